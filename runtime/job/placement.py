"""Where the subtasks of a job run: TaskManagers with slots, and which channels are therefore local.

How this works: ``ClusterConfig`` says how many TaskManagers the job gets and how many slots each offers; by
default one TaskManager (Flink's MiniCluster, as a local environment runs a job) with as many slots as the job's
highest parallelism. ``place`` assigns the subtasks as Flink's default scheduling does with slot sharing (every
vertex in the default slot sharing group): subtask ``i`` of every vertex shares slot ``i``, so a slot holds one
parallel instance of each vertex, and the slots fill the TaskManagers in order. A job that needs more slots than
the cluster offers is refused (Flink's ``NoResourceAvailableException``). ``Placement.channel_kind`` says whether
the channel between two subtasks is local (both in one TaskManager: Flink's ``LocalInputChannel``) or remote
(``RemoteInputChannel``, over the network); ``gate_specs`` gives a consumer subtask's input gates with the kind
of each channel. Mirrors Flink's ``SlotSharingGroup`` default placement (``LocalInputPreferredSlotSharingStrategy``
puts producer and consumer subtask ``i`` together) and the choice of channel in ``SingleInputGateFactory``
(``createInputChannel``: local if the producer's partition is on this TaskManager).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from barriersim.runtime.jobgraph import JobGraph

SubtaskKey = tuple[str, int]


class ChannelKind(enum.Enum):
    LOCAL = "local"
    REMOTE = "remote"


class PlacementError(ValueError):
    """A job the cluster cannot hold; ``key`` is the setting at fault."""

    def __init__(self, key: str, problem: str):
        self.key = key
        super().__init__(f"{key}: {problem}")


@dataclass(frozen=True)
class ClusterConfig:
    """``taskmanagers`` TaskManagers with ``slots_per_taskmanager`` slots each (0: as many as the job's highest
    parallelism, one TaskManager holding the whole job)."""

    taskmanagers: int = 1
    slots_per_taskmanager: int = 0

    def slots_per_taskmanager_for(self, graph: JobGraph) -> int:
        return self.slots_per_taskmanager or max(v.parallelism for v in graph.vertices)


@dataclass(frozen=True)
class Placement:
    slot_of: dict[SubtaskKey, int]
    taskmanager_of: dict[SubtaskKey, int]
    taskmanagers: int
    slots_per_taskmanager: int

    def channel_kind(self, producer: SubtaskKey, consumer: SubtaskKey) -> ChannelKind:
        same = self.taskmanager_of[producer] == self.taskmanager_of[consumer]
        return ChannelKind.LOCAL if same else ChannelKind.REMOTE

    def gate_specs(self, graph: JobGraph, vertex: str, subtask_index: int) -> list[list[str]]:
        """Per input gate of ``vertex#subtask_index``, the kind of each channel (``"local"`` or ``"remote"``)."""
        consumer = (vertex, subtask_index)
        return [[self.channel_kind((edge.source, producer), consumer).value
                 for producer in graph.channels_in_gate(vertex, gate_idx, subtask_index)]
                for gate_idx, edge in enumerate(graph.gates_of(vertex))]

    def describe(self) -> list[dict]:
        """One row per subtask: its TaskManager and slot (for the run directory)."""
        return [{"task": f"{v}#{i}", "taskmanager": self.taskmanager_of[(v, i)], "slot": self.slot_of[(v, i)]}
                for (v, i) in self.slot_of]


def place(graph: JobGraph, cluster: ClusterConfig = ClusterConfig()) -> Placement:
    if cluster.taskmanagers < 1 or cluster.slots_per_taskmanager < 0:
        raise PlacementError("cluster", f"needs at least one TaskManager and a non-negative slot count, got {cluster}")
    slots = cluster.slots_per_taskmanager_for(graph)
    needed = max(v.parallelism for v in graph.vertices)
    if needed > cluster.taskmanagers * slots:
        raise PlacementError("cluster.slots_per_taskmanager",
                             f"the job needs {needed} slots (its highest parallelism, with slot sharing) but "
                             f"{cluster.taskmanagers} TaskManager(s) x {slots} slot(s) offer "
                             f"{cluster.taskmanagers * slots}")
    slot_of = {(v.name, i): i for v in graph.vertices for i in range(v.parallelism)}
    taskmanager_of = {key: slot // slots for key, slot in slot_of.items()}
    return Placement(slot_of, taskmanager_of, cluster.taskmanagers, slots)
