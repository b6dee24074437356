"""Test helpers for the input side of checkpointing (ports of Flink's ``ValidatingCheckpointHandler``,
``MockInputGate``, ``TestBufferFactory`` and the ``createBuffer``/``createBarrier``/... helpers of Flink's
checkpointing tests), shared by the Aligned/Unaligned/Alternating/CheckpointedInputGate test ports.

Import with ``from tests.runtime.checkpointing.checkpointing_testkit import ...``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from barriersim.runtime.checkpointing.api import CheckpointingMode, InputSide, ManualClock, ManualTimerService
from barriersim.runtime.checkpointing.barrier_handler import (
    AbortCheckpointOnBarrier,
    AddInputData,
    AllBarriersReceived,
    TriggerCheckpointOnBarrier,
)
from barriersim.runtime.checkpointing.checkpointed_input_gate import CheckpointedInputGate, GateActionRouter
from barriersim.runtime.checkpointing.single_checkpoint_barrier_handler import SingleCheckpointBarrierHandler
from barriersim.runtime.events import (
    END_OF_PARTITION,
    Buffer,
    CancelCheckpointMarker,
    CheckpointBarrier,
    CheckpointOptions,
    InputChannelInfo,
)
from barriersim.runtime.network.input.single_input_gate import BufferOrEvent

PAGE_SIZE = 512

__all__ = [
    "PAGE_SIZE",
    "ValidatingCheckpointHandler",
    "MockInputGate",
    "ManualClock",
    "ManualTimerService",
    "create_buffer",
    "create_barrier",
    "create_cancellation_barrier",
    "create_end_of_partition",
    "check",
    "create_aligned_checkpointed_input_gate",
    "CheckpointingMode",
    "InputSide",
]

_size_counter = itertools.count(1)


class ValidatingCheckpointHandler:
    """Flink's ``ValidatingCheckpointHandler`` as an action sink: records triggers and aborts and, when
    ``next_expected_checkpoint_id`` is not -1, asserts each trigger has that id."""

    def __init__(self, next_expected_checkpoint_id: int = -1):
        self.next_expected_checkpoint_id = next_expected_checkpoint_id
        self.triggered_checkpoint_counter = 0
        self.aborted_checkpoint_counter = 0
        self.last_canceled_checkpoint_id = -1
        self.failure_reason = None
        self.triggered_checkpoints: list[int] = []
        self.aborted_checkpoints: list[int] = []
        self.triggered_checkpoint_options: list[CheckpointOptions] = []
        self.last_alignment_duration_ms: int | None = None
        self.last_bytes_processed_during_alignment: int | None = None
        self.actions: list[Any] = []
        self.added_input: dict[InputChannelInfo, list[Buffer]] = {}
        self.all_barriers_received: list[int] = []

    def __call__(self, action: Any) -> None:
        self.actions.append(action)
        if isinstance(action, TriggerCheckpointOnBarrier):
            if self.next_expected_checkpoint_id != -1:
                assert action.checkpoint_id == self.next_expected_checkpoint_id, (
                    f"wrong checkpoint id: {action.checkpoint_id}, expected {self.next_expected_checkpoint_id}"
                )
            assert action.timestamp >= 0
            self.next_expected_checkpoint_id = action.checkpoint_id + 1
            self.triggered_checkpoint_counter += 1
            self.last_alignment_duration_ms = action.metrics.alignment_duration_ms
            self.last_bytes_processed_during_alignment = action.metrics.bytes_processed_during_alignment
            if not action.options.is_unaligned_checkpoint:
                assert self.last_alignment_duration_ms is not None
                assert self.last_bytes_processed_during_alignment is not None
            self.triggered_checkpoints.append(action.checkpoint_id)
            self.triggered_checkpoint_options.append(action.options)
        elif isinstance(action, AbortCheckpointOnBarrier):
            self.last_canceled_checkpoint_id = action.checkpoint_id
            self.failure_reason = action.reason
            self.aborted_checkpoint_counter += 1
            self.aborted_checkpoints.append(action.checkpoint_id)
        elif isinstance(action, AddInputData):
            self.added_input.setdefault(action.channel_info, []).extend(action.buffers)
        elif isinstance(action, AllBarriersReceived):
            self.all_barriers_received.append(action.checkpoint_id)


class MockInputGate:
    """Flink's ``MockInputGate``: replays a fixed sequence of ``BufferOrEvent`` whatever is blocked, and
    records which channels the handler blocked and which checkpoints it started/stopped."""

    def __init__(self, num_channels: int, sequence: Iterable[BufferOrEvent], gate_idx: int = 0):
        self.gate_idx = gate_idx
        self.num_channels = num_channels
        self._sequence = list(sequence)
        self._blocked: set[int] = set()
        self.started_checkpoints: list[int] = []
        self.stopped_checkpoints: list[int] = []
        self.prioritized: list[tuple[int, int]] = []

    def poll_next(self) -> BufferOrEvent | None:
        return self._sequence.pop(0) if self._sequence else None

    def is_finished(self) -> bool:
        return not self._sequence

    def has_priority_event(self) -> bool:
        return False

    @property
    def channel_infos(self) -> list[InputChannelInfo]:
        return [InputChannelInfo(self.gate_idx, i) for i in range(self.num_channels)]

    @property
    def number_of_input_channels(self) -> int:
        return self.num_channels

    def block_consumption(self, channel_info: InputChannelInfo) -> None:
        self._blocked.add(channel_info.channel_idx)

    def resume_consumption(self, channel_info: InputChannelInfo) -> None:
        self._blocked.discard(channel_info.channel_idx)

    def get_blocked_channels(self) -> set[int]:
        return set(self._blocked)

    def checkpoint_started(self, barrier: CheckpointBarrier) -> None:
        self.started_checkpoints.append(barrier.id)

    def checkpoint_stopped(self, checkpoint_id: int) -> None:
        self.stopped_checkpoints.append(checkpoint_id)

    def convert_to_priority_event(self, channel_idx: int, sequence_number: int) -> None:
        self.prioritized.append((channel_idx, sequence_number))


# -- element factories (Flink's createBuffer / createBarrier / ... ) ------------------------------------------


def create_buffer(channel: int, size: int | None = None, gate: int = 0) -> BufferOrEvent:
    """A data buffer on ``channel``; without ``size`` each buffer gets a distinct size (Flink's sizeCounter),
    and its record identifies it."""
    if size is None:
        size = next(_size_counter)
    return BufferOrEvent(Buffer((("b", channel, size, next(_size_counter)),), size), InputChannelInfo(gate, channel))


def create_barrier(
    checkpoint_id: int, channel: int, timestamp: int = 0, options: CheckpointOptions | None = None, gate: int = 0
) -> BufferOrEvent:
    options = options if options is not None else CheckpointOptions.for_checkpoint_with_default_location()
    return BufferOrEvent(CheckpointBarrier(checkpoint_id, timestamp, options), InputChannelInfo(gate, channel))


def create_cancellation_barrier(checkpoint_id: int, channel: int, gate: int = 0) -> BufferOrEvent:
    return BufferOrEvent(CancelCheckpointMarker(checkpoint_id), InputChannelInfo(gate, channel))


def create_end_of_partition(channel: int, gate: int = 0) -> BufferOrEvent:
    return BufferOrEvent(END_OF_PARTITION, InputChannelInfo(gate, channel))


def check(expected: BufferOrEvent, present: BufferOrEvent | None) -> None:
    """Flink's ``check``: same kind, same content, same channel."""
    assert present is not None, f"expected {expected}, got nothing"
    assert expected.is_buffer == present.is_buffer
    assert expected.element == present.element
    assert expected.channel_info == present.channel_info


def create_aligned_checkpointed_input_gate(
    num_channels: int,
    sequence: Sequence[BufferOrEvent],
    to_notify: ValidatingCheckpointHandler | None = None,
    enable_checkpoints_after_tasks_finish: bool = True,
    clock: ManualClock | None = None,
) -> tuple[CheckpointedInputGate, MockInputGate, ValidatingCheckpointHandler]:
    """Flink's ``AlignedCheckpointsTest.createCheckpointedInputGate`` over a ``MockInputGate``."""
    to_notify = to_notify if to_notify is not None else ValidatingCheckpointHandler()
    clock = clock if clock is not None else ManualClock()
    gate = MockInputGate(num_channels, sequence)
    handler = SingleCheckpointBarrierHandler.aligned(
        "Testing",
        GateActionRouter([gate], to_notify),
        clock,
        num_channels,
        None,
        enable_checkpoints_after_tasks_finish,
    )
    return CheckpointedInputGate(gate, handler), gate, to_notify


def add_sequence(side: InputSide, output: list, sequence_numbers: dict, *sequence: BufferOrEvent) -> None:
    """Flink's ``UnalignedCheckpointsTest.addSequence``: deliver each element to its channel of a real gate
    (with its next sequence number and a zero backlog), then poll everything the operator can consume."""
    for boe in sequence:
        info = boe.channel_info
        seq = sequence_numbers.get(info, 0)
        sequence_numbers[info] = seq + 1
        side.on_element(info, boe.element, seq, backlog=0 if boe.is_buffer else None)
        while (polled := side.poll_next()) is not None:
            output.append(polled)
