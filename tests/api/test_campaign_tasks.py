"""A campaign's cases as Ray tasks (``barriersim.ray_tasks``), batches of seeds at a time, give the rows the same
campaign gives in one process; a campaign that starts in this process moves to Ray tasks when its first batch says
the rest is worth it."""

from __future__ import annotations

import os

import pytest

from barriersim import campaign, ray_tasks
from tests.api.test_campaign import rows

pytestmark = pytest.mark.ray


def test_ray_tasks_give_the_rows_of_a_campaign_in_one_process(tmp_path, monkeypatch):
    serial = campaign.run_campaign(
        "generated", range(100, 116), out=tmp_path / "serial", parallelism=1, aggregate=False
    )
    on_ray = campaign.run_campaign(
        "generated", range(100, 116), out=tmp_path / "ray", parallelism=2, batch=3, aggregate=False
    )
    assert serial.ran == on_ray.ran == 16 and rows(tmp_path / "ray") == rows(tmp_path / "serial")
    said = []
    monkeypatch.setattr(ray_tasks, "RAY_WORTH_SECONDS", 0.0)  # the first batch here, the rest as Ray tasks
    auto = campaign.run_campaign(
        "generated",
        range(100, 116),
        out=tmp_path / "auto",
        batch=4,
        aggregate=False,
        progress=lambda what, done, total: said.append(what),
    )
    assert auto.ran == 16 and rows(tmp_path / "auto") == rows(tmp_path / "serial")
    assert said[0] == "running 16 cases in this process"
    assert f"running 12 cases as Ray tasks, {os.cpu_count()} at a time" in said


def test_when_ray_does_not_start_the_campaign_goes_on_in_this_process(tmp_path, monkeypatch):
    def timed_out(self):
        raise Exception("The current node timed out during startup.")  # what ray.init raised on a loaded machine

    monkeypatch.setattr(ray_tasks.RayAndSpark, "start_ray", timed_out)
    monkeypatch.setattr(ray_tasks, "RAY_WORTH_SECONDS", 0.0)
    serial = campaign.run_campaign(
        "generated", range(100, 108), out=tmp_path / "serial", parallelism=1, aggregate=False
    )
    said = []
    fallback = campaign.run_campaign(
        "generated",
        range(100, 108),
        out=tmp_path / "fallback",
        batch=3,
        aggregate=False,
        progress=lambda what, done, total: said.append(what),
    )
    assert fallback.ran == serial.ran == 8 and rows(tmp_path / "fallback") == rows(tmp_path / "serial")
    assert "Ray did not start: The current node timed out during startup.; running the rest in this process" in said
    with pytest.raises(ray_tasks.RayStartError):
        campaign.run_campaign("generated", range(100, 102), out=tmp_path / "asked", parallelism=2, aggregate=False)
