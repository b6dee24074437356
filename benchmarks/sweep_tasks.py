"""A simulator sweep of 32 points, serially in one process against Ray tasks over this machine's cores (the
simulation phase: ``run_sweep`` without the aggregation, Ray's start and stop included), and optionally on a
local Ray cluster of three nodes (``--cluster``); every variant must give the serial traces (``trace_sha256``).
Target: Ray tasks >= 1.7 x faster than serially on 2 cores. The machine's load average is printed beside each;
with ``--repeats N`` the variants alternate and the best of each is compared too.

The sweep: ``scenarios/skew.toml`` with 300,000 records, over 8 Zipf exponents x 4 checkpoint intervals (about
0.8 s per point on a quiet machine here). ``python -m benchmarks.sweep_tasks [--repeats N] [--cluster]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from barriersim import sweep
from barriersim.scenarios.documents import dumps, scenario_document
from barriersim.scenarios.loader import apply_settings, load_scenario

ROOT = Path(__file__).resolve().parents[1]
RECORDS = 300_000
AXES = {
    "workload.zipf_exponent": [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75],
    "checkpointing.interval_ms": [50, 100, 200, 400],
}


def sweep_file(directory: Path) -> Path:
    scenario = apply_settings(load_scenario(ROOT / "scenarios" / "skew.toml"), {"workload.records": RECORDS}, "bench")
    document = scenario_document(scenario)
    document["sweep"] = AXES
    path = directory / "sweep32.toml"
    path.write_text(dumps(document))
    return path


def timed(path: Path, out: Path, **options) -> tuple[float, float, dict, tuple]:
    """The sweep's wall time, its simulation phase's (from the first simulation's start, Ray's start left out, to
    the last run done, Ray's stop left out), its traces and the load average before it."""
    load = os.getloadavg()
    marks: list[float] = []

    def progress(what: str, done: int, total: int) -> None:
        if "simulating" in what and not marks or done == total:
            marks.append(time.perf_counter())

    started = time.perf_counter()
    result = sweep.run_sweep(path, out=out, aggregate=False, progress=progress, **options)
    wall = time.perf_counter() - started
    return wall, marks[-1] - marks[0], {key: r.summary["trace_sha256"] for key, r in result.runs.items()}, load


def speed_ups(times: dict[str, tuple[float, float]]) -> str:
    serial = times["serial"]
    return (
        ", ".join(
            f"{name} {serial[0] / t[0]:.2f} x (simulation phase {serial[1] / t[1]:.2f} x)"
            for name, t in times.items()
            if name != "serial"
        )
        + " (target 1.7 x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--cluster", action="store_true", help="also on a local Ray cluster of three nodes")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = sweep_file(Path(tmp))
        print(f"32 points x 1 mode, {RECORDS:,} records each; {os.cpu_count()} cores")
        traces = None
        best: dict[str, tuple[float, float]] = {}
        for repeat in range(args.repeats):
            variants: list[tuple[str, dict[str, int | None]]] = [
                ("serial", {"parallelism": 1}),
                ("ray tasks", {"parallelism": os.cpu_count()}),
                ("auto", {}),
            ]
            times = {}
            for name, options in variants:
                wall, phase, hashes, load = timed(path, Path(tmp) / f"{name}-{repeat}", **options)
                traces = traces or hashes
                same = hashes == traces and len(hashes) == 32
                times[name] = (wall, phase)
                best_wall, best_phase = best.get(name, times[name])
                best[name] = (min(wall, best_wall), min(phase, best_phase))
                print(
                    f"{name:10} {wall:6.1f} s, simulation phase {phase:6.1f} s  traces "
                    f"{'identical' if same else 'DIFFER'}  load {load[0]:.2f} {load[1]:.2f}",
                    flush=True,
                )
            print(speed_ups(times), flush=True)
        if args.repeats > 1:
            print(f"best of {args.repeats}: {speed_ups(best)}")
        if args.cluster:
            from barriersim.local_cluster import LocalCluster

            cluster = LocalCluster(nodes=3, head_cpus=1, worker_cpus=1, connect=False)
            try:
                wall, phase, hashes, load = timed(path, Path(tmp) / "cluster", address=cluster.address)
            finally:
                cluster.shutdown()
            print(
                f"3 nodes    {wall:6.1f} s, simulation phase {phase:6.1f} s  traces "
                f"{'identical' if hashes == traces else 'DIFFER'}  load {load[0]:.2f} {load[1]:.2f}"
            )


if __name__ == "__main__":
    main()
