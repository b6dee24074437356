"""The interface every input-side barrier handler implements, and the actions handlers emit: frozen values pushed,
synchronously and in order, into an injected sink (task-, gate- and channel-state-directed actions). Time comes
from an injected ``clock()`` and ``TimerService``, in milliseconds.

Mirrors Flink's ``CheckpointBarrierHandler`` and the callbacks of ``CheckpointableTask`` / ``CheckpointableInput``.
See docs/data-plane.md, "Barrier handlers and their actions".
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from barriersim.runtime.events import (
    CancelCheckpointMarker,
    CheckpointBarrier,
    CheckpointOptions,
    InputChannelInfo,
)
from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason
from barriersim.runtime.network.input.channel_state_persister import AddInputData
from barriersim.runtime.values import fast_init

# ---------------------------------------------------------------------------------------------------
# injected services
# ---------------------------------------------------------------------------------------------------

Clock = Callable[[], int]
"""Returns the current time in milliseconds (Flink's ``Clock.absoluteTimeMillis``)."""


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class TimerService(Protocol):
    """Registers ``callback`` to run once when time reaches ``at_ms``; the handle cancels it."""

    def register_timer(self, at_ms: int, callback: Callable[[], None]) -> Cancellable: ...


# ---------------------------------------------------------------------------------------------------
# metrics
# ---------------------------------------------------------------------------------------------------


@fast_init
@dataclass(frozen=True)
class CheckpointMetrics:
    """The input side's part of Flink's ``CheckpointMetricsBuilder`` for one checkpoint.

    ``alignment_duration_ms`` and ``bytes_processed_during_alignment`` are ``None`` while not yet known
    (an unaligned checkpoint is triggered on the first barrier, before alignment ends; Flink passes an
    uncompleted future); ``AllBarriersReceived`` carries the final values. ``bytes_persisted_during_alignment``
    is the in-flight input data captured for an unaligned checkpoint: handlers do not see it (they emit 0);
    ``InputSide.metrics(id)`` fills it in from the ``AddInputData`` actions (0 for aligned checkpoints).
    """

    checkpoint_id: int
    alignment_duration_ms: int | None = 0
    bytes_processed_during_alignment: int | None = 0
    checkpoint_start_delay_ms: int = 0
    bytes_persisted_during_alignment: int = 0
    unaligned: bool = False


# ---------------------------------------------------------------------------------------------------
# actions
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TriggerCheckpointOnBarrier:
    """Flink's ``CheckpointableTask.triggerCheckpointOnBarrier(metaData, options, metrics)``: the task
    snapshots its state now. ``options.is_unaligned_checkpoint`` tells aligned from unaligned."""

    checkpoint_id: int
    timestamp: int
    options: CheckpointOptions
    metrics: CheckpointMetrics

    @property
    def is_unaligned(self) -> bool:
        return self.options.is_unaligned_checkpoint


@dataclass(frozen=True)
class AbortCheckpointOnBarrier:
    """Flink's ``CheckpointableTask.abortCheckpointOnBarrier(checkpointId, cause)``."""

    checkpoint_id: int
    reason: CheckpointFailureReason


@dataclass(frozen=True)
class InitInputsCheckpoint:
    """Flink's ``SubtaskCheckpointCoordinator.initInputsCheckpoint(id, options)``: start the channel state
    writer for an unaligned checkpoint before any input data is added to it."""

    checkpoint_id: int
    options: CheckpointOptions


@dataclass(frozen=True)
class AllBarriersReceived:
    """Flink's ``getAllBarriersReceivedFuture(checkpointId)`` completing: every open channel delivered the
    barrier (or finished); carries the final alignment metrics."""

    checkpoint_id: int
    metrics: CheckpointMetrics


@fast_init
@dataclass(frozen=True)
class BlockConsumption:
    """Flink's ``CheckpointableInput.blockConsumption``: stop reading ``channel_info`` (aligned checkpoint)."""

    channel_info: InputChannelInfo


@fast_init
@dataclass(frozen=True)
class ResumeConsumption:
    """Flink's ``CheckpointableInput.resumeConsumption``."""

    channel_info: InputChannelInfo


@dataclass(frozen=True)
class CheckpointStarted:
    """Flink's ``CheckpointableInput.checkpointStarted(barrier)`` for every gate: channels start persisting
    their in-flight data (the unaligned ``barrier``)."""

    barrier: CheckpointBarrier


@dataclass(frozen=True)
class CheckpointStopped:
    """Flink's ``CheckpointableInput.checkpointStopped(cancelledCheckpointId)``: channels stop persisting."""

    checkpoint_id: int


@dataclass(frozen=True)
class ConvertToPriorityEvent:
    """Flink's ``CheckpointableInput.convertToPriorityEvent(channelIndex, sequenceNumber)``: the announced
    aligned barrier at ``sequence_number`` in ``channel_info`` overtakes the data queued before it."""

    channel_info: InputChannelInfo
    sequence_number: int


TaskAction = TriggerCheckpointOnBarrier | AbortCheckpointOnBarrier | InitInputsCheckpoint | AllBarriersReceived
GateAction = BlockConsumption | ResumeConsumption | CheckpointStarted | CheckpointStopped | ConvertToPriorityEvent
# the gate actions' types: the router applied them to the gates; whoever listens after it may skip them by type
GATE_ACTION_TYPES = frozenset(
    (BlockConsumption, ResumeConsumption, CheckpointStarted, CheckpointStopped, ConvertToPriorityEvent)
)
HandlerAction = TaskAction | GateAction | AddInputData
ActionSink = Callable[[HandlerAction], None]


# ---------------------------------------------------------------------------------------------------
# the abstract handler
# ---------------------------------------------------------------------------------------------------


class CheckpointBarrierHandler(abc.ABC):
    """Flink's abstract ``CheckpointBarrierHandler``.

    Subclasses implement the ``process_*`` methods, ``get_latest_checkpoint_id`` and
    ``is_checkpoint_pending``; this base keeps the alignment metrics (``mark_alignment_start``,
    ``mark_alignment_end``, ``reset_alignment``, ``add_processed_bytes``) and emits the two task
    notifications (``notify_checkpoint``, ``notify_abort``) the way Flink's base class does.
    """

    def __init__(self, sink: ActionSink, clock: Clock, enable_checkpoint_after_tasks_finished: bool = True) -> None:
        self._sink = sink
        self._clock = clock
        self._checkpoint_after_tasks_finished = enable_checkpoint_after_tasks_finished
        # alignment bookkeeping (Flink: startOfAlignmentTimestamp, latestAlignmentDurationNanos, ...)
        self._start_of_alignment_ms: int | None = None
        self._start_alignment_checkpoint_id = -1
        self._bytes_processed_during_alignment = 0
        self._latest_alignment_duration_ms: int | None = None
        self._latest_bytes_processed_during_alignment: int | None = None
        self._latest_checkpoint_start_delay_ms = 0

    # -- what the gate feeds in ----------------------------------------------------------------------

    @abc.abstractmethod
    def process_barrier(
        self, barrier: CheckpointBarrier, channel_info: InputChannelInfo, is_rpc_trigger: bool = False
    ) -> None:
        """A barrier was polled from ``channel_info`` (or, with ``is_rpc_trigger``, injected by an RPC
        trigger for a source input: the channel is then not blocked)."""

    @abc.abstractmethod
    def process_barrier_announcement(
        self, announced_barrier: CheckpointBarrier, sequence_number: int, channel_info: InputChannelInfo
    ) -> None:
        """An ``EventAnnouncement`` of an aligned, timeoutable barrier queued at ``sequence_number``."""

    @abc.abstractmethod
    def process_cancellation_barrier(self, marker: CancelCheckpointMarker, channel_info: InputChannelInfo) -> None: ...

    @abc.abstractmethod
    def process_end_of_partition(self, channel_info: InputChannelInfo) -> None: ...

    @abc.abstractmethod
    def get_latest_checkpoint_id(self) -> int:
        """The newest checkpoint id this handler has seen (-1 before any)."""

    @abc.abstractmethod
    def is_checkpoint_pending(self) -> bool: ...

    def close(self) -> None:  # noqa: B027 - optional, as in Flink
        """Release timers; the default does nothing."""

    @property
    def is_checkpoint_after_tasks_finished_enabled(self) -> bool:
        return self._checkpoint_after_tasks_finished

    # -- metrics (Flink's base-class bookkeeping) -------------------------------------------------------

    @property
    def clock(self) -> Clock:
        return self._clock

    def is_during_alignment(self) -> bool:
        return self._start_of_alignment_ms is not None

    def alignment_checkpoint_id(self) -> int | None:
        """The checkpoint whose alignment is running (its barrier arrived on some channels, not yet on all), or
        None: a task crashing ``mid_alignment`` is one for which this is the checkpoint named."""
        return self._start_alignment_checkpoint_id if self._start_of_alignment_ms is not None else None

    def add_processed_bytes(self, nbytes: int) -> None:
        """Bytes the operator consumed; counted while an alignment is in progress."""
        if self.is_during_alignment():
            self._bytes_processed_during_alignment += nbytes

    def get_alignment_duration_ms(self) -> int:
        """Flink's ``getAlignmentDurationNanos`` (in ms): the running duration during an alignment, else the
        latest completed alignment's duration, 0 if none completed since the last reset."""
        if self._start_of_alignment_ms is not None:
            return self._clock() - self._start_of_alignment_ms
        return self._latest_alignment_duration_ms or 0

    def get_bytes_processed_during_alignment(self) -> int | None:
        return self._latest_bytes_processed_during_alignment

    def get_checkpoint_start_delay_ms(self) -> int:
        """First barrier's arrival minus the barrier's creation timestamp (never negative)."""
        return self._latest_checkpoint_start_delay_ms

    def latest_metrics(self, checkpoint_id: int) -> CheckpointMetrics:
        """Metrics as Flink's ``notifyCheckpoint`` builds them: real values for the checkpoint whose
        alignment was measured, zeros for any other."""
        if checkpoint_id == self._start_alignment_checkpoint_id:
            return CheckpointMetrics(
                checkpoint_id,
                self._latest_alignment_duration_ms,
                self._latest_bytes_processed_during_alignment,
                self._latest_checkpoint_start_delay_ms,
            )
        return CheckpointMetrics(checkpoint_id, 0, 0, 0)

    def mark_alignment_start(self, checkpoint_id: int, checkpoint_creation_timestamp: int) -> None:
        now = self._clock()
        self._latest_checkpoint_start_delay_ms = max(0, now - checkpoint_creation_timestamp)
        self.reset_alignment()
        self._start_of_alignment_ms = now
        self._start_alignment_checkpoint_id = checkpoint_id

    def mark_alignment_start_and_end(self, checkpoint_id: int, checkpoint_creation_timestamp: int) -> None:
        self.mark_alignment_start(checkpoint_id, checkpoint_creation_timestamp)
        self._mark_alignment_end_with(0)

    def mark_alignment_end(self) -> None:
        start = self._start_of_alignment_ms
        self._mark_alignment_end_with(0 if start is None else self._clock() - start)

    def _mark_alignment_end_with(self, duration_ms: int) -> None:
        if duration_ms < 0:
            raise ValueError(f"negative alignment duration {duration_ms} ms")
        self._latest_alignment_duration_ms = duration_ms
        self._latest_bytes_processed_during_alignment = self._bytes_processed_during_alignment
        self._start_of_alignment_ms = None
        self._bytes_processed_during_alignment = 0

    def reset_alignment(self) -> None:
        self._mark_alignment_end_with(0)
        self._latest_alignment_duration_ms = None
        self._latest_bytes_processed_during_alignment = None

    # -- notifications --------------------------------------------------------------------------------

    def emit(self, action: HandlerAction) -> None:
        self._sink(action)

    def notify_checkpoint(self, barrier: CheckpointBarrier) -> None:
        """Flink's ``notifyCheckpoint``: tell the task to checkpoint on ``barrier``."""
        self.emit(
            TriggerCheckpointOnBarrier(barrier.id, barrier.timestamp, barrier.options, self._metrics_for(barrier))
        )

    def _metrics_for(self, barrier: CheckpointBarrier) -> CheckpointMetrics:
        return replace(self.latest_metrics(barrier.id), unaligned=barrier.options.is_unaligned_checkpoint)

    def notify_all_barriers_received(self, checkpoint_id: int, unaligned: bool = False) -> None:
        self.emit(AllBarriersReceived(checkpoint_id, replace(self.latest_metrics(checkpoint_id), unaligned=unaligned)))

    def notify_abort_on_cancellation_barrier(self, checkpoint_id: int) -> None:
        self.notify_abort(
            checkpoint_id, CheckpointException(CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER)
        )

    def notify_abort(self, checkpoint_id: int, cause: CheckpointException) -> None:
        self.emit(AbortCheckpointOnBarrier(checkpoint_id, cause.reason))
