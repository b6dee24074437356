"""Restores the in-flight data of an unaligned checkpoint: persisted buffers go back into the input channels and
result subpartitions they came from, before any new data; after a rescaled restore, through virtual channels.

Mirrors Flink's ``SequentialChannelStateReaderImpl`` (``readInputData``, ``readOutputData``) and its
``InputChannelRecoveredStateHandler`` / ``ResultSubpartitionRecoveredStateHandler``. See docs/data-plane.md,
"Restoring in-flight data".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from barriersim.runtime.events import (
    END_OF_CHANNEL_STATE,
    Buffer,
    InputChannelInfo,
    ResultSubpartitionInfo,
    SubtaskConnectionDescriptor,
)
from barriersim.runtime.network.output.result_partition import ResultPartition
from barriersim.runtime.state.inflight_data_rescaling import NO_RESCALE, InflightDataRescalingDescriptor
from barriersim.runtime.state.snapshot import OperatorSubtaskState, TaskStateSnapshot


class ChannelStateRestoreError(RuntimeError):
    """Persisted data names a channel or partition the restored task does not have."""


def _ordered(groups: Mapping[Any, Any]) -> dict[Any, Any]:
    return {info: tuple(sorted(bufs, key=lambda b: b.sequence_number)) for info, bufs in sorted(groups.items()) if bufs}


def _with_data(buffers: tuple[Buffer, ...]) -> list[Buffer]:
    """The persisted buffers that hold anything: an empty one (a drained open output buffer an unaligned barrier
    overtook) counts in the state's size but brings nothing back."""
    return [b for b in buffers if b.size or len(b.records)]


