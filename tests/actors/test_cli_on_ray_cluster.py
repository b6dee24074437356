"""The one command on an existing Ray cluster of three nodes (``tests/actors/conftest.py``), as a user runs it:
``barriersim run SCENARIO --address ADDRESS`` in its own process, a second driver of the cluster. Spark's
executors spread over the nodes, the job's TaskManagers too, the checkpoints go to ``s3://`` storage (a real
S3-compatible server, ``tests.s3_server``), and the run directory says where each subtask ran."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

# the first test's setup runs the whole command (Spark and the job on three nodes): over 600 s with two busy
# processes and other work beside the suite on this 2-core machine (load average 10-17)
pytestmark = [pytest.mark.ray, pytest.mark.spark, pytest.mark.timeout(1500)]

ROOT = Path(__file__).parents[2]
SCENARIO = """\
[scenario]
name = "spread"
seed = 5

[workload]
records = 20000
keys = 200
rate_per_source = 5000

[job]
source_parallelism = 3
keyed_sum_parallelism = 3

[cluster]
taskmanagers = 3
slots_per_taskmanager = 1

[checkpointing]
interval_ms = 200
"""


def _run(ray_cluster, scenario: Path, out: Path, storage: str, *options: str) -> dict:
    """``barriersim run`` in its own process (the AWS variables the fixture set reach it); its summary."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "barriersim.cli",
            "run",
            str(scenario),
            "--address",
            ray_cluster.address,
            "--out",
            str(out),
            "--checkpoint-storage",
            storage,
            *options,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((out / "summary.json").read_text())


@pytest.fixture(scope="module")
def first_run(ray_cluster, s3_server, tmp_path_factory):
    """A run with s3:// storage that is stopped with a savepoint at 500 ms."""
    tmp_path = tmp_path_factory.mktemp("one-command")
    scenario = tmp_path / "spread.toml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "run"
    storage = s3_server.versioned_bucket_uri()
    summary = _run(ray_cluster, scenario, out, storage, "--stop-with-savepoint-at", "500", "--no-cache")
    return scenario, out, storage, summary


def test_a_scenario_runs_over_the_nodes_of_an_existing_cluster_with_the_one_command(first_run, s3_server):
    _, out, storage, summary = first_run
    assert summary["verification"]["verdict"] == "exactly-once"
    # Spark: one executor per node, each on its own node
    spark = summary["spark"]
    nodes = [n["ray_node_id"] for n in summary["placement"]["ray_nodes"]]
    assert spark["executors"] == 3 and sorted(spark["executor_nodes"]) == sorted(nodes)
    # the job: 3 TaskManagers on the 3 nodes (cluster.nodes = 0: every node), each subtask's actor on its node
    assert summary["placement"]["nodes"] == 3 and summary["placement"]["taskmanager_nodes"] == [[0, 1, 2]]
    with open(out / "placement.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 7
    assert all(r["ray_node_id"] == nodes[int(r["taskmanager"])] for r in rows)
    # keyed-sum#i reads 3 channels, one of them from source#i in its own TaskManager
    assert {(r["local_input_channels"], r["remote_input_channels"]) for r in rows if r["task"].startswith("keyed")} == {
        ("1", "2")
    }
    # the checkpoints were written to the bucket, under the run directory's name, and discarded when the job finished
    assert summary["ray"]["checkpoint_storage"] == storage.replace("/checkpoints?", "/checkpoints/run?")
    assert summary["checkpoints"]["completed"] >= 1
    written = s3_server.written_keys(storage)
    metadata = {k for k in written if k.endswith("/_metadata") and "/chk-" in k}
    # the stop's savepoint went to the bucket beside the run's checkpoints, not to the run directory; as in Flink,
    # the completed count includes it
    savepoints = {
        k for k in written if k.startswith("checkpoints/run/savepoints/savepoint-") and k.endswith("/_metadata")
    }
    assert len(savepoints) == 1, sorted(written)[:20]
    assert len(metadata) + len(savepoints) == summary["checkpoints"]["completed"]
    assert all(k.startswith("checkpoints/run/spread-5/chk-") for k in metadata), sorted(metadata)
    assert not (out / "checkpoints").exists()
    assert not (out / "savepoints").exists() or not any((out / "savepoints").iterdir())
    # the analytics Spark computed went to the bucket too, beside the run's checkpoints, in the run directory's
    # layout, and read back equal to the run directory's; summary.json says where
    import pandas as pd
    import pyarrow.parquet as pq

    from barriersim.runtime.storage.object_storage import object_store_filesystem

    analytics_uri = summary["ray"]["analytics_uri"]
    assert analytics_uri == storage.replace("/checkpoints?", "/checkpoints/run/analytics?")
    assert {f"checkpoints/run/analytics/{t}/_SUCCESS" for t in ("summary.parquet", "counts.parquet")} <= written
    filesystem, base = object_store_filesystem(analytics_uri)
    for table in ("summary.parquet", "counts.parquet"):
        remote = pq.read_table(f"{base}/{table}", filesystem=filesystem).to_pandas()
        local = pq.read_table(str(out / "analytics" / table)).to_pandas()
        assert len(local) > 0
        pd.testing.assert_frame_equal(remote, local)


def test_a_later_run_restores_from_the_savepoint_the_first_wrote_to_s3(ray_cluster, first_run, s3_server):
    """``--from`` an ``s3://`` savepoint pointer (the S3 client's options in its query, as in the storage URI):
    the savepoint is read from the bucket, the run that wrote it is found beside it (its scenario, external system
    and summary, published there), and the restored run continues that run's output, exactly once."""
    scenario, out, storage, summary = first_run
    stop = summary["job"]["stopped_with_savepoint"]
    bucket = storage.split("/")[2]
    assert stop["path"].startswith(f"s3://{bucket}/checkpoints/run/savepoints/savepoint-"), stop
    assert {
        f"checkpoints/run/{name}" for name in ("scenario.toml", "summary.json", "external_store.msgpack")
    } <= s3_server.written_keys(storage)
    pointer = f"{stop['path']}?{storage.split('?', 1)[1]}"
    restored = _run(ray_cluster, scenario, out.parent / "restored", storage, "--from", pointer)
    assert restored["job"]["latest_restored"]["external_path"] == stop["path"]
    assert restored["job"]["latest_restored"]["is_savepoint"]
    v = restored["verification"]
    assert (v["verdict"], v["lost"], v["duplicated"], v["wrong"]) == ("exactly-once", 0, 0, 0), v
    assert restored["checkpoints"]["restored"] == 1
    # the stop-with-savepoint was the first run's last commit: nothing is committed again
    assert restored["restore"]["earlier_output_after_snapshot"] == {"transactions": 0, "records": 0}
    # the throughput counts what this run's sources read: from the savepoint's offsets (where the first run's
    # sources stopped) to the end of their splits
    first = {row["task"]: row["records"] for row in summary["throughput"]["sources"]}
    again = {row["task"]: row["records"] for row in restored["throughput"]["sources"]}
    assert first.keys() == again.keys() and all(first[t] > 0 for t in first)
    assert sum(first.values()) + sum(again.values()) == restored["workload"]["records"], (first, again)
