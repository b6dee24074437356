"""Flink in the loop: runs each family configuration on Flink 2.3.0 (``benchmarks/flink/FamilyJob.java``), one at a
time, a fresh JVM and MiniCluster per run, and keeps Flink's REST statistics gzipped as evidence.

How this works: the Java job is compiled against PyFlink's jars (``.venv-flink``, ``make flink-venv``) into
``runs/flink-family/classes``; per run the runner writes the configuration's description, starts the JVM on a free
REST port, waits until every task runs, reads each subtask's counters and accumulated busy time a third of the way
into ``seconds`` and at its end, then the checkpoint history, every completed checkpoint's per-subtask statistics
and where each subtask ran, trimmed to what ``figures`` reads; then it tells the job to stop. A run whose file exists
is skipped (the output resumes); ``--only`` selects configurations by name patterns. Run it with nothing else on the
machine: ``.venv/bin/python -m benchmarks.flink_family.runner`` (see docs/fidelity-family.md for the time it takes)."""

from __future__ import annotations

import argparse
import fnmatch
import gzip
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from benchmarks.flink_family.description import Config
from benchmarks.flink_family.generator import FAMILY_JSON, load_family

ROOT = Path(__file__).resolve().parent.parent.parent
JAVA_SOURCE = ROOT / "benchmarks" / "flink" / "FamilyJob.java"
FLINK_VENV = ROOT / ".venv-flink"
RAW_DIR = ROOT / "benchmarks" / "flink" / "family" / "raw"
SCRATCH = ROOT / "runs" / "flink-family"
JVM_OPTIONS = [
    "--add-exports=java.base/sun.net.util=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.net=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
]
METRICS = (
    "numRecordsIn",
    "numRecordsOut",
    "numBytesOut",
    "accumulateBusyTimeMs",
    "accumulateBackPressuredTimeMs",
    "accumulateIdleTimeMs",
)
HISTORY_FIELDS = (
    "id",
    "status",
    "checkpoint_type",
    "trigger_timestamp",
    "latest_ack_timestamp",
    "end_to_end_duration",
    "state_size",
    "checkpointed_size",
    "persisted_data",
    "processed_data",
    "num_subtasks",
    "num_acknowledged_subtasks",
)
SUBTASK_FIELDS = (
    "index",
    "status",
    "end_to_end_duration",
    "start_delay",
    "alignment",
    "checkpoint",
    "unaligned_checkpoint",
    "state_size",
    "checkpointed_size",
)
STARTUP_S, STOP_S = 180, 90  # how long a JVM may take to run every task, and to stop
T = TypeVar("T")


class RunFailed(Exception):
    pass


def flink_lib() -> Path:
    sites = sorted((FLINK_VENV / "lib").glob("python3*/site-packages/pyflink/lib"))
    if not sites:
        raise SystemExit(f"flink_family: no PyFlink under {FLINK_VENV}: run `make flink-venv` first")
    return sites[0]


def compile_job(classes: Path) -> Path:
    """The Java job's classes, compiled again when the source is newer."""
    marker = classes / "FamilyJob.class"
    if not marker.exists() or marker.stat().st_mtime < JAVA_SOURCE.stat().st_mtime:
        classes.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["javac", "-nowarn", "-cp", f"{flink_lib()}/*", "-d", str(classes), str(JAVA_SOURCE)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"flink_family: javac failed: {done.stderr.strip().splitlines()[0]}")
    return classes


def job_command(classes: Path, description: Path, port: int, *jvm_args: str) -> list[str]:
    """The JVM that runs ``FamilyJob`` on ``description`` with its REST API on ``port``."""
    return [
        "java",
        *JVM_OPTIONS,
        *jvm_args,
        "-cp",
        f"{flink_lib()}/*:{classes}",
        "FamilyJob",
        str(description),
        str(port),
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read().decode())


def _keep(d: dict, keys) -> dict:
    return {k: d[k] for k in keys if k in d}


