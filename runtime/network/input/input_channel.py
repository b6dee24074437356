"""One input channel of a gate: the receive queue of elements from one upstream subpartition, remote (with its own
buffers and credit) or local (reading the producer's subpartition).

Mirrors Flink's ``InputChannel``, ``RemoteInputChannel`` and ``LocalInputChannel``. See docs/data-plane.md, "Input
channels, remote and local".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from barriersim.runtime.events import (
    Buffer,
    ChannelElement,
    CheckpointBarrier,
    EndOfPartition,
    EventAnnouncement,
    InputChannelInfo,
)
from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason
from barriersim.runtime.network.input.buffer_manager import (
    DEFAULT_EXCLUSIVE_BUFFERS_PER_CHANNEL,
    BufferManager,
    BufferOrigin,
    FloatingBufferPool,
)
from barriersim.runtime.network.input.channel_state_persister import ChannelStatePersister, CheckpointStatus
from barriersim.runtime.network.input.prioritized_deque import PrioritizedDeque
from barriersim.runtime.values import fast_init

NONE = -1
_BARRIER_PENDING = CheckpointStatus.BARRIER_PENDING

# the buffers a local channel holds of its producer's: the one its task reads and the next one (see above)
LOCAL_CHANNEL_BUFFERS = 2


@fast_init
@dataclass(frozen=True)
class AddCredit:
    """Flink's ``NettyMessage.AddCredit``: the receiver grants ``credit`` more data buffers to the sender
    of ``channel_info``."""

    channel_info: InputChannelInfo
    credit: int


@fast_init
@dataclass(frozen=True)
class ResumeConsumptionUpstream:
    """Flink's ``NettyMessage.ResumeConsumption``: the sender of ``channel_info``, blocked after an aligned
    barrier, may send again."""

    channel_info: InputChannelInfo


@dataclass(frozen=True)
class AnnounceBufferSize:
    """Flink's ``NettyMessage.NewBufferSize``: the receiver of ``channel_info`` asks its sender to cut new
    buffers at ``buffer_size`` bytes (buffer debloating)."""

    channel_info: InputChannelInfo
    buffer_size: int


@dataclass(frozen=True)
class AcknowledgeAllRecordsProcessed:
    """Flink's ``InputChannel.acknowledgeAllRecordsProcessed`` (``NettyMessage.AckAllUserRecordsProcessed`` from a
    remote channel, ``acknowledgeAllDataProcessed`` on the subpartition view from a local one): the task reading
    ``channel_info`` processed every record before its ``EndOfData``, so the sender may finish."""

    channel_info: InputChannelInfo


# the messages a consumer's task sends the producer of one of its channels, each naming the channel
UPSTREAM_MESSAGES = (AddCredit, ResumeConsumptionUpstream, AnnounceBufferSize, AcknowledgeAllRecordsProcessed)


class BufferReorderingException(Exception):
    """An element arrived with an unexpected sequence number (Flink's ``BufferReorderingException``)."""


class ChannelStateError(Exception):
    """An operation that the channel's current state does not allow (e.g. data after end of partition)."""


@fast_init
@dataclass(frozen=True)
class SequenceElement:
    element: ChannelElement
    sequence_number: int
    origin: BufferOrigin | None = None


class InputChannel:
    """Common part of remote and local channels; ``sink`` receives ``AddInputData``, ``AddCredit`` and
    ``ResumeConsumptionUpstream`` values."""

    is_remote = False

    def __init__(self, channel_info: InputChannelInfo, sink: Callable[[Any], None]) -> None:
        self.channel_info = channel_info
        self._sink = sink
        self._queue: PrioritizedDeque[SequenceElement] = PrioritizedDeque()
        # the queue's priority and normal sections (read-only outside: a gate tests them without a call)
        self.queue_sections = self._queue.sections
        self.expected_sequence_number = 0
        self._persister = ChannelStatePersister(channel_info, sink)
        self._last_barrier_id = NONE
        self._last_barrier_sequence_number = NONE
        self.blocked = False
        self.end_of_partition_received = False
        self.released = False
        self.queued_bytes = 0
        self._in_task: list[BufferOrigin | None] = []  # data buffers the task took and has not processed yet

    # -- arriving elements -------------------------------------------------------------------------

    def on_element(
        self,
        element: ChannelElement,
        sequence_number: int | None = None,
        backlog: int | None = None,
        priority: bool | None = None,
    ) -> bool:
        """Queue an arriving element; returns True if it is (or brought) a priority element."""
        if sequence_number is None:
            sequence_number = self.expected_sequence_number
        if sequence_number != self.expected_sequence_number:
            raise BufferReorderingException(
                f"{type(element).__name__} on {self.channel_info}: sequence number {sequence_number}, "
                f"expected {self.expected_sequence_number}"
            )
        if self.end_of_partition_received:
            raise ChannelStateError(f"{type(element).__name__} on {self.channel_info} after end of partition")
        if type(element) is Buffer:  # the common case, the steps below that apply to a data buffer
            priority = bool(priority)
            self._queue.add(SequenceElement(element, sequence_number, self._take_buffer()), priority)
            self.queued_bytes += element.size
            if self._persister.status is _BARRIER_PENDING:
                self._persister.maybe_persist(element)
            self.expected_sequence_number += 1
            if backlog is not None:
                self._on_sender_backlog(backlog)
            return priority
        if priority is None:
            priority = isinstance(element, EventAnnouncement) or (
                isinstance(element, CheckpointBarrier) and element.options.is_unaligned_checkpoint
            )
        origin = self._take_buffer() if isinstance(element, Buffer) else None
        self._queue.add(SequenceElement(element, sequence_number, origin), priority)
        has_priority = priority or self._announce(element, sequence_number)
        if isinstance(element, Buffer):
            self.queued_bytes += element.size
        if isinstance(element, EndOfPartition):
            self.end_of_partition_received = True
        barrier_id = self._persister.check_for_barrier(element)
        if isinstance(element, CheckpointBarrier) and barrier_id is not None and barrier_id > self._last_barrier_id:
            # the task has not started this checkpoint yet: remember where its barrier is
            self._last_barrier_id = barrier_id
            self._last_barrier_sequence_number = sequence_number
        if isinstance(element, Buffer):
            self._persister.maybe_persist(element)
        self.expected_sequence_number += 1
        if backlog is not None:
            self._on_sender_backlog(backlog)
        return has_priority

    def _announce(self, element: ChannelElement, sequence_number: int) -> bool:
        """A channel that announces timeoutable barriers puts an announcement ahead of the data (remote only);
        True if it did."""
        return False

    def _take_buffer(self) -> BufferOrigin | None:
        return None

    def _on_sender_backlog(self, backlog: int) -> None:
        pass

    # -- consuming --------------------------------------------------------------------------------

    def get_next(self) -> SequenceElement | None:
        entry = self._queue.poll()
        if entry is None:
            return None
        if isinstance(entry.element, Buffer):
            self.queued_bytes -= entry.element.size
            self._in_task.append(entry.origin)
        return entry

    @property
    def holds_processed_buffers(self) -> bool:
        return bool(self._in_task)

    def release_processed(self) -> None:
        """The task processed the data buffers it took from this channel: recycle them."""
        in_task, self._in_task = self._in_task, []
        for origin in in_task:
            self._recycle(origin)

    def _recycle(self, origin: BufferOrigin | None) -> None:
        pass

    def has_data(self) -> bool:
        return bool(self._queue)

    def has_priority_element(self) -> bool:
        return self._queue.has_priority_element()

    def peek(self) -> ChannelElement | None:
        entry = self._queue.peek()
        return None if entry is None else entry.element

    @property
    def num_queued(self) -> int:
        return len(self._queue)

    def queued_elements(self) -> tuple[ChannelElement, ...]:
        return tuple(e.element for e in self._queue)

    # -- checkpointing hooks (Flink's CheckpointableInput, per channel) ------------------------------

    def checkpoint_started(self, barrier: CheckpointBarrier, spill_inflight_buffers: bool = True) -> None:
        """Start persisting for ``barrier``'s checkpoint: the queued buffers before its barrier, then what arrives
        until it (``spill_inflight_buffers`` False: only what arrives, as the planted FLINK-18139 decides)."""
        if barrier.id < self._last_barrier_id:
            raise CheckpointException(
                CheckpointFailureReason.CHECKPOINT_SUBSUMED,
                barrier.id,
                f"sequence number of checkpoint {barrier.id} on {self.channel_info} was overwritten by "
                f"newer checkpoint {self._last_barrier_id}",
            )
        if barrier.id > self._last_barrier_id:
            # an obsolete, older barrier was seen here: ignore its position
            self._reset_last_barrier()
        self._persister.start_persisting(barrier.id, self._get_inflight_buffers() if spill_inflight_buffers else [])

    def has_inflight_buffers(self) -> bool:
        """Queued data buffers before the barrier (Flink 1.11's ``CheckpointBarrierUnaligner.hasInflightData``)."""
        return bool(self._get_inflight_buffers())

    def checkpoint_stopped(self, checkpoint_id: int) -> None:
        self._persister.stop_persisting(checkpoint_id)
        if self._last_barrier_id == checkpoint_id:
            self._reset_last_barrier()

    def _reset_last_barrier(self) -> None:
        self._last_barrier_id = NONE
        self._last_barrier_sequence_number = NONE

    def _get_inflight_buffers(self) -> list[Buffer]:
        buffers: list[Buffer] = []
        for entry in self._queue.iter_non_priority():
            if isinstance(entry.element, Buffer):
                if (
                    self._last_barrier_sequence_number == NONE
                    or entry.sequence_number < self._last_barrier_sequence_number
                ):
                    buffers.append(entry.element)
                else:
                    break
        return buffers

    def convert_to_priority_event(self, sequence_number: int) -> bool:
        """Move the queued (announced) barrier at ``sequence_number`` ahead of the data; True if moved."""
        moved = self._queue.prioritize(
            lambda e: e.sequence_number == sequence_number and isinstance(e.element, CheckpointBarrier)
        )
        return moved is not None

    def block_consumption(self) -> None:
        self.blocked = True

    def resume_consumption(self) -> None:
        self.blocked = False

    def release(self) -> None:
        self.released = True

    def announce_credit(self) -> None:
        pass

    @property
    def persisting_checkpoint_id(self) -> int | None:
        if self._persister.status is CheckpointStatus.BARRIER_PENDING:
            return self._persister.last_seen_barrier
        return None


class RemoteInputChannel(InputChannel):
    """A channel fed over the network, with credit-based flow control."""

    is_remote = True

    def __init__(
        self,
        channel_info: InputChannelInfo,
        sink: Callable[[Any], None],
        pool: FloatingBufferPool,
        exclusive_buffers: int = DEFAULT_EXCLUSIVE_BUFFERS_PER_CHANNEL,
    ) -> None:
        super().__init__(channel_info, sink)
        self.buffer_manager = BufferManager(pool, exclusive_buffers)
        self.buffer_manager.unannounced_credit = exclusive_buffers  # Flink: initial credit of the partition request

    def _announce(self, element: ChannelElement, sequence_number: int) -> bool:
        """Flink's ``RemoteInputChannel.onBuffer``: a timeoutable aligned barrier
        (``DataType.TIMEOUTABLE_ALIGNED_CHECKPOINT_BARRIER``) is announced ahead of the queued data."""
        if (
            isinstance(element, CheckpointBarrier)
            and element.options.is_timeoutable
            and not element.options.is_unaligned_checkpoint
        ):
            self._queue.add_priority_element(
                SequenceElement(EventAnnouncement(element, sequence_number), sequence_number)
            )
            return True
        return False

    def _take_buffer(self) -> BufferOrigin | None:
        return self.buffer_manager.take_buffer()

    def _on_sender_backlog(self, backlog: int) -> None:
        self.buffer_manager.on_sender_backlog(backlog)

    def _recycle(self, origin: BufferOrigin | None) -> None:
        if origin is not None:
            self.buffer_manager.recycle(origin)

    def block_consumption(self) -> None:
        super().block_consumption()
        self.buffer_manager.set_blocked(True)

    def resume_consumption(self) -> None:
        # always tell the sender: it blocked itself after handing out an aligned barrier, even one this
        # channel's task found obsolete and never blocked for (Flink sends ResumeConsumption unconditionally)
        super().resume_consumption()
        self.buffer_manager.set_blocked(False)
        self._sink(ResumeConsumptionUpstream(self.channel_info))

    def release(self) -> None:
        super().release()
        self.buffer_manager.release()

    def announce_credit(self) -> None:
        if self.released or self.buffer_manager.unannounced_credit <= 0:
            return
        self._sink(AddCredit(self.channel_info, self.buffer_manager.take_unannounced_credit()))

    @property
    def sender_credit(self) -> int:
        return self.buffer_manager.sender_credit


class LocalInputChannel(InputChannel):
    """A channel reading a subpartition of the same TaskManager: no buffers of its own, no announcements; it
    holds at most ``LOCAL_CHANNEL_BUFFERS`` of the producer's buffers (see the module's docstring)."""

    def __init__(self, channel_info: InputChannelInfo, sink: Callable[[Any], None]) -> None:
        super().__init__(channel_info, sink)
        self._requested = False
        self.sender_backlog = 0  # the producer's queued buffers when it last handed one out

    def _on_sender_backlog(self, backlog: int) -> None:
        self.sender_backlog = backlog

    def announce_credit(self) -> None:
        """The partition request: ask for the first buffers."""
        if not self._requested and not self.released:
            self._requested = True
            self._sink(AddCredit(self.channel_info, LOCAL_CHANNEL_BUFFERS))

    def _recycle(self, origin: BufferOrigin | None) -> None:
        # the task processed a buffer: it returns to the producer, and the channel reads the next one
        if not self.released:
            self._sink(AddCredit(self.channel_info, 1))

    def resume_consumption(self) -> None:
        super().resume_consumption()
        self._sink(ResumeConsumptionUpstream(self.channel_info))


__all__ = [
    "LOCAL_CHANNEL_BUFFERS",
    "AddCredit",
    "AcknowledgeAllRecordsProcessed",
    "AnnounceBufferSize",
    "ResumeConsumptionUpstream",
    "UPSTREAM_MESSAGES",
    "BufferReorderingException",
    "ChannelStateError",
    "SequenceElement",
    "InputChannel",
    "RemoteInputChannel",
    "LocalInputChannel",
]
