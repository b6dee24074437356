"""A large run on Ray actors: a library scenario (default: the quickstart, 20 million records, sources as fast as
they can) on real Ray actors with its checkpoints, verified exactly-once against the reference evaluated on
columns. Prints the wall times of its phases (drawing the workload, the job on Ray, the verification), records/s
while the job runs, the checkpoints and the verdict; exits 1 unless the job finished exactly-once with every record.

How this works: the workload is drawn locally (``simulation_inputs.workload_splits``: the same numpy draws the Spark
workload makes), so the run needs no Spark; the job runs through ``run_graph_on_ray`` as the Ray backend runs it;
``runtime.verification.reference`` compares the committed output with the expected one without a per-record Python step.

Run: ``python -m benchmarks.ray_large_run [--scenario PATH] [--records N] [--rate N]``."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import ray

from barriersim.actors.graph_runner import run_graph_on_ray
from barriersim.runtime.verification.reference import Verdict, expected_sink_input, verify
from barriersim.scenarios.loader import load_scenario, with_setting
from barriersim.scenarios.simulation_inputs import job_config, workload_splits

QUICKSTART = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.toml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", type=Path, default=QUICKSTART)
    parser.add_argument("--records", type=int, default=20_000_000, help="the scenario's workload.records")
    parser.add_argument("--rate", type=int, default=0, help="records/s per source subtask (0: as fast as possible)")
    args = parser.parse_args()
    scenario = with_setting(
        with_setting(load_scenario(args.scenario), "workload.records", args.records),
        "workload.rate_per_source",
        args.rate,
    )
    config = job_config(scenario)
    t0 = time.perf_counter()
    splits = workload_splits(scenario)
    expected = expected_sink_input(config.graph, splits)
    drawn = time.perf_counter() - t0
    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False)
    try:
        t1 = time.perf_counter()
        with tempfile.TemporaryDirectory() as root:
            result = run_graph_on_ray(config, splits, root, "large", timeout_seconds=7200)
        ran = time.perf_counter() - t1
    finally:
        ray.shutdown()
    t2 = time.perf_counter()
    verdict = verify(expected, result.committed_output, at_least_once=not config.checkpointing.mode.exactly_once)
    verified = time.perf_counter() - t2
    print(
        f"{scenario.name} on Ray actors, {expected.records:,} records, mode {config.checkpointing.mode.value}, "
        f"checkpoints every {config.checkpointing.interval_ms} ms:"
    )
    print(f"  workload drawn and expected output evaluated: {drawn:.1f} s wall")
    print(
        f"  job on Ray (actors started to job end): {ran:.1f} s wall = {expected.records / ran:,.0f} records/s; "
        f"outcome {result.outcome}; checkpoints completed {result.counts.get('completed', 0)}, "
        f"failed {result.counts.get('failed', 0)}"
    )
    print(
        f"  verification on columns: {verified:.1f} s wall; {verdict.output_records:,} records committed, lost "
        f"{verdict.lost}, duplicated {verdict.duplicated}, wrong {verdict.wrong}, final sums mismatched "
        f"{verdict.final_sum_mismatched_keys}: {verdict.verdict.value}"
    )
    ok = (
        result.outcome == "finished"
        and verdict.verdict is Verdict.EXACTLY_ONCE
        and verdict.output_records == verdict.expected_records
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
