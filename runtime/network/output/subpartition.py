"""One subpartition of a pipelined result partition: the queue of finished buffers and events for one downstream
channel, with priority events that overtake the queued data.

Mirrors Flink's ``PipelinedSubpartition``, its ``PrioritizedDeque`` and ``Buffer.DataType``. See
docs/data-plane.md, "A result subpartition".
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from barriersim.runtime.events import (
    Buffer,
    ChannelElement,
    CheckpointBarrier,
    EndOfPartition,
    ResultSubpartitionInfo,
)
from barriersim.runtime.values import fast_init


class DataType(enum.Enum):
    """Flink's ``Buffer.DataType`` (the kinds our model uses)."""

    NONE = "NONE"
    DATA_BUFFER = "DATA_BUFFER"
    EVENT_BUFFER = "EVENT_BUFFER"
    PRIORITIZED_EVENT_BUFFER = "PRIORITIZED_EVENT_BUFFER"
    ALIGNED_CHECKPOINT_BARRIER = "ALIGNED_CHECKPOINT_BARRIER"
    TIMEOUTABLE_ALIGNED_CHECKPOINT_BARRIER = "TIMEOUTABLE_ALIGNED_CHECKPOINT_BARRIER"

    @property
    def is_buffer(self) -> bool:
        return self is DataType.DATA_BUFFER

    @property
    def is_event(self) -> bool:
        return self not in (DataType.NONE, DataType.DATA_BUFFER)

    @property
    def has_priority(self) -> bool:
        return self is DataType.PRIORITIZED_EVENT_BUFFER

    @property
    def is_blocking_upstream(self) -> bool:
        return self in (DataType.ALIGNED_CHECKPOINT_BARRIER, DataType.TIMEOUTABLE_ALIGNED_CHECKPOINT_BARRIER)

    @property
    def requires_announcement(self) -> bool:
        """The receiver's ``RemoteInputChannel`` announces such a barrier when it arrives."""
        return self is DataType.TIMEOUTABLE_ALIGNED_CHECKPOINT_BARRIER


_DATA_BUFFER = DataType.DATA_BUFFER
_ALIGNED_BARRIER = DataType.ALIGNED_CHECKPOINT_BARRIER
_TIMEOUTABLE_BARRIER = DataType.TIMEOUTABLE_ALIGNED_CHECKPOINT_BARRIER


def data_type_of(element: ChannelElement, is_priority: bool = False) -> DataType:
    """Flink's ``Buffer.DataType.getDataType(event, hasPriority)``."""
    if isinstance(element, Buffer):
        return DataType.DATA_BUFFER
    if is_priority:
        return DataType.PRIORITIZED_EVENT_BUFFER
    if isinstance(element, CheckpointBarrier) and element.options.needs_alignment:
        if element.options.is_timeoutable:
            return DataType.TIMEOUTABLE_ALIGNED_CHECKPOINT_BARRIER
        return DataType.ALIGNED_CHECKPOINT_BARRIER
    return DataType.EVENT_BUFFER


@fast_init
@dataclass(frozen=True)
class BufferAndBacklog:
    """What a subpartition hands out: the element, the data buffers still queued behind it (the backlog the
    receiver uses to ask for floating buffers), the type of the next element (``NONE`` if none can be sent
    now) and the element's wire sequence number. Flink's ``ResultSubpartition.BufferAndBacklog``."""

    element: ChannelElement
    buffers_in_backlog: int
    next_data_type: DataType
    sequence_number: int

    @property
    def is_buffer(self) -> bool:
        return isinstance(self.element, Buffer)

    @property
    def is_data_available(self) -> bool:
        return self.next_data_type is not DataType.NONE

    @property
    def is_event_available(self) -> bool:
        return self.next_data_type.is_event


class SubpartitionStateError(RuntimeError):
    """An operation that the subpartition's state does not allow (e.g. resume when not blocked)."""


@dataclass
class _Entry:
    element: ChannelElement
    data_type: DataType


