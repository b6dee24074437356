"""Simulator speed, measured in this run: events per second and simulated seconds per wall second for a
16-task job checkpointing every 100 simulated ms (no faults, and with a crash), and the property campaign's
throughput (generated fault schedules per minute). The simulator's targets: >= 500,000 events/s,
>= 50x faster than real time, >= 1,000 fault schedules per minute on the default distribution
(``barriersim.strategies.simulated_cases()``: every mode, random topologies, faults and protocol situations, each
case simulated and checked for consistent cuts, as the property suite does).

Run: ``python -m benchmarks.simulator [--rates-only] [--repeats N] [--baseline-rev REV]``.
How it works: docs/benchmarks.md, "The simulator's speed and the failure campaign".
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
import warnings

from hypothesis import HealthCheck, Phase, given, settings

from barriersim.runtime.checkpointing_mode import CheckpointingMode
from barriersim.runtime.coordinator.configuration import CheckpointingConfig
from barriersim.runtime.faults.fault_schedule import FaultSchedule
from barriersim.runtime.job.config import JobConfig, SourceEmission, WorkloadConfig
from barriersim.runtime.job.restart_strategy import RestartStrategyConfig
from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobVertex
from barriersim.runtime.jobgraph import OperatorKind as K
from barriersim.runtime.jobgraph import Partitioner as P
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.runtime.sim.kernel import Priority, Simulation
from barriersim.scenarios.workload import local_splits
from barriersim.strategies import SimulatedCase, simulated_cases

SIXTEEN_TASKS = JobGraph(
    (
        JobVertex("source", K.SOURCE, 4),
        JobVertex("sum", K.KEYED_SUM, 8),
        JobVertex("map", K.MAP, 3),
        JobVertex("sink", K.TWO_PHASE_COMMIT_SINK, 1),
    ),
    (JobEdge("source", "sum", P.HASH), JobEdge("sum", "map", P.REBALANCE), JobEdge("map", "sink", P.REBALANCE)),
)


def measure_job(mode: str, faults: str = "[]", records: int = 400_000, rate: int = 10_000) -> dict:
    splits = {"source": local_splits(records, 1000, 1.0, 100, 4, seed=1, rate_per_source=rate)}
    checkpointing_mode = CheckpointingMode.parse(mode)
    timeout = 50 if checkpointing_mode.uses_alignment_timeout else 0
    config = JobConfig(
        SIXTEEN_TASKS,
        checkpointing=CheckpointingConfig(
            mode=checkpointing_mode, interval_ms=100, aligned_checkpoint_timeout_ms=timeout
        ),
        workload=WorkloadConfig(rate_per_source=rate),
        faults=FaultSchedule.from_json(faults),
        restart=RestartStrategyConfig(delay_ms=200),
    )
    started, cpu_started = time.perf_counter(), time.process_time()
    result = JobSimulation(config, splits, seed=7).run()
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    return {
        "mode": mode,
        "records": records,
        "events": result.events,
        "wall_seconds": wall,
        "cpu_seconds": cpu,  # on a shared machine, CPU time is the steadier measure
        "events_per_cpu_second": result.events / cpu,
        "virtual_seconds": result.virtual_ms / 1000,
        "events_per_second": result.events / wall,
        "records_per_wall_second": records / wall,
        "speedup_vs_real_time": result.virtual_ms / 1000 / wall,
        "checkpoints": result.counts["completed"],
    }


RATE_SECONDS = {10_000: 10.0, 100_000: 4.0, 1_000_000: 2.0}  # simulated seconds of records at each rate


def rate_graph() -> JobGraph:
    """The 16-task shape, with 0.1 us of work per record downstream: it keeps up with 4 sources at 1M records/s."""
    cost = {"cost_us_per_record": 0.1}
    return JobGraph(
        (
            JobVertex("source", K.SOURCE, 4),
            JobVertex("sum", K.KEYED_SUM, 8, params=cost),
            JobVertex("map", K.MAP, 3, params=cost),
            JobVertex("sink", K.TWO_PHASE_COMMIT_SINK, 1, params=cost),
        ),
        (JobEdge("source", "sum", P.HASH), JobEdge("sum", "map", P.REBALANCE), JobEdge("map", "sink", P.REBALANCE)),
    )


def measure_rate(rate: int, seconds: float, exact_sources: bool = False) -> dict:
    """The 16-task shape with ``seconds`` worth of records at ``rate`` records/s per source: simulated seconds per
    CPU second and per wall second (the workload drawn before the clock starts); with ``exact_sources``, the sources'
    records written when each is due (``source_emission = "exact"``) instead of in 10 ms steps."""
    records = int(rate * seconds) * 4
    splits = {"source": local_splits(records, 1000, 1.0, 100, 4, seed=1, rate_per_source=rate)}
    config = JobConfig(
        rate_graph(),
        checkpointing=CheckpointingConfig(mode=CheckpointingMode.ALIGNED, interval_ms=100),
        workload=WorkloadConfig(
            rate_per_source=rate, source_emission=SourceEmission.EXACT if exact_sources else SourceEmission.STEPS
        ),
    )
    started, cpu_started = time.perf_counter(), time.process_time()
    result = JobSimulation(config, splits, seed=7).run()
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    # the committed output joined into one batch, as verification reads it: the current result joins it when it is
    # first read, measured here apart; the baseline tree's run joined it itself (inside its times above)
    join_started = time.process_time()
    committed = len(result.committed_output)
    join = time.process_time() - join_started if hasattr(result, "committed_batches") else 0.0
    if committed != records:
        raise RuntimeError(f"rate {rate}: committed {committed} of {records} records")
    virtual = result.virtual_ms / 1000
    return {
        "rate": rate,
        "records": records,
        "events": result.events,
        "virtual_seconds": virtual,
        "cpu_seconds": cpu,
        "wall_seconds": wall,
        "x_real_time_cpu": virtual / cpu,
        "x_real_time_wall": virtual / wall,
        "checkpoints": result.counts["completed"],
        "join_cpu_seconds": join,
        "x_real_time_cpu_joined": virtual / (cpu + join),
    }


def measure_rates_before_after(repeats: int, baseline_rev: str) -> dict:
    """Each rate on the current code and on ``baseline_rev``'s, alternately, ``repeats`` times: the medians."""
    from benchmarks.baseline_tree import BaselineUnavailable, export, run_json

    try:
        tree = export(baseline_rev)
    except BaselineUnavailable as err:
        print(f"before: not measured ({err})")
        tree = None
    if tree is not None and "--measure-rate" not in (tree / "benchmarks" / "simulator.py").read_text():
        print(f"before: not measured ({baseline_rev}'s benchmarks/simulator.py has no --measure-rate)")
        tree = None
    out = {}
    for rate, seconds in RATE_SECONDS.items():
        runs: dict[str, list] = {"before": [], "after": []}
        for _ in range(repeats):
            if tree is not None:
                # the baseline's own copy of this script: the same job, built with that revision's config classes
                runs["before"].append(
                    run_json(tree, tree / "benchmarks" / "simulator.py", ["--measure-rate", str(rate), str(seconds)])
                )
            runs["after"].append(measure_rate(rate, seconds))
        out[rate] = {
            side: {f: statistics.median(r[f] for r in rs) for f in rs[0]} if rs else None for side, rs in runs.items()
        }
    return out


