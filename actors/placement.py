"""Where a job's actors run on a Ray cluster: the nodes its TaskManagers are spread over, every actor of a TaskManager
pinned to its node, the JobManager and the external store on the driver's node; and how a node is killed for a
``kill_node`` fault. See docs/ray-driver.md, "Placement on a Ray cluster".
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from barriersim.runtime.faults.fault_schedule import KillNode
from barriersim.runtime.job.placement import PlacementError

HEAD_RESOURCE = "node:__internal_head__"  # the resource Ray gives its head node


@dataclass(frozen=True)
class RayNode:
    """Node ``index`` of the job's placement: a Ray node, by id and address, and whether it is Ray's head."""

    index: int
    node_id: str
    address: str
    is_head: bool = False

    def as_row(self) -> dict:
        return {"node": self.index, "ray_node_id": self.node_id, "ray_node_address": self.address}


def cluster_nodes(wanted: int = 0) -> list[RayNode]:
    """The Ray nodes the job's TaskManagers are spread over: alive, with CPUs, the driver's node first; the first
    ``wanted`` of them (0: every one)."""
    here = ray.get_runtime_context().get_node_id()
    alive = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0]
    alive.sort(
        key=lambda n: (
            n["NodeID"] != here,
            HEAD_RESOURCE in n["Resources"],
            n.get("NodeManagerAddress", ""),
            n["NodeID"],
        )
    )
    if wanted > len(alive):
        raise PlacementError(
            "cluster.nodes",
            f"the job's TaskManagers are to be spread over {wanted} nodes, but the "
            f"Ray cluster has {len(alive)} alive node(s) with CPUs",
        )
    chosen = alive[:wanted] if wanted else alive
    return [
        RayNode(i, n["NodeID"], n.get("NodeManagerAddress", ""), HEAD_RESOURCE in n["Resources"])
        for i, n in enumerate(chosen)
    ]


def check_kill_nodes(faults, nodes: list[RayNode]) -> None:
    """Raise ``PlacementError`` for a ``kill_node`` of Ray's head node (when the driver does not run there)."""
    for i, fault in enumerate(faults.faults):
        if isinstance(fault, KillNode) and fault.node < len(nodes) and nodes[fault.node].is_head:
            raise PlacementError(
                f"faults[{i}].node",
                f"node {fault.node} is Ray's head node here (the driver runs on "
                "another node): killing it would end the cluster",
            )


def on_node(node_id: str) -> NodeAffinitySchedulingStrategy:
    """Run on this node and nowhere else."""
    return NodeAffinitySchedulingStrategy(node_id, soft=False)


def driver_node() -> dict:
    """Actor options that put an actor on the driver's node, whatever CPUs that node has."""
    return {"num_cpus": 0, "scheduling_strategy": on_node(ray.get_runtime_context().get_node_id())}


@ray.remote(num_cpus=0, max_restarts=0)
class NodeAgent:
    """Lives on one node until it kills it."""

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def kill_node(self) -> None:
        """Kill this node's raylet and every process it started, this one last. Raises if this worker's parent is
        not the raylet (then nothing is killed)."""
        import psutil  # Ray ships it (ray/thirdparty_files) and puts it on the path of every worker

        raylet = psutil.Process(os.getppid())
        if raylet.name() != "raylet":
            raise RuntimeError(f"kill_node: this worker's parent process is {raylet.name()!r}, not the raylet")
        others = [p for p in raylet.children(recursive=True) if p.pid != os.getpid()]
        raylet.send_signal(signal.SIGKILL)
        for process in others:
            try:
                process.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
        os.kill(os.getpid(), signal.SIGKILL)
