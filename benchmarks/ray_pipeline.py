"""barriersim on Ray against the raw Ray baseline, all measured in the same run: throughput of a 4-stage
pipeline with checkpointing off and every 100 ms, and the time a barrier takes through an idle pipeline of
depth 4 against 4 raw one-hop latencies.

Run: ``python -m benchmarks.ray_pipeline [--records N] [--repeats N] [--partitioner forward|rebalance]
[--taskmanagers spread|one] [--before-after [--baseline-rev REV]]``.
How it works: docs/benchmarks.md, "The pipeline on Ray against raw Ray".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ray

from barriersim.actors.graph_runner import RayJobResult, run_graph_on_ray
from barriersim.runtime.checkpointing_mode import CheckpointingMode
from barriersim.runtime.coordinator.configuration import CheckpointingConfig
from barriersim.runtime.job.config import JobConfig, WorkloadConfig
from barriersim.runtime.job.placement import ClusterConfig
from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobVertex, Partitioner
from barriersim.runtime.jobgraph import OperatorKind as K
from barriersim.runtime.network.config import NetworkConfig
from barriersim.scenarios.workload import local_splits
from benchmarks import ray_baseline
from benchmarks.ray_baseline import measure_raw_pipeline, measure_raw_ray

TIMEOUT = 900
NEVER_MS = 10**9  # an interval too large to trigger during the run


@ray.remote(num_cpus=0.01)
class ForwardLink:
    """A raw fire-and-forget chain: each link passes the message on without awaiting it, as barriersim's
    channels do; the last one records how long the message took (the wall clock is shared on one machine)."""

    def __init__(self, next_link=None):
        self.next_link = next_link
        self.seconds: list[float] = []

    async def forward(self, sent_at: float, payload: bytes) -> None:
        if self.next_link is not None:
            self.next_link.forward.remote(sent_at, payload)
        else:
            self.seconds.append(time.time() - sent_at)

    async def times(self) -> list[float]:
        return self.seconds


@ray.remote(num_cpus=0.01)
class ChainFeeder:
    async def feed(self, first, messages: int, gap_seconds: float) -> None:
        for _ in range(messages):
            first.forward.remote(time.time(), b"b" * 64)
            await asyncio.sleep(gap_seconds)


def measure_fire_and_forget_chain(depth: int = 4, messages: int = 200) -> float:
    """Median ms for a small message through ``depth`` fire-and-forget hops between actors, paced (idle)."""
    # ray.remote's type information gives the decorated class, not the actor class with remote()
    new_link: Any = ForwardLink.remote  # type: ignore[attr-defined]
    links = [new_link()]
    for _ in range(depth - 1):
        links.append(new_link(links[-1]))
    last, first = links[0], links[-1]
    feeder = ChainFeeder.remote()  # type: ignore[attr-defined]
    ray.get(feeder.feed.remote(first, 20, 0.01))
    ray.get(feeder.feed.remote(first, messages, 0.02))
    seconds = ray.get(last.times.remote())[20:]
    for actor in (feeder, *links):
        ray.kill(actor)
    return statistics.median(seconds) * 1e3


def pipeline(partitioner: Partitioner, spread: bool = False) -> JobGraph:
    """source -> map -> map -> sink; ``spread``: each vertex in a slot sharing group of its own, so that in
    ``SPREAD`` (4 TaskManagers of one slot) every channel is remote."""
    vertices: tuple[JobVertex, ...] = (
        JobVertex("source", K.SOURCE, 1),
        JobVertex("map-1", K.MAP, 1),
        JobVertex("map-2", K.MAP, 1),
        JobVertex("sink", K.AT_LEAST_ONCE_SINK, 1),
    )
    if spread:
        vertices = tuple(
            JobVertex(v.name, v.operator, v.parallelism, params={"slot_sharing_group": v.name}) for v in vertices
        )
    return JobGraph(
        vertices,
        (
            JobEdge("source", "map-1", partitioner),
            JobEdge("map-1", "map-2", partitioner),
            JobEdge("map-2", "sink", partitioner),
        ),
    )


# One stage per TaskManager: every channel remote (Flink's RemoteInputChannel, credit-based flow control with
# exclusive and floating buffers), as every hop of the raw pipeline crosses between processes. In one
# TaskManager (the default cluster) every channel is local: Flink's LocalInputChannel reads the producer's own
# buffers, and barriersim's holds at most two of them, the one its task reads and the next
# (runtime.network.input.input_channel), so a Ray call carries one or two buffers.
SPREAD = ClusterConfig(taskmanagers=4, slots_per_taskmanager=1)
SHAPES = {"spread": (True, SPREAD), "one": (False, ClusterConfig())}
SHAPE_NAMES = {"spread": "4 TaskManagers, remote channels", "one": "one TaskManager, local channels"}


def run(
    graph: JobGraph,
    records: int,
    interval_ms: int,
    rate: int = 0,
    job_id: str = "bench",
    max_source_batch_records: int | None = None,
    cluster: ClusterConfig = ClusterConfig(),
    socket_links: bool | None = None,
) -> RayJobResult:
    splits = {"source": local_splits(records, 100, 1.0, 100, 1, seed=5)}
    # with no periodic checkpoint, tasks must not wait for a final checkpoint (FLIP-147) at end of input
    config = JobConfig(
        graph,
        checkpointing=CheckpointingConfig(
            mode=CheckpointingMode.ALIGNED,
            interval_ms=interval_ms,
            checkpoints_after_tasks_finish=interval_ms != NEVER_MS,
        ),
        workload=WorkloadConfig(rate_per_source=rate),
        cluster=cluster,
        max_source_batch_records=max_source_batch_records,
    )
    with tempfile.TemporaryDirectory() as root:
        # the baseline tree's run_graph_on_ray (``--before-after``) has no links to choose
        links: dict[str, Any] = {} if socket_links is None else {"socket_links": socket_links}
        result = run_graph_on_ray(config, splits, root, job_id, timeout_seconds=TIMEOUT, **links)
    if result.outcome != "finished" or len(result.committed_output) != records:
        raise RuntimeError(
            f"benchmark job {job_id} did not finish cleanly: {result.outcome}, "
            f"{len(result.committed_output)} of {records} records"
        )
    return result


def throughput(result: RayJobResult, record_size: int) -> dict:
    """Records/s while the records flow: from the start of the first tasks (time 0 of the job's clock) until the
    sink processed its last record. The job ends later when it checkpoints: its tasks wait for a checkpoint
    after their end of input (FLIP-147), a wait of up to an interval plus a checkpoint that is no cost to
    throughput and would weigh on a run of a few seconds; ``end_wait_seconds`` reports it."""
    seconds = max(run["last_record_at_ms"] for run in result.task_runs if run["task"].startswith("sink")) / 1000
    rps = result.records_emitted / seconds
    cpu = sum(run["cpu_seconds"] for run in result.task_runs) + result.job_manager_cpu_seconds
    wire = sum(run["data_bytes_sent"] for run in result.task_runs) / 3  # per hop: three data hops
    calls = sum(run["data_calls_sent"] for run in result.task_runs)
    buffers = sum(run.get("data_buffers_sent", 0) for run in result.task_runs)
    return {
        "buffers_per_call": buffers / max(1, calls),
        "data_calls_per_second_per_hop": calls / 3 / seconds,
        "upstream_calls_per_second_per_hop": sum(run["upstream_calls_sent"] for run in result.task_runs) / 3 / seconds,
        "stages": stage_account(result),
        "seconds": seconds,
        "records_per_second": rps,
        "mb_per_second": rps * record_size / 1e6,
        "checkpoints": result.counts.get("completed", 0),
        "cpu_us_per_record": cpu / result.records_emitted * 1e6,
        "checkpoint_median_ms": statistics.median(
            [c["end_to_end_duration"] for c in result.checkpoints if c["status"] == "COMPLETED"] or [float("nan")]
        ),
        "wire_mb_per_second": wire / seconds / 1e6,
        "end_wait_seconds": max(0.0, result.job_seconds - result.first_deploy_seconds - seconds),
    }


ACCOUNT = ("steps", "receive", "collect", "encode", "submit")


def stage_account(result: RayJobResult) -> dict:
    """Per task, in us per record of the job: its process CPU, the CPU of its task thread (the rest of the process
    CPU is the transport: Ray's own threads, and the links' reader and network threads), and where
    that thread's wall time went: the task's steps (the records' Python and numpy work), taking in arrivals
    (decoding, handing elements to the task), collecting what leaves (each element's wire form), packing a call
    (msgpack), handing calls to Ray (``.remote()``) or to the links' network thread."""
    n = result.records_emitted
    return {
        run["task"]: {
            "cpu": run["cpu_seconds"] / n * 1e6,
            "thread_cpu": run.get("thread_cpu_seconds", 0.0) / n * 1e6,
            **{name: run.get(f"{name}_seconds", 0.0) / n * 1e6 for name in ACCOUNT},
            "calls": run["data_calls_sent"] + run["upstream_calls_sent"],
        }
        for run in result.task_runs
    }


def print_account(stages: dict) -> None:
    print(
        "      where the time goes, per stage, in us per record (process CPU = task thread CPU + other threads: Ray's "
        "and the links' reader and network threads; the task thread's wall time in: " + ", ".join(ACCOUNT) + "):"
    )
    for task, a in stages.items():
        print(
            f"        {task:10} CPU {a['cpu']:5.2f} = thread {a['thread_cpu']:5.2f} + other "
            f"{a['cpu'] - a['thread_cpu']:5.2f}; "
            + ", ".join(f"{name} {a[name]:.2f}" for name in ACCOUNT)
            + f"; {a['calls']} calls sent"
        )


def calls_text(r: dict) -> str:
    return (
        f"{r['buffers_per_call']:.2f} buffers per data call, {r['data_calls_per_second_per_hop']:,.0f} data calls/s "
        f"and "
        f"{r['upstream_calls_per_second_per_hop']:,.0f} credit calls/s per hop"
    )


def barrier_times(result: RayJobResult) -> dict:
    completed = {c["id"]: c for c in result.checkpoints if c["status"] == "COMPLETED"}
    acks: dict = {}
    for row in result.subtasks:
        if row["id"] in completed and not row["finished"]:  # a task finished before the trigger had no barrier
            acks.setdefault(row["id"], {})[row["task"].split("#")[0]] = row["ack_timestamp"]
    end_to_end = [c["end_to_end_duration"] for c in completed.values()]
    through = [a["sink"] - a["source"] for a in acks.values() if "sink" in a and "source" in a]
    # Flink's start delay of the sink: from the trigger to the first barrier's arrival at the sink, i.e. the
    # barrier's way through the pipeline (trigger RPC to the source, then three data hops): 4 hops
    to_sink = [
        row["start_delay"]
        for row in result.subtasks
        if row["id"] in completed and row["task"].startswith("sink") and not row["finished"]
    ]
    return {
        "checkpoints": len(completed),
        "end_to_end_median_ms": statistics.median(end_to_end) if end_to_end else float("nan"),
        "sink_start_delay_median_ms": statistics.median(to_sink) if to_sink else float("nan"),
        "source_to_sink_median_ms": statistics.median(through) if through else float("nan"),
    }


def measure_checkpoint_cost(
    graph: JobGraph,
    records: int,
    repeats: int,
    record_size: int,
    cluster: ClusterConfig = ClusterConfig(),
    local_graph: JobGraph | None = None,
) -> dict:
    """Throughput with checkpointing off and every 100 ms, over ``repeats`` interleaved pairs of runs (the order
    within a pair alternates, so a drift of the machine's speed during the benchmark falls on both sides).
    One pair is as noisy as the effect it measures on this 2-core machine (single pairs ranged from -2 % to
    24 %), hence medians: the median records/s of each side, and the median and range of the pairs' costs."""
    offs, everys, costs, locals_, calls_ = [], [], [], [], []
    for i in range(repeats):
        sides = [("off", NEVER_MS), ("every", 100)]
        if i % 2:
            sides.reverse()
        measured = {
            name: throughput(run(graph, records, interval, job_id=f"{name}-{i}", cluster=cluster), record_size)
            for name, interval in sides
        }
        if local_graph is not None:  # the same pipeline in one TaskManager, checkpointing off
            locals_.append(throughput(run(local_graph, records, NEVER_MS, job_id=f"local-{i}"), record_size))
            # and over actor calls instead of links, checkpointing off
            calls_.append(
                throughput(
                    run(graph, records, NEVER_MS, job_id=f"calls-{i}", cluster=cluster, socket_links=False), record_size
                )
            )
        offs.append(measured["off"])
        everys.append(measured["every"])
        costs.append(1 - measured["every"]["records_per_second"] / measured["off"]["records_per_second"])

    def median_of(rows: list, field: str) -> float:
        return statistics.median(r[field] for r in rows)

    calls = ("buffers_per_call", "data_calls_per_second_per_hop", "upstream_calls_per_second_per_hop")
    median_off = sorted(offs, key=lambda r: r["records_per_second"])[len(offs) // 2]
    return {
        "off": {
            **{
                f: median_of(offs, f)
                for f in (
                    "records_per_second",
                    "mb_per_second",
                    "seconds",
                    "cpu_us_per_record",
                    "wire_mb_per_second",
                    *calls,
                )
            },
            "stages": median_off["stages"],
        },
        "every": {
            f: median_of(everys, f)
            for f in (
                "records_per_second",
                "mb_per_second",
                "seconds",
                "checkpoints",
                "end_wait_seconds",
                "cpu_us_per_record",
                "checkpoint_median_ms",
                *calls,
            )
        },
        "local": (
            {f: median_of(locals_, f) for f in ("records_per_second", "mb_per_second", "cpu_us_per_record", *calls)}
            if locals_
            else None
        ),
        "calls": (
            {f: median_of(calls_, f) for f in ("records_per_second", "mb_per_second", "cpu_us_per_record", *calls)}
            if calls_
            else None
        ),
        "cost_of_medians": 1 - median_of(everys, "records_per_second") / median_of(offs, "records_per_second"),
        "pair_costs": costs,
        "pair_cpu_costs": [e["cpu_us_per_record"] / o["cpu_us_per_record"] - 1 for o, e in zip(offs, everys)],
    }


def measure_throughput(records: int, repeats: int, partitioner: str, shape: str = "one") -> dict:
    """In a Ray cluster of its own: the raw same-shape pipeline, then the pipeline's throughput with checkpointing
    off and every 100 ms (``measure_checkpoint_cost``), placed as ``SHAPES[shape]`` says."""
    spread, cluster = SHAPES[shape]
    graph = pipeline(Partitioner(partitioner), spread)
    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False)
    try:
        raw_pipeline = measure_raw_pipeline(4)
        measured = measure_checkpoint_cost(graph, records, repeats, 32, cluster)
    finally:
        ray.shutdown()
    return {"raw_pipeline": raw_pipeline, "off": measured["off"], "every": measured["every"]}


def before_after(records: int, repeats: int, partitioner: str, baseline_rev: str, shape: str) -> None:
    from benchmarks.baseline_tree import REPO, BaselineUnavailable, export, run_json

    args = ["--measure-throughput", str(records), str(repeats), partitioner, shape]
    try:
        tree = export(baseline_rev)  # its own copy of this script: the same pipeline, that revision's code
        before = run_json(tree, tree / "benchmarks" / "ray_pipeline.py", args)
    except BaselineUnavailable as err:
        before = None
        print(f"before: not measured ({err})")
    after = run_json(REPO, Path(__file__), args)
    print(
        f"Ray pipeline source -> map -> map -> sink ({partitioner}, {SHAPE_NAMES[shape]}), {records:,} records of 32 "
        f"B, medians of {repeats} "
        f"interleaved pairs per side; each side against the raw same-shape pipeline of its own cluster (4 actors "
        f"passing 32 KiB payloads on):"
    )
    for name, side in (("before", before), ("after", after)):
        if side is None:
            continue
        raw = side["raw_pipeline"]
        print(f"  {name:6}: raw pipeline {raw['calls_per_second']:,.0f} payloads/s = {raw['mb_per_second']:.1f} MB/s")
        for label, key in (("checkpointing off", "off"), ("every 100 ms", "every")):
            r = side[key]
            print(
                f"          {label:18} {r['records_per_second']:>12,.0f} records/s = {r['mb_per_second']:6.2f} MB/s "
                f"= {r['mb_per_second'] / raw['mb_per_second']:.2f} of the raw pipeline's bytes/s; "
                f"{r['cpu_us_per_record']:.2f} us of CPU per record"
            )
    for label, key in (("checkpointing off", "off"), ("every 100 ms", "every")):
        r, raw = after[key], after["raw_pipeline"]
        speedup = f", {r['records_per_second'] / before[key]['records_per_second']:.1f}x before" if before else ""
        print(
            f"  after, {label}: {r['records_per_second']:,.0f} records/s (target >= 1,000,000: "
            f"{'met' if r['records_per_second'] >= 1e6 else 'NOT met'}{speedup}); bytes/s "
            f"{r['mb_per_second'] / raw['mb_per_second']:.2f} of the raw pipeline's (target >= 1: "
            f"{'met' if r['mb_per_second'] >= raw['mb_per_second'] else 'NOT met'})"
        )


def main() -> None:
    from benchmarks.baseline_tree import BEFORE_COLUMNAR

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument(
        "--repeats", type=int, default=5, help="interleaved pairs of runs, checkpointing off / every 100 ms"
    )
    parser.add_argument("--partitioner", choices=["forward", "rebalance"], default="forward")
    parser.add_argument(
        "--before-after",
        action="store_true",
        help="throughput before and after the columnar data plane, each against its raw pipeline",
    )
    parser.add_argument("--baseline-rev", default=BEFORE_COLUMNAR)
    parser.add_argument(
        "--taskmanagers",
        choices=sorted(SHAPES),
        default="spread",
        help="spread: one stage per TaskManager, every channel remote (the raw pipeline's hops); one: "
        "one TaskManager, every channel local. The default also measures 'one' with checkpointing off",
    )
    args = parser.parse_args()
    if args.records < 1 or args.repeats < 1:
        parser.error("--records and --repeats must be at least 1")
    if args.before_after:
        before_after(args.records, args.repeats, args.partitioner, args.baseline_rev, args.taskmanagers)
        return
    spread, cluster = SHAPES[args.taskmanagers]
    graph = pipeline(Partitioner(args.partitioner), spread)
    local_graph = pipeline(Partitioner(args.partitioner)) if spread else None
    record_size = NetworkConfig().record_size

    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False)
    try:
        raw = measure_raw_ray()
        raw_pipeline = measure_raw_pipeline(4)
        raw_socket = ray_baseline.measure_raw_socket_pipeline(4)
        raw_chain_ms = measure_fire_and_forget_chain(4)
        measured = measure_checkpoint_cost(graph, args.records, args.repeats, record_size, cluster, local_graph)
        # one record every 200 ms: the pipeline is idle when the barriers pass
        idle = barrier_times(run(graph, 60, 200, rate=5, job_id="idle", max_source_batch_records=1, cluster=cluster))
    finally:
        ray.shutdown()

    off, every, costs, cpu_costs = (
        measured["off"],
        measured["every"],
        measured["pair_costs"],
        measured["pair_cpu_costs"],
    )
    hops = 4 * raw["one_hop_ms"]
    print(
        f"(1) raw Ray: {raw['one_way_calls_per_second']:,.0f} one-way 32 KiB calls/s = "
        f"{raw['one_way_mb_per_second']:.1f} MB/s; "
        f"round trip median {raw['round_trip_median_ms']:.2f} ms (p99 {raw['round_trip_p99_ms']:.2f}); "
        f"one hop {raw['one_hop_ms']:.2f} ms; chain of 4 awaited {raw['chain_median_ms']:.2f} ms"
    )
    print(
        f"(1') raw Ray pipeline of the same shape (4 actors passing 32 KiB payloads on, no work, at most 10 calls "
        f"in flight per hop): {raw_pipeline['calls_per_second']:,.0f} payloads/s = "
        f"{raw_pipeline['mb_per_second']:.1f} MB/s "
        f"= {raw_pipeline['mb_per_second'] / raw['one_way_mb_per_second']:.2f} of (1): the ceiling of any 4-stage "
        f"pipeline "
        f"on Ray here with actor calls"
    )
    print(
        f"(1'') the same over Unix domain sockets (as barriersim's links between actors on one node): "
        f"{raw_socket['payloads_per_second']:,.0f} payloads/s = {raw_socket['mb_per_second']:.1f} MB/s "
        f"= {raw_socket['mb_per_second'] / raw_pipeline['mb_per_second']:.1f} x (1')"
    )
    print(
        f"(2) pipeline source -> map -> map -> sink ({args.partitioner}, {SHAPE_NAMES[args.taskmanagers]}), "
        f"{args.records:,} records of {record_size} B, medians of {args.repeats} interleaved pairs of runs; a 'call' "
        f"below is a Ray call or, between actors on one node, a write to their link:"
    )
    print(
        f"    checkpointing off:      {off['records_per_second']:,.0f} records/s = {off['mb_per_second']:.2f} MB/s "
        f"({off['seconds']:.1f} s; {off['cpu_us_per_record']:.2f} us of CPU per record, tasks and job manager; "
        f"{off['wire_mb_per_second']:.2f} MB/s of msgpack per hop really sent; {calls_text(off)})"
    )
    print_account(off["stages"])
    print(
        f"    checkpoints every 100 ms: {every['records_per_second']:,.0f} records/s = {every['mb_per_second']:.2f} "
        f"MB/s "
        f"({every['seconds']:.1f} s, {every['checkpoints']:.0f} checkpoints of median end to end "
        f"{every['checkpoint_median_ms']:.0f} ms; {every['cpu_us_per_record']:.2f} us of CPU "
        f"per record; then {every['end_wait_seconds'] * 1e3:.0f} ms to the job's end, the final checkpoint of "
        f"FLIP-147; "
        f"{calls_text(every)})"
    )
    local = measured["local"]
    if local is not None:
        print(
            f"    {SHAPE_NAMES['one']}, checkpointing off: {local['records_per_second']:,.0f} records/s = "
            f"{local['mb_per_second']:.2f} MB/s = {local['mb_per_second'] / raw_pipeline['mb_per_second']:.2f} of the "
            f"raw "
            f"pipeline's bytes/s ({local['cpu_us_per_record']:.2f} us of CPU per record; {calls_text(local)})"
        )
    over_calls = measured["calls"]
    if over_calls is not None:
        print(
            f"    over actor calls (no links), checkpointing off: {over_calls['records_per_second']:,.0f} "
            f"records/s = {over_calls['mb_per_second']:.2f} MB/s = "
            f"{over_calls['mb_per_second'] / raw_pipeline['mb_per_second']:.2f} "
            f"of (1') ({over_calls['cpu_us_per_record']:.2f} us of CPU per record; {calls_text(over_calls)}); the "
            f"links "
            f"move {off['records_per_second'] / over_calls['records_per_second']:.2f} x as many records/s"
        )
    print(f"    cost per pair: {', '.join(f'{c * 100:.1f} %' for c in costs)}")
    print(f"    CPU per record, cost per pair: {', '.join(f'{c * 100:.1f} %' for c in cpu_costs)}")
    print(
        f"(3) barrier through an idle pipeline of depth 4 ({idle['checkpoints']} checkpoints): trigger -> first "
        f"barrier "
        f"at the sink (the sink's start delay: trigger RPC and 3 data hops) median "
        f"{idle['sink_start_delay_median_ms']:.1f} ms; "
        f"end to end (those 4 hops, then the ack) median {idle['end_to_end_median_ms']:.1f} ms; source ack -> sink "
        f"ack median "
        f"{idle['source_to_sink_median_ms']:.1f} ms; 4 raw one-hop latencies (half round trips) {hops:.2f} ms; "
        f"raw fire-and-forget chain of 4 hops {raw_chain_ms:.2f} ms"
    )
    ratio_bytes = off["mb_per_second"] / raw["one_way_mb_per_second"]
    target = "met" if off["records_per_second"] >= 1e6 else "NOT met"
    cost = statistics.median(costs)
    cpu_cost = statistics.median(cpu_costs)
    ratio_barrier = idle["sink_start_delay_median_ms"] / hops
    print("ratios against the targets:")
    print(
        f"    (2)/(1) bytes/s = {ratio_bytes:.3f} (target >= 0.7): {'met' if ratio_bytes >= 0.7 else 'NOT met'}; "
        f"(2)/(1') = {off['mb_per_second'] / raw_pipeline['mb_per_second']:.2f} of the raw pipeline's bytes/s "
        f"({off['wire_mb_per_second'] / raw_pipeline['mb_per_second']:.2f} in bytes really sent)"
    )
    print(
        f"    (2) records/s = {off['records_per_second']:,.0f} (target >= 1,000,000): {target}; (2)/(1') bytes/s "
        f"(target >= 1): {'met' if off['mb_per_second'] >= raw_pipeline['mb_per_second'] else 'NOT met'}; (2)/(1'') "
        f"= {off['mb_per_second'] / raw_socket['mb_per_second']:.3f} of the socket pipeline's bytes/s"
    )
    print(
        f"    cost of checkpoints every 100 ms = {cost * 100:.1f} % of records/s (median of the pairs; "
        f"{min(costs) * 100:.1f} to "
        f"{max(costs) * 100:.1f} %; of the medians {measured['cost_of_medians'] * 100:.1f} %) (target <= 5 %): "
        f"{'met' if cost <= 0.05 else 'NOT met'}; in CPU per record {cpu_cost * 100:.1f} % (median of the pairs; "
        f"{min(cpu_costs) * 100:.1f} to {max(cpu_costs) * 100:.1f} %)"
    )
    print(
        f"    (3) trigger -> sink / 4 raw hops = {ratio_barrier:.2f}x (target <= 1.5x): "
        f"{'met' if ratio_barrier <= 1.5 else 'NOT met'}"
    )
    ratio_chain = idle["sink_start_delay_median_ms"] / raw_chain_ms
    print(
        f"    (3) / raw fire-and-forget chain of 4 hops = {ratio_chain:.2f}x (the same target, against calls that "
        f"are not awaited, as barriersim's are): {'met' if ratio_chain <= 1.5 else 'NOT met'}"
    )
    print(f"    end to end (5 messages) / 5 raw hops = {idle['end_to_end_median_ms'] / (5 * raw['one_hop_ms']):.2f}x")


if __name__ == "__main__":
    if len(sys.argv) in (5, 6) and sys.argv[1] == "--measure-throughput":
        print(json.dumps(measure_throughput(int(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:])))
    else:
        main()
