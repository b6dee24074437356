"""Test doubles for the ports of Flink's ``UnalignedCheckpointsTest`` and ``AlternatingCheckpointsTest``: action sinks
that rebuild what Flink's mocks observe (``ValidatingCheckpointHandler``, ``RecordingChannelStateWriter``,
``ClockWithDelayedActions``, ``fan_out``), driving only ``InputSide``'s public API. See docs/testing.md, "Ports of
Flink's input-side tests".
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from barriersim.runtime.checkpointing.barrier_handler import (
    AbortCheckpointOnBarrier,
    AddInputData,
    AllBarriersReceived,
    InitInputsCheckpoint,
    TriggerCheckpointOnBarrier,
)
from barriersim.runtime.events import Buffer, CheckpointOptions, InputChannelInfo
from barriersim.runtime.failure_reason import CheckpointFailureReason


def fan_out(*sinks: Callable[[Any], None]) -> Callable[[Any], None]:
    def sink(action: Any) -> None:
        for s in sinks:
            s(action)

    return sink


class ValidatingCheckpointHandler:
    """Flink's ``ValidatingCheckpointHandler``; ``reset_expected_on_abort`` is the variant of
    ``UnalignedCheckpointsTest`` whose ``abortCheckpointOnBarrier`` sets the next expected id to -1."""

    def __init__(self, next_expected_checkpoint_id: int = -1, reset_expected_on_abort: bool = False):
        self.next_expected_checkpoint_id = next_expected_checkpoint_id
        self.reset_expected_on_abort = reset_expected_on_abort
        self.triggered_checkpoints: list[int] = []
        self.triggered_checkpoint_options: list[CheckpointOptions] = []
        self.triggered_checkpoint_counter = 0
        self.aborted_checkpoints: list[int] = []
        self.aborted_checkpoint_counter = 0
        self.last_canceled_checkpoint_id = -1
        self.failure_reason: CheckpointFailureReason | None = None
        # Flink keeps the (possibly not yet completed) futures of the last trigger's metrics
        self._last_trigger_id: int | None = None
        self.last_alignment_duration_ms: int | None = None
        self.last_bytes_processed_during_alignment: int | None = None
        self.on_abort: Callable[[int], None] | None = None

    def __call__(self, action: Any) -> None:
        if isinstance(action, TriggerCheckpointOnBarrier):
            self.trigger_checkpoint_on_barrier(action)
        elif isinstance(action, AbortCheckpointOnBarrier):
            self.abort_checkpoint_on_barrier(action.checkpoint_id, action.reason)
        elif isinstance(action, AllBarriersReceived) and action.checkpoint_id == self._last_trigger_id:
            if self.last_alignment_duration_ms is None:
                self.last_alignment_duration_ms = action.metrics.alignment_duration_ms
            if self.last_bytes_processed_during_alignment is None:
                self.last_bytes_processed_during_alignment = action.metrics.bytes_processed_during_alignment

    def trigger_checkpoint_on_barrier(self, action: TriggerCheckpointOnBarrier) -> None:
        if self.next_expected_checkpoint_id != -1:
            assert action.checkpoint_id == self.next_expected_checkpoint_id, (
                f"triggered checkpoint {action.checkpoint_id}, expected {self.next_expected_checkpoint_id}"
            )
        assert action.timestamp > 0, f"checkpoint {action.checkpoint_id} has timestamp {action.timestamp}"
        self.next_expected_checkpoint_id = action.checkpoint_id + 1
        self.triggered_checkpoint_counter += 1
        self._last_trigger_id = action.checkpoint_id
        self.last_alignment_duration_ms = action.metrics.alignment_duration_ms
        self.last_bytes_processed_during_alignment = action.metrics.bytes_processed_during_alignment
        if not action.options.is_unaligned_checkpoint:
            # Flink: Preconditions.checkCompletedNormally on both futures for aligned checkpoints
            assert self.last_alignment_duration_ms is not None
            assert self.last_bytes_processed_during_alignment is not None
        self.triggered_checkpoints.append(action.checkpoint_id)
        self.triggered_checkpoint_options.append(action.options)

    def abort_checkpoint_on_barrier(self, checkpoint_id: int, reason: CheckpointFailureReason) -> None:
        self.last_canceled_checkpoint_id = checkpoint_id
        self.failure_reason = reason
        self.aborted_checkpoint_counter += 1
        self.aborted_checkpoints.append(checkpoint_id)
        if self.reset_expected_on_abort:
            self.next_expected_checkpoint_id = -1
        if self.on_abort is not None:
            self.on_abort(checkpoint_id)


class RecordingChannelStateWriter:
    """Flink's ``RecordingChannelStateWriter`` (input side only)."""

    def __init__(self) -> None:
        self.last_started_checkpoint_id = -1
        self.added_input: list[tuple[InputChannelInfo, Buffer]] = []

    def __call__(self, action: Any) -> None:
        if isinstance(action, InitInputsCheckpoint):
            self.last_started_checkpoint_id = action.checkpoint_id
        elif isinstance(action, AddInputData):
            self.added_input.extend((action.channel_info, b) for b in action.buffers)

    def added_input_of(self, channel_info: InputChannelInfo) -> list[Buffer]:
        return [b for info, b in self.added_input if info == channel_info]

    def reset(self) -> None:
        self.last_started_checkpoint_id = -1
        self.added_input.clear()


