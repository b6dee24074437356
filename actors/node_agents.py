"""The node agents of a job: ``NodeAgents`` starts a ``NodeAgent`` (``actors.placement``) on every node a
``kill_node`` fault names, up before the job starts, kills a node through its agent when the fault is due, and
kills the agents when the job is over."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

import ray

from barriersim.actors.placement import NodeAgent, RayNode, on_node


class NodeAgents:
    """A ``NodeAgent`` on every node a ``kill_node`` fault names (see the module)."""

    def __init__(
        self, job_id: str, nodes: Iterable[int], ray_nodes: list[RayNode] | None, on_error: Callable[[str], None]
    ) -> None:
        """``nodes``: the nodes the job's ``kill_node`` faults name; ``ray_nodes``: the Ray node of each node of the
        job's placement; ``on_error(text)``: an agent returned without killing its node."""
        self._job_id = job_id
        self._nodes = sorted(set(nodes))
        self._ray_nodes = ray_nodes
        self._on_error = on_error
        self._agents: dict[int, Any] = {}  # node index -> NodeAgent's handle

    async def start(self) -> None:
        """The agents, up before the job starts."""
        if not self._nodes:
            return
        if self._ray_nodes is None:
            raise RuntimeError(f"job {self._job_id}: kill_node needs the job's Ray nodes")
        ray_nodes = self._ray_nodes
        self._agents = {
            # ray.remote gives the class options(), which mypy does not see
            n: NodeAgent.options(scheduling_strategy=on_node(ray_nodes[n].node_id)).remote()  # type: ignore[attr-defined]
            for n in self._nodes
        }
        await asyncio.gather(*(agent.node_id.remote() for agent in self._agents.values()))

    async def kill_node(self, node: int) -> None:
        """Kill node ``node`` through its agent; the call fails with the agent's death, as it must."""
        try:
            await self._agents[node].kill_node.remote()
        except ray.exceptions.RayActorError:
            return
        self._on_error(f"job {self._job_id}: kill_node {node}: the node's agent returned without killing it")

    def kill_all(self) -> None:
        for agent in self._agents.values():
            ray.kill(agent)
        self._agents = {}
