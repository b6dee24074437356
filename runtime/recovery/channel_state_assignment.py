"""State assignment of in-flight data (an unaligned checkpoint's channel state) when vertices are rescaled.

Mirrors Flink's ``TaskStateAssignment`` (``getInputMapping``, ``getOutputMapping``, ``createRescalingDescriptor``)
and ``StateAssignmentOperation.reDistributeInputChannelStates`` / ``reDistributeResultSubpartitionStates``. See
docs/state-and-rescaling.md, "Assigning in-flight data".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from barriersim.runtime.jobgraph import JobEdge, JobGraph
from barriersim.runtime.recovery.errors import ChannelStateRescalingUnsupportedError
from barriersim.runtime.recovery.subtask_state_mapper import (
    SubtaskStateMapper,
    UnsupportedRescalingError,
    downstream_mapper,
    upstream_mapper,
)
from barriersim.runtime.state.inflight_data_rescaling import (
    NO_RESCALE,
    InflightDataGateOrPartitionRescalingDescriptor,
    InflightDataRescalingDescriptor,
    MappingType,
)
from barriersim.runtime.state.rescale_mappings import RescaleMappings
from barriersim.runtime.state.snapshot import InputChannelStateHandle, OperatorState, ResultSubpartitionStateHandle


@dataclass(frozen=True)
class SubtasksRescaleMapping:
    """Flink's ``TaskStateAssignment.SubtasksRescaleMapping``: the mapping and whether it may be ambiguous."""

    rescale_mappings: RescaleMappings
    may_have_ambiguous_subtasks: bool


def _has_buffers(handles: Iterable[InputChannelStateHandle | ResultSubpartitionStateHandle]) -> bool:
    return any(h.buffers for h in handles)