def _metrics(base: str, vertices: list[dict], started: float) -> dict:
    """Each subtask's counters and accumulated times, per vertex id, all from one fetch of the JobManager's metric
    store, and when that fetch was. A metric request answers from the store and starts a fetch from the TaskManagers
    when the last is older than ``metrics.fetcher.update-interval`` (the Java job sets 5 s): the first request
    starts one, the reads wait until the source's count moved (the fetch landed) and end within the interval."""
    probe = f"{base}/vertices/{vertices[0]['id']}/subtasks/0/metrics?get=numRecordsOut"
    before, deadline = _get(probe), time.monotonic() + 5
    while _get(probe) == before and time.monotonic() < deadline:
        time.sleep(0.1)
    fetched = time.monotonic() - started
    out = {}
    for v in vertices:
        rows = []
        for i in range(v["parallelism"]):
            values = _get(f"{base}/vertices/{v['id']}/subtasks/{i}/metrics?get={','.join(METRICS)}")
            rows.append({m["id"]: float(m["value"]) for m in values})
        out[v["id"]] = rows
    return {"t": fetched, "vertices": out}


def poll_job(
    port: int, process: subprocess.Popen, ready: Callable[[str, dict], T | None], what: str, every: float
) -> T:
    """Asks the JobManager about its job every ``every`` s until ``ready(base, job)`` answers (not None); ``what``
    names the awaited moment in the errors."""
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RunFailed(f"the JVM ended (exit {process.returncode}) before {what}")
        try:
            jobs = _get(f"http://localhost:{port}/jobs/overview")["jobs"]
            if jobs:
                base = f"http://localhost:{port}/jobs/{jobs[0]['jid']}"
                answer = ready(base, _get(base))
                if answer is not None:
                    return answer
        except OSError:
            pass  # the REST endpoint is not up yet
        time.sleep(every)
    raise RunFailed(f"waited {STARTUP_S} s, in vain, until {what}")


def _running(base: str, job: dict) -> str | None:
    if job["state"] in ("FAILED", "CANCELED", "FINISHED"):
        raise RunFailed(f"the job ended {job['state']} before it ran")
    return base if job["vertices"] and all(v["status"] == "RUNNING" for v in job["vertices"]) else None


def _wait_running(port: int, process: subprocess.Popen) -> str:
    """The job's REST base once every task of it runs."""
    return poll_job(port, process, _running, "the job ran", every=0.5)


