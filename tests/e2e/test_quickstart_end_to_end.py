"""The Ray backend end to end: the real CLI, the job on real Ray actors, real Spark on Ray (RayDP): all modes
side by side on one local cluster (cold: Spark generates the workload, replacing an unreadable cache entry), the
same workload again warm (from the workload cache, without Spark), a run on an existing cluster that it leaves
running, and Ctrl-C."""

import csv
import json
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from barriersim import workload_cache
from barriersim.scenarios.loader import load_scenario
from barriersim.spark.analytics import read_analytics
from tests.e2e.processes import MARKER_VARIABLE, marked_environment, stray_processes

ROOT = Path(__file__).parents[2]
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"
RAY = Path(sys.executable).parent / "ray"
FLINK_CHECKPOINT_FIELDS = {
    "id",
    "status",
    "is_savepoint",
    "trigger_timestamp",
    "latest_ack_timestamp",
    "end_to_end_duration",
    "checkpointed_size",
    "state_size",
    "alignment_buffered",
    "processed_data",
    "persisted_data",
    "num_subtasks",
    "num_acknowledged_subtasks",
    "checkpoint_type",
}
SUMMARY_KEYS = [
    "scenario",
    "seed",
    "backend",
    "mode",
    "versions",
    "workload",
    "checkpointing",
    "restart",
    "network",
    "cluster",
    "placement",
    "checkpoints",
    "verification",
    "job",
    "throughput",
    "faults",
    "faults_fired",
    "spark",
    "workload_cache",
    "timings_seconds",
    "ray",
    "wall_seconds",
]

TIMINGS = ["ray_start", "spark_start", "workload", "cache_write", "analytics", "deploy", "job", "verification"]
# what a run must not print: Spark's, Ray's or log4j's warnings and errors, Ray's core worker lines, Python warnings
NOISE = re.compile(r"\bWARN\b|\bERROR\b|StatusConsoleListener|gcs_client|Warning:|warnings\.warn")

pytestmark = [pytest.mark.ray, pytest.mark.spark]


def assert_quiet(output: str) -> None:
    assert not [line for line in output.splitlines() if NOISE.search(line)], output


