"""Where the subtasks of a job run: TaskManagers with slots, and which channels are therefore local.

How this works: ``ClusterConfig`` (a scenario's ``[cluster]``) says how many TaskManagers the job gets, the slots
each offers and the hosts they are spread over (TaskManager ``t`` on node ``t % nodes``); ``place`` assigns the
subtasks as Flink's scheduling does with slot sharing (subtask ``i`` of every vertex of a slot sharing group in the
group's slot ``i``), refusing a job that needs more slots than the cluster offers (``PlacementError``);
``Placement.channel_kind`` and ``gate_specs`` say which channels are local (one TaskManager) or remote. Lost nodes
stay lost: their TaskManagers are replaced on the survivors. Mirrors Flink's ``SlotSharingGroup`` placement and
``SingleInputGateFactory.createInputChannel``; ``docs/architecture.md`` ("Settings: scenario to runtime") has more.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, cast

from barriersim.runtime.jobgraph import JobGraph, JobVertex
from barriersim.runtime.settings import Between, setting

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
    TaskManager holding the whole job), spread over ``nodes`` hosts (0: every node of the Ray cluster; one on the
    simulator); on the simulator their subtasks share ``cpu_cores`` cores (0: a core each)."""

    taskmanagers: int = setting(
        1, "TaskManagers the job is placed in (one: Flink's MiniCluster, every channel local)", Between(1, 1024)
    )
    slots_per_taskmanager: int = setting(
        0, "slots each TaskManager offers; 0: the job's highest parallelism", Between(0, 1024)
    )
    nodes: int = setting(
        0,
        "hosts the TaskManagers are spread over (TaskManager t on node t % nodes, node 0 also "
        "hosts the JobManager); 0: every node of the Ray cluster (one on the simulator)",
        Between(0, 1024),
    )
    cpu_cores: int = setting(
        0,
        "the simulator's CPU cores the subtasks of all TaskManagers share (one machine, as Flink's MiniCluster): "
        "while more do CPU work than there are cores, each progresses at cores / running (runtime.sim.cpu_share); "
        "0: a core per subtask. On Ray the machine's cores are real",
        Between(0, 1024),
    )
    jvm_share_start: float = setting(
        0.0,
        "the simulator's JVM threads (JIT compiler, collector, Flink's own) as they start: the share of the cpu_cores "
        "they hold when the job first runs, decaying to jvm_share_steady with time constant jvm_share_decay_ms "
        "(a failover does not start it again); 0: none. Only with cpu_cores (docs/fidelity-family.md)",
        Between(0.0, 0.9),
    )
    jvm_share_steady: float = setting(
        0.0, "the share of the cpu_cores the JVM's own threads hold once warm (jvm_share_start)", Between(0.0, 0.9)
    )
    jvm_share_decay_ms: float = setting(
        4000.0,
        "the time constant (ms) of the JVM threads' share from jvm_share_start to jvm_share_steady",
        Between(1.0, 1e7),
    )
    subtask_speed_sigma: float = setting(
        0.01,
        "the simulator's spread of a subtask's speed: each subtask's per-record cost is its vertex's times a factor "
        "drawn once per subtask (log-normal), as identical subtasks of a Flink job run at slightly different "
        "speeds (their threads' share of the cores, caches); 0: identical. On Ray the speeds are real",
        Between(0.0, 1.0),
    )


DEFAULT_SLOT_SHARING_GROUP = "default"


