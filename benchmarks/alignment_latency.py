"""The alignment-latency benchmark: the job of Flink's measured table (``docs/flink-facts.md``) on the simulator,
in every mode, without and with heavy backpressure and with a 500 ms aligned-checkpoint timeout, beside Flink's
figures; then Flink's own CheckpointingTimeBenchmark topology; then the shape checks as PASS/FAIL lines.

How this works: every row is one deterministic simulation of ``scenarios/alignment_latency.toml`` (or
``scenarios/checkpointing_time_benchmark.toml``) with a few settings overridden through the loader
(``apply_settings``): the source rate (0: unthrottled, so the hot keyed subtask backpressures the sources; or a
rate well under the bottleneck's capacity: no backpressure), the mode, the timeout, the minimum pause. The
figures come from the run's statistics with Flink's names (``checkpoints`` and ``subtasks`` rows): medians of
``end_to_end_duration`` and ``persisted_data`` over the completed checkpoints that every source subtask
acknowledged (Flink's sources never end, ours do; checkpoints after a source finished run on drained queues),
the bottleneck's ``start_delay`` (the subtask that owns the hot key, found by Flink's key-group assignment;
without a hot key, the latest start among the subtasks of the costliest vertex) and the sinks'
``alignment_duration``. The checks compare shapes, not absolute numbers: aligned
and at-least-once at least 50 times slower than unaligned under heavy backpressure, unaligned persisting
in-flight data of the order of the buffers the channels in front of the bottleneck hold, the timeout mode
completing shortly after its timeout, no backpressure fast in every mode, and unaligned far faster than
aligned in the CheckpointingTimeBenchmark topology, where buffer debloating (Flink's 300 ms target) shortens
aligned checkpoints against full buffers.

Run: ``.venv/bin/python -m benchmarks.alignment_latency`` from the repository root (``--quick`` for a smaller
workload, ``--json FILE`` to keep the figures).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.runtime.verification import expected_sink_input, verify
from barriersim.runtime.state.key_groups import assign_key_to_parallel_operator
from barriersim.runtime.checkpointing_mode import CheckpointingMode
from barriersim.scenarios.loader import Scenario, apply_settings, load_scenario
from barriersim.scenarios.simulation_inputs import job_config, workload_splits

ROOT = Path(__file__).resolve().parent.parent
ALIGNMENT_SCENARIO = ROOT / "scenarios" / "alignment_latency.toml"
CTB_SCENARIO = ROOT / "scenarios" / "checkpointing_time_benchmark.toml"

NO_BACKPRESSURE_RATE = 6000  # records/s per source subtask: the bottleneck runs at about 40 % of its capacity
ALIGNED_TIMEOUT_MS = 500
RATIO_NEEDED = 50

CALM = "no backpressure"
HEAVY = "heavy backpressure"
FULL_QUEUES = "heavy, min pause 1 s"  # every checkpoint starts with full queues in front of the bottleneck
TIMEOUT = f"heavy, {ALIGNED_TIMEOUT_MS} ms timeout"
CTB_ALIGNED = "CheckpointingTimeBenchmark, 64 B records, debloating 300 ms"
CTB_FULL_BUFFERS = "CheckpointingTimeBenchmark, 64 B records, no debloating"
CTB_UNALIGNED = "CheckpointingTimeBenchmark, 1 KiB records"

# Flink's figures (docs/flink-facts.md), as text for the table and as numbers for the checks.
FLINK_NO_BACKPRESSURE = "17-26 ms"
FLINK_HEAVY_ALIGNED = "≈ 3.4 s (start delay ≈ 3.3 s)"
FLINK_HEAVY_AT_LEAST_ONCE = "≈ 3.4 s"
FLINK_HEAVY_UNALIGNED = "20-32 ms, ≈ 450 KB persisted"
FLINK_TIMEOUT = "≈ 520 ms, only the bottleneck switches"
FLINK_CTB_ALIGNED = "≈ 2 × 300 ms (with buffer debloating)"


@dataclass
class Row:
    group: str
    mode: str
    flink: str
    checkpoints: int = 0
    median_end_to_end_ms: float | None = None
    bottleneck_start_delay_ms: float | None = None
    sink_alignment_ms: float | None = None
    median_persisted_bytes: float | None = None
    unaligned_subtasks: list[str] = field(default_factory=list)
    verdict: str = ""
    virtual_seconds: float = 0.0
    wall_seconds: float = 0.0
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str
    hint: str = ""  # printed when the check fails: what the simulator does there and what Flink does


# Why a shape may come out unlike Flink's (measured when this benchmark was written; printed only on FAIL).
HINT_PRIORITY = ("the simulator lets a task take a priority (unaligned) barrier only after the whole input buffer it "
                 "is working on (1,024 records, about 130 ms at the bottleneck) and not while its output is "
                 "backpressured; Flink takes it between two records and while backpressured, as a mailbox mail "
                 "(CheckpointedInputGate.waitForPriorityEvents -> processPriorityEvents; StreamTaskNetworkInput.emitNext "
                 "handles one record per call)")
HINT_REFILL = ("with min pause 0 the next checkpoint starts as soon as one completes, when the aligned barrier has "
               "just drained the bottleneck's queue (the sources were blocked during the sinks' alignment), so "
               "every second checkpoint meets a half-empty queue; compare the min-pause rows")
HINT_FLUSH = ("the simulator's output flusher closes partially filled buffers every 100 ms even under backpressure "
              "(ResultPartition.flush finishes the open buffer), so the queues in front of the bottleneck fill with "
              "part-empty buffers and drain sooner; Flink's PipelinedSubpartition.flush only requests a flush, the "
              "BufferBuilder keeps filling until it is full or polled with credit (with the flusher off, heavy "
              "at-least-once checkpoints take 4.2-4.4 s here)")
HINT_TIMEOUT_OUTPUT = ("an aligned-with-timeout checkpoint's output channel state completes only when the alignment "
                       "timer fires (StreamTask never calls SubtaskCheckpointCoordinator.notify_output_progress after "
                       "sending), so every such checkpoint lasts at least the timeout; Flink completes it when the "
                       "barrier leaves the subpartition (PipelinedSubpartition.pollBuffer -> "
                       "completeTimeoutableCheckpointBarrier)")


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def bottleneck_subtask(scenario: Scenario) -> str | None:
    """The subtask that owns the hot key (Flink's key group assignment), as ``vertex#index``."""
    for v in scenario.job.graph.vertices:
        hot = v.params.get("hot_key", -1)
        if hot >= 0 and v.params.get("hot_key_extra_us", 0.0) > 0:
            return f"{v.name}#{assign_key_to_parallel_operator(hot, v.max_parallelism, v.parallelism)}"
    return None


def _bottleneck_tasks(scenario: Scenario) -> set[str]:
    """The hot key's subtask; without a hot key, every subtask of the vertex with the highest per-record cost."""
    hot = bottleneck_subtask(scenario)
    if hot is not None:
        return {hot}
    slowest = max(scenario.job.graph.vertices, key=lambda v: v.params.get("cost_us_per_record", 1.0))
    return {f"{slowest.name}#{i}" for i in range(slowest.parallelism)}


def measure(scenario: Scenario, mode: str, group: str, flink: str, **settings: Any) -> Row:
    """One simulated run of ``scenario`` in ``mode`` with ``settings`` (dotted keys) and its figures."""
    settings = {**settings, "checkpointing.mode": mode}
    if CheckpointingMode.parse(mode).uses_alignment_timeout:
        settings["checkpointing.aligned_checkpoint_timeout_ms"] = ALIGNED_TIMEOUT_MS
    scenario = apply_settings(scenario, settings, "benchmark")
    config = job_config(scenario)
    splits = workload_splits(scenario)
    started = time.perf_counter()
    result = JobSimulation(config, splits, scenario.seed).run()
    wall = time.perf_counter() - started
    verdict = verify(expected_sink_input(config.graph, splits), result.committed_output).verdict.value
    graph = scenario.job.graph
    sources = {f"{v.name}#{i}" for v in graph.sources for i in range(v.parallelism)}
    sinks = {f"{v.name}#{i}" for v in graph.sinks for i in range(v.parallelism)}
    acked: dict[int, list[dict]] = {}
    for row in result.subtasks:
        acked.setdefault(row["id"], []).append(row)
    steady = [c for c in result.checkpoints
              if c["status"] == "COMPLETED" and sources <= {r["task"] for r in acked.get(c["id"], [])}]
    ids = {c["id"] for c in steady}
    rows = [r for r in result.subtasks if r["id"] in ids]
    bottleneck = _bottleneck_tasks(scenario)
    delays: dict[int, int] = {}  # per checkpoint: the latest start among the bottleneck's subtasks
    for r in rows:
        if r["task"] in bottleneck:
            delays[r["id"]] = max(delays.get(r["id"], 0), r["start_delay"])
    return Row(
        group=group, mode=mode, flink=flink, checkpoints=len(steady),
        median_end_to_end_ms=_median([c["end_to_end_duration"] for c in steady]),
        bottleneck_start_delay_ms=_median(list(delays.values())),
        sink_alignment_ms=_median([r["alignment_duration"] for r in rows if r["task"] in sinks]),
        median_persisted_bytes=_median([c["persisted_data"] for c in steady]),
        unaligned_subtasks=sorted({r["task"] for r in rows if r["unaligned_checkpoint"]}),
        verdict=verdict, virtual_seconds=result.virtual_ms / 1000, wall_seconds=wall,
        settings={"mode": mode, **settings},
    )


def channel_capacity_bytes(scenario: Scenario, subtask: str) -> int:
    """The bytes the network can hold in front of ``subtask``: its input channels' exclusive buffers and its
    gates' floating buffers, plus up to ``max_buffers_per_channel`` buffers queued in each upstream subpartition
    feeding it."""
    net, graph = scenario.network, scenario.job.graph
    name, _, index = subtask.partition("#")
    buffers = 0
    for gate in range(len(graph.gates_of(name))):
        channels = len(graph.channels_in_gate(name, gate, int(index)))
        buffers += channels * net.exclusive_buffers_per_channel + net.floating_buffers_per_gate
        buffers += channels * net.max_buffers_per_channel
    return buffers * net.buffer_size


def run_all(quick: bool = False) -> tuple[list[Row], list[Check]]:
    base = load_scenario(ALIGNMENT_SCENARIO)
    ctb = load_scenario(CTB_SCENARIO)
    heavy_records = 200_000 if quick else 600_000
    calm_records = 60_000 if quick else 120_000
    ctb_records = 24_000 if quick else 60_000
    rows: list[Row] = []
    calm = {"workload.rate_per_source": NO_BACKPRESSURE_RATE, "workload.records": calm_records}
    for mode in ("aligned", "unaligned", "at-least-once", "aligned-with-timeout"):
        rows.append(measure(base, mode, CALM, FLINK_NO_BACKPRESSURE, **calm))
    heavy = {"workload.rate_per_source": 0, "workload.records": heavy_records}
    rows.append(measure(base, "aligned", HEAVY, FLINK_HEAVY_ALIGNED, **heavy))
    rows.append(measure(base, "at-least-once", HEAVY, FLINK_HEAVY_AT_LEAST_ONCE, **heavy))
    rows.append(measure(base, "unaligned", HEAVY, FLINK_HEAVY_UNALIGNED, **heavy))
    full = {**heavy, "checkpointing.min_pause_ms": 1000}
    rows.append(measure(base, "aligned", FULL_QUEUES, FLINK_HEAVY_ALIGNED, **full))
    rows.append(measure(base, "at-least-once", FULL_QUEUES,
                        FLINK_HEAVY_AT_LEAST_ONCE, **full))
    rows.append(measure(base, "unaligned", FULL_QUEUES, FLINK_HEAVY_UNALIGNED, **full))
    rows.append(measure(base, "aligned-with-timeout", TIMEOUT,
                        FLINK_TIMEOUT, **heavy))
    rows.append(measure(ctb, "aligned", CTB_ALIGNED, FLINK_CTB_ALIGNED,
                        **{"workload.records": ctb_records}))
    rows.append(measure(ctb, "aligned", CTB_FULL_BUFFERS, "-",
                        **{"workload.records": ctb_records, "network.buffer_debloat": False}))
    rows.append(measure(ctb, "unaligned", CTB_UNALIGNED, "-",
                        **{"workload.records": ctb_records // 2, "network.record_size": 1024}))
    return rows, shape_checks(rows, base)


def _find(rows: list[Row], group: str, mode: str) -> Row:
    return next(r for r in rows if r.group == group and r.mode == mode)


def _ratio(slow: Row, fast: Row) -> float:
    if not slow.median_end_to_end_ms or fast.median_end_to_end_ms is None:
        return 0.0
    return slow.median_end_to_end_ms / max(fast.median_end_to_end_ms, 1)


def shape_checks(rows: list[Row], base: Scenario) -> list[Check]:
    checks = []
    for group in (HEAVY, FULL_QUEUES):
        unaligned = _find(rows, group, "unaligned")
        for mode in ("aligned", "at-least-once"):
            ratio = _ratio(_find(rows, group, mode), unaligned)
            checks.append(Check(f"{group}: {mode} / unaligned >= {RATIO_NEEDED}", ratio >= RATIO_NEEDED,
                                f"ratio {ratio:.1f} ({_find(rows, group, mode).median_end_to_end_ms} ms / "
                                f"{unaligned.median_end_to_end_ms} ms; Flink ≈ 3400 / 20-32 ≈ 100-170)",
                                "; ".join([HINT_PRIORITY, HINT_FLUSH] + ([HINT_REFILL] if group == HEAVY else []))))
    bottleneck = bottleneck_subtask(base)
    capacity = channel_capacity_bytes(base, bottleneck)
    persisted = _find(rows, HEAVY, "unaligned").median_persisted_bytes or 0
    share = persisted / capacity
    checks.append(Check("heavy backpressure: unaligned persists in-flight data of the order of the channel buffers",
                        0.2 <= share <= 1.5,
                        f"median {persisted / 1000:.0f} KB persisted per checkpoint = {share:.2f} x the {capacity / 1000:.0f} KB "
                        f"the channels in front of {bottleneck} hold (Flink: ≈ 450 KB)"))
    timeout = _find(rows, TIMEOUT, "aligned-with-timeout")
    t = timeout.median_end_to_end_ms or 0
    checks.append(Check(f"timeout mode completes shortly after its {ALIGNED_TIMEOUT_MS} ms timeout",
                        ALIGNED_TIMEOUT_MS <= t <= 1.5 * ALIGNED_TIMEOUT_MS,
                        f"median {t} ms = {t / ALIGNED_TIMEOUT_MS:.2f} x the timeout (Flink ≈ 520 ms = 1.04 x)",
                        HINT_PRIORITY))
    checks.append(Check(f"timeout mode: the bottleneck {bottleneck} switches to unaligned",
                        bottleneck in timeout.unaligned_subtasks,
                        f"subtasks reporting unaligned_checkpoint: {', '.join(timeout.unaligned_subtasks) or 'none'} "
                        "(Flink: only the bottleneck)"))
    calm = [r for r in rows if r.group == CALM]
    worst = max((r.median_end_to_end_ms or 0) for r in calm)
    slowest = max(calm, key=lambda r: r.median_end_to_end_ms or 0)
    checks.append(Check("no backpressure: every mode completes within 100 ms", worst <= 100,
                        f"slowest median {worst} ms, {slowest.mode} (Flink 17-26 ms)",
                        HINT_TIMEOUT_OUTPUT if slowest.mode == "aligned-with-timeout" else ""))
    ctb_aligned = next(r for r in rows if r.group == CTB_ALIGNED)
    ctb_unaligned = next(r for r in rows if r.group == CTB_UNALIGNED)
    ctb_full = next(r for r in rows if r.group == CTB_FULL_BUFFERS)
    ratio = _ratio(ctb_aligned, ctb_unaligned)
    checks.append(Check("CheckpointingTimeBenchmark: unaligned far faster than aligned (>= 5x)", ratio >= 5,
                        f"ratio {ratio:.1f}; aligned median {ctb_aligned.median_end_to_end_ms} ms with buffer "
                        "debloating against Flink's ≈ 600 ms"))
    debloat_ratio = _ratio(ctb_full, ctb_aligned)
    checks.append(Check("CheckpointingTimeBenchmark: buffer debloating (300 ms) shortens aligned checkpoints (>= 3x)",
                        debloat_ratio >= 3,
                        f"{ctb_full.median_end_to_end_ms} ms with full buffers, {ctb_aligned.median_end_to_end_ms} ms "
                        f"debloated: {debloat_ratio:.1f}x"))
    checks.append(Check("every run's output verifies", all(r.verdict in ("exactly-once", "at-least-once") for r in rows),
                        ", ".join(sorted({r.verdict for r in rows}))))
    return checks


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"


def _kb(value: float | None) -> str:
    return "-" if value is None else f"{value / 1000:.0f} KB"


def _subtasks(names: list[str]) -> str:
    """``keyed#2, sink#0, sink#1`` as ``keyed#2, sink (2)``: a vertex with several subtasks listed by count."""
    by_vertex: dict[str, list[str]] = {}
    for n in names:
        by_vertex.setdefault(n.partition("#")[0], []).append(n)
    return ", ".join(v[0] if len(v) == 1 else f"{k} ({len(v)})" for k, v in by_vertex.items()) or "-"


def print_results(rows: list[Row], checks: list[Check]) -> None:
    import sys

    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 160)
    table = Table(title="alignment latency: barriersim's simulator beside Flink (PyFlink 2.3 minicluster, docs/flink-facts.md)")
    for col in ("setting", "mode", "ckpts", "median end-to-end", "Flink", "bottleneck start delay",
                "sink alignment", "persisted / ckpt", "unaligned at"):
        table.add_column(col, justify="left" if col in ("setting", "mode", "Flink", "unaligned at") else "right")
    for r in rows:
        table.add_row(r.group, r.mode, str(r.checkpoints), _ms(r.median_end_to_end_ms), r.flink,
                      _ms(r.bottleneck_start_delay_ms), _ms(r.sink_alignment_ms), _kb(r.median_persisted_bytes),
                      _subtasks(r.unaligned_subtasks))
    console.print(table)
    console.print("medians over the completed checkpoints every source subtask acknowledged; 'unaligned at': subtasks "
                  "reporting unaligned_checkpoint", markup=False, highlight=False)
    for c in checks:
        console.print(f"{'PASS' if c.passed else 'FAIL'}  {c.name}: {c.detail}", markup=False, highlight=False)
        if not c.passed and c.hint:
            console.print(f"      why: {c.hint}", markup=False, highlight=False, style="dim")
    console.print(f"{len(rows)} simulated runs, {sum(r.virtual_seconds for r in rows):.0f} virtual s in "
                  f"{sum(r.wall_seconds for r in rows):.1f} wall s", markup=False, highlight=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.alignment_latency", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller workloads (fewer checkpoints per setting)")
    parser.add_argument("--json", type=Path, help="also write the rows and checks to this file")
    args = parser.parse_args(argv)
    rows, checks = run_all(quick=args.quick)
    print_results(rows, checks)
    if args.json:
        args.json.write_text(json.dumps({"rows": [asdict(r) for r in rows], "checks": [asdict(c) for c in checks]},
                                        indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