def barriersim(*args, **kw):
    return subprocess.Popen(
        [sys.executable, "-m", "barriersim.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        **kw,
    )


def check_run_directory(out: Path, mode: str, seed: int) -> dict:
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary) == SUMMARY_KEYS
    assert summary["scenario"] == "quickstart" and summary["seed"] == seed
    assert summary["backend"] == "ray" and summary["mode"] == mode
    assert set(summary["versions"]) == {"barriersim", "ray", "raydp", "pyspark"}
    assert summary["versions"]["ray"] == "2.60.0" and summary["versions"]["pyspark"] == "3.5.7"
    assert summary["spark"]["app_id"] and summary["spark"]["master"].startswith("ray://")
    assert summary["workload"] == {**summary["workload"], "records": 100_000, "generated_by": "spark"}
    assert summary["job"] == {**summary["job"], "outcome": "finished", "restarts": 0}
    assert summary["throughput"]["records_per_second"] > 0 and summary["throughput"]["clock"] == "wall"
    assert summary["throughput"]["offered_per_source_subtask"] == 25_000
    sources = summary["throughput"]["sources"]
    assert [r["task"] for r in sources] == ["source#0", "source#1"]
    assert all(r["records"] == 50_000 and r["achieved_per_second"] > 0 for r in sources)
    assert summary["throughput"]["offered_rate_reached"] == all(r["reached"] for r in sources)
    assert list(summary["timings_seconds"]) == TIMINGS and min(summary["timings_seconds"].values()) >= 0
    v = summary["verification"]
    assert v["reference"] == "spark" and v["expected_records"] == 100_000
    assert (v["lost"], v["duplicated"], v["wrong"], v["final_sum_mismatched_keys"]) == (0, 0, 0, 0)
    assert v["verdict"] == "exactly-once"
    assert summary["checkpoints"]["completed"] >= 2
    assert summary["faults"] == summary["faults_fired"] == []
    assert summary["wall_seconds"] > 0
    # one TaskManager (the default) on the driver's node; the quickstart's channels are all local
    placement = summary["placement"]
    assert (placement["taskmanagers"], placement["taskmanager_nodes"]) == (1, [[0]])
    assert placement["input_channels"] == {"local": 6, "remote": 0} and len(placement["ray_nodes"]) >= 1
    with open(out / "placement.csv") as f:
        where = list(csv.DictReader(f))
    assert len(where) == 5 and {r["ray_node_id"] for r in where} == {placement["ray_nodes"][0]["ray_node_id"]}
    # the effective scenario the run ran, and its checkpointing settings in the summary
    ran = load_scenario(out / "scenario.toml")
    assert (ran.seed, ran.checkpointing.mode.value) == (seed, mode)
    assert summary["checkpointing"]["mode"] == mode and summary["checkpointing"]["interval_ms"] == 400

    # Per-checkpoint and per-subtask statistics with Flink's names, consistent with the summary.
    with open(out / "checkpoints.csv") as f:
        rows = list(csv.DictReader(f))
    assert FLINK_CHECKPOINT_FIELDS <= set(rows[0])
    completed = [r for r in rows if r["status"] == "COMPLETED"]
    assert len(completed) == summary["checkpoints"]["completed"]
    assert all(int(r["num_acknowledged_subtasks"]) == int(r["num_subtasks"]) == 5 for r in completed)
    assert (out / "checkpoints.parquet").stat().st_size > 0 and (out / "subtasks.parquet").stat().st_size > 0
    with open(out / "subtasks.csv") as f:
        acks = [(r["id"], r["task"]) for r in csv.DictReader(f)]
    assert len(acks) == len(set(acks))  # one row per subtask and checkpoint
    for c in completed:  # a subtask that finished before a checkpoint (FLIP-147) has a row too, as Flink reports it
        assert sum(1 for cid, _ in acks if cid == c["id"]) == 5

    # The filesystem checkpoint storage's layout: the job's directory with its shared and task-owned state
    # directories; the finished job's completed checkpoints (chk-<n>) were discarded, as Flink does when a job
    # reaches FINISHED; no temporary file is left.
    job_dir = out / "checkpoints" / f"quickstart-{seed}"
    assert (job_dir / "shared").is_dir() and (job_dir / "taskowned").is_dir()
    assert not list(job_dir.glob("chk-*"))
    assert not list(job_dir.rglob("*.tmp"))
    return summary


@pytest.fixture(scope="module")
def all_modes_run(tmp_path_factory):
    """``--mode all`` of the quickstart, seed 7, cold: with a workload cache of its own whose entry for this
    workload is unreadable (a manifest that is no msgpack map), so Spark generates the workload and rewrites it."""
    tmp = tmp_path_factory.mktemp("all-modes")
    env, marker = marked_environment()
    env.pop("RAY_ADDRESS", None)
    env["BARRIERSIM_CACHE_DIR"] = str(tmp / "cache")
    key = workload_cache.cache_key(replace(load_scenario(QUICKSTART), seed=7))
    planted = workload_cache.entry_path(key, tmp / "cache") / workload_cache.MANIFEST_FILE
    planted.parent.mkdir(parents=True)
    planted.write_bytes(b"\x93 not a manifest")
    out = tmp / "run"
    proc = barriersim("run", str(QUICKSTART), "--mode", "all", "--out", str(out), "--seed", "7", env=env)
    output, _ = proc.communicate(timeout=900)
    return SimpleNamespace(
        out=out, output=output, returncode=proc.returncode, marker=marker, key=key, cache=tmp / "cache", planted=planted
    )


