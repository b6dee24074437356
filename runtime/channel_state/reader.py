"""Restores the in-flight data of an unaligned checkpoint: persisted buffers go back into the input channels
and result subpartitions they came from, before any new data.

How this works: the reader collects, from a subtask's restored state (a ``TaskStateSnapshot`` or its
``OperatorSubtaskState``s), every ``InputChannelStateHandle`` and ``ResultSubpartitionStateHandle``, merges
the handles of the same channel, and orders each channel's buffers by sequence number (stable for equal
numbers). ``read_output_data`` re-queues the output buffers in the task's result partitions
(``ResultPartition.add_recovered``, which refuses once new data was written); ``read_input_data`` hands each
input channel's buffers to an injected callback (the input gate's recovered channel), which must put them
ahead of anything received later. Both report what they restored so the driver can trace it.

Redistribution of channel state on rescaling (Flink's ``InflightDataRescalingDescriptor``) is out of
scope: the handles are restored to the channels they name.

Mirrors Flink's ``SequentialChannelStateReader`` / ``SequentialChannelStateReaderImpl`` (``readInputData``,
``readOutputData``) with ``ChannelStateChunkReader``'s per-channel ordering.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, Sequence, Union

from barriersim.runtime.events import Buffer, InputChannelInfo, ResultSubpartitionInfo
from barriersim.runtime.network.output.result_partition import ResultPartition
from barriersim.runtime.state.snapshot import OperatorSubtaskState, TaskStateSnapshot


class ChannelStateRestoreError(RuntimeError):
    """Persisted data names a channel or partition the restored task does not have."""


def _ordered(groups: Mapping) -> dict:
    return {
        info: tuple(sorted(bufs, key=lambda b: b.sequence_number)) for info, bufs in sorted(groups.items()) if bufs
    }


class SequentialChannelStateReader:
    def __init__(self, state: Union[TaskStateSnapshot, Iterable[OperatorSubtaskState]]):
        states = state.subtask_states_by_operator.values() if isinstance(state, TaskStateSnapshot) else state
        inputs: dict[InputChannelInfo, list[Buffer]] = {}
        outputs: dict[ResultSubpartitionInfo, list[Buffer]] = {}
        for s in states:
            for h in s.input_channel_state:
                inputs.setdefault(h.info, []).extend(h.buffers)
            for h in s.result_subpartition_state:
                outputs.setdefault(h.info, []).extend(h.buffers)
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
        self, inject: Callable[[InputChannelInfo, tuple[Buffer, ...]], None]
    ) -> dict[InputChannelInfo, int]:
        """Calls ``inject(channel, buffers)`` once per channel with persisted data; returns bytes per channel."""
        restored = {}
        for info, buffers in self._inputs.items():
            inject(info, buffers)
            restored[info] = sum(b.size for b in buffers)
        return restored

    def read_output_data(self, partitions: Sequence[ResultPartition]) -> dict[ResultSubpartitionInfo, int]:
        """Re-queues persisted output buffers into ``partitions`` (indexed by partition index) before any new
        data; returns bytes per subpartition."""
        by_idx = {p.partition_idx: p for p in partitions}
        restored = {}
        for info, buffers in self._outputs.items():
            partition = by_idx.get(info.partition_idx)
            if partition is None or info.subpartition_idx >= partition.number_of_subpartitions:
                raise ChannelStateRestoreError(
                    f"read_output_data: persisted data of {info} has no result subpartition in this task "
                    f"(partitions {sorted(by_idx)})"
                )
            partition.add_recovered(info, buffers)
            restored[info] = sum(b.size for b in buffers)
        return restored