def print_exact_emission(rates: dict, repeats: int) -> None:
    """Each rate with exact source emission against the same shape in steps (the table above's "after"): what
    writing every record when it is due costs the simulator."""
    print(
        'exact source emission (every record written when it is due; workload.source_emission = "exact"), '
        f"medians of {repeats}:"
    )
    for rate, seconds in RATE_SECONDS.items():
        exact = statistics.median(
            measure_rate(rate, seconds, exact_sources=True)["x_real_time_cpu"] for _ in range(repeats)
        )
        steps = rates[rate]["after"]["x_real_time_cpu"]
        print(
            f"    {rate:,} records/s per source: {exact:.2f}x real time per CPU second, in steps {steps:.2f}x "
            f"(exact / steps: {exact / steps:.2f})"
        )


def print_rates(rates: dict, ceiling: dict | None = None) -> None:
    """The before/after table; with ``ceiling`` (``measure_kernel_ceiling``, same run), for each target the events
    per second it needs at the run's events per simulated second, against what the bare kernel runs."""
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title="simulator, 16-task shape, checkpoints every 100 ms: simulated seconds per second "
        "(targets: >= 100x at 10,000 records/s per source, >= 1x at 1,000,000)"
    )
    for col in (
        "records/s per source",
        "side",
        "records",
        "events",
        "virtual s",
        "cpu s",
        "wall s",
        "x real time (cpu)",
        "x real time (wall)",
        "checkpoints",
    ):
        table.add_column(col, justify="right")
    for rate, sides in rates.items():
        for side in ("before", "after"):
            r = sides[side]
            if r is None:
                continue
            table.add_row(
                f"{rate:,}",
                side,
                f"{r['records']:,.0f}",
                f"{r['events']:,.0f}",
                f"{r['virtual_seconds']:.2f}",
                f"{r['cpu_seconds']:.2f}",
                f"{r['wall_seconds']:.2f}",
                f"{r['x_real_time_cpu']:.2f}",
                f"{r['x_real_time_wall']:.2f}",
                f"{r['checkpoints']:.0f}",
            )
    Console(width=max(Console().width, 160)).print(table)  # wide enough for every column when piped
    for rate, target in ((10_000, 100.0), (1_000_000, 1.0)):
        after = rates[rate]["after"]["x_real_time_cpu"]
        print(
            f"    {rate:,} records/s per source: {after:.2f}x real time per CPU second (target >= {target:g}x): "
            f"{'met' if after >= target else 'NOT met'}"
        )
        joined = rates[rate]["after"].get("x_real_time_cpu_joined")
        if joined is not None:
            print(
                f"      with the committed output joined into one batch afterwards, as verification reads it "
                f"({rates[rate]['after']['join_cpu_seconds']:.2f} CPU s more; the baseline's run joined it inside "
                f"its time): {joined:.2f}x"
            )
        if ceiling is not None:
            r = rates[rate]["after"]
            per_simulated_second = r["events"] / r["virtual_seconds"]
            needed = per_simulated_second * target
            print(
                f"      {per_simulated_second:,.0f} events per simulated second, so {target:g}x needs {needed:,.0f} "
                f"events/s; the bare kernel runs {ceiling['events_per_second']:,.0f} in this run "
                f"({needed / ceiling['events_per_second']:.2f}x its ceiling)"
            )


