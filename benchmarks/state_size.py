"""The state-size sweep: what a checkpoint costs as keyed state grows from 10 MB to 1 GB, heap against incremental, on
the simulator. See docs/benchmarks.md, "The state-size sweep".

Run: ``.venv/bin/python -m benchmarks.state_size`` from the repository root (``--quick``: 10 MB and 100 MB only).
"""

from __future__ import annotations

import argparse
import statistics
import time

from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.runtime.verification.reference import expected_sink_input, verify
from barriersim.scenarios.loader import effective_scenario, parse_scenario
from barriersim.scenarios.simulation_inputs import job_config, workload_splits

MB = 1_000_000
KEYS = 20_000
SIZES_MB = (10, 100, 1000)


def scenario(backend: str, state_mb: int):
    return effective_scenario(
        parse_scenario(
            {
                "scenario": {"name": f"state-{state_mb}mb-{backend}", "seed": 3},
                "workload": {
                    "records": 40_000,
                    "keys": KEYS,
                    "zipf_exponent": 0.8,
                    "rate_per_source": 2_500,
                    "key_growth": True,
                },
                "checkpointing": {"mode": "aligned", "interval_ms": 1_000, "timeout_ms": 600_000},
                "state": {"backend": backend, "entry_bytes": state_mb * MB // KEYS},
                "job": {
                    "vertex": [
                        {"name": "source", "operator": "source", "parallelism": 2},
                        {"name": "sum", "operator": "keyed_sum", "parallelism": 2},
                        {"name": "sink", "operator": "two_phase_commit_sink", "parallelism": 2},
                    ],
                    "edge": [
                        {"from": "source", "to": "sum", "partitioner": "hash"},
                        {"from": "sum", "to": "sink", "partitioner": "forward"},
                    ],
                },
            }
        )
    )


def run(backend: str, state_mb: int) -> tuple[list[dict], str]:
    s = scenario(backend, state_mb)
    config = job_config(s)
    splits = workload_splits(s)
    result = JobSimulation(config, splits, s.seed).run()
    verdict = verify(expected_sink_input(config.graph, splits), result.committed_output).verdict.value
    # the checkpoints taken while the job ran (the last, after its end, holds no keyed state)
    return [c for c in result.checkpoints if c["status"] == "COMPLETED" and c["state_size"] > 1_000], verdict


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 MB and 100 MB only")
    args = parser.parse_args(argv)
    sizes = SIZES_MB[:2] if args.quick else SIZES_MB
    started = time.perf_counter()
    ratios: dict[tuple[str, int], float] = {}
    print(
        "state-size sweep on the simulator: keyed running sum, 20,000 keys added over 8 s (Zipf 0.8), "
        "checkpoint every 1 s; sizes in MB (10^6 bytes)"
    )
    for state_mb in sizes:
        for backend in ("heap", "incremental"):
            checkpoints, verdict = run(backend, state_mb)
            print(
                f"\n{state_mb} MB of keyed state once all keys exist ({state_mb * MB // KEYS} bytes an entry; the run "
                f"reaches about 43 % of them), {backend} backend ({verdict}):"
            )
            print(
                f"{'checkpoint':>10} {'end_to_end_ms':>14} {'state_size_MB':>14} {'checkpointed_size_MB':>21} "
                f"{'checkpointed/state':>19}"
            )
            for c in checkpoints:
                print(
                    f"{c['id']:>10} {c['end_to_end_duration']:>14} {c['state_size'] / MB:>14.1f} "
                    f"{c['checkpointed_size'] / MB:>21.1f} {c['checkpointed_size'] / c['state_size']:>19.2f}"
                )
            later = checkpoints[len(checkpoints) // 2 :]  # once most keys exist
            ratios[(backend, state_mb)] = statistics.median(c["checkpointed_size"] / c["state_size"] for c in later)
            durations = [c["end_to_end_duration"] for c in checkpoints]
            print(
                f"{'median':>10} {statistics.median(durations):>14.0f}   (checkpointed/state over the later half: "
                f"{ratios[(backend, state_mb)]:.2f})"
            )
    print("\nshape checks:")
    for state_mb in sizes:
        heap, incremental = ratios[("heap", state_mb)], ratios[("incremental", state_mb)]
        print(
            f"{'PASS' if heap > 0.99 else 'FAIL'}  heap {state_mb} MB: every checkpoint writes all its state "
            f"(checkpointed/state {heap:.2f})"
        )
        print(
            f"{'PASS' if incremental < 0.7 * heap else 'FAIL'}  incremental {state_mb} MB: a checkpoint writes "
            f"what changed, not all state (checkpointed/state {incremental:.2f}, heap {heap:.2f})"
        )
    print(f"\n{2 * len(sizes)} simulated runs in {time.perf_counter() - started:.0f} s wall")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
