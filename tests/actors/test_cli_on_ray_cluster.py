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

from tests.s3_server import s3_server  # noqa: F401 - the fixture

pytestmark = [pytest.mark.ray, pytest.mark.spark]

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


def test_a_scenario_runs_over_the_nodes_of_an_existing_cluster_with_the_one_command(ray_cluster, s3_server, tmp_path):
    scenario = tmp_path / "spread.toml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "run"
    storage = s3_server.versioned_bucket_uri()  # the AWS variables the fixture set reach the command's process
    proc = subprocess.run([sys.executable, "-m", "barriersim.cli", "run", str(scenario), "--address",
                           ray_cluster.address, "--out", str(out), "--checkpoint-storage", storage,
                           "--savepoint-at", "300"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
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
    assert {(r["local_input_channels"], r["remote_input_channels"]) for r in rows if r["task"].startswith("keyed")} == {("1", "2")}
    # the checkpoints were written to the bucket, under the run directory's name, and discarded when the job finished
    assert summary["ray"]["checkpoint_storage"] == storage.replace("/checkpoints?", "/checkpoints/run?")
    assert summary["checkpoints"]["completed"] >= 1
    written = s3_server.written_keys(storage)
    metadata = {k for k in written if k.endswith("/_metadata") and "/chk-" in k}
    # the savepoint taken at 300 ms went to the bucket beside the run's checkpoints, not to the run directory; as in
    # Flink, the completed count includes it
    savepoints = {k for k in written if k.startswith("checkpoints/run/savepoints/savepoint-") and k.endswith("/_metadata")}
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
