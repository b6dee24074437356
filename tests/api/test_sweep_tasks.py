"""A simulator sweep's points as Ray tasks (``barriersim.ray_tasks``) give what the same sweep gives in one process:
the same traces (``trace_sha256``), summaries, statistics tables and ``sweep.json``; on a local Ray, when the first
run says the rest is worth it, and on a Ray cluster of three nodes (``ray.cluster_utils``) at ``--address``."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from barriersim import ray_tasks, sweep
from barriersim.local_cluster import LocalCluster
from tests.api.scenarios import TWO_POINT_SWEEP, write

pytestmark = pytest.mark.ray

FOUR_POINTS = TWO_POINT_SWEEP + '"checkpointing.interval_ms" = [10, 25]\n'


def comparable(summary: dict) -> dict:
    """A summary without what differs from one execution to the next (wall time, its rate, the out path)."""
    out = {k: v for k, v in summary.items() if k not in ("wall_seconds", "replay")}
    out["simulation"] = {k: v for k, v in summary["simulation"].items() if k != "events_per_second"}
    return out


def assert_same_sweep(serial: sweep.SweepResult, other: sweep.SweepResult) -> None:
    assert list(serial.runs) == list(other.runs) and len(serial.runs) == 8
    for key, run in serial.runs.items():
        twin = other.runs[key]
        assert twin.summary["trace_sha256"] == run.summary["trace_sha256"], key
        assert comparable(twin.summary) == comparable(run.summary), key
        assert json.loads((twin.out_dir / "summary.json").read_text())["trace_sha256"] == run.summary["trace_sha256"]
        pd.testing.assert_frame_equal(twin.checkpoints, run.checkpoints)
        pd.testing.assert_frame_equal(twin.subtasks, run.subtasks)
        assert (twin.out_dir / "scenario.toml").read_text() == (run.out_dir / "scenario.toml").read_text()
    assert json.loads((other.out_dir / "sweep.json").read_text()) == json.loads(
        (serial.out_dir / "sweep.json").read_text()
    )


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    return write(tmp_path_factory.mktemp("scenario"), FOUR_POINTS)


@pytest.fixture(scope="module")
def serial(scenario, tmp_path_factory):
    return sweep.run_sweep(
        scenario,
        out=tmp_path_factory.mktemp("serial") / "out",
        modes=["aligned", "unaligned"],
        parallelism=1,
        aggregate=False,
    )


def test_ray_tasks_on_the_local_cores_give_the_serial_sweep(scenario, serial, tmp_path, monkeypatch):
    monkeypatch.setattr(ray_tasks, "RAY_WORTH_SECONDS", 0.0)  # the first run in this process, the rest as Ray tasks
    said = []
    result = sweep.run_sweep(
        scenario,
        out=tmp_path / "out",
        modes=["aligned", "unaligned"],
        aggregate=False,
        progress=lambda what, done, total: said.append((what, done, total)),
    )
    assert_same_sweep(serial, result)
    assert said[0][0] == "zipf_exponent=0.0,interval_ms=10: simulating tiny in aligned mode"
    tasks = [(done, total) for what, done, total in said if what.startswith("simulating 7 runs as Ray tasks")]
    assert tasks[0] == (1, 8) and tasks[-1] == (8, 8)  # a progress line per run done


def test_a_three_node_ray_cluster_gives_the_serial_sweep(scenario, serial, tmp_path):
    cluster = LocalCluster(nodes=3, head_cpus=1, worker_cpus=1, connect=False)
    try:
        result = sweep.run_sweep(
            scenario, out=tmp_path / "out", modes=["aligned", "unaligned"], aggregate=False, address=cluster.address
        )
    finally:
        cluster.shutdown()
    assert_same_sweep(serial, result)


def test_when_ray_does_not_start_the_rule_runs_the_rest_here_and_an_asked_for_ray_is_one_error(
    scenario, serial, tmp_path, monkeypatch
):
    def timed_out(self):
        raise Exception("The current node timed out during startup.")  # what ray.init raised on a loaded machine

    monkeypatch.setattr(ray_tasks.RayAndSpark, "start_ray", timed_out)
    monkeypatch.setattr(ray_tasks, "RAY_WORTH_SECONDS", 0.0)  # the rule picks Ray after the first run
    said = []
    result = sweep.run_sweep(
        scenario,
        out=tmp_path / "out",
        modes=["aligned", "unaligned"],
        aggregate=False,
        progress=lambda what, done, total: said.append(what),
    )
    assert_same_sweep(serial, result)
    assert "Ray did not start: The current node timed out during startup.; simulating the rest in this process" in said
    with pytest.raises(ray_tasks.RayStartError, match="^Ray did not start: The current node timed out"):
        sweep.run_sweep(scenario, out=tmp_path / "asked", modes=["aligned"], aggregate=False, parallelism=2)
