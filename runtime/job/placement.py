"""Where the subtasks of a job run: TaskManagers with slots, and which channels are therefore local.

How this works: ``ClusterConfig`` says how many TaskManagers the job gets and how many slots each offers; by
default one TaskManager (Flink's MiniCluster, as a local environment runs a job) with as many slots as the job
needs. ``place`` assigns the subtasks as Flink's scheduling does with slot sharing: within a slot sharing group
(a vertex's ``slot_sharing_group`` parameter, ``"default"`` unless set, as Flink's ``slotSharingGroup(name)``),
subtask ``i`` of every vertex shares the group's slot ``i``, so a slot holds one parallel instance of each of the
group's vertices; each group takes as many slots as its highest parallelism, the groups one after the other, and
the slots fill the TaskManagers in order. A job that needs more slots than
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
    """``taskmanagers`` TaskManagers with ``slots_per_taskmanager`` slots each (0: as many as the job needs, one
    TaskManager holding the whole job)."""

    taskmanagers: int = 1
    slots_per_taskmanager: int = 0


DEFAULT_SLOT_SHARING_GROUP = "default"


def slot_sharing_group(vertex) -> str:
    return vertex.params.get("slot_sharing_group", DEFAULT_SLOT_SHARING_GROUP)


def slots_needed(graph: JobGraph) -> int:
    """Slots the job needs with slot sharing: per slot sharing group, its highest parallelism."""
    groups: dict[str, int] = {}
    for v in graph.vertices:
        g = slot_sharing_group(v)
        groups[g] = max(groups.get(g, 0), v.parallelism)
    return sum(groups.values())


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
    needed = slots_needed(graph)
    slots = cluster.slots_per_taskmanager or needed
    if needed > cluster.taskmanagers * slots:
        raise PlacementError("cluster.slots_per_taskmanager",
                             f"the job needs {needed} slots (with slot sharing) but {cluster.taskmanagers} "
                             f"TaskManager(s) x {slots} slot(s) offer {cluster.taskmanagers * slots}")
    offsets: dict[str, int] = {}
    widths: dict[str, int] = {}
    for v in graph.vertices:
        g = slot_sharing_group(v)
        widths[g] = max(widths.get(g, 0), v.parallelism)
    start = 0
    for g, width in widths.items():  # the groups in the order their first vertex appears
        offsets[g] = start
        start += width
    slot_of = {(v.name, i): offsets[slot_sharing_group(v)] + i for v in graph.vertices for i in range(v.parallelism)}
    taskmanager_of = {key: slot // slots for key, slot in slot_of.items()}
    return Placement(slot_of, taskmanager_of, cluster.taskmanagers, slots)
