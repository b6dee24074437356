"""Demultiplexing the recovered in-flight data of a rescaled restore by virtual channel (one per old connection), with
the record filter of ambiguous ones.

Mirrors Flink's ``DemultiplexingRecordDeserializer`` (with its ``VirtualChannel``) and ``RecordFilter``, as
``RescalingStreamTaskNetworkInput`` uses them. See docs/data-plane.md, "Virtual channels after a rescaled restore".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

import numpy as np

from barriersim.runtime.buffer_content import Part, content_of, segments
from barriersim.runtime.events import InputChannelInfo, StreamElements, SubtaskConnectionDescriptor, Watermark
from barriersim.runtime.record_batch import RecordBatch
from barriersim.runtime.state.inflight_data_rescaling import InflightDataRescalingDescriptor

# Flink's RecordFilter, on columns: a batch's records -> a boolean mask of those this subtask keeps
RecordFilter = Callable[[RecordBatch], np.ndarray]


class VirtualChannelError(RuntimeError):
    """Recovered data names a virtual channel the restored subtask does not have."""


class VirtualChannel:
    __slots__ = ("record_filter", "last_watermark")

    def __init__(self, record_filter: RecordFilter | None) -> None:
        self.record_filter = record_filter
        self.last_watermark: int | None = None  # None: uninitialized


class DemultiplexingChannel:
    """The virtual channels of one physical input channel during recovery."""

    def __init__(self, channel: InputChannelInfo, virtual_channels: dict[tuple[int, int], VirtualChannel]) -> None:
        self.channel = channel
        self.virtual_channels = virtual_channels
        self.current: VirtualChannel | None = None

    def select(self, descriptor: SubtaskConnectionDescriptor) -> None:
        key = (descriptor.input_subtask_index, descriptor.output_subtask_index)
        selected = self.virtual_channels.get(key)
        if selected is None:
            raise VirtualChannelError(
                f"channel {self.channel}: cannot select virtual channel {key}; known channels are "
                f"{sorted(self.virtual_channels)}"
            )
        self.current = selected

    def finish(self) -> None:
        """The recovered data of the channel ended: what follows is new data."""
        self.current = None

    @property
    def is_selecting(self) -> bool:
        return self.current is not None

    def demultiplex(
        self, content: RecordBatch | StreamElements | Iterable[Any]
    ) -> RecordBatch | StreamElements | Iterable[Any]:
        """A recovered buffer's content (a ``RecordBatch``, ``StreamElements``, or record tuples and watermarks)
        of the selected virtual channel, as the operator sees it, in the same forms: the records of an ambiguous
        virtual channel filtered by one mask per batch, watermarks combined over the virtual channels."""
        vc = self.current
        if vc is None:
            return content
        parts: list[Part] = []
        for part in segments(content):
            if type(part) is RecordBatch:
                if vc.record_filter is not None and len(part):
                    part = part.take(np.asarray(vc.record_filter(part), dtype=bool))
                if len(part):
                    parts.append(part)
            else:
                vc.last_watermark = part.timestamp
                marks = [v.last_watermark for v in self.virtual_channels.values()]
                if None not in marks:
                    parts.append(Watermark(min(cast("list[int]", marks))))
        return content_of(parts) if parts else RecordBatch.empty()


def demultiplexers(
    gates: Sequence[Sequence[InputChannelInfo]],
    descriptor: InflightDataRescalingDescriptor,
    record_filter_of_gate: Callable[[int], RecordFilter | None],
) -> dict[InputChannelInfo, DemultiplexingChannel]:
    """One ``DemultiplexingChannel`` per channel that recovers data of more than its own connection (Flink's
    ``DemultiplexingRecordDeserializer.create``: a channel without old subtasks or old channels is unmapped)."""
    result: dict[InputChannelInfo, DemultiplexingChannel] = {}
    if descriptor.is_no_rescale:
        return result
    for gate, channels in enumerate(gates):
        gate_descriptor = descriptor.descriptor(gate)
        if gate_descriptor.is_identity:
            continue
        old_subtasks = gate_descriptor.old_subtask_indexes
        for info in channels:
            old_channels = gate_descriptor.rescale_mappings.get_mapped_indexes(info.channel_idx)
            if not old_subtasks or not old_channels:
                continue
            vcs = {}
            for subtask in old_subtasks:
                record_filter = record_filter_of_gate(gate) if descriptor.is_ambiguous(gate, subtask) else None
                for channel in old_channels:
                    vcs[(subtask, channel)] = VirtualChannel(record_filter)
            result[info] = DemultiplexingChannel(info, vcs)
    return result