@contextmanager
def flink_jvm(description: dict, name: str, classes: Path) -> Iterator[tuple[subprocess.Popen, int]]:
    """A fresh JVM running ``FamilyJob`` on ``description`` (kept as ``name``.json in the scratch directory, its output
    in ``name``.log), and its REST port; told to stop when the block ends, killed if it does not within ``STOP_S``."""
    SCRATCH.mkdir(parents=True, exist_ok=True)
    path = SCRATCH / f"{name}.json"
    path.write_text(json.dumps(description, indent=1))
    port = _free_port()
    with open(SCRATCH / f"{name}.log", "w") as log_file:
        process = subprocess.Popen(
            job_command(classes, path, port),
            stdin=subprocess.PIPE,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            yield process, port
        finally:
            try:
                assert process.stdin is not None  # started with stdin=PIPE
                process.stdin.write("stop\n")
                process.stdin.close()
                process.wait(timeout=STOP_S)
            except (OSError, subprocess.TimeoutExpired):
                process.kill()
                process.wait()


def write_gzipped(out: Path, raw: dict) -> None:
    """``raw`` as gzipped JSON at ``out``, whole or not at all."""
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(gzip.compress(json.dumps(raw, separators=(",", ":")).encode()))
    tmp.replace(out)


def collect(base: str, port: int, config: Config, running_at: float) -> dict:
    job = _get(base)
    vertices = [_keep(v, ("id", "name", "parallelism", "status")) for v in job["vertices"]]
    time.sleep(max(0.0, running_at + config.seconds / 3 - time.monotonic()))
    metrics = [_metrics(base, vertices, running_at)]
    time.sleep(max(0.0, running_at + config.seconds - time.monotonic()))
    metrics.append(_metrics(base, vertices, running_at))
    checkpoints = _get(f"{base}/checkpoints")
    history = sorted((_keep(c, HISTORY_FIELDS) for c in checkpoints["history"]), key=lambda c: c["id"])
    details = {}
    for c in history:
        if c["status"] == "COMPLETED":
            details[c["id"]] = {
                v["id"]: [
                    _keep(s, SUBTASK_FIELDS)
                    for s in _get(f"{base}/checkpoints/details/{c['id']}/subtasks/{v['id']}")["subtasks"]
                ]
                for v in vertices
            }
    placement = {
        v["id"]: [s.get("taskmanager-id") for s in _get(f"{base}/vertices/{v['id']}")["subtasks"]] for v in vertices
    }
    return {
        "flink_version": _get(f"http://localhost:{port}/config").get("flink-version"),
        "config": config.to_json(),
        "job": {"state": job["state"], "vertices": vertices},
        "counts": checkpoints["counts"],
        "history": history,
        "subtasks": details,
        "metrics": metrics,
        "placement": placement,
        "checkpoint_config": _get(f"{base}/checkpoints/config"),
    }


def run_once(config: Config, classes: Path, out: Path) -> None:
    """One run: a fresh JVM for ``config``, its REST statistics written gzipped to ``out``."""
    load_before = os.getloadavg()
    with flink_jvm(config.to_json(), out.name.replace(".json.gz", ""), classes) as (process, port):
        base = _wait_running(port, process)
        raw = collect(base, port, config, time.monotonic())
        raw["loadavg"] = {"before": load_before, "after": os.getloadavg()}
    write_gzipped(out, raw)


def wait_for_quiet(limit: float) -> None:
    if os.getloadavg()[0] >= limit:
        print(f"waiting for the load average ({os.getloadavg()[0]:.1f}) to fall below {limit}", file=sys.stderr)
    while os.getloadavg()[0] >= limit:
        time.sleep(5)


def selected(configs: list[Config], only: str) -> list[Config]:
    patterns = [p for p in only.split(",") if p]
    return [c for c in configs if not patterns or any(fnmatch.fnmatch(c.name, p) for p in patterns)]


def raw_path(raw_dir: Path, name: str, run: int) -> Path:
    return raw_dir / f"{name}-run{run}.json.gz"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.flink_family.runner", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--family", type=Path, default=FAMILY_JSON)
    parser.add_argument("--raw-dir", type=Path, default=RAW_DIR)
    parser.add_argument("--only", default="", help="comma-separated shell patterns of configuration names")
    parser.add_argument("--runs", type=int, default=2, help="runs per configuration")
    parser.add_argument(
        "--wait-load",
        type=float,
        default=None,
        help="before each run, wait until the 1-minute load average is below this (a shared machine)",
    )
    args = parser.parse_args(argv)
    configs, _ = load_family(args.family)
    if not selected(configs, args.only):
        print(f"flink_family.runner: --only {args.only!r} names no configuration of {args.family}", file=sys.stderr)
        return 2
    todo = [
        (c, i)
        for c in selected(configs, args.only)
        for i in range(1, args.runs + 1)
        if not raw_path(args.raw_dir, c.name, i).exists()
    ]
    estimate = sum(c.seconds + 25 for c, _ in todo)
    print(f"{len(todo)} runs to do, about {estimate / 60:.0f} min", file=sys.stderr)
    if not todo:
        return 0
    args.raw_dir.mkdir(parents=True, exist_ok=True)
    classes = compile_job(SCRATCH / "classes")
    failed = 0
    for config, i in todo:
        if args.wait_load is not None:
            wait_for_quiet(args.wait_load)
        started = time.monotonic()
        out = raw_path(args.raw_dir, config.name, i)
        try:
            run_once(config, classes, out)
            print(f"{out.name}: {time.monotonic() - started:.0f} s, load {os.getloadavg()[0]:.1f}", file=sys.stderr)
        except Exception as err:  # noqa: BLE001 - one failed run is reported, the others go on
            failed += 1
            print(f"{out.name}: failed: {err} (see {SCRATCH / out.name.replace('.json.gz', '.log')})", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
