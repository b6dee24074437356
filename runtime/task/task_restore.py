"""How a subtask restores a checkpoint: its operator state, its recovered in-flight data, and a task that had
finished.

How this works: ``TaskRestore`` is the part of ``runtime.task.stream_task.StreamTask`` (a base class of it, sharing its
state: the operator, the partitions, the input side) that Flink's ``StreamTask.restoreInternal`` runs before the
task reads any new input. ``restore`` loads the operator's state and reads the snapshot's channel state
(``SequentialChannelStateReader``): recovered input is queued to be processed before any new data (Flink's
``RecoveredInputChannel``), recovered output goes back into the result partitions. A rescaled restore's input
channels that carry data of several old connections get virtual channels (``DemultiplexingChannel``, with Flink's
``RecordFilter`` for hash edges), selected by the ``SubtaskConnectionDescriptor`` events of the recovered data;
until every such channel's ``EndOfChannelStateEvent`` the task is recovering rescaled state and declines
checkpoints (Flink's ``RescalingStreamTaskNetworkInput``). A task every operator of which had finished when the
checkpoint was taken (FLIP-147) is deployed as finished (Flink's ``FinishedOnRestoreOperatorChain``): it only ends
its outputs.
"""

from __future__ import annotations

from barriersim.runtime.channel_state.reader import SequentialChannelStateReader
from barriersim.runtime.events import END_OF_CHANNEL_STATE
from barriersim.runtime.jobgraph import Partitioner
from barriersim.runtime.network.input.virtual_channels import demultiplexers
from barriersim.runtime.operators.records import KEY
from barriersim.runtime.state.key_groups import KeyGroupAssigner, operator_indices_for_key_groups
from barriersim.runtime.state.snapshot import OperatorSubtaskState, TaskStateSnapshot


class TaskRestore:
    """The restore of ``StreamTask`` (a part of it, not used alone)."""

    def restore(self, snapshot: TaskStateSnapshot | None) -> dict[str, int]:
        """Load the operator state and re-inject in-flight data (channel state) before any new data."""
        if snapshot is None:
            self.operator.restore(None)
            return {"input_bytes": 0, "output_bytes": 0}
        own = snapshot.subtask_states_by_operator.get(self.vertex.name, OperatorSubtaskState())
        if snapshot.is_task_deployed_as_finished:
            # FLIP-147: every operator of this task had finished when the checkpoint was taken; Flink deploys the
            # task as finished (FinishedOnRestoreOperatorChain): it only ends its outputs, it reads and emits nothing.
            self._deployed_as_finished = True
            for partition_idx in own.end_of_channel_state_partitions:
                partition = self.partitions[partition_idx]
                for info in partition.subpartition_infos:
                    partition.add_recovered_elements(info, (END_OF_CHANNEL_STATE,))
            return {"input_bytes": 0, "output_bytes": 0}
        self.operator.restore(snapshot.subtask_states_by_operator.get(self.vertex.name))
        reader = SequentialChannelStateReader(snapshot)
        restored_in = {}
        if self.input_side is not None:
            # Recovered in-flight input is processed before any new data (Flink's RecoveredInputChannel).
            descriptor = own.input_rescaling_descriptor
            recovered = []
            restored_in = reader.read_input_data(
                lambda info, elements: recovered.extend((info, e) for e in elements), descriptor)
            if descriptor.is_no_rescale:
                recovered.sort(key=lambda item: (item[0], item[1].sequence_number))
            infos = self.input_side.channel_infos()
            gates = [[info for info in infos if info.gate_idx == g] for g in range(len(self.input_side.gates))]
            self._network_input.recover(recovered, demultiplexers(gates, descriptor, self._record_filter_of_gate),
                                        {info for g in own.end_of_channel_state_gates for info in gates[g]})
        restored_out = reader.read_output_data(self.partitions, own.output_rescaling_descriptor,
                                               own.end_of_channel_state_partitions)
        return {"input_bytes": sum(restored_in.values()), "output_bytes": sum(restored_out.values())}

    def _record_filter_of_gate(self, gate_idx: int):
        """Flink's ``RecordFilter``: whether a recovered record of an ambiguous virtual channel belongs to this
        subtask, by the gate's partitioner (only hash partitioning makes virtual channels ambiguous)."""
        edge = self.graph.gates_of(self.vertex.name)[gate_idx]
        if edge.partitioner is not Partitioner.HASH:
            return None
        max_p, p, me = self.vertex.max_parallelism, self.vertex.parallelism, self.subtask_index
        key_group_of = KeyGroupAssigner(max_p)
        return lambda batch: operator_indices_for_key_groups(key_group_of.of_keys(batch.columns[KEY]), max_p, p) == me

    @property
    def deployed_as_finished(self) -> bool:
        """Restored from a snapshot in which this task had finished (FLIP-147): it finishes at its first step."""
        return self._deployed_as_finished