class PipelinedSubpartition:
    def __init__(self, info: ResultSubpartitionInfo, *, block_on_aligned_barrier: bool = True) -> None:
        self.info = info
        self.block_on_aligned_barrier = block_on_aligned_barrier
        self._priority: deque[_Entry] = deque()
        self._normal: deque[_Entry] = deque()
        # both queues, never replaced (read-only outside: the partition tests them for emptiness without a call)
        self.queues = (self._priority, self._normal)
        # data buffers queued regardless of blocking (what the producer's memory holds; read-only outside)
        self.number_of_queued_buffers = 0
        self._next_buffer_index = 0
        self._sequence_number = 0  # wire number of the next element handed out
        self._is_blocked = False
        self._is_finished = False
        self._is_released = False
        self._new_data_added = False  # a buffer or event other than recovered data was queued
        self.total_number_of_buffers = 0
        self.total_number_of_bytes = 0

    # -- producing -------------------------------------------------------------------------------

    def add_buffer(self, buffer: Buffer) -> Buffer:
        """Queues a finished data buffer, numbering it with the next buffer index; returns it numbered (a
        released subpartition drops it and returns it as given)."""
        if self._is_released:
            return buffer
        if self._is_finished:
            self._check_not_finished(f"add_buffer({buffer.size} bytes)")
        numbered = buffer.with_sequence_number(self._next_buffer_index)
        self._new_data_added = True
        self._next_buffer_index += 1
        self._normal.append(_Entry(numbered, DataType.DATA_BUFFER))
        self.number_of_queued_buffers += 1
        return numbered

    def add_recovered(self, buffers: Iterable[Buffer]) -> None:
        """Restore: persisted output buffers go in first, keeping their buffer indices."""
        if self._is_released:
            return
        if self._normal or self._priority or self._sequence_number:
            raise SubpartitionStateError(f"{self.info}: recovered buffers must come before any new data")
        for b in sorted(buffers, key=lambda x: x.sequence_number):
            self._normal.append(_Entry(b, DataType.DATA_BUFFER))
            self.number_of_queued_buffers += 1
            self._next_buffer_index = max(self._next_buffer_index, b.sequence_number + 1)

    def add_recovered_elements(self, elements: Iterable[ChannelElement]) -> None:
        """Restore after rescaling: recovered buffers with the virtual-channel events between them (and the end of
        the recovered data), in the given order, before any new data; the buffers are numbered in that order."""
        if self._is_released:
            return
        if self._sequence_number or self._new_data_added or self._priority:
            raise SubpartitionStateError(f"{self.info}: recovered buffers must come before any new data")
        for element in elements:
            if isinstance(element, Buffer):
                self._normal.append(_Entry(element.with_sequence_number(self._next_buffer_index), DataType.DATA_BUFFER))
                self._next_buffer_index += 1
                self.number_of_queued_buffers += 1
            else:
                self._normal.append(_Entry(element, data_type_of(element)))

    def add_event(self, event: ChannelElement, is_priority: bool = False) -> tuple[Buffer, ...]:
        """Queues an event; a priority event goes to the head and the data buffers it overtook are
        returned (empty tuple otherwise). A released subpartition drops the event."""
        if self._is_released:
            return ()
        if self._is_finished:
            self._check_not_finished(f"add_event({event!r})")
        data_type = data_type_of(event, is_priority)
        self._new_data_added = True
        if data_type.has_priority:
            if isinstance(event, CheckpointBarrier) and not event.options.is_unaligned_checkpoint:
                raise SubpartitionStateError(
                    f"{self.info}: only unaligned checkpoint barriers may be priority events, got {event!r}"
                )
            self._priority.append(_Entry(event, data_type))
            return self._queued_data()
        self._normal.append(_Entry(event, data_type))
        if isinstance(event, EndOfPartition):
            self._is_finished = True
        return ()

    def finish(self) -> None:
        """Flink's ``finish``: queues the end of partition; no more elements may be added."""
        if not self._is_finished:
            self.add_event(EndOfPartition())

    def release(self) -> None:
        """Flink's ``release`` (the producing task failed or was cancelled): every queued buffer and event is
        dropped, nothing is handed out any more and later adds are silently dropped. Idempotent."""
        if self._is_released:
            return
        self._is_released = True
        self._priority.clear()
        self._normal.clear()
        self.number_of_queued_buffers = 0
        self._is_blocked = False

    def aligned_barrier_timeout(self, checkpoint_id: int) -> tuple[Buffer, ...] | None:
        """Converts the still queued timeoutable barrier of ``checkpoint_id`` into an unaligned priority
        barrier; returns the data buffers it overtook, or None if no such barrier is queued (already sent)."""
        for i, entry in enumerate(self._normal):
            el = entry.element
            if (
                isinstance(el, CheckpointBarrier)
                and el.id == checkpoint_id
                and entry.data_type is DataType.TIMEOUTABLE_ALIGNED_CHECKPOINT_BARRIER
            ):
                overtaken = tuple(e.element for e in list(self._normal)[:i] if e.data_type.is_buffer)
                del self._normal[i]
                self._priority.append(_Entry(el.as_unaligned(), DataType.PRIORITIZED_EVENT_BUFFER))
                return overtaken  # type: ignore[return-value]
        return None

    def has_queued_timeoutable_barrier(self, checkpoint_id: int) -> bool:
        """True while the timeoutable barrier of ``checkpoint_id`` is queued (neither sent nor converted)."""
        return any(
            e.data_type is DataType.TIMEOUTABLE_ALIGNED_CHECKPOINT_BARRIER and e.element.id == checkpoint_id  # type: ignore[union-attr]
            for e in self._normal
        )

    def _queued_data(self) -> tuple[Buffer, ...]:
        return tuple(e.element for e in self._normal if e.data_type.is_buffer)  # type: ignore[misc]

    def _check_not_finished(self, what: str) -> None:
        if self._is_finished:
            raise SubpartitionStateError(f"{what}: subpartition {self.info} is finished")

    # -- consuming ----------------------------------------------------------------------------------

    def _head(self) -> _Entry | None:
        if self._priority:
            return self._priority[0]
        if self._normal:
            return self._normal[0]
        return None

    def next_data_type(self, num_credits_available: int) -> DataType:
        """The type of the element that could be handed out now with the given credit (``NONE`` if none:
        empty, blocked, or a data buffer at the head without credit)."""
        queue = self._priority or self._normal
        if not queue or self._is_blocked:
            return DataType.NONE
        data_type = queue[0].data_type
        if data_type is _DATA_BUFFER and num_credits_available <= 0:
            return DataType.NONE
        return data_type

    @property
    def has_queued_elements(self) -> bool:
        """True while anything (data, events, announcements) is queued, sendable now or not."""
        return bool(self._priority or self._normal)

    def is_available(self, num_credits_available: int) -> bool:
        return self.next_data_type(num_credits_available) is not DataType.NONE

    def poll_buffer(self, num_credits_available: int) -> BufferAndBacklog | None:
        """Hands out the head element if it can be sent with ``num_credits_available`` (events need no
        credit); the caller takes one credit for a data buffer."""
        if self._is_blocked:
            return None
        queue = self._priority or self._normal
        if not queue:
            return None
        entry = queue[0]
        data_type = entry.data_type
        is_buffer = data_type is _DATA_BUFFER
        if is_buffer and num_credits_available <= 0:
            return None
        queue.popleft()
        element = entry.element
        if is_buffer:
            self.number_of_queued_buffers -= 1
            self.total_number_of_bytes += element.size  # type: ignore[union-attr]
            num_credits_available -= 1
        self.total_number_of_buffers += 1
        if (data_type is _ALIGNED_BARRIER or data_type is _TIMEOUTABLE_BARRIER) and self.block_on_aligned_barrier:
            self._is_blocked = True
        seq = self._sequence_number
        self._sequence_number = seq + 1
        if self._is_blocked:  # ``get_buffers_in_backlog`` and ``next_data_type``, inline
            return BufferAndBacklog(element, 0, DataType.NONE, seq)
        queue = self._priority or self._normal
        if not queue:
            next_type = DataType.NONE
        else:
            next_type = queue[0].data_type
            if next_type is _DATA_BUFFER and num_credits_available <= 0:
                next_type = DataType.NONE
        return BufferAndBacklog(element, self.number_of_queued_buffers, next_type, seq)

    def resume_consumption(self) -> None:
        """Flink's ``resumeConsumption``: the consumer finished its alignment (ignored once released: the
        consumer's message finds no reader)."""
        if self._is_released:
            return
        if not self._is_blocked:
            raise SubpartitionStateError(f"resume_consumption: subpartition {self.info} is not blocked by a checkpoint")
        self._is_blocked = False

    # -- queries -----------------------------------------------------------------------------------

    def get_buffers_in_backlog(self) -> int:
        """Data buffers queued (0 while blocked, as Flink's ``getBuffersInBacklogUnsafe``)."""
        return 0 if self._is_blocked else self.number_of_queued_buffers

    @property
    def is_blocked(self) -> bool:
        return self._is_blocked

    @property
    def is_finished(self) -> bool:
        return self._is_finished

    @property
    def is_released(self) -> bool:
        return self._is_released

    @property
    def is_released_and_drained(self) -> bool:
        return self._is_finished and self._head() is None

    @property
    def next_buffer_index(self) -> int:
        return self._next_buffer_index

    def queued_elements(self) -> list[ChannelElement]:
        """The queue in hand-out order; for tests and traces."""
        return [e.element for e in (*self._priority, *self._normal)]


__all__ = [
    "BufferAndBacklog",
    "DataType",
    "PipelinedSubpartition",
    "SubpartitionStateError",
    "data_type_of",
]