class SequentialChannelStateReader:
    def __init__(self, state: TaskStateSnapshot | Iterable[OperatorSubtaskState]) -> None:
        states = state.subtask_states_by_operator.values() if isinstance(state, TaskStateSnapshot) else state
        inputs: dict[InputChannelInfo, list[Buffer]] = {}
        outputs: dict[ResultSubpartitionInfo, list[Buffer]] = {}
        # per (old subtask, channel): the handles a rescaled restore routes by virtual channel
        self._input_handles: dict[tuple[int, InputChannelInfo], list[Buffer]] = {}
        self._output_handles: dict[tuple[int, ResultSubpartitionInfo], list[Buffer]] = {}
        for s in states:
            for h in s.input_channel_state:
                data = _with_data(h.buffers)
                inputs.setdefault(h.info, []).extend(data)
                self._input_handles.setdefault((h.subtask_index, h.info), []).extend(data)
            for out in s.result_subpartition_state:
                data = _with_data(out.buffers)
                outputs.setdefault(out.info, []).extend(data)
                self._output_handles.setdefault((out.subtask_index, out.info), []).extend(data)
        self._inputs = _ordered(inputs)
        self._outputs = _ordered(outputs)

    @property
    def input_data(self) -> dict[InputChannelInfo, tuple[Buffer, ...]]:
        """Persisted input buffers per channel, in sequence-number order."""
        return dict(self._inputs)

    @property
    def output_data(self) -> dict[ResultSubpartitionInfo, tuple[Buffer, ...]]:
        """Persisted output buffers per subpartition, in sequence-number order."""
        return dict(self._outputs)

    @property
    def has_state(self) -> bool:
        return bool(self._inputs or self._outputs)

    def read_input_data(
        self,
        inject: Callable[[InputChannelInfo, tuple[Any, ...]], None],
        descriptor: InflightDataRescalingDescriptor = NO_RESCALE,
    ) -> dict[InputChannelInfo, int]:
        """Calls ``inject(channel, elements)`` once per channel (rescaled: once per virtual channel of a channel)
        with persisted data: its buffers, after a rescaled restore preceded by their virtual channel's
        ``SubtaskConnectionDescriptor``; returns bytes per channel."""
        restored: dict[InputChannelInfo, int] = {}
        if descriptor.is_no_rescale:
            for info, buffers in self._inputs.items():
                inject(info, buffers)
                restored[info] = sum(b.size for b in buffers)
            return restored
        routed: dict[InputChannelInfo, list[tuple[Any, ...]]] = {}
        for (old_subtask, info), buffers in sorted(self._input_handles.items()):
            buffers = tuple(sorted(buffers, key=lambda b: b.sequence_number))
            if not buffers:
                continue
            gate = descriptor.descriptor(info.gate_idx)
            if gate.is_identity:
                routed.setdefault(info, []).append(buffers)
                continue
            targets = gate.rescale_mappings.invert().get_mapped_indexes(info.channel_idx)
            if len(targets) != 1:
                raise ChannelStateRestoreError(
                    f"read_input_data: the persisted data of {info} (old subtask {old_subtask}) maps to channels "
                    f"{list(targets)}: one buffer is only distributed to one target input channel"
                )
            target = InputChannelInfo(info.gate_idx, targets[0])
            routed.setdefault(target, []).append(
                (SubtaskConnectionDescriptor(old_subtask, info.channel_idx),) + buffers
            )
        for info in sorted(routed):
            for elements in routed[info]:
                inject(info, elements)
                restored[info] = restored.get(info, 0) + sum(e.size for e in elements if isinstance(e, Buffer))
        return restored

    def read_output_data(
        self,
        partitions: Sequence[ResultPartition],
        descriptor: InflightDataRescalingDescriptor = NO_RESCALE,
        end_of_channel_state_partitions: Sequence[int] = (),
    ) -> dict[ResultSubpartitionInfo, int]:
        """Re-queues persisted output buffers into ``partitions`` (indexed by partition index) before any new
        data, after a rescaled restore routed by virtual channel and with the end of the recovered data on the
        partitions of rescaled edges; returns bytes per (old) subpartition."""
        by_idx = {p.partition_idx: p for p in partitions}
        restored: dict[ResultSubpartitionInfo, int] = {}
        rescaled = not descriptor.is_no_rescale or bool(end_of_channel_state_partitions)
        if not rescaled:
            for info, buffers in self._outputs.items():
                self._partition_of(by_idx, info).add_recovered(info, buffers)
                restored[info] = sum(b.size for b in buffers)
            return restored
        for (old_subtask, info), buffers in sorted(self._output_handles.items()):
            buffers = tuple(sorted(buffers, key=lambda b: b.sequence_number))
            if not buffers:
                continue
            gate = descriptor.descriptor(info.partition_idx)
            if gate.is_identity:
                self._partition_of(by_idx, info).add_recovered_elements(info, buffers)
            else:
                partition = self._partition_of(by_idx, ResultSubpartitionInfo(info.partition_idx, 0))
                descriptor_event = SubtaskConnectionDescriptor(info.subpartition_idx, old_subtask)
                for target in gate.rescale_mappings.invert().get_mapped_indexes(info.subpartition_idx):
                    target_info = ResultSubpartitionInfo(info.partition_idx, target)
                    partition.add_recovered_elements(target_info, (descriptor_event,) + buffers)
            restored[info] = restored.get(info, 0) + sum(b.size for b in buffers)
        for partition_idx in end_of_channel_state_partitions:
            partition = by_idx[partition_idx]
            for info in partition.subpartition_infos:
                partition.add_recovered_elements(info, (END_OF_CHANNEL_STATE,))
        return restored

    @staticmethod
    def _partition_of(by_idx: Mapping[int, ResultPartition], info: ResultSubpartitionInfo) -> ResultPartition:
        partition = by_idx.get(info.partition_idx)
        if partition is None or info.subpartition_idx >= partition.number_of_subpartitions:
            raise ChannelStateRestoreError(
                f"read_output_data: persisted data of {info} has no result subpartition in this task "
                f"(partitions {sorted(by_idx)})"
            )
        return partition