def slot_sharing_group(vertex: JobVertex) -> str:
    return cast(str, vertex.params.get("slot_sharing_group", DEFAULT_SLOT_SHARING_GROUP))


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
    nodes: int = 1

    def node_of_taskmanager(self, taskmanager: int, lost: frozenset[int] | set[int] = frozenset()) -> int:
        """The node TaskManager ``taskmanager`` runs on: ``taskmanager % nodes``, or, when that node is ``lost``,
        the surviving node its turn gives (the surviving nodes in order, ``taskmanager`` modulo their number)."""
        home = taskmanager % self.nodes
        if home not in lost:
            return home
        surviving = [n for n in range(self.nodes) if n not in lost]
        if not surviving:
            raise PlacementError("cluster.nodes", f"every one of the {self.nodes} node(s) is lost")
        return surviving[taskmanager % len(surviving)]

    def taskmanager_nodes(self, lost: frozenset[int] | set[int] = frozenset()) -> tuple[int, ...]:
        """The node of every TaskManager, in TaskManager order."""
        return tuple(self.node_of_taskmanager(t, lost) for t in range(self.taskmanagers))

    def subtasks_of(self, taskmanager: int) -> list[SubtaskKey]:
        """The subtasks TaskManager ``taskmanager`` runs, in the job's order."""
        return [key for key, tm in self.taskmanager_of.items() if tm == taskmanager]

    def channel_kind(self, producer: SubtaskKey, consumer: SubtaskKey) -> ChannelKind:
        same = self.taskmanager_of[producer] == self.taskmanager_of[consumer]
        return ChannelKind.LOCAL if same else ChannelKind.REMOTE

    def gate_specs(self, graph: JobGraph, vertex: str, subtask_index: int) -> list[list[str]]:
        """Per input gate of ``vertex#subtask_index``, the kind of each channel (``"local"`` or ``"remote"``)."""
        consumer = (vertex, subtask_index)
        return [
            [
                self.channel_kind((edge.source, producer), consumer).value
                for producer in graph.channels_in_gate(vertex, gate_idx, subtask_index)
            ]
            for gate_idx, edge in enumerate(graph.gates_of(vertex))
        ]

    def local_subpartitions(self, graph: JobGraph, vertex: str, subtask_index: int) -> list[list[bool]]:
        """Per output edge of ``vertex#subtask_index``, whether each subpartition's consumer runs in the same
        TaskManager (a local channel reads it)."""
        producer = (vertex, subtask_index)
        return [
            [
                self.channel_kind(producer, (edge.target, consumer)) is ChannelKind.LOCAL
                for consumer in graph.subpartitions_of(edge, subtask_index)
            ]
            for edge in graph.outputs_of(vertex)
        ]

    def input_channel_counts(self, graph: JobGraph, vertex: str, subtask_index: int) -> tuple[int, int]:
        """``(local, remote)``: how many of the subtask's input channels are local and how many remote."""
        kinds = [kind for gate in self.gate_specs(graph, vertex, subtask_index) for kind in gate]
        local = kinds.count(ChannelKind.LOCAL.value)
        return local, len(kinds) - local

    def describe(
        self, graph: JobGraph | None = None, taskmanager_nodes: tuple[int, ...] | None = None
    ) -> list[dict[str, Any]]:
        """One row per subtask: its TaskManager, slot and node (``taskmanager_nodes``: a deployment's, else the
        first), and with ``graph`` how many of its input channels are local and how many remote (for the run
        directory)."""
        nodes = taskmanager_nodes if taskmanager_nodes is not None else self.taskmanager_nodes()
        rows = []
        for (v, i), slot in self.slot_of.items():
            tm = self.taskmanager_of[(v, i)]
            row = {"task": f"{v}#{i}", "taskmanager": tm, "slot": slot, "node": nodes[tm]}
            if graph is not None:
                row["local_input_channels"], row["remote_input_channels"] = self.input_channel_counts(graph, v, i)
            rows.append(row)
        return rows


def place(graph: JobGraph, cluster: ClusterConfig = ClusterConfig()) -> Placement:
    if cluster.taskmanagers < 1 or cluster.slots_per_taskmanager < 0 or cluster.nodes < 0:
        raise PlacementError(
            "cluster", f"needs at least one TaskManager and non-negative slot and node counts, got {cluster}"
        )
    needed = slots_needed(graph)
    slots = cluster.slots_per_taskmanager or needed
    if needed > cluster.taskmanagers * slots:
        raise PlacementError(
            "cluster.slots_per_taskmanager",
            f"the job needs {needed} slots (with slot sharing) but {cluster.taskmanagers} "
            f"TaskManager(s) x {slots} slot(s) offer {cluster.taskmanagers * slots}",
        )
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
    return Placement(slot_of, taskmanager_of, cluster.taskmanagers, slots, max(1, cluster.nodes))
