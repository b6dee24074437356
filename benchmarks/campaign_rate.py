"""A fault campaign's rate on the default distribution (``barriersim campaign generated``): the same seeds in one
process and as Ray tasks over this machine's cores, in cases per wall minute (Ray's start and stop included, and
without them: from the first case done to the last) and per CPU minute of the cases; every variant must give the
same rows. Targets: >= 1,000 cases per CPU minute; Ray tasks on 2 cores >= 1.8 x the rate of one process. The
machine's load average is printed beside each.

``python -m benchmarks.campaign_rate [--seeds A..B]`` (default seeds 5,000,000..5,001,999, never drawn by
the test suite).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from barriersim import campaign

TIMINGS = ("wall_seconds", "cpu_seconds")


def timed(seeds: range, out: Path, parallelism: int) -> dict:
    load = os.getloadavg()
    marks: list[tuple[float, int]] = []  # (when, cases done) at each batch done

    def progress(what: str, done: int, total: int) -> None:
        if done and (not marks or marks[-1][1] != done):
            marks.append((time.perf_counter(), done))

    started = time.perf_counter()
    result = campaign.run_campaign(
        "generated", seeds, out=out, parallelism=parallelism, aggregate=False, progress=progress
    )
    wall = time.perf_counter() - started
    rows = result.rows.to_pandas()
    cpu = float(rows["cpu_seconds"].sum())
    key = sorted(tuple(r) for r in rows.drop(columns=list(TIMINGS)).astype(str).itertuples(index=False))
    return {
        "cases": result.ran,
        "wall": wall,
        "per_minute": result.ran * 60 / wall,
        "per_cpu_minute": result.ran * 60 / cpu,
        "load": load,
        "key": key,
        # from the first batch done to the last: Ray's start, the workers' imports and Ray's stop left out
        "steady_per_minute": (marks[-1][1] - marks[0][1]) * 60 / (marks[-1][0] - marks[0][0]),
        "violated": result.count(campaign.VIOLATED),
        "errors": result.count(campaign.ERROR),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=campaign.parse_seeds, default=campaign.parse_seeds("5000000..5001999"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = {}
        for name, parallelism in (("one process", 1), ("ray tasks", os.cpu_count() or 2)):
            r = results[name] = timed(args.seeds, Path(tmp) / name.replace(" ", "-"), parallelism)
            print(
                f"{name:12} {r['cases']:,} cases in {r['wall']:.1f} s: {r['per_minute']:,.0f} per minute "
                f"({r['steady_per_minute']:,.0f} after the first batch), {r['per_cpu_minute']:,.0f} "
                f"per CPU minute; violated {r['violated']}, errors {r['errors']}; load {r['load'][0]:.2f} "
                f"{r['load'][1]:.2f}",
                flush=True,
            )
        one, ray = results["one process"], results["ray tasks"]
        print(
            f"rows identical: {one['key'] == ray['key']}; speed-up {ray['per_minute'] / one['per_minute']:.2f} x "
            f"(after the first batch: {ray['steady_per_minute'] / one['steady_per_minute']:.2f} x; target 1.8 x)"
        )


if __name__ == "__main__":
    main()