def test_all_modes_run_side_by_side_on_one_local_cluster(all_modes_run):
    output, out, marker = all_modes_run.output, all_modes_run.out, all_modes_run.marker
    assert all_modes_run.returncode == 0, output
    assert output.count("starting Spark on Ray") == 1
    assert_quiet(output)
    assert output.count("shared by the modes") == 1 and "own wall time (s)" in output
    assert (out / "logs" / "spark-driver.log").is_file()
    apps = set()
    shared = set()
    for mode in ("aligned", "unaligned", "at-least-once"):
        summary = check_run_directory(out / mode, mode, 7)
        apps.add(summary["spark"]["app_id"])
        shared.add(
            tuple(
                summary["timings_seconds"][k]
                for k in ("ray_start", "spark_start", "workload", "cache_write", "analytics")
            )
        )
        assert f"{mode}: verdict: exactly-once  lost=0 duplicated=0 wrong=0" in output
        # the unreadable cache entry was reported, and Spark's workload and reference replaced it
        assert summary["workload_cache"] == {
            "status": "corrupt",
            "key": all_modes_run.key,
            "path": str(all_modes_run.planted.parent),
            "written": True,
            "statistics": "spark",
        }
    assert [line for line in output.splitlines() if "workload cache:" in line] == [
        f"barriersim: warning: workload cache: {all_modes_run.planted}: unreadable manifest (ExtraData: unpack(b) "
        "received extra data.); Spark recomputes the entry",
        f"workload cache: unreadable entry: regenerated in Spark, entry written (key {all_modes_run.key})",
    ], output
    # the modes side by side, with their checkpoint statistics, readable in 120 columns
    table = [line for line in output.splitlines() if line.startswith(("┃", "│"))]
    assert max(len(line) for line in table) <= 120
    assert "alignment duration p50 / p99 (ms)" in output and "1 before tasks ran" in output
    assert len(apps) == 1  # one Spark session for the three modes
    assert len(shared) == 1  # the phases the modes share, the same in each
    # Flink's REST summaries of the three runs, computed by that Spark session and written as Parquet
    analytics = read_analytics(out)
    assert analytics is not None and set(analytics.counts["run"]) == {"aligned", "unaligned", "at-least-once"}
    assert {"p50", "p99", "p999"} <= set(analytics.summary.columns)
    assert stray_processes(marker) == []


def test_a_warm_run_takes_the_workload_and_reference_from_the_cache_and_starts_no_spark(all_modes_run, tmp_path):
    """The same workload again, in one mode: the cold run's cache entry gives the splits and Spark's reference,
    Spark does not start, the statistics are computed in pandas, and the verification counts what Spark's did."""
    assert all_modes_run.returncode == 0, all_modes_run.output
    env, marker = marked_environment()
    env.pop("RAY_ADDRESS", None)
    env["BARRIERSIM_CACHE_DIR"] = str(all_modes_run.cache)
    out = tmp_path / "warm"
    proc = barriersim("run", str(QUICKSTART), "--mode", "unaligned", "--out", str(out), "--seed", "7", env=env)
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, output
    assert_quiet(output)
    assert "Spark on Ray" not in output and "warning" not in output and "stopping Ray\n" in output
    assert f"hit: workload and reference from the cache; statistics in pandas (key {all_modes_run.key})" in output
    summary = json.loads((out / "summary.json").read_text())
    cold = json.loads((all_modes_run.out / "unaligned" / "summary.json").read_text())
    assert list(summary) == SUMMARY_KEYS
    assert summary["spark"] == {"started": False}
    assert summary["workload_cache"] == {
        "status": "hit",
        "key": all_modes_run.key,
        "path": str(all_modes_run.planted.parent),
        "written": False,
        "statistics": "pandas",
    }
    assert list(summary["timings_seconds"]) == TIMINGS
    assert summary["timings_seconds"]["spark_start"] == summary["timings_seconds"]["cache_write"] == 0
    assert summary["workload"] == {**cold["workload"], "generated_by": "spark"}
    assert summary["verification"] == cold["verification"]
    assert (
        summary["verification"]["verdict"] == "exactly-once" and summary["verification"]["expected_records"] == 100_000
    )
    assert [r["records"] for r in summary["throughput"]["sources"]] == [50_000, 50_000]
    analytics = read_analytics(out)
    assert analytics is not None and set(analytics.counts["run"]) == {"."}
    assert int(analytics.counts["completed"].iloc[0]) == summary["checkpoints"]["completed"]
    assert stray_processes(marker) == []


