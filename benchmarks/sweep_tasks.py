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
AXES = {"workload.zipf_exponent": [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75],
        "checkpointing.interval_ms": [50, 100, 200, 400]}


def sweep_file(directory: Path) -> Path:
    scenario = apply_settings(load_scenario(ROOT / "scenarios" / "skew.toml"), {"workload.records": RECORDS}, "bench")
    document = scenario_document(scenario)
    document["sweep"] = AXES
    path = directory / "sweep32.toml"
    path.write_text(dumps(document))
    return path


def timed(path: Path, out: Path, **options) -> tuple[float, dict, tuple]:
    load = os.getloadavg()
    started = time.perf_counter()
    result = sweep.run_sweep(path, out=out, aggregate=False, **options)
    wall = time.perf_counter() - started
    return wall, {key: r.summary["trace_sha256"] for key, r in result.runs.items()}, load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--cluster", action="store_true", help="also on a local Ray cluster of three nodes")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = sweep_file(Path(tmp))
        print(f"32 points x 1 mode, {RECORDS:,} records each; {os.cpu_count()} cores")
        traces = None
        best: dict[str, float] = {}
        for repeat in range(args.repeats):
            variants = [("serial", {"parallelism": 1}), ("ray tasks", {"parallelism": os.cpu_count()}),
                        ("auto", {})]
            walls = {}
            for name, options in variants:
                wall, hashes, load = timed(path, Path(tmp) / f"{name}-{repeat}", **options)
                traces = traces or hashes
                same = hashes == traces and len(hashes) == 32
                walls[name] = wall
                best[name] = min(wall, best.get(name, wall))
                print(f"{name:10} {wall:6.1f} s  traces {'identical' if same else 'DIFFER'}  "
                      f"load {load[0]:.2f} {load[1]:.2f}", flush=True)
            print(f"speed-up: ray tasks {walls['serial'] / walls['ray tasks']:.2f} x, "
                  f"auto {walls['serial'] / walls['auto']:.2f} x (target 1.7 x)", flush=True)
        if args.repeats > 1:
            print(f"best of {args.repeats}: serial {best['serial']:.1f} s, ray tasks {best['ray tasks']:.1f} s "
                  f"({best['serial'] / best['ray tasks']:.2f} x), auto {best['auto']:.1f} s "
                  f"({best['serial'] / best['auto']:.2f} x)")
        if args.cluster:
            from barriersim.local_cluster import LocalCluster

            cluster = LocalCluster(nodes=3, head_cpus=1, worker_cpus=1, connect=False)
            try:
                wall, hashes, load = timed(path, Path(tmp) / "cluster", address=cluster.address)
            finally:
                cluster.shutdown()
            print(f"3 nodes    {wall:6.1f} s  traces {'identical' if hashes == traces else 'DIFFER'}  "
                  f"load {load[0]:.2f} {load[1]:.2f}")


if __name__ == "__main__":
    main()
