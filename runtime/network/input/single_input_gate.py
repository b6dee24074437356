"""An input gate: the channels of one logical input of a task, polled in availability order.

Mirrors Flink's ``SingleInputGate`` and ``BufferOrEvent``. See docs/data-plane.md, "The input gate".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from barriersim.runtime.events import Buffer, ChannelElement, CheckpointBarrier, EndOfPartition, InputChannelInfo
from barriersim.runtime.network.input.buffer_debloater import (
    BufferDebloatConfiguration,
    BufferDebloater,
    Flink114BufferDebloater,
    ThroughputCalculator,
    buffer_debloater,
)
from barriersim.runtime.network.input.buffer_manager import (
    DEFAULT_EXCLUSIVE_BUFFERS_PER_CHANNEL,
    DEFAULT_FLOATING_BUFFERS_PER_GATE,
    FloatingBufferPool,
)
from barriersim.runtime.network.input.input_channel import (
    AnnounceBufferSize,
    InputChannel,
    LocalInputChannel,
    RemoteInputChannel,
)
from barriersim.runtime.network.input.prioritized_deque import PrioritizedDeque
from barriersim.runtime.values import fast_init


@fast_init
@dataclass(frozen=True)
class BufferOrEvent:
    """Flink's ``BufferOrEvent``: what a gate hands out, with the channel it came from."""

    element: ChannelElement
    channel_info: InputChannelInfo
    more_available: bool = False
    sequence_number: int = -1

    @property
    def is_buffer(self) -> bool:
        return isinstance(self.element, Buffer)

    @property
    def is_event(self) -> bool:
        return not self.is_buffer

    @property
    def size(self) -> int:
        return self.element.size if isinstance(self.element, Buffer) else 0


class GateClosedError(Exception):
    """The gate was closed; nothing can be polled or received any more."""