class ChannelStateAssignment:
    """The channel state and rescaling descriptors of every subtask of a restored job."""

    def __init__(
        self,
        checkpoint_id: int,
        graph: JobGraph | None,
        old_states: Mapping[str, OperatorState | None],
        new_parallelism: Mapping[str, int],
    ) -> None:
        self.checkpoint_id = checkpoint_id
        self.graph = graph
        self._old = old_states
        self._new_p = dict(new_parallelism)
        self._old_p = {v: (s.parallelism if s is not None else self._new_p[v]) for v, s in old_states.items()}
        self._has_input = {
            v: s is not None and any(_has_buffers(st.input_channel_state) for st in s.subtask_states.values())
            for v, s in old_states.items()
        }
        self._has_output = {
            v: s is not None and any(_has_buffers(st.result_subpartition_state) for st in s.subtask_states.values())
            for v, s in old_states.items()
        }
        self._input_mappings: dict[tuple[str, int], SubtasksRescaleMapping] = {}
        self._output_mappings: dict[tuple[str, int], SubtasksRescaleMapping] = {}
        self.input_states: dict[str, list[tuple[InputChannelStateHandle, ...]]] = {}
        self.output_states: dict[str, list[tuple[ResultSubpartitionStateHandle, ...]]] = {}
        for vertex in old_states:
            self.input_states[vertex] = self._redistribute(vertex, input_side=True)
            self.output_states[vertex] = self._redistribute(vertex, input_side=False)

    # -- topology ---------------------------------------------------------------------------------------

    def _gates(self, vertex: str) -> list[Any]:
        return self.graph.gates_of(vertex) if self.graph is not None else []

    def _partitions(self, vertex: str) -> list[Any]:
        return self.graph.outputs_of(vertex) if self.graph is not None else []

    def _rescaled(self, vertex: str) -> bool:
        return self._old_p[vertex] != self._new_p[vertex]

    def _upstream_has_output(self, vertex: str) -> bool:
        return any(self._has_output.get(e.source, False) for e in self._gates(vertex))

    def _downstream_has_input(self, vertex: str) -> bool:
        return any(self._has_input.get(e.target, False) for e in self._partitions(vertex))

    # -- mappings (TaskStateAssignment.getInputMapping / getOutputMapping) ---------------------------------

    def _mapper_mapping(self, mapper: SubtaskStateMapper, vertex: str, edge: JobEdge) -> SubtasksRescaleMapping:
        try:
            mapping = mapper.new_to_old_subtasks_mapping(self._old_p[vertex], self._new_p[vertex])
        except UnsupportedRescalingError as e:
            raise ChannelStateRescalingUnsupportedError(
                f"Cannot restore unaligned checkpoint {self.checkpoint_id}: the in-flight data of edge {edge} would "
                f"have to be rescaled ({edge.source} {self._old_p[edge.source]} -> {self._new_p[edge.source]}, "
                f"{edge.target} {self._old_p[edge.target]} -> {self._new_p[edge.target]}): {e}"
            ) from None
        return SubtasksRescaleMapping(mapping, mapper.is_ambiguous)

    def input_mapping(self, vertex: str, gate: int, store: bool = False) -> SubtasksRescaleMapping:
        found = self._input_mappings.get((vertex, gate))
        if found is not None:
            return found
        edge = self._gates(vertex)[gate]
        mapping = self._mapper_mapping(downstream_mapper(edge.partitioner), vertex, edge)
        if store:
            self._input_mappings[(vertex, gate)] = mapping
        return mapping

    def output_mapping(self, vertex: str, partition: int, store: bool = False) -> SubtasksRescaleMapping:
        found = self._output_mappings.get((vertex, partition))
        if found is not None:
            return found
        edge = self._partitions(vertex)[partition]
        mapping = self._mapper_mapping(upstream_mapper(edge.partitioner), vertex, edge)
        if store:
            self._output_mappings[(vertex, partition)] = mapping
        return mapping

    # -- redistribution (reDistributeInputChannelStates / reDistributeResultSubpartitionStates) -------------

    def _redistribute(self, vertex: str, input_side: bool) -> list[tuple[Any, ...]]:
        state = self._old[vertex]
        new_p = self._new_p[vertex]
        field = "input_channel_state" if input_side else "result_subpartition_state"
        old = [
            getattr(state.subtask_states[i], field) if state is not None and i in state.subtask_states else ()
            for i in range(self._old_p[vertex])
        ]
        if not self._rescaled(vertex):
            return [tuple(handles) for handles in old]
        has_state = self._has_input[vertex] if input_side else self._has_output[vertex]
        neighbours = self._upstream_has_output(vertex) if input_side else self._downstream_has_input(vertex)
        if not has_state and not neighbours:
            return [() for _ in range(new_p)]  # only empty handles, if any: dropped
        if self.graph is None:
            subtasks = [i for i, handles in enumerate(old) if _has_buffers(handles)]
            raise ChannelStateRescalingUnsupportedError(
                f"Cannot restore operator {vertex} from unaligned checkpoint {self.checkpoint_id} with parallelism "
                f"{new_p}: its subtasks {subtasks} hold in-flight channel state taken at parallelism "
                f"{self._old_p[vertex]}, and without the job's topology it cannot be rescaled"
            )
        result: list[list[Any]] = [[] for _ in range(new_p)]
        count = len(self._gates(vertex)) if input_side else len(self._partitions(vertex))
        for index in range(count):
            mapping = (
                self.input_mapping(vertex, index, store=True)
                if input_side
                else self.output_mapping(vertex, index, store=True)
            ).rescale_mappings
            for new_index in range(new_p):
                for old_index in mapping.get_mapped_indexes(new_index):
                    result[new_index].extend(
                        h
                        for h in old[old_index]
                        if h.buffers and (h.info.gate_idx if input_side else h.info.partition_idx) == index
                    )
        return [tuple(handles) for handles in result]

    # -- descriptors (createRescalingDescriptor) ---------------------------------------------------------------

    def _edge_mappings(self, edge: JobEdge) -> tuple[SubtasksRescaleMapping, SubtasksRescaleMapping] | None:
        """(producer's output mapping, consumer's input mapping) of ``edge`` if either was needed to redistribute
        state, else None."""
        partition = self._partitions(edge.source).index(edge)
        gate = self._gates(edge.target).index(edge)
        if (edge.source, partition) not in self._output_mappings and (edge.target, gate) not in self._input_mappings:
            return None
        return self.output_mapping(edge.source, partition), self.input_mapping(edge.target, gate)

    def is_rescaled_edge(self, edge: JobEdge) -> bool:
        """Whether the edge's recovered in-flight data is rescaled (its descriptors are not all identities)."""
        if self.graph is None or edge.source not in self._old or edge.target not in self._old:
            return False
        mappings = self._edge_mappings(edge)
        return mappings is not None and not (
            mappings[0].rescale_mappings.is_identity and mappings[1].rescale_mappings.is_identity
        )

    @staticmethod
    def _descriptor(
        subtask: int, subtask_mapping: SubtasksRescaleMapping, rescale_mapping: SubtasksRescaleMapping
    ) -> InflightDataGateOrPartitionRescalingDescriptor:
        old = subtask_mapping.rescale_mappings.get_mapped_indexes(subtask)
        identity = (
            subtask_mapping.rescale_mappings.is_identity and rescale_mapping.rescale_mappings.is_identity
        ) or not old
        ambiguous = (
            subtask_mapping.rescale_mappings.ambiguous_targets()
            if subtask_mapping.may_have_ambiguous_subtasks
            else frozenset()
        )
        return InflightDataGateOrPartitionRescalingDescriptor(
            tuple(old),
            rescale_mapping.rescale_mappings,
            ambiguous,
            MappingType.IDENTITY if identity else MappingType.RESCALING,
        )

    def input_descriptor(self, vertex: str, subtask: int) -> InflightDataRescalingDescriptor:
        gates = self._gates(vertex)
        if not any(self._edge_mappings(edge) is not None for edge in gates if edge.source in self._old):
            return NO_RESCALE
        descriptors = []
        for gate, edge in enumerate(gates):
            partition = self._partitions(edge.source).index(edge)
            descriptors.append(
                self._descriptor(subtask, self.input_mapping(vertex, gate), self.output_mapping(edge.source, partition))
            )
        if all(d.is_identity for d in descriptors):
            return NO_RESCALE
        return InflightDataRescalingDescriptor(tuple(descriptors))

    def output_descriptor(self, vertex: str, subtask: int) -> InflightDataRescalingDescriptor:
        partitions = self._partitions(vertex)
        if not any(self._edge_mappings(edge) is not None for edge in partitions if edge.target in self._old):
            return NO_RESCALE
        descriptors = []
        for partition, edge in enumerate(partitions):
            gate = self._gates(edge.target).index(edge)
            descriptors.append(
                self._descriptor(subtask, self.output_mapping(vertex, partition), self.input_mapping(edge.target, gate))
            )
        if all(d.is_identity for d in descriptors):
            return NO_RESCALE
        return InflightDataRescalingDescriptor(tuple(descriptors))

    def end_of_channel_state_gates(self, vertex: str) -> tuple[int, ...]:
        return tuple(g for g, edge in enumerate(self._gates(vertex)) if self.is_rescaled_edge(edge))

    def end_of_channel_state_partitions(self, vertex: str) -> tuple[int, ...]:
        return tuple(p for p, edge in enumerate(self._partitions(vertex)) if self.is_rescaled_edge(edge))