@dataclass(order=True)
class _Callable:
    at_ms: int
    seq: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class _NotCancellable:
    def cancel(self) -> None:
        pass


class ClockWithDelayedActions:
    """Flink's ``AlternatingCheckpointsTest.ClockWithDelayedActions``: a manual clock that starts at 100 ms
    (barrier timestamps must be positive) and is also the timer service of the handler.

    ``cancellable=False`` is the variant of ``testNoActiveTimeoutAlignmentAfterClose`` whose handles do not
    unregister timers on cancel."""

    def __init__(self, start_ms: int = 100, cancellable: bool = True):
        self.now_ms = start_ms
        self._queue: list[_Callable] = []
        self._seq = itertools.count()
        self._cancellable = cancellable

    # Clock
    def __call__(self) -> int:
        return self.now_ms

    def relative_time_millis(self) -> int:
        return self.now_ms

    # TimerService
    def register_timer(self, at_ms: int, callback: Callable[[], None]):
        entry = _Callable(at_ms, next(self._seq), callback)
        heapq.heappush(self._queue, entry)
        return entry if self._cancellable else _NotCancellable()

    def advance_time(self, delta_ms: int) -> None:
        self.now_ms += delta_ms
        self.execute_callables()

    def advance_time_without_running_callables(self, delta_ms: int) -> None:
        self.now_ms += delta_ms

    def execute_callables(self) -> None:
        while self._queue and self._queue[0].at_ms <= self.now_ms:
            entry = heapq.heappop(self._queue)
            if not entry.cancelled:
                entry.callback()

    def pending(self) -> int:
        return sum(1 for e in self._queue if not e.cancelled)

    def next_due(self) -> int:
        """The time of the earliest live timer (only when ``pending()``)."""
        return min(e.at_ms for e in self._queue if not e.cancelled)


class ValidatingCheckpointInvokable:
    """``UnalignedCheckpointsTest.ValidatingCheckpointInvokable``: remembers the last triggered and the last
    aborted checkpoint id and counts triggers, without validating anything."""

    def __init__(self) -> None:
        self.triggered_checkpoint_id = 0
        self.total_triggered_checkpoints = 0
        self.aborted_checkpoint_id = 0
        self.abort_reasons: list[CheckpointFailureReason] = []

    def __call__(self, action: Any) -> None:
        if isinstance(action, TriggerCheckpointOnBarrier):
            self.triggered_checkpoint_id = action.checkpoint_id
            self.total_triggered_checkpoints += 1
        elif isinstance(action, AbortCheckpointOnBarrier):
            self.aborted_checkpoint_id = action.checkpoint_id
            self.abort_reasons.append(action.reason)
