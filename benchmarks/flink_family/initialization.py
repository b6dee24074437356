"""How long before Flink triggers a job's first checkpoint its tasks started their output flushers: the measurement
behind ``network.task_initialization_ms``. Runs family configurations on Flink 2.3.0 with the task state changes
logged and prints, per run, each task's INITIALIZING time and the lead from its construction to checkpoint 1.

How this works: a task builds its record writers (and starts their ``OutputFlusher``) in ``StreamTask``'s constructor,
then logs ``DEPLOYING to INITIALIZING``, restores and opens its operators, logs ``INITIALIZING to RUNNING``; the
JobManager triggers checkpoint 1 once every task runs, and later ones at the interval from it. So the lead is the
checkpoint's timestamp less the construction's log time (both milliseconds of one JVM's clock). Run it with nothing
else on the machine: ``.venv/bin/python -m benchmarks.flink_family.initialization [NAME ...] [--runs N]``."""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import time
from pathlib import Path

from benchmarks.flink_family import runner
from benchmarks.flink_family.generator import load_family

LOG4J = Path(__file__).resolve().parent.parent / "flink" / "log4j2-task-states.properties"
_CHECKPOINT = re.compile(r"Triggering checkpoint (\d+) .*@ (\d+)")


def _ms(stamp: str) -> int:
    """``HH:MM:SS,mmm`` as milliseconds of the day."""
    clock, millis = stamp.split(",")
    hours, minutes, seconds = (int(x) for x in clock.split(":"))
    return ((hours * 60 + minutes) * 60 + seconds) * 1000 + int(millis)


def leads(log: str) -> dict:
    """From one run's log: each task's construction and RUNNING time, and checkpoint 1's timestamp."""
    built, running, first = [], [], None
    for line in log.splitlines():
        if " Task - " in line and "DEPLOYING to INITIALIZING" in line:
            built.append(_ms(line[:12]))
        elif " Task - " in line and "INITIALIZING to RUNNING" in line:
            running.append(_ms(line[:12]))
        match = _CHECKPOINT.search(line)
        if match and match.group(1) == "1":
            first = int(match.group(2)) % 86_400_000
    if not built or first is None:
        raise ValueError("the log has no task construction or no checkpoint 1 (too short a run?)")
    return {
        "tasks": len(built),
        "initializing_ms": statistics.median(r - b for r, b in zip(sorted(running), sorted(built))),
        "built_spread_ms": max(built) - min(built),
        "lead_ms": first - statistics.mean(built),
    }


def run(name: str, seconds: float, classes: Path) -> dict:
    config = {c.name: c for c in load_family()[0]}[name]
    runner.SCRATCH.mkdir(parents=True, exist_ok=True)
    description = runner.SCRATCH / f"{name}-initialization.json"
    description.write_text(json.dumps(config.to_json()))
    command = runner.job_command(classes, description, runner._free_port(), f"-Dlog4j.configurationFile={LOG4J}")
    log = runner.SCRATCH / f"{name}-initialization.log"
    with open(log, "w") as log_file:
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=log_file, stderr=subprocess.STDOUT, text=True)
        time.sleep(seconds)
        process.communicate("stop\n", timeout=120)
    return leads(log.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=["calibration-spin-5us", "base-busy", "draw-19"])
    parser.add_argument("--runs", type=int, default=2, help="runs per configuration")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long each job runs (start-up included)")
    args = parser.parse_args()
    classes = runner.compile_job(runner.SCRATCH / "classes")
    found = []
    for name in args.names:
        for _ in range(args.runs):
            row = run(name, args.seconds, classes)
            found.append(row["lead_ms"])
            print(
                f"{name}: {row['tasks']} tasks, INITIALIZING {row['initializing_ms']:.0f} ms, built over "
                f"{row['built_spread_ms']} ms, checkpoint 1 {row['lead_ms']:.0f} ms after they were built",
                flush=True,
            )
    print(f"lead: median {statistics.median(found):.0f} ms over {len(found)} runs ({min(found):.0f}-{max(found):.0f})")


if __name__ == "__main__":
    main()
