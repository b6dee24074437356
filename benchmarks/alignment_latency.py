"""The alignment-latency benchmark: Flink's measured job (``docs/flink-facts.md``) on the simulator, row by row
beside Flink's table (``benchmarks.alignment_checks``), then shape checks and Flink's CheckpointingTimeBenchmark.

Each row is one deterministic run of ``scenarios/alignment_latency.toml`` or ``checkpointing_time_benchmark.toml``
with settings overridden through the loader (mode, offered rate, alignment timeout); the idle rows run the job as the
facts ran it, without the hot key (``idle_job``), the output-flusher block the idle rate with it. ``measure`` takes
Flink's figures from the run's statistics as Flink's measurement did (medians over the completed checkpoints but the
first; the bottleneck's start delay; the sinks' alignment; persisted and processed data; unaligned flags; the steady
throughput; the ramp over seeds). Run: ``.venv/bin/python -m benchmarks.alignment_latency`` (``--quick``, ``--json``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from barriersim.runtime.checkpointing_mode import CheckpointingMode
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.runtime.sim.kernel import Trace
from barriersim.runtime.state.key_groups import assign_key_to_parallel_operator
from barriersim.runtime.verification.reference import expected_sink_input, verify
from barriersim.scenarios.loader import Scenario, apply_settings, load_scenario
from barriersim.scenarios.simulation_inputs import job_config, workload_splits
from benchmarks.alignment_checks import (
    ALIGNED_TIMEOUT_MS,
    CALM,
    CALM_HOT,
    FLINK_RAMP_MS,
    HEAVY,
    OFFERED_RECORDS_PER_S,
    TIMEOUT,
    Check,
    RampRun,
    Remeasured,
    find_row,
    flink_checks,
    load_remeasured,
    ramp_check,
    span_text,
)

ROOT = Path(__file__).resolve().parent.parent
ALIGNMENT_SCENARIO = ROOT / "scenarios" / "alignment_latency.toml"
CTB_SCENARIO = ROOT / "scenarios" / "checkpointing_time_benchmark.toml"

SOURCE_SUBTASKS = 2  # the job's two source subtasks share the offered rate
# records/s per source without backpressure: the 2,000 in all Flink's job offered, which Flink delivers (re-measured
# here by its counters; the facts' "1,250" reads like its per-second meter, a 60 s window, in a younger job)
NO_BACKPRESSURE_RATE = OFFERED_RECORDS_PER_S[CALM] // SOURCE_SUBTASKS
HEAVY_RATE = OFFERED_RECORDS_PER_S[HEAVY] // SOURCE_SUBTASKS  # records/s per source under heavy backpressure
RATIO_NEEDED = 50
CTB_ALIGNED = "CheckpointingTimeBenchmark, 29 B records, debloating 300 ms"
CTB_FULL_BUFFERS = "CheckpointingTimeBenchmark, 29 B records, no debloating"
CTB_UNALIGNED = "CheckpointingTimeBenchmark, 1 KiB records"


@dataclass
class Row:
    group: str
    mode: str
    checkpoints: int = 0
    e2e_ms: float | None = None
    e2e_p90_ms: float | None = None
    after_start_ms: float | None = None  # per checkpoint: end-to-end less the bottleneck's start delay (median)
    start_delay_ms: float | None = None
    sink_alignment_ms: float | None = None
    persisted_kib: float | None = None
    processed_kib: float | None = None
    keyed_unaligned: str = ""
    sinks_unaligned: str = ""
    ramp_ms: list[float] = field(default_factory=list)
    unaligned_subtasks: list[str] = field(default_factory=list)
    throughput: float | None = None  # records/s through the job in steady state (``steady_throughput``)
    verdict: str = ""
    virtual_seconds: float = 0.0
    wall_seconds: float = 0.0
    settings: dict[str, Any] = field(default_factory=dict)

    # the earlier names the shape checks read
    @property
    def median_end_to_end_ms(self) -> float | None:
        return self.e2e_ms

    @property
    def median_persisted_bytes(self) -> float | None:
        return None if self.persisted_kib is None else self.persisted_kib * 1024


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def bottleneck_subtask(scenario: Scenario) -> str | None:
    """The subtask that owns the hot key (Flink's key group assignment), as ``vertex#index``."""
    for v in scenario.job.graph.vertices:
        hot = v.params.get("hot_key", -1)
        if hot >= 0 and v.params.get("hot_key_extra_us", 0.0) > 0:
            return f"{v.name}#{assign_key_to_parallel_operator(hot, v.max_parallelism, v.parallelism)}"
    return None


def hot_key_subtask(scenario: Scenario) -> str:
    """``bottleneck_subtask`` of a scenario that has a hot key, as the alignment job has."""
    subtask = bottleneck_subtask(scenario)
    if subtask is None:
        raise ValueError(f"scenario {scenario.name!r} has no hot key")
    return subtask


def _bottleneck_tasks(scenario: Scenario) -> set[str]:
    """The hot key's subtask; without a hot key, every subtask of the vertex with the highest per-record cost."""
    hot = bottleneck_subtask(scenario)
    if hot is not None:
        return {hot}
    slowest = max(scenario.job.graph.vertices, key=lambda v: v.params.get("cost_us_per_record", 1.0))
    return {f"{slowest.name}#{i}" for i in range(slowest.parallelism)}


def p90(values: list[float]) -> float | None:
    return statistics.quantiles(values, n=10, method="inclusive")[-1] if len(values) > 1 else _median(values)


def _flags(rows: list[dict], vertex: str, parallelism: int) -> str:
    """Per subtask of ``vertex`` in index order, 1 if it reported ``unaligned_checkpoint`` in most checkpoints."""
    out = []
    for i in range(parallelism):
        mine = [r["unaligned_checkpoint"] for r in rows if r["task"] == f"{vertex}#{i}"]
        out.append("1" if mine and sum(mine) * 2 > len(mine) else "0")
    return ",".join(out)


def measure(scenario: Scenario, mode: str, group: str, **settings: Any) -> Row:
    """One simulated run of ``scenario`` in ``mode`` with ``settings`` (dotted keys) and its figures."""
    settings = {**settings, "checkpointing.mode": mode}
    if CheckpointingMode.parse(mode).uses_alignment_timeout:
        settings["checkpointing.aligned_checkpoint_timeout_ms"] = ALIGNED_TIMEOUT_MS
    scenario = apply_settings(scenario, settings, "benchmark")
    config = job_config(scenario)
    splits = workload_splits(scenario)
    started = time.perf_counter()
    simulation = JobSimulation(config, splits, scenario.seed)
    simulation.sim.trace.lines = []  # keep the trace's lines: the bottleneck's steps give the throughput
    result = simulation.run()
    wall = time.perf_counter() - started
    verdict = verify(
        expected_sink_input(config.graph, splits),
        result.committed_output,
        at_least_once=not config.checkpointing.mode.exactly_once,
    ).verdict.value
    graph = scenario.job.graph
    sources = {f"{v.name}#{i}" for v in graph.sources for i in range(v.parallelism)}
    acked: dict[int, set[str]] = {}
    for row in result.subtasks:
        if not row["finished"]:  # a task that had finished before the trigger (FLIP-147) took part in nothing
            acked.setdefault(row["id"], set()).add(row["task"])
    completed = sorted(
        (c for c in result.checkpoints if c["status"] == "COMPLETED" and sources <= acked.get(c["id"], set())),
        key=lambda c: c["id"],
    )
    steady = completed[1:]  # the first completed checkpoint is left out, as in Flink's measurement
    ids = {c["id"] for c in steady}
    rows = [r for r in result.subtasks if r["id"] in ids]
    bottleneck = _bottleneck_tasks(scenario)
    delays: dict[int, int] = {}  # per checkpoint: the latest start among the bottleneck's subtasks
    sink_alignment: dict[int, int] = {}  # per checkpoint: the larger alignment of the sinks
    sinks = {f"{v.name}#{i}" for v in graph.sinks for i in range(v.parallelism)}
    for r in rows:
        if r["task"] in bottleneck:
            delays[r["id"]] = max(delays.get(r["id"], 0), r["start_delay"])
        if r["task"] in sinks:
            sink_alignment[r["id"]] = max(sink_alignment.get(r["id"], 0), r["alignment_duration"])
    keyed = max(graph.vertices, key=lambda v: (v.params.get("hot_key_extra_us", 0.0), v.operator.is_keyed))
    sink = graph.sinks[0]
    e2e = [c["end_to_end_duration"] for c in steady]
    return Row(
        group=group,
        mode=mode,
        checkpoints=len(steady),
        e2e_ms=_median(e2e),
        e2e_p90_ms=p90(e2e),
        after_start_ms=_median([c["end_to_end_duration"] - delays[c["id"]] for c in steady if c["id"] in delays]),
        start_delay_ms=_median(list(delays.values())),
        sink_alignment_ms=_median(list(sink_alignment.values())),
        persisted_kib=_median([c["persisted_data"] / 1024 for c in steady]),
        processed_kib=_median([c["processed_data"] / 1024 for c in steady]),
        keyed_unaligned=_flags(rows, keyed.name, keyed.parallelism),
        sinks_unaligned=_flags(rows, sink.name, sink.parallelism),
        ramp_ms=[c["end_to_end_duration"] for c in completed[: len(FLINK_RAMP_MS)]],
        unaligned_subtasks=sorted({r["task"] for r in rows if r["unaligned_checkpoint"]}),
        throughput=steady_throughput(
            simulation.sim.trace.lines,
            bottleneck,
            sum(len(split) for per_vertex in splits.values() for split in per_vertex),
        ),
        verdict=verdict,
        virtual_seconds=result.virtual_ms / 1000,
        wall_seconds=wall,
        settings={"mode": mode, **settings},
    )


def channel_capacity_bytes(scenario: Scenario, subtask: str) -> int:
    """The bytes the network can hold in front of ``subtask``: up to ``max_buffers_per_channel`` buffers of each
    upstream subpartition feeding it (for a local channel these include the buffers it holds, which are the
    producer's), plus, for its remote channels only, their exclusive buffers and their gates' floating buffers (a
    local channel has no buffers of its own)."""
    net, graph = scenario.network, scenario.job.graph
    name, _, index = subtask.partition("#")
    kinds = job_config(scenario).placement.gate_specs(graph, name, int(index))
    buffers = 0
    for gate in kinds:
        remote = sum(1 for kind in gate if kind == "remote")
        buffers += len(gate) * net.max_buffers_per_channel
        if remote:
            buffers += remote * net.exclusive_buffers_per_channel + net.floating_buffers_per_gate
    return buffers * net.buffer_size


def steady_throughput(trace_lines: list[str], bottleneck: set[str], records: int) -> float | None:
    """Records/s through the job in steady state, taken where the job's rate is set: the bottleneck's records per
    second over the middle half of its activity (the trace's ``step`` lines), so that neither the start-up nor the
    end (the queues draining, FLIP-147's final checkpoints) counts, scaled by the job's records per bottleneck
    record. The sinks' rate would swing with every aligned checkpoint, which holds the other keyed subtasks' records
    back while the sinks align."""
    steps = []
    for line in trace_lines:
        time_us, label, detail = Trace.parse(line)
        if label == "step":
            task, _, count = detail.split(" ")
            if task in bottleneck and int(count):
                steps.append((time_us, int(count)))
    total = sum(n for _, n in steps)
    if len(steps) < 2 or not total:
        return None
    first, last = steps[0][0], steps[-1][0]
    low, high = first + (last - first) / 4, last - (last - first) / 4
    window = sum(n for t, n in steps if low <= t < high)
    return window / ((high - low) / 1e6) * records / total if high > low else None


def _calm(records: int) -> dict:
    """The overrides of the no-backpressure rows: Flink's delivered rate, ``records`` per source vertex."""
    return {"workload.rate_per_source": NO_BACKPRESSURE_RATE, "workload.records": records}


def idle_job(scenario: Scenario) -> Scenario:
    """``scenario`` as the facts' idle rows ran the job: no hot key (the keys uniform) and no vertex paying a hot
    key's extra cost (docs/flink-facts.md, "The idle rows")."""
    graph = scenario.job.graph
    vertices = tuple(
        replace(v, params={k: x for k, x in v.params.items() if k not in ("hot_key", "hot_key_extra_us")})
        for v in graph.vertices
    )
    scenario = replace(scenario, job=replace(scenario.job, graph=replace(graph, vertices=vertices)))
    return apply_settings(scenario, {"workload.hot_key_share": 0.0}, "benchmark")


def run_all(quick: bool = False) -> tuple[list[Row], list[Check], list[Check]]:
    base = load_scenario(ALIGNMENT_SCENARIO)
    ctb = load_scenario(CTB_SCENARIO)
    heavy_records = 45_000 if quick else 90_000  # about 17 or 34 s of the job at ≈ 2,650 records/s
    calm_records = 32_000 if quick else 64_000  # about 16 or 32 s at 2,000 records/s
    ctb_records = 120_000 if quick else 300_000  # about 6 or 15 s of the job at ≈ 20,000 records/s
    rows: list[Row] = []
    calm = _calm(calm_records)
    for mode in ("aligned", "unaligned", "at-least-once"):
        rows.append(measure(idle_job(base), mode, CALM, **calm))
    heavy = {"workload.rate_per_source": HEAVY_RATE, "workload.records": heavy_records}
    for mode in ("aligned", "at-least-once", "unaligned"):
        rows.append(measure(base, mode, HEAVY, **heavy))
    rows.append(measure(base, "aligned-with-timeout", TIMEOUT, **heavy))
    rows.append(measure(ctb, "aligned", CTB_ALIGNED, **{"workload.records": ctb_records}))
    rows.append(
        measure(ctb, "aligned", CTB_FULL_BUFFERS, **{"workload.records": ctb_records, "network.buffer_debloat": False})
    )
    rows.append(
        measure(
            ctb,
            "unaligned",
            CTB_UNALIGNED,
            **{"workload.records": ctb_records // 2, "network.record_size": 1024, "network.buffer_debloat": False},
        )
    )  # as the benchmark's unaligned variant runs
    bottleneck_index = int(hot_key_subtask(base).partition("#")[2])
    here = load_remeasured()
    return (
        rows,
        flink_checks(rows, bottleneck_index, here) + [ramp_check(ramp_runs(), here)],
        shape_checks(rows, base),
    )


DEFAULT_FLUSHER_MS = 100  # Flink's execution.buffer-timeout.interval
FLUSHER_TIMEOUTS_MS = (DEFAULT_FLUSHER_MS, 10, 1)


def flusher_rows(quick: bool = False) -> list[Row]:
    """The idle aligned row on the job with the hot key (not a row of the facts) at several output-flusher intervals
    (Flink's ``execution.buffer-timeout.interval``, 100 ms by default): how much of the bottleneck's start delay is
    the records the flusher held back. Without backpressure the consumers see a subpartition's records only when the
    flusher (or a full buffer, or an event) hands them over (Flink's ``PipelinedSubpartition.flush``), so they reach
    the bottleneck in bursts, and with the hot key's 1 ms per record the barrier waits behind the burst's work."""
    base = load_scenario(ALIGNMENT_SCENARIO)
    calm = _calm(20_000 if quick else 40_000)
    return [
        measure(base, "aligned", f"{CALM_HOT}, flusher {t} ms", **calm, **{"network.buffer_timeout_ms": t})
        for t in FLUSHER_TIMEOUTS_MS
    ]


def flusher_phase_rows(quick: bool = False) -> list[Row]:
    """The idle aligned row with the hot key and Flink's 100 ms flusher in one run per seed of ``RAMP_SEEDS``: each
    seed draws every
    task's flusher phase, so its own phases of the flushers against the trigger (every interval from the start).
    Whatever the phases, the start delay stays well above the trigger path: each source's flush hands the bottleneck
    (about 70 % busy) 100 ms of that source's records, about 38 ms of work, and the first barrier it takes waits
    behind the records its own source held back since its last flush and behind what is left of the bursts before."""
    base = load_scenario(ALIGNMENT_SCENARIO)
    calm = _calm(10_000 if quick else 20_000)
    return [
        measure(replace(base, seed=seed), "aligned", f"{CALM_HOT}, flusher 100 ms, seed {seed}", **calm)
        for seed in RAMP_SEEDS
    ]


RAMP_SEEDS = tuple(range(1, 9))


def ramp_runs() -> list[RampRun]:
    """The heavy aligned job's first six checkpoints, once per seed (each its own costs and flusher phases).
    Checkpoint 1 is triggered as the job starts: Flink 2.3 triggers it when the job's last task reports RUNNING
    (``runtime/coordinator/deactivator.py``), and barriersim's tasks run at once."""
    base = load_scenario(ALIGNMENT_SCENARIO)
    heavy = apply_settings(
        base,
        {"checkpointing.mode": "aligned", "workload.rate_per_source": HEAVY_RATE, "workload.records": 45_000},
        "benchmark",
    )  # about 18 s of the job
    runs = []
    for seed in RAMP_SEEDS:  # the same in --quick: the ramp needs only the first checkpoints
        scenario = replace(heavy, seed=seed)
        result = JobSimulation(job_config(scenario), workload_splits(scenario), seed).run()
        completed = sorted((c for c in result.checkpoints if c["status"] == "COMPLETED"), key=lambda c: c["id"])
        first = completed[: len(FLINK_RAMP_MS)]
        runs.append(
            RampRun(seed, first[0]["trigger_timestamp"] if first else -1, [c["end_to_end_duration"] for c in first])
        )
    return runs


def _ratio(slow: Row, fast: Row) -> float:
    if not slow.median_end_to_end_ms or fast.median_end_to_end_ms is None:
        return 0.0
    return slow.median_end_to_end_ms / max(fast.median_end_to_end_ms, 1)


def shape_checks(rows: list[Row], base: Scenario) -> list[Check]:
    checks = []
    for group in (HEAVY,):
        unaligned = find_row(rows, group, "unaligned")
        for mode in ("aligned", "at-least-once"):
            ratio = _ratio(find_row(rows, group, mode), unaligned)
            checks.append(
                Check(
                    f"{group}: {mode} / unaligned >= {RATIO_NEEDED}",
                    ratio >= RATIO_NEEDED,
                    f"ratio {ratio:.1f} ({find_row(rows, group, mode).median_end_to_end_ms} ms / "
                    f"{unaligned.median_end_to_end_ms} ms; Flink ≈ 3400 / 20-32 ≈ 100-170)",
                    "",
                )
            )
    bottleneck = hot_key_subtask(base)
    capacity = channel_capacity_bytes(base, bottleneck)
    persisted = find_row(rows, HEAVY, "unaligned").median_persisted_bytes or 0
    share = persisted / capacity
    checks.append(
        Check(
            "heavy backpressure: unaligned persists in-flight data of the order of the channel buffers",
            0.2 <= share <= 1.5,
            f"median {persisted / 1000:.0f} KB persisted per checkpoint = {share:.2f} x the {capacity / 1000:.0f} KB "
            f"the channels in front of {bottleneck} hold (Flink: ≈ 450 KB)",
        )
    )
    timeout = find_row(rows, TIMEOUT, "aligned-with-timeout")
    t = timeout.median_end_to_end_ms or 0
    checks.append(
        Check(
            f"timeout mode completes shortly after its {ALIGNED_TIMEOUT_MS} ms timeout",
            ALIGNED_TIMEOUT_MS <= t <= 1.5 * ALIGNED_TIMEOUT_MS,
            f"median {t} ms = {t / ALIGNED_TIMEOUT_MS:.2f} x the timeout (Flink ≈ 520 ms = 1.04 x)",
        )
    )
    checks.append(
        Check(
            f"timeout mode: the bottleneck {bottleneck} switches to unaligned",
            bottleneck in timeout.unaligned_subtasks,
            f"subtasks reporting unaligned_checkpoint: {', '.join(timeout.unaligned_subtasks) or 'none'} "
            "(Flink: of the keyed subtasks, only the bottleneck)",
        )
    )
    calm = [r for r in rows if r.group == CALM]
    worst = max((r.median_end_to_end_ms or 0) for r in calm)
    slowest = max(calm, key=lambda r: r.median_end_to_end_ms or 0)
    checks.append(
        Check(
            "no backpressure: every mode completes within 100 ms",
            worst <= 100,
            f"slowest median {worst} ms, {slowest.mode} (Flink 17-26 ms)",
        )
    )
    ctb_aligned = next(r for r in rows if r.group == CTB_ALIGNED)
    ctb_unaligned = next(r for r in rows if r.group == CTB_UNALIGNED)
    ctb_full = next(r for r in rows if r.group == CTB_FULL_BUFFERS)
    ratio = _ratio(ctb_aligned, ctb_unaligned)
    checks.append(
        Check(
            "CheckpointingTimeBenchmark: unaligned far faster than aligned (>= 5x)",
            ratio >= 5,
            f"ratio {ratio:.1f}; aligned median {ctb_aligned.median_end_to_end_ms} ms with buffer "
            "debloating against Flink's ≈ 600 ms",
        )
    )
    debloat_ratio = _ratio(ctb_full, ctb_aligned)
    checks.append(
        Check(
            "CheckpointingTimeBenchmark: buffer debloating (300 ms) shortens aligned checkpoints (>= 3x)",
            debloat_ratio >= 3,
            f"{ctb_full.median_end_to_end_ms} ms with full buffers, {ctb_aligned.median_end_to_end_ms} ms "
            f"debloated: {debloat_ratio:.1f}x",
        )
    )
    checks.append(
        Check(
            "every run's output verifies",
            all(r.verdict in ("exactly-once", "at-least-once") for r in rows),
            ", ".join(sorted({r.verdict for r in rows})),
        )
    )
    return checks


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"


def _kib(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} KiB"


def print_results(
    rows: list[Row], flink: list[Check], shapes: list[Check], flusher: Sequence[Row] = (), phases: Sequence[Row] = ()
) -> None:
    here = load_remeasured()  # Flink re-measured on this machine, for the flusher lines
    console = Console(width=None if sys.stdout.isatty() else 200)
    table = Table(title="alignment latency: barriersim's simulator on Flink's measured job (docs/flink-facts.md)")
    for col in (
        "setting",
        "mode",
        "ckpts",
        "e2e median",
        "e2e p90",
        "bottleneck start delay",
        "sink alignment",
        "persisted",
        "processed",
        "unaligned keyed / sinks",
    ):
        table.add_column(col, justify="left" if col in ("setting", "mode") else "right", overflow="fold")
    for r in rows:
        table.add_row(
            r.group,
            r.mode,
            str(r.checkpoints),
            _ms(r.e2e_ms),
            _ms(r.e2e_p90_ms),
            _ms(r.start_delay_ms),
            _ms(r.sink_alignment_ms),
            _kib(r.persisted_kib),
            _kib(r.processed_kib),
            f"{r.keyed_unaligned} / {r.sinks_unaligned}",
        )
    console.print(table)
    console.print(
        "medians over the completed checkpoints every source subtask acknowledged, the first left out; "
        "flags: 1 = the subtask reported unaligned_checkpoint in most checkpoints",
        markup=False,
        highlight=False,
    )
    console.print(
        "\nrow by row against Flink's table (PASS: within Flink's range widened by 30 %, figures under "
        "50 ms by 15 ms):",
        markup=False,
        highlight=False,
    )
    for c in flink:
        judged = "" if c.passed_here is None else f"; {c.detail_here}: {'PASS' if c.passed_here else 'FAIL'}"
        console.print(f"{'PASS' if c.passed else 'FAIL'}  {c.name}: {c.detail}{judged}", markup=False, highlight=False)
        if not c.passed and c.hint:
            console.print(f"      why: {c.hint}", markup=False, highlight=False, style="dim")
    console.print(
        f"{sum(c.passed for c in flink)} of {len(flink)} figures within their band", markup=False, highlight=False
    )
    judged_here = [c for c in flink if c.passed_here is not None]
    if judged_here:
        console.print(
            f"{sum(bool(c.passed_here) for c in judged_here)} of {len(judged_here)} within the same band "
            f"around Flink re-measured on this machine (benchmarks/flink_remeasured.json, "
            f"benchmarks.flink_remeasure: the facts' job run by Flink itself)",
            markup=False,
            highlight=False,
        )
    console.print("\nshape checks (wide bands):", markup=False, highlight=False)
    for c in shapes:
        console.print(f"{'PASS' if c.passed else 'FAIL'}  {c.name}: {c.detail}", markup=False, highlight=False)
    if flusher:
        console.print(
            "\nthe output flusher in the idle aligned start delay on the job with the hot key (not a row of "
            "the facts, whose idle rows ran without it; Flink's execution.buffer-timeout.interval, 100 ms by "
            "default):",
            markup=False,
            highlight=False,
        )
        for t, r in zip(FLUSHER_TIMEOUTS_MS, flusher):
            measured = ""
            flusher_ms = None if t == DEFAULT_FLUSHER_MS else t
            if here is not None and (again := here.row(CALM_HOT, "aligned", flusher_ms)) is not None:
                measured = (
                    f" (Flink {here.flink_version} here at {t} ms: {span_text(again['start_delay'])}, "
                    f"{span_text(again['e2e'])}, {span_text(again['sink_alignment'])} ms)"
                )
            console.print(
                f"  {r.group}: bottleneck start delay {_ms(r.start_delay_ms)}, e2e median {_ms(r.e2e_ms)}, "
                f"sink alignment {_ms(r.sink_alignment_ms)}{measured}",
                markup=False,
                highlight=False,
            )
        rows = [*rows, *flusher]
    if phases:
        delays = [r.start_delay_ms for r in phases if r.start_delay_ms is not None]
        e2e = [r.e2e_ms for r in phases if r.e2e_ms is not None]
        console.print(
            f"  flusher 100 ms, one run per seed {RAMP_SEEDS[0]}-{RAMP_SEEDS[-1]} (each its own phases of the "
            f"flushers against the trigger): bottleneck start delay {_ms(min(delays))} to {_ms(max(delays))}, "
            f"e2e median {_ms(min(e2e))} to {_ms(max(e2e))}{_here_idle_aligned(here)}",
            markup=False,
            highlight=False,
        )
        rows = [*rows, *phases]
    console.print(
        f"{len(rows)} simulated runs, {sum(r.virtual_seconds for r in rows):.0f} virtual s in "
        f"{sum(r.wall_seconds for r in rows):.1f} wall s, besides the ramp's runs (one per seed)",
        markup=False,
        highlight=False,
    )


def _here_idle_aligned(here: Remeasured | None) -> str:
    """Flink re-measured here, idle aligned with the hot key at its default flusher: start delay and end to end."""
    again = here.row(CALM_HOT, "aligned") if here is not None else None
    if here is None or again is None:
        return ""
    return f" (Flink {here.flink_version} here: {span_text(again['start_delay'])} and {span_text(again['e2e'])} ms)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.alignment_latency", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller workloads (fewer checkpoints per setting)")
    parser.add_argument("--json", type=Path, help="also write the rows and checks to this file")
    args = parser.parse_args(argv)
    rows, flink, shapes = run_all(quick=args.quick)
    flusher = flusher_rows(quick=args.quick)
    phases = flusher_phase_rows(quick=args.quick)
    print_results(rows, flink, shapes, flusher, phases)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "rows": [asdict(r) for r in rows],
                    "flink": [asdict(c) for c in flink],
                    "shapes": [asdict(c) for c in shapes],
                    "flusher": [asdict(r) for r in flusher],
                    "flusher_phases": [asdict(r) for r in phases],
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
