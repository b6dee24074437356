"""The job graph: vertices (operators with a parallelism) joined by edges (partitioners), validated; errors are
``JobGraphError`` naming the vertex or edge.

Mirrors Flink's ``JobGraph`` / ``JobVertex`` / ``JobEdge`` with the edge's ``StreamPartitioner``. See
docs/jobs-and-operators.md, "The job graph".
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any


class Partitioner(enum.Enum):
    """Flink's ``ForwardPartitioner``, ``RebalancePartitioner``, ``KeyGroupStreamPartitioner``,
    ``BroadcastPartitioner``."""

    FORWARD = "forward"
    REBALANCE = "rebalance"
    HASH = "hash"
    BROADCAST = "broadcast"

    @property
    def is_pointwise(self) -> bool:
        return self is Partitioner.FORWARD

    @property
    def supports_unaligned_checkpoints(self) -> bool:
        """Flink's ``StreamPartitioner.isSupportsUnalignedCheckpoint``: every partitioner but the pointwise and the
        broadcast ones."""
        return not self.is_pointwise and self is not Partitioner.BROADCAST


class OperatorKind(enum.Enum):
    SOURCE = "source"
    MAP = "map"
    FILTER = "filter"
    KEYED_SUM = "keyed_sum"
    TUMBLING_WINDOW = "tumbling_window"
    UNION = "union"
    JOIN = "join"
    TWO_PHASE_COMMIT_SINK = "two_phase_commit_sink"
    AT_LEAST_ONCE_SINK = "at_least_once_sink"

    @property
    def is_source(self) -> bool:
        return self is OperatorKind.SOURCE

    @property
    def is_sink(self) -> bool:
        return self in (OperatorKind.TWO_PHASE_COMMIT_SINK, OperatorKind.AT_LEAST_ONCE_SINK)

    @property
    def is_keyed(self) -> bool:
        return self in (OperatorKind.KEYED_SUM, OperatorKind.TUMBLING_WINDOW, OperatorKind.JOIN)

    @property
    def uses_event_time(self) -> bool:
        """Windows fire on watermarks: a job with such an operator has its sources emit watermarks."""
        return self in (OperatorKind.TUMBLING_WINDOW, OperatorKind.JOIN)

    @property
    def logical_inputs(self) -> int:
        """How many logical inputs the operator has (each fed by one or more gates)."""
        if self.is_source:
            return 0
        return 2 if self is OperatorKind.JOIN else 1


class JobGraphError(ValueError):
    """A job graph that cannot run; the message names the vertex or edge."""


@dataclass(frozen=True)
class JobVertex:
    name: str
    operator: OperatorKind
    parallelism: int
    max_parallelism: int = 128
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JobEdge:
    source: str
    target: str
    partitioner: Partitioner
    target_input: int = 0

    def __str__(self) -> str:
        return f"{_shown(self.source)} -[{self.partitioner.value}]-> {_shown(self.target)} (input {self.target_input})"


def _shown(name: str) -> str:
    """A vertex name as messages show it: as written, or quoted and escaped if it is empty, has surrounding
    blanks or a character that does not print (a newline would break a one-line error)."""
    return name if isinstance(name, str) and name and name.isprintable() and name.strip() == name else repr(name)


@dataclass(frozen=True)
class JobGraph:
    vertices: tuple[JobVertex, ...]
    edges: tuple[JobEdge, ...]

    # -- lookups ---------------------------------------------------------------------------------

    def vertex(self, name: str) -> JobVertex:
        for v in self.vertices:
            if v.name == name:
                return v
        raise JobGraphError(f"no vertex named {name!r}")

    def inputs_of(self, name: str) -> list[JobEdge]:
        return [e for e in self.edges if e.target == name]

    def outputs_of(self, name: str) -> list[JobEdge]:
        return [e for e in self.edges if e.source == name]

    def gates_of(self, name: str) -> list[JobEdge]:
        """The vertex's input gates in order (gate index = position): one per input edge, input 0's first."""
        gates = self._gates.get(name)
        return list(gates) if gates is not None else self._find_gates(name)

    def _find_gates(self, name: str) -> list[JobEdge]:
        edges = self.inputs_of(name)
        return [e for i in sorted({e.target_input for e in edges}) for e in edges if e.target_input == i]

    @cached_property  # a frozen graph's gates: found once (asked per subtask and channel while a job is built)
    def _gates(self) -> dict[str, tuple[JobEdge, ...]]:
        return {v.name: tuple(self._find_gates(v.name)) for v in self.vertices}

    def channels_in_gate(self, name: str, gate: int, subtask: int) -> list[int]:
        """The producer subtask behind each input channel of ``subtask``'s gate ``gate``, in channel order."""
        edge = self.gates_of(name)[gate]
        if edge.partitioner.is_pointwise:
            return [subtask]
        return list(range(self.vertex(edge.source).parallelism))

    def supports_unaligned_checkpoints(self, edge: JobEdge) -> bool:
        """Whether ``edge`` carries unaligned barriers: not if any input edge of its target vertex has a partitioner
        that cannot (Flink's ``StreamGraphGenerator`` marks every input edge of such a vertex, so that its barrier
        handler never sees unaligned and forced-aligned barriers of one checkpoint)."""
        return all(e.partitioner.supports_unaligned_checkpoints for e in self.inputs_of(edge.target))

    def subpartitions_of(self, edge: JobEdge, producer_subtask: int) -> list[int]:
        """The consumer subtasks that producer subtask's result partition for ``edge`` feeds, one per
        subpartition in order."""
        if edge.partitioner.is_pointwise:
            return [producer_subtask]
        return list(range(self.vertex(edge.target).parallelism))

    def topological_order(self) -> list[str]:
        indegree = {v.name: 0 for v in self.vertices}
        for e in self.edges:
            indegree[e.target] += 1
        ready = [v.name for v in self.vertices if indegree[v.name] == 0]
        order: list[str] = []
        while ready:
            name = ready.pop(0)
            order.append(name)
            for e in self.outputs_of(name):
                indegree[e.target] -= 1
                if indegree[e.target] == 0:
                    ready.append(e.target)
        if len(order) != len(self.vertices):
            stuck = sorted(n for n, d in indegree.items() if d > 0)
            raise JobGraphError(f"the job graph has a cycle through {', '.join(stuck)}")
        return order

    def stages(self) -> int:
        """The length of the longest source-to-sink path, in vertices."""
        depth: dict[str, int] = {}
        for name in self.topological_order():
            depth[name] = 1 + max((depth[e.source] for e in self.inputs_of(name)), default=0)
        return max(depth.values(), default=0)

    @property
    def sources(self) -> list[JobVertex]:
        return [v for v in self.vertices if v.operator.is_source]

    @property
    def sinks(self) -> list[JobVertex]:
        return [v for v in self.vertices if v.operator.is_sink]

    # -- validation ------------------------------------------------------------------------------

    def validate(self) -> JobGraph:
        names = [v.name for v in self.vertices]
        if not names:
            raise JobGraphError("the job graph has no vertices")
        for name in names:
            if names.count(name) > 1:
                raise JobGraphError(f"vertex {name!r} is defined twice")
        for v in self.vertices:
            if v.parallelism < 1:
                raise JobGraphError(f"vertex {v.name!r}: parallelism must be >= 1, got {v.parallelism}")
            if not v.parallelism <= v.max_parallelism <= 32768:
                raise JobGraphError(
                    f"vertex {v.name!r}: max parallelism {v.max_parallelism} must be between the parallelism "
                    f"{v.parallelism} and 32768"
                )
        for e in self.edges:
            for end in (e.source, e.target):
                if end not in names:
                    raise JobGraphError(f"edge {e}: no vertex named {end!r}")
            if e.source == e.target:
                raise JobGraphError(f"edge {e}: a vertex cannot feed itself")
            if e.target_input not in (0, 1):
                raise JobGraphError(f"edge {e}: target input must be 0 or 1")
            src, dst = self.vertex(e.source), self.vertex(e.target)
            if src.operator.is_sink:
                raise JobGraphError(f"edge {e}: sink {src.name!r} cannot have outputs")
            if dst.operator.is_source:
                raise JobGraphError(f"edge {e}: source {dst.name!r} cannot have inputs")
            if e.partitioner is Partitioner.FORWARD and src.parallelism != dst.parallelism:
                raise JobGraphError(
                    f"edge {e}: forward needs equal parallelism, got {src.parallelism} and {dst.parallelism}"
                )
            if e.partitioner is Partitioner.HASH and not dst.operator.is_keyed:
                raise JobGraphError(f"edge {e}: hash partitioning needs a keyed operator, {dst.name!r} is not keyed")
            if dst.operator.is_keyed and e.partitioner is not Partitioner.HASH:
                raise JobGraphError(f"edge {e}: keyed operator {dst.name!r} must be fed by a hash partitioner")
        self.topological_order()
        for v in self.vertices:
            if v.operator.is_source:
                continue
            fed = {e.target_input for e in self.inputs_of(v.name)}
            expected = set(range(v.operator.logical_inputs))
            if fed != expected:
                raise JobGraphError(
                    f"vertex {v.name!r}: {v.operator.value} takes input(s) {sorted(expected)}, fed {sorted(fed)}"
                )
            if not self.outputs_of(v.name) and not v.operator.is_sink:
                raise JobGraphError(f"vertex {v.name!r}: only sinks may have no outputs")
        if not self.sources:
            raise JobGraphError("the job graph has no source")
        if not self.sinks:
            raise JobGraphError("the job graph has no sink")
        return self