def measure_kernel_ceiling(events: int = 400_000, tasks: int = 16) -> dict:
    """Events/s of the bare kernel: ``tasks`` callbacks, each rescheduling itself after a random delay."""
    sim = Simulation(seed=1)
    rng = sim.random("ceiling")

    def make(task: int):
        def step() -> None:
            sim.schedule_after(rng.randint(1, 100), step, Priority.NORMAL, "step")

        return step

    for task in range(tasks):
        sim.schedule_at(0, make(task), Priority.NORMAL, "step")
    started = time.perf_counter()
    sim.run(max_events=events)
    wall = time.perf_counter() - started
    return {"events": events, "wall_seconds": wall, "events_per_second": events / wall}


class _TimeUp(BaseException):
    """Ends a campaign's generation loop (not an Exception: Hypothesis lets it through)."""


FLINK_DEFAULT_CHECKPOINT_TIMEOUT_MS = 600_000


def measure_campaign(seconds: float = 20.0, variant: str = "default") -> dict:
    """Generated fault schedules per minute of this process's CPU time (the steadier measure on a shared machine;
    per wall minute too), for ``seconds`` of CPU: ``default`` simulates each case as drawn; ``flink-timeout`` with
    the checkpoint timeout set to Flink's default (10 minutes); ``generation`` only draws them. The same
    derandomized sequence of cases in each variant."""
    count = 0
    longest = 0.0
    started, cpu_started = time.perf_counter(), time.process_time()

    @settings(
        max_examples=1_000_000,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(simulated_cases())
    def campaign(case):
        nonlocal count, longest
        if time.process_time() - cpu_started > seconds:
            raise _TimeUp
        if variant == "flink-timeout":
            document = copy.deepcopy(case.document)
            document["checkpointing"]["timeout_ms"] = FLINK_DEFAULT_CHECKPOINT_TIMEOUT_MS
            case = SimulatedCase(document, case.faults, case.seed)
        if variant != "generation":
            one = time.perf_counter()
            case.run()
            longest = max(longest, time.perf_counter() - one)
        count += 1

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            campaign()
        except _TimeUp:
            pass
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return {
        "variant": variant,
        "fault_schedules": count,
        "seconds": elapsed,
        "cpu_seconds": cpu,
        "per_minute": count * 60 / cpu,
        "per_wall_minute": count * 60 / elapsed,
        "longest_case_seconds": longest,
    }


def main() -> None:
    from rich.console import Console
    from rich.table import Table

    from benchmarks.baseline_tree import BEFORE_COLUMNAR

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates-only", action="store_true", help="only the before/after table at three rates")
    parser.add_argument("--repeats", type=int, default=3, help="alternating runs per side and rate (medians)")
    parser.add_argument("--baseline-rev", default=BEFORE_COLUMNAR)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    ceiling = measure_kernel_ceiling()
    rates = measure_rates_before_after(args.repeats, args.baseline_rev)
    print_rates(rates, ceiling)
    print_exact_emission(rates, args.repeats)
    if args.rates_only:
        return

    rows = [measure_job(m) for m in ("aligned", "unaligned", "at-least-once")]
    rows.append(
        {**measure_job("aligned", '[{"type":"crash_task","task":"sum#3","at_ms":4000}]'), "mode": "aligned + crash"}
    )
    rows.append({**measure_job("aligned", records=40_000, rate=1_000), "mode": "aligned, 1,000 rec/s per source"})
    table = Table(
        title="simulator: 16-task job, checkpoints every 100 simulated ms (targets: 500,000 events/s, 50x real time)"
    )
    for col in (
        "mode",
        "records",
        "events",
        "events/s",
        "events/cpu s",
        "records/s (wall)",
        "virtual s",
        "wall s",
        "cpu s",
        "x real time",
        "checkpoints",
        "/ kernel ceiling",
        "us/event beyond it",
        "x kernel us/event",
    ):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            r["mode"],
            f"{r['records']:,}",
            f"{r['events']:,}",
            f"{r['events_per_second']:,.0f}",
            f"{r['events_per_cpu_second']:,.0f}",
            f"{r['records_per_wall_second']:,.0f}",
            f"{r['virtual_seconds']:.1f}",
            f"{r['wall_seconds']:.2f}",
            f"{r['cpu_seconds']:.2f}",
            f"{r['speedup_vs_real_time']:.1f}",
            str(r["checkpoints"]),
            f"{r['events_per_second'] / ceiling['events_per_second']:.3f}",
            f"{1e6 / r['events_per_second'] - 1e6 / ceiling['events_per_second']:.1f}",
            f"{ceiling['events_per_second'] / r['events_per_second']:.1f}",
        )
    console = Console()
    console.print(
        f"baseline: the kernel alone (16 self-rescheduling no-op callbacks) runs "
        f"{ceiling['events_per_second']:,.0f} events/s = {1e6 / ceiling['events_per_second']:.2f} us per event; "
        f"the target of 500,000 events/s leaves {1e6 / 500_000 - 1e6 / ceiling['events_per_second']:.2f} us "
        f"per event for the job's own work"
    )
    console.print(table)
    campaign = Table(
        title="property campaign on the default distribution (simulated_cases(), derandomized): "
        "target 1,000 fault schedules per minute"
    )
    for col in (
        "variant",
        "fault schedules",
        "cpu s",
        "per cpu minute",
        "per wall minute",
        "longest case (s)",
        "/ default",
    ):
        campaign.add_column(col, justify="right")
    results = [measure_campaign(variant=v) for v in ("default", "flink-timeout", "generation")]
    for r in results:
        campaign.add_row(
            r["variant"],
            f"{r['fault_schedules']:,}",
            f"{r['cpu_seconds']:.1f}",
            f"{r['per_minute']:,.0f}",
            f"{r['per_wall_minute']:,.0f}",
            f"{r['longest_case_seconds']:.2f}" if r["variant"] != "generation" else "-",
            f"{r['per_minute'] / results[0]['per_minute']:.2f}",
        )
    console.print(campaign)
    console.print(
        "default: as generated (checkpoint timeouts of 1-10 s); flink-timeout: the same cases with Flink's "
        "10-minute default; generation: drawing the cases only (the ceiling)"
    )


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--measure-rate":
        print(json.dumps(measure_rate(int(sys.argv[2]), float(sys.argv[3]))))
    else:
        main()
