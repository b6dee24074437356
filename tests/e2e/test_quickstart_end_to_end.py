"""The walking skeleton end to end: the real CLI, real Ray actors, real Spark on Ray (RayDP)."""

import csv
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.processes import marked_environment, stray_processes

ROOT = Path(__file__).parents[2]
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"
FLINK_CHECKPOINT_FIELDS = {
    "id", "status", "is_savepoint", "trigger_timestamp", "latest_ack_timestamp", "end_to_end_duration",
    "checkpointed_size", "state_size", "alignment_buffered", "processed_data", "persisted_data",
    "num_subtasks", "num_acknowledged_subtasks", "checkpoint_type",
}

pytestmark = [pytest.mark.ray, pytest.mark.spark]


def barriersim(*args, **kw):
    return subprocess.Popen(
        [sys.executable, "-m", "barriersim.cli", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, **kw,
    )


def test_quickstart_runs_exactly_once_with_spark_reference(tmp_path):
    env, marker = marked_environment()
    out = tmp_path / "run"
    proc = barriersim("run", str(QUICKSTART), "--out", str(out), "--seed", "7", env=env)
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, output
    assert "verdict: exactly-once" in output
    assert "lost=0 duplicated=0 wrong=0" in output

    summary = json.loads((out / "summary.json").read_text())
    assert summary["scenario"] == "quickstart" and summary["seed"] == 7
    assert summary["backend"] == "ray" and summary["mode"] == "aligned"
    assert set(summary["versions"]) == {"barriersim", "ray", "raydp", "pyspark"}
    assert summary["versions"]["ray"] == "2.60.0" and summary["versions"]["pyspark"] == "3.5.7"
    assert summary["spark"]["app_id"] and summary["spark"]["master"].startswith("ray://")
    assert summary["workload"] == {**summary["workload"], "records": 100_000, "generated_by": "spark"}
    v = summary["verification"]
    assert v["reference"] == "spark" and v["expected_records"] == 100_000
    assert (v["lost"], v["duplicated"], v["wrong"], v["final_sum_mismatched_keys"]) == (0, 0, 0, 0)
    assert v["verdict"] == "exactly-once"
    assert summary["checkpoints"]["completed"] >= 2
    assert summary["wall_seconds"] > 0

    # Per-checkpoint statistics with Flink's names, one row per checkpoint, consistent with the summary.
    with open(out / "checkpoints.csv") as f:
        rows = list(csv.DictReader(f))
    assert FLINK_CHECKPOINT_FIELDS <= set(rows[0])
    completed = [r for r in rows if r["status"] == "COMPLETED"]
    assert len(completed) == summary["checkpoints"]["completed"]
    assert all(int(r["num_acknowledged_subtasks"]) == int(r["num_subtasks"]) == 5 for r in completed)
    assert (out / "checkpoints.parquet").stat().st_size > 0 and (out / "subtasks.csv").exists()

    # Every completed checkpoint is on disk with its _metadata and one state file per subtask.
    job_dir = out / "checkpoints" / "quickstart-7"
    for r in completed:
        chk = job_dir / f"chk-{r['id']}"
        assert (chk / "_metadata").stat().st_size > 0
        assert len(list((chk / "taskowned").glob("*.state"))) == 5
    assert not list(job_dir.rglob("*.tmp"))

    assert stray_processes(marker) == []


def test_ctrl_c_stops_spark_and_ray(tmp_path):
    env, marker = marked_environment()
    proc = barriersim("run", str(QUICKSTART), "--out", str(tmp_path / "run"), env=env)
    for line in proc.stdout:
        if "generating the workload" in line or "running the job" in line:
            break
    else:
        pytest.fail("the run ended before it started the workload")
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=180)
    assert proc.returncode == 130, rest
    assert "interrupted" in rest and "Traceback" not in rest
    assert stray_processes(marker) == []
