"""A Ray-backend sweep with ``parallelism=2``: two points' jobs at once on one local Ray (``barriersim.ray_jobs``:
each job in a driver process of its own, its own Spark), each verified as a serial run is, the index in the
serial shape, progress lines per point, and the two jobs' spans (each run directory's ``started_at`` and
``ended_at``) overlapping; a job that fails ends its own point only. The driver processes themselves: their
lines, results and errors, a driver that dies, and one interrupted when the caller stops."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from barriersim import ray_jobs, sweep
from barriersim.errors import BarriersimError
from tests.api.scenarios import write

pytestmark = [pytest.mark.ray, pytest.mark.spark]

# 3,000 records per source at 1,500 records/s: each job runs about 2 s on the wall clock, whatever the load
TWO_RAY_POINTS = """\
[scenario]
name = "two-ray-points"
seed = 13

[workload]
records = 3000
keys = 50
rate_per_source = 1500

[job]
source_parallelism = 2
keyed_sum_parallelism = 2

[checkpointing]
interval_ms = 200

[sweep]
"workload.zipf_exponent" = [0.0, 1.5]
"""


def test_two_ray_jobs_run_at_once_and_give_a_serial_sweeps_results(tmp_path, monkeypatch):
    monkeypatch.setenv("BARRIERSIM_CACHE_DIR", str(tmp_path / "cache"))  # a cold cache: each job starts its Spark
    said: list[str] = []
    result = sweep.run_sweep(
        write(tmp_path, TWO_RAY_POINTS),
        backend="ray",
        out=tmp_path / "out",
        modes=["aligned", "at-least-once"],
        parallelism=2,
        progress=lambda what, done, total: said.append(what),
    )
    labels = ["zipf_exponent=0.0", "zipf_exponent=1.5"]
    assert sorted(result.runs) == [(label, mode) for label in labels for mode in ("aligned", "at-least-once")]
    for (label, mode), run in result.runs.items():
        v = run.summary["verification"]
        assert v["lost"] == 0 and v["wrong"] == 0, (label, mode)
        if mode == "aligned":
            assert v["verdict"] == "exactly-once" and v["duplicated"] == 0, label
        assert run.summary["job"]["outcome"] == "finished" and run.summary["backend"] == "ray"
    index = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert [p["label"] for p in index["points"]] == labels and index["backend"] == "ray"
    assert [[r["mode"] for r in p["runs"]] for p in index["points"]] == [["aligned", "at-least-once"]] * 2
    assert result.table is not None and sorted(result.table["run"]) == sorted(
        f"{label}/{mode}" for label in labels for mode in ("aligned", "at-least-once")
    )
    # each point's own progress lines, its Spark its own
    for label in labels:
        assert f"{label}: starting Ray" in said and f"{label}: done" in said
    assert "running 2 jobs on Ray, 2 at a time" in said
    apps = {run.summary["spark"]["app_id"] for run in result.runs.values()}
    assert len(apps) == 2
    # the two jobs overlapped: each started before the other ended (the spans their run directories recorded)
    spans = {}
    for label in labels:
        ray = json.loads((tmp_path / "out" / label / "aligned" / "summary.json").read_text())["ray"]
        spans[label] = (ray["started_at"], ray["ended_at"])
    (a_start, a_end), (b_start, b_end) = spans.values()
    assert a_start < b_end and b_start < a_end, spans


def test_a_job_that_fails_ends_its_own_point_only(tmp_path):
    """A point whose job cannot run (its TaskManagers spread over 2 nodes of a one-node Ray) raises its one-line
    error once the other point, running beside it, has finished and been recorded."""
    text = TWO_RAY_POINTS.replace('"workload.zipf_exponent" = [0.0, 1.5]', '"cluster.nodes" = [1, 2]').replace(
        "[checkpointing]", "[cluster]\ntaskmanagers = 2\nslots_per_taskmanager = 2\n\n[checkpointing]"
    )
    with pytest.raises(BarriersimError) as failed:
        sweep.run_sweep(write(tmp_path, text), backend="ray", out=tmp_path / "out", parallelism=2, aggregate=False)
    assert "cluster.nodes" in str(failed.value) and "2 nodes" in str(failed.value)
    index = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert [p["label"] for p in index["points"]] == ["nodes=1"]
    assert index["points"][0]["runs"][0]["verdict"] == "exactly-once"


def _driver(item, say):
    """A driver process's work for ``ray_jobs.map_unordered``: says its item, then returns, raises or dies."""
    say(f"item {item}")
    if item == "raises":
        raise BarriersimError("point raises: one line")
    if item == "unpicklable":
        raise _Unpicklable(1, 2)
    if item == "dies":
        os._exit(3)
    return {"item": item, "pid": os.getpid()}


class _Unpicklable(Exception):
    def __init__(self, a, b):  # two arguments: pickle gives __init__ one (its str) and fails to rebuild it
        super().__init__(f"{a}+{b}")


def test_driver_processes_give_each_items_lines_result_or_error():
    events = list(ray_jobs.map_unordered(_driver, ["ok", "raises", "unpicklable", "dies"], parallelism=2))
    said = {e.index: e.what for e in events if isinstance(e, ray_jobs.Said)}
    ended = {e.index: e for e in events if isinstance(e, ray_jobs.Ended)}
    assert said == {0: "item ok", 1: "item raises", 2: "item unpicklable", 3: "item dies"}
    assert ended[0].result["item"] == "ok" and ended[0].result["pid"] != os.getpid() and ended[0].error is None
    assert isinstance(ended[1].error, BarriersimError) and str(ended[1].error) == "point raises: one line"
    assert isinstance(ended[2].error, ray_jobs.DriverError) and str(ended[2].error) == "_Unpicklable: 1+2"
    assert isinstance(ended[3].error, ray_jobs.DriverError) and "exit status 3" in str(ended[3].error)


def _waits_for_an_interrupt(marker: str, say):
    try:
        say(str(os.getpid()))
        signal.pause()
    except KeyboardInterrupt:
        Path(marker).write_text("interrupted")  # what a job's own cleanup does on a Ctrl-C
        raise


def test_a_driver_left_running_is_interrupted_once_and_ends_when_the_caller_stops(tmp_path):
    events = ray_jobs.map_unordered(_waits_for_an_interrupt, [str(tmp_path / "marker")], parallelism=1)
    first = next(events)
    assert isinstance(first, ray_jobs.Said)
    events.close()  # the caller stops (a Ctrl-C, an error): the driver is interrupted, and waited for
    assert (tmp_path / "marker").read_text() == "interrupted"
    with pytest.raises(ProcessLookupError):
        os.kill(int(first.what), 0)  # ended and reaped
