"""A Ray run of a scenario cold (Spark generates the workload, verifies and computes the statistics) against the same
run warm (the workload and Spark's reference from the workload cache, no Spark), measured in the same session. See
docs/benchmarks.md, "A warm run against a cold one".

Run: ``python -m benchmarks.warm_run [SCENARIO] [--mode MODE]`` (default ``scenarios/quickstart.toml``, the
scenario's mode).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
TARGET_SECONDS = 35.0
TARGET_JOB_SHARE = 1 / 3


def run(scenario: str, out: Path, cache_dir: Path, *extra: str) -> tuple[float, dict]:
    env = {**os.environ, "BARRIERSIM_CACHE_DIR": str(cache_dir)}
    env.pop("RAY_ADDRESS", None)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "barriersim.cli", "run", scenario, "--out", str(out), *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"barriersim run failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    summary_path = out / "summary.json"
    if not summary_path.exists():  # several modes: the first mode's directory holds the shared phases
        summary_path = sorted(out.glob("*/summary.json"))[0]
    return wall, json.loads(summary_path.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", nargs="?", default=str(ROOT / "scenarios" / "quickstart.toml"))
    parser.add_argument("--mode")
    args = parser.parse_args(argv)
    extra = ("--mode", args.mode) if args.mode else ()
    with tempfile.TemporaryDirectory(prefix="barriersim-warm-run-") as tmp:
        tmp_path = Path(tmp)
        results = {}
        for name, flags in (
            ("baseline (--no-cache)", ("--no-cache",)),
            ("cold (cache empty)", ()),
            ("warm (cache hit)", ()),
        ):
            results[name] = run(args.scenario, tmp_path / name.split()[0], tmp_path / "cache", *extra, *flags)
    phases = list(next(iter(results.values()))[1]["timings_seconds"])
    print(f"{'phase (s)':<28}" + "".join(f"{name:>24}" for name in results))
    for phase in phases:
        print(f"{phase:<28}" + "".join(f"{s['timings_seconds'].get(phase, 0):>24.2f}" for _, s in results.values()))
    print(f"{'command wall time':<28}" + "".join(f"{wall:>24.2f}" for wall, _ in results.values()))
    print(
        f"{'job share of the wall':<28}"
        + "".join(f"{s['timings_seconds']['job'] / wall:>24.0%}" for wall, s in results.values())
    )
    print(
        f"{'own phases share':<28}"
        + "".join(
            f"{sum(s['timings_seconds'][k] for k in ('deploy', 'job', 'verification')) / wall:>24.0%}"
            for wall, s in results.values()
        )
    )
    print(f"{'workload cache':<28}" + "".join(f"{s['workload_cache']['status']:>24}" for _, s in results.values()))
    (base_wall, _), (warm_wall, warm) = results["baseline (--no-cache)"], results["warm (cache hit)"]
    share = warm["timings_seconds"]["job"] / warm_wall
    print(f"warm / baseline wall time: {warm_wall / base_wall:.2f}")
    print(
        f"target: warm under {TARGET_SECONDS:.0f} s: {'met' if warm_wall < TARGET_SECONDS else 'NOT met'} "
        f"({warm_wall:.1f} s); the job at least a third of it: "
        f"{'met' if share >= TARGET_JOB_SHARE else 'NOT met'} ({share:.0%})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
