"""The same job placed three ways on a local Ray cluster of three nodes, against raw Ray hops placed the same way,
all measured in one run: a barrier's start delay and a checkpoint's end-to-end duration in one TaskManager, in
4 TaskManagers on one node and in 4 TaskManagers over 3 nodes.

Run: ``python -m benchmarks.placement [--repeats N] [--records N]``.
How it works: docs/benchmarks.md, "Placements over Ray nodes".
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from typing import Any

import ray

from barriersim.actors.graph_runner import RayJobResult, run_graph_on_ray
from barriersim.actors.placement import cluster_nodes, on_node
from barriersim.local_cluster import LocalCluster
from barriersim.runtime.checkpointing_mode import CheckpointingMode
from barriersim.runtime.coordinator.configuration import CheckpointingConfig
from barriersim.runtime.job.config import JobConfig, WorkloadConfig
from barriersim.runtime.job.placement import ClusterConfig
from barriersim.runtime.verification.reference import Verdict, expected_sink_input, verify
from barriersim.scenarios.loader import quickstart_graph
from barriersim.scenarios.workload import local_splits
from benchmarks.ray_baseline import percentile

GRAPH = quickstart_graph(4, 4)
PLACEMENTS = {
    "1 TaskManager": ClusterConfig(taskmanagers=1, nodes=1),
    "4 TaskManagers, 1 node": ClusterConfig(taskmanagers=4, slots_per_taskmanager=1, nodes=1),
    "4 TaskManagers, 3 nodes": ClusterConfig(taskmanagers=4, slots_per_taskmanager=1, nodes=3),
}
RATE = 10  # records/s per source: the pipeline is idle when a barrier passes
INTERVAL_MS = 200


@ray.remote(num_cpus=0)
class Hop:
    """A raw actor: answers pings, and passes a message on without awaiting it (the last records its time)."""

    def __init__(self, next_hop=None):
        self.next_hop = next_hop
        self.seconds: list[float] = []

    async def ping(self) -> None:
        return None

    async def forward(self, sent_at: float) -> None:
        if self.next_hop is not None:
            self.next_hop.forward.remote(sent_at)
        else:
            self.seconds.append(time.time() - sent_at)

    async def times(self) -> list[float]:
        return self.seconds

    async def round_trips(self, other, calls: int) -> list[float]:
        out = []
        for _ in range(calls):
            t = time.perf_counter()
            await other.ping.remote()
            out.append(time.perf_counter() - t)
        return out

    async def feed(self, first, messages: int, gap_seconds: float) -> None:
        for _ in range(messages):
            first.forward.remote(time.time())
            await asyncio.sleep(gap_seconds)


def hop_on(node: str, next_hop: Any = None) -> Any:
    """A ``Hop`` actor on ``node``."""
    # ray.remote's type information gives the decorated class, not the actor class with options()
    return Hop.options(scheduling_strategy=on_node(node)).remote(next_hop)  # type: ignore[attr-defined]


def raw_one_hop_ms(node_a: str, node_b: str, calls: int = 300) -> float:
    """Half the median awaited round trip between an actor on ``node_a`` and one on ``node_b``."""
    a = hop_on(node_a)
    b = hop_on(node_b)
    ray.get(a.round_trips.remote(b, 30))
    rtts = ray.get(a.round_trips.remote(b, calls))
    for actor in (a, b):
        ray.kill(actor)
    return statistics.median(rtts) * 1e3 / 2


def raw_chain_ms(nodes: list[str], messages: int = 150) -> float:
    """Median ms of a small message through fire-and-forget hops between actors on ``nodes`` (a feeder on the
    first, then one actor per further node), paced so the chain is idle."""
    hops = [hop_on(nodes[-1])]
    for node in reversed(nodes[1:-1]):
        hops.append(hop_on(node, hops[-1]))
    feeder = hop_on(nodes[0])
    ray.get(feeder.feed.remote(hops[-1], 20, 0.01))
    ray.get(feeder.feed.remote(hops[-1], messages, 0.02))
    seconds = ray.get(hops[0].times.remote())[20:]
    for actor in (feeder, *hops):
        ray.kill(actor)
    return statistics.median(seconds) * 1e3


def run_job(cluster: ClusterConfig, records: int, job_id: str) -> RayJobResult:
    splits = {"source": local_splits(records, 100, 1.0, 100, 4, seed=7)}
    config = JobConfig(
        GRAPH,
        checkpointing=CheckpointingConfig(mode=CheckpointingMode.ALIGNED, interval_ms=INTERVAL_MS),
        workload=WorkloadConfig(rate_per_source=RATE),
        cluster=cluster,
        max_source_batch_records=1,
    )
    with tempfile.TemporaryDirectory() as root:
        result = run_graph_on_ray(config, splits, root, job_id, timeout_seconds=900)
    verdict = verify(expected_sink_input(GRAPH, splits), result.committed_output)
    if result.outcome != "finished" or verdict.verdict is not Verdict.EXACTLY_ONCE:
        raise RuntimeError(f"benchmark job {job_id} did not finish exactly once: {result.outcome}, {verdict}")
    return result


def barrier_figures(result: RayJobResult) -> dict[str, list[float]]:
    """Start delays of the sources and the sink and end-to-end durations of the completed checkpoints, the first
    left out (it meets tasks still starting)."""
    completed = sorted(c["id"] for c in result.checkpoints if c["status"] == "COMPLETED")[1:]
    keep = set(completed)
    rows = [r for r in result.subtasks if r["id"] in keep and not r["finished"]]  # finished: no barrier (FLIP-147)
    return {
        "source_start_delay": [r["start_delay"] for r in rows if r["task"].startswith("source")],
        "sink_start_delay": [r["start_delay"] for r in rows if r["task"].startswith("sink")],
        "end_to_end": [c["end_to_end_duration"] for c in result.checkpoints if c["id"] in keep],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="interleaved rounds of the three placements")
    parser.add_argument("--records", type=int, default=200, help="records in all (4 sources at 10 records/s each)")
    args = parser.parse_args()
    if args.repeats < 1 or args.records < 4:
        parser.error("--repeats must be at least 1 and --records at least 4")

    local = LocalCluster(3, head_cpus=2, worker_cpus=2)
    try:
        figures: dict[str, dict[str, list[float]]] = {
            name: {"source_start_delay": [], "sink_start_delay": [], "end_to_end": []} for name in PLACEMENTS
        }
        ray_nodes = [n.node_id for n in cluster_nodes(3)]  # the driver's node first, as the job's placement has them
        for i in range(args.repeats):
            names = list(PLACEMENTS) if i % 2 == 0 else list(reversed(PLACEMENTS))
            for name in names:
                result = run_job(PLACEMENTS[name], args.records, f"placement-{i}-{len(name)}")
                for key, values in barrier_figures(result).items():
                    figures[name][key] += values
                if name == "4 TaskManagers, 3 nodes":
                    path = {r["task"]: r["ray_node_id"] for r in result.placement if r["deployment"] == 0}
        same = raw_one_hop_ms(ray_nodes[0], ray_nodes[0])
        across = raw_one_hop_ms(ray_nodes[1], ray_nodes[2])
        chain_one_node = raw_chain_ms([ray_nodes[0]] * 4)
        barrier_path = [ray_nodes[0], path["source#1"], path["keyed-sum#2"], path["sink#0"]]
        chain_spread = raw_chain_ms(barrier_path)
    finally:
        local.shutdown()

    def med(values: list[float]) -> str:
        return f"{statistics.median(values):6.1f}" if values else "   n/a"

    def p90(values: list[float]) -> str:
        return f"{percentile(values, 0.9):6.1f}" if values else "   n/a"

    print(
        f"job: source (4) -> hash -> keyed sum (4) -> rebalance -> sink (1), sources paced at {RATE} records/s, "
        f"aligned checkpoints every {INTERVAL_MS} ms, {args.records} records, {args.repeats} interleaved round(s); "
        f"medians (p90) in ms over the completed checkpoints but each run's first"
    )
    print(
        f"{'placement':26} {'source start delay':>20} {'sink start delay':>20} {'end to end':>18}   raw Ray, same "
        f"placement"
    )
    raw = {
        "1 TaskManager": f"one hop {same:.2f}; chain of 3 hops {chain_one_node:.2f}",
        "4 TaskManagers, 1 node": f"one hop {same:.2f}; chain of 3 hops {chain_one_node:.2f}",
        "4 TaskManagers, 3 nodes": f"one hop {same:.2f} same node, {across:.2f} across; chain of 3 hops "
        f"(nodes {' -> '.join(str(ray_nodes.index(n)) for n in barrier_path)}) {chain_spread:.2f}",
    }
    for name, f in figures.items():
        print(
            f"{name:26} {med(f['source_start_delay'])} ({p90(f['source_start_delay'])})      "
            f"{med(f['sink_start_delay'])} ({p90(f['sink_start_delay'])})    {med(f['end_to_end'])} "
            f"({p90(f['end_to_end'])})"
            f"   {raw[name]}"
        )
    print(
        "ratios: the sink's start delay (trigger RPC and 2 data hops: 3 hops) against the raw chain of 3 hops of the "
        "same placement:"
    )
    for name, chain in (
        ("1 TaskManager", chain_one_node),
        ("4 TaskManagers, 1 node", chain_one_node),
        ("4 TaskManagers, 3 nodes", chain_spread),
    ):
        sink = figures[name]["sink_start_delay"]
        if sink:
            print(f"    {name}: {statistics.median(sink) / chain:.2f}x")


if __name__ == "__main__":
    main()
