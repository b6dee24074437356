"""A subtask's restore phase (Flink's ``StreamTask.restoreInternal``): it loads the operator's state, puts the
snapshot's recovered in-flight data back (input into the network input, before any new data; output into the result
partitions), with the virtual channels of a rescaled restore, or tells that the task is deployed as finished
(FLIP-147). See ``docs/architecture.md``, "The data plane".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from barriersim.runtime.channel_state.reader import SequentialChannelStateReader
from barriersim.runtime.events import END_OF_CHANNEL_STATE, InputChannelInfo
from barriersim.runtime.jobgraph import JobEdge, JobVertex, Partitioner
from barriersim.runtime.network.input.virtual_channels import RecordFilter, demultiplexers
from barriersim.runtime.network.output.result_partition import ResultPartition
from barriersim.runtime.operators.factory import SubtaskOperator
from barriersim.runtime.operators.records import KEY
from barriersim.runtime.state.key_groups import KeyGroupAssigner, operator_indices_for_key_groups
from barriersim.runtime.state.snapshot import OperatorSubtaskState, TaskStateSnapshot
from barriersim.runtime.task.network_input import StreamTaskNetworkInput


@dataclass(frozen=True)
class Restored:
    """What a restore put back: the bytes of recovered in-flight input and output, and whether the task is deployed
    as finished."""

    input_bytes: int = 0
    output_bytes: int = 0
    deployed_as_finished: bool = False


class TaskRestore:
    def __init__(
        self,
        vertex: JobVertex,
        gate_edges: Sequence[JobEdge],
        subtask_index: int,
        operator: SubtaskOperator,
        partitions: Sequence[ResultPartition],
        network_input: StreamTaskNetworkInput | None,
    ) -> None:
        """``gate_edges``: the edge of each input gate (its partitioner filters a rescaled edge's records);
        ``network_input``: None for a source."""
        self._vertex = vertex
        self._gate_edges = gate_edges
        self._subtask_index = subtask_index
        self._operator = operator
        self._partitions = partitions
        self._network_input = network_input

    def restore(self, snapshot: TaskStateSnapshot | None) -> Restored:
        """Load the operator state and re-inject in-flight data (channel state) before any new data."""
        if snapshot is None:
            self._operator.restore(None)
            return Restored()
        own = snapshot.subtask_states_by_operator.get(self._vertex.name, OperatorSubtaskState())
        if snapshot.is_task_deployed_as_finished:
            # FLIP-147: every operator of this task had finished when the checkpoint was taken; Flink deploys the
            # task as finished (FinishedOnRestoreOperatorChain): it only ends its outputs, it reads and emits nothing.
            for partition_idx in own.end_of_channel_state_partitions:
                partition = self._partitions[partition_idx]
                for info in partition.subpartition_infos:
                    partition.add_recovered_elements(info, (END_OF_CHANNEL_STATE,))
            return Restored(deployed_as_finished=True)
        self._operator.restore(snapshot.subtask_states_by_operator.get(self._vertex.name))
        reader = SequentialChannelStateReader(snapshot)
        restored_in = {}
        if self._network_input is not None:
            # Recovered in-flight input is processed before any new data (Flink's RecoveredInputChannel).
            descriptor = own.input_rescaling_descriptor
            recovered: list[tuple[InputChannelInfo, Any]] = []
            restored_in = reader.read_input_data(
                lambda info, elements: recovered.extend((info, e) for e in elements), descriptor
            )
            if descriptor.is_no_rescale:
                recovered.sort(key=lambda item: (item[0], item[1].sequence_number))
            gates = self._network_input.channels_by_gate()
            self._network_input.recover(
                recovered,
                demultiplexers(gates, descriptor, self._record_filter_of_gate),
                {info for g in own.end_of_channel_state_gates for info in gates[g]},
            )
        restored_out = reader.read_output_data(
            self._partitions, own.output_rescaling_descriptor, own.end_of_channel_state_partitions
        )
        return Restored(sum(restored_in.values()), sum(restored_out.values()))

    def _record_filter_of_gate(self, gate_idx: int) -> RecordFilter | None:
        """Flink's ``RecordFilter``: whether a recovered record of an ambiguous virtual channel belongs to this
        subtask, by the gate's partitioner (only hash partitioning makes virtual channels ambiguous)."""
        edge = self._gate_edges[gate_idx]
        if edge.partitioner is not Partitioner.HASH:
            return None
        max_p, p, me = self._vertex.max_parallelism, self._vertex.parallelism, self._subtask_index
        key_group_of = KeyGroupAssigner(max_p)
        return lambda batch: operator_indices_for_key_groups(key_group_of.of_keys(batch.columns[KEY]), max_p, p) == me
