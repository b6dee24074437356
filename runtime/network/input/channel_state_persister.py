"""Decides which buffers of one input channel belong to the in-flight data of an unaligned checkpoint.

Mirrors Flink's ``ChannelStatePersister`` (with its ``CheckpointStatus``). See docs/data-plane.md, "Which input
buffers are persisted".
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from barriersim.runtime.events import Buffer, CheckpointBarrier, EventAnnouncement, InputChannelInfo
from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason
from barriersim.runtime.faults.mutations import PlantedBug, is_planted


@dataclass(frozen=True)
class AddInputData:
    """Flink's ``ChannelStateWriter.addInputData(checkpointId, info, startSeqNum, data)``: in-flight input
    data of ``channel_info`` persisted for unaligned checkpoint ``checkpoint_id``."""

    checkpoint_id: int
    channel_info: InputChannelInfo
    buffers: tuple[Buffer, ...]

    @property
    def size(self) -> int:
        return sum(b.size for b in self.buffers)


class CheckpointStatus(enum.Enum):
    COMPLETED = "COMPLETED"
    BARRIER_PENDING = "BARRIER_PENDING"
    BARRIER_RECEIVED = "BARRIER_RECEIVED"


class ChannelStatePersister:
    def __init__(self, channel_info: InputChannelInfo, sink: Callable[[AddInputData], None]) -> None:
        self.channel_info = channel_info
        self._sink = sink
        self.status = CheckpointStatus.COMPLETED
        self.last_seen_barrier = -1

    def start_persisting(self, barrier_id: int, known_buffers: Sequence[Buffer]) -> None:
        if self.status is CheckpointStatus.BARRIER_RECEIVED and self.last_seen_barrier > barrier_id:
            raise CheckpointException(
                CheckpointFailureReason.CHECKPOINT_SUBSUMED,
                barrier_id,
                f"barrier of newer checkpoint {self.last_seen_barrier} already received on {self.channel_info}",
            )
        if self.last_seen_barrier < barrier_id:
            # a newer checkpoint than any barrier seen so far: its barrier is still to come
            self.status = CheckpointStatus.BARRIER_PENDING
            self.last_seen_barrier = barrier_id
        if known_buffers:
            self._sink(AddInputData(barrier_id, self.channel_info, tuple(known_buffers)))

    def stop_persisting(self, checkpoint_id: int) -> None:
        if checkpoint_id >= self.last_seen_barrier:
            self.status = CheckpointStatus.COMPLETED
            self.last_seen_barrier = checkpoint_id

    def maybe_persist(self, buffer: Buffer) -> None:
        if self.status is CheckpointStatus.BARRIER_PENDING:
            self._sink(AddInputData(self.last_seen_barrier, self.channel_info, (buffer,)))

    def check_for_barrier(self, element: object) -> int | None:
        """If ``element`` is a (not outdated) barrier, note it and return its id; an announcement's
        barrier id is returned without changing the status."""
        if isinstance(element, CheckpointBarrier):
            expected = (
                self.last_seen_barrier + 1 if self.status is CheckpointStatus.COMPLETED else self.last_seen_barrier
            )
            if element.id >= expected:
                self.status = CheckpointStatus.BARRIER_RECEIVED
                self.last_seen_barrier = element.id
                return element.id
            if is_planted(PlantedBug.LATE_BARRIER_OF_CANCELLED_CHECKPOINT):
                self.status = CheckpointStatus.BARRIER_RECEIVED  # the historical bug: stops persisting
            return None
        if isinstance(element, EventAnnouncement):
            return element.announced_event.id
        return None

    def has_barrier_received(self) -> bool:
        return self.status is CheckpointStatus.BARRIER_RECEIVED