def _free_port() -> int:
    """A port free on every interface, below the kernel's ephemeral range (where other Ray sessions on the machine
    get their random component ports) and above Ray's worker port range (10002-19999)."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20_000, 32_000)
        with socket.socket() as s:
            try:
                s.bind(("", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port found")


def _stop_marked_processes(marker: str) -> None:
    """Stop the test's cluster: ``ray stop`` would stop every Ray process on the machine (other sessions' too),
    so the processes carrying this test's marker are terminated by pid instead."""
    procs = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get(MARKER_VARIABLE) == marker:
                procs.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    for proc in procs:
        try:
            proc.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(procs, timeout=20)
    for proc in alive:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=10)


def test_a_run_on_an_existing_cluster_leaves_it_running(tmp_path):
    env, marker = marked_environment()
    env.pop("RAY_ADDRESS", None)
    # `ray start` turns token authentication on by default (Ray 2.60); a local test cluster opts out, for the
    # cluster and the run alike
    env["RAY_AUTH_MODE"] = "disabled"
    port = _free_port()
    address = f"127.0.0.1:{port}"
    temp_dir = tempfile.mkdtemp(prefix="bsray", dir="/tmp")  # short: Ray's socket paths live under it
    try:
        started = subprocess.run(
            [
                str(RAY),
                "start",
                "--head",
                f"--port={port}",
                "--num-cpus=4",
                "--include-dashboard=false",
                f"--temp-dir={temp_dir}",
                "--disable-usage-stats",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert started.returncode == 0, started.stdout + started.stderr

        out = tmp_path / "run"
        proc = barriersim(
            "run", str(QUICKSTART), "--address", address, "--out", str(out), "--seed", "3", "--no-cache", env=env
        )
        output, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, output
        assert "verdict: exactly-once" in output and "lost=0 duplicated=0 wrong=0" in output
        assert_quiet(output)
        summary = check_run_directory(out, "aligned", 3)
        # --no-cache: Spark generated the workload, and the cache was neither read nor written
        key = workload_cache.cache_key(replace(load_scenario(QUICKSTART), seed=3))
        assert summary["workload_cache"] == {
            "status": "disabled",
            "key": key,
            "path": None,
            "written": False,
            "statistics": "spark",
        }
        assert not workload_cache.entry_path(key).exists()

        status = subprocess.run(
            [str(RAY), "status", f"--address={address}"], env=env, capture_output=True, text=True, timeout=120
        )
        assert status.returncode == 0, status.stdout + status.stderr  # the run did not stop the cluster
        assert "4.0 CPU" in status.stdout or "/4.0 CPU" in status.stdout, status.stdout
    finally:
        _stop_marked_processes(marker)
    assert stray_processes(marker) == []


def test_ctrl_c_stops_spark_and_ray(tmp_path):
    env, marker = marked_environment()
    env.pop("RAY_ADDRESS", None)
    proc = barriersim("run", str(QUICKSTART), "--out", str(tmp_path / "run"), "--no-cache", env=env)
    for line in proc.stdout:
        if "generating the workload" in line or "running the job" in line:
            break
    else:
        pytest.fail("the run ended before it started the workload")
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=180)
    assert proc.returncode == 130, rest
    assert [line for line in rest.splitlines() if "interrupted" in line] == [
        "barriersim: interrupted; Spark and Ray were stopped"
    ], rest
    assert "Traceback" not in rest
    assert stray_processes(marker) == []