class SingleInputGate:
    """``channel_kinds`` lists, per channel index, ``"remote"`` or ``"local"``."""

    def __init__(
        self,
        gate_idx: int,
        channel_kinds: Sequence[str],
        sink: Callable[[Any], None],
        exclusive_buffers_per_channel: int = DEFAULT_EXCLUSIVE_BUFFERS_PER_CHANNEL,
        floating_buffers_per_gate: int = DEFAULT_FLOATING_BUFFERS_PER_GATE,
    ) -> None:
        self.gate_idx = gate_idx
        self._sink = sink
        self.floating_pool = FloatingBufferPool(floating_buffers_per_gate)
        self.channels: list[InputChannel] = []
        for idx, kind in enumerate(channel_kinds):
            info = InputChannelInfo(gate_idx, idx)
            if kind == "remote":
                self.channels.append(RemoteInputChannel(info, sink, self.floating_pool, exclusive_buffers_per_channel))
            elif kind == "local":
                self.channels.append(LocalInputChannel(info, sink))
            else:
                raise ValueError(f"channel {idx} of gate {gate_idx}: kind must be 'remote' or 'local', got {kind!r}")
        self._remote_channels = [c for c in self.channels if isinstance(c, RemoteInputChannel)]
        self._remote_managers = [(c, c.buffer_manager) for c in self._remote_channels]
        self._channels_with_data: PrioritizedDeque[int] = PrioritizedDeque()
        self._priority_channels = self._channels_with_data.priority_section  # never replaced
        self._enqueued: set[int] = set()
        self._finished_channels: set[int] = set()
        # channels whose data buffers the task took and has not released yet (read-only outside)
        self.holding: list[int] = []
        self.closed = False
        self._set_up = False
        self.throughput: ThroughputCalculator | None = None
        self.debloater: BufferDebloater | Flink114BufferDebloater | None = None

    # -- lifecycle -------------------------------------------------------------------------------------

    def enable_debloating(
        self, config: BufferDebloatConfiguration, max_buffer_size: int, clock: Callable[[], int]
    ) -> None:
        """Measure throughput and size the senders' buffers (Flink's ``createBufferDebloater``)."""
        config = config.validate(max_buffer_size)
        self.throughput = ThroughputCalculator(clock, config.throughput_ema_samples)
        self.debloater = buffer_debloater(config, max_buffer_size)

    def setup(self) -> None:
        """Request the partitions: remote channels announce their initial (exclusive) credit, local channels
        ask for their first buffer."""
        if not self._set_up:
            self._set_up = True
            self._announce_credit()
            for ch in self.channels:
                if isinstance(ch, LocalInputChannel):
                    ch.announce_credit()

    def close(self) -> None:
        self.closed = True

    # -- channel infos (Flink's CheckpointableInput) ------------------------------------------------

    @property
    def number_of_input_channels(self) -> int:
        return len(self.channels)

    @property
    def channel_infos(self) -> list[InputChannelInfo]:
        return [c.channel_info for c in self.channels]

    def get_channel(self, channel_idx: int) -> InputChannel:
        return self.channels[channel_idx]

    def _channel(self, channel: int | InputChannelInfo) -> InputChannel:
        if not isinstance(channel, InputChannelInfo):
            return self.channels[channel]
        if channel.gate_idx != self.gate_idx:
            raise ValueError(f"{channel} does not belong to gate {self.gate_idx}")
        return self.channels[channel.channel_idx]

    # -- receiving -------------------------------------------------------------------------------------

    def on_element(
        self,
        channel: int | InputChannelInfo,
        element: ChannelElement,
        sequence_number: int | None = None,
        backlog: int | None = None,
        priority: bool | None = None,
    ) -> None:
        if self.closed:
            raise GateClosedError(f"{type(element).__name__} arrived at closed gate {self.gate_idx}")
        if type(channel) is InputChannelInfo and channel.gate_idx == self.gate_idx:  # ``_channel``, inline
            ch = self.channels[channel.channel_idx]
        else:
            ch = self._channel(channel)
        has_priority = ch.on_element(element, sequence_number, backlog, priority)
        idx = ch.channel_info.channel_idx
        if idx not in self._enqueued:  # ``_queue_channel``, inline for the common case
            self._enqueued.add(idx)
            self._channels_with_data.add(idx, has_priority)
        elif has_priority:
            self._queue_channel(idx, True)
        self._announce_credit()

    def _queue_channel(self, idx: int, priority: bool) -> None:
        if idx in self._enqueued:
            if priority:
                self._channels_with_data.prioritize(lambda i: i == idx)
            return
        self._enqueued.add(idx)
        self._channels_with_data.add(idx, priority)

    # -- polling ---------------------------------------------------------------------------------------

    def poll_next(self) -> BufferOrEvent | None:
        if self.closed:
            raise GateClosedError(f"poll of closed gate {self.gate_idx}")
        with_data = self._channels_with_data
        priority_idx, normal_idx = with_data.sections  # ``bool(with_data)``, without a call
        while priority_idx or normal_idx:
            idx = priority_idx.popleft() if priority_idx else normal_idx.popleft()  # ``with_data.poll()``
            self._enqueued.discard(idx)
            ch = self.channels[idx]
            priority, normal = ch.queue_sections  # ``has_data`` and ``has_priority_element``, without calls
            if ch.blocked or not (priority or normal):
                continue
            entry = ch.get_next()
            assert entry is not None
            element = entry.element
            if ch.holds_processed_buffers and idx not in self.holding:
                self.holding.append(idx)
            if not ch.blocked and (priority or normal):
                self._queue_channel(idx, bool(priority))
            if type(element) is EndOfPartition:
                self._finished_channels.add(idx)
                ch.release()
            self._announce_credit()
            if self.throughput is not None:
                self.throughput.resume_measurement()
                if type(element) is Buffer:
                    self.throughput.incoming_data_size(element.size)
            return BufferOrEvent(element, ch.channel_info, bool(priority_idx or normal_idx), entry.sequence_number)
        if self.throughput is not None:
            self.throughput.pause_measurement()
        return None

    def release_processed(self) -> None:
        """The task processed the data buffers it polled: the channels recycle them (the receiver's buffers
        return as credit; a local channel's to its producer)."""
        if not self.holding:
            return
        holding, self.holding = self.holding, []
        for idx in holding:
            self.channels[idx].release_processed()
        self._announce_credit()

    def is_finished(self) -> bool:
        return len(self._finished_channels) == len(self.channels)

    def unfinished_channels(self) -> list[InputChannelInfo]:
        """Flink's ``getUnfinishedChannels``: channels whose end of partition has not been consumed yet."""
        return [ch.channel_info for i, ch in enumerate(self.channels) if i not in self._finished_channels]

    def is_available(self) -> bool:
        return any(not self.channels[i].blocked and self.channels[i].has_data() for i in self._enqueued)

    def has_priority_event(self) -> bool:
        """True if the next poll returns a priority event (of a channel that is not blocked)."""
        if not self._priority_channels:  # (``_channels_with_data.has_priority_element``)
            return False
        return any(
            not self.channels[i].blocked and self.channels[i].has_priority_element()
            for i in self._channels_with_data.iter_priority()
        )

    # -- checkpointing hooks ----------------------------------------------------------------------------

    def block_consumption(self, channel_info: InputChannelInfo) -> None:
        self._channel(channel_info).block_consumption()

    def resume_consumption(self, channel_info: InputChannelInfo) -> None:
        ch = self._channel(channel_info)
        ch.resume_consumption()
        if ch.has_data():
            self._queue_channel(ch.channel_info.channel_idx, ch.has_priority_element())
        self._announce_credit()

    def is_blocked(self, channel_info: InputChannelInfo) -> bool:
        return self._channel(channel_info).blocked

    @property
    def blocked_channels(self) -> list[InputChannelInfo]:
        return [c.channel_info for c in self.channels if c.blocked]

    def checkpoint_started(self, barrier: CheckpointBarrier) -> None:
        for ch in self.channels:
            if not ch.released:
                ch.checkpoint_started(barrier)

    def checkpoint_stopped(self, checkpoint_id: int) -> None:
        for ch in self.channels:
            ch.checkpoint_stopped(checkpoint_id)

    def convert_to_priority_event(self, channel_idx: int, sequence_number: int) -> None:
        ch = self.channels[channel_idx]
        if ch.convert_to_priority_event(sequence_number):
            if not ch.blocked:
                self._queue_channel(channel_idx, True)

    # -- credit --------------------------------------------------------------------------------------------

    def _announce_credit(self) -> None:
        if not self._set_up:
            return
        for ch, manager in self._remote_managers:  # local channels have no credit
            if manager.unannounced_credit > 0:
                ch.announce_credit()

    # -- buffer debloating ---------------------------------------------------------------------------

    def buffers_in_use(self) -> int:
        """Flink's ``getBuffersInUseCount``: per channel the queued buffers plus the sender's backlog (a local
        channel's buffers in use are the producer's queued ones)."""
        count = 0
        for ch in self.channels:
            count += ch.num_queued
            if isinstance(ch, RemoteInputChannel):
                count += ch.buffer_manager.sender_backlog
            elif isinstance(ch, LocalInputChannel):
                count += ch.sender_backlog
        return count

    def trigger_debloating(self) -> int | None:
        """Flink's ``triggerDebloating``: recalculate the buffer size and announce it to every unfinished
        channel's sender; returns the announced size (None: unchanged, or the gate is finished)."""
        if self.debloater is None or self.closed or self.is_finished():
            return None
        assert self.throughput is not None  # enabled with the debloater
        size = self.debloater.recalculate_buffer_size(self.throughput.calculate_throughput(), self.buffers_in_use())
        if size is not None:
            for idx, ch in enumerate(self.channels):
                if idx not in self._finished_channels:
                    self._sink(AnnounceBufferSize(ch.channel_info, size))
        return size

    def remote_channels(self) -> Iterable[RemoteInputChannel]:
        return (c for c in self.channels if isinstance(c, RemoteInputChannel))
