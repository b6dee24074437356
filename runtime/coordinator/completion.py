"""Acknowledging, completing and aborting pending checkpoints: ``CheckpointCompletion``, a collaborator of
``CheckpointCoordinator`` (Flink's ``receiveAcknowledgeMessage`` / ``receiveDeclineMessage`` /
``completePendingCheckpoint`` / ``abortPendingCheckpoint``, with its ``CompletedCheckpointStore``,
``SharedStateRegistry`` and ``CheckpointFailureManager``). It owns the ``_metadata`` write under way, the
recently expired checkpoints and the time of the last completion; the pending checkpoints are the
coordinator's. docs/architecture.md ("The control plane") has the narrative."""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.completed_store import INVALID_CHECKPOINT_ID, StandaloneCompletedCheckpointStore
from barriersim.runtime.coordinator.failure_manager import (
    EXCEEDED_CHECKPOINT_TOLERABLE_FAILURE_MESSAGE,
    CheckpointFailureManager,
    FailureOutcome,
)
from barriersim.runtime.coordinator.id_counter import StandaloneCheckpointIDCounter
from barriersim.runtime.coordinator.outcomes import AcknowledgeOutcome, CoordinatorError, DeclineOutcome
from barriersim.runtime.coordinator.pending_checkpoint import (
    CompletedCheckpoint,
    PendingCheckpoint,
    TaskAcknowledgeResult,
)
from barriersim.runtime.coordinator.plan import JobVertexInfo
from barriersim.runtime.coordinator.properties import CheckpointProperties
from barriersim.runtime.coordinator.shared_state_registry import SharedStateRegistry, SharedStateRegistryError
from barriersim.runtime.coordinator.stats_tracker import CheckpointStatsTracker
from barriersim.runtime.event_timers import EventTimers
from barriersim.runtime.events import CheckpointType
from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason
from barriersim.runtime.faults.mutations import PlantedBug, is_planted
from barriersim.runtime.ids import ExecutionAttemptID, OperatorID
from barriersim.runtime.state.snapshot import CheckpointMetadata, OperatorSubtaskState
from barriersim.runtime.storage.memory_storage import external_path

NUM_GHOST_CHECKPOINT_IDS = 16  # Flink's: the recently expired checkpoints whose late messages are LATE


@dataclass(frozen=True)
class _Finalizing:
    """A checkpoint whose ``_metadata`` write is under way (the coordinator is held until it ends)."""

    checkpoint_id: int
    pending: PendingCheckpoint


class CheckpointCompletion:
    """A pending checkpoint's acknowledgements, declines, completion and abort (see the module)."""

    def __init__(
        self,
        job_id: str,
        vertices: Sequence[JobVertexInfo],
        *,
        pending: dict[int, PendingCheckpoint],
        store: StandaloneCompletedCheckpointStore,
        shared_state_registry: SharedStateRegistry,
        stats: CheckpointStatsTracker,
        failure_manager: CheckpointFailureManager,
        id_counter: StandaloneCheckpointIDCounter,
        operator_coordinators: tuple[OperatorID, ...],
        clock: Callable[[], int],
        timers: EventTimers,
        emit: Callable[[Any], None],
        checkpoint_writer: Callable[[CheckpointMetadata, bool], Any] | None,
        metadata_write_ms: Callable[[list[OperatorSubtaskState]], float] | None,
        min_pause_between_checkpoints: int,
        is_shutdown: Callable[[], bool],
        checkpoint_ended: Callable[[PendingCheckpoint, CheckpointException], None],
        execute_queued_request: Callable[[], None],
        synchronous_savepoint_failed: Callable[[CheckpointFailureReason], None],
    ) -> None:
        """``pending``: the coordinator's pending checkpoints (taken out here when they end); ``checkpoint_ended``:
        the triggering's (a checkpoint still being triggered fails its trigger); ``execute_queued_request``: the next
        queued request may start; ``synchronous_savepoint_failed``: a stop-with-savepoint failed."""
        self.job_id = job_id
        self._vertex_by_id = {v.vertex_id: v for v in vertices}
        self._pending = pending
        self._store = store
        self._registry = shared_state_registry
        self._stats = stats
        self._failure_manager = failure_manager
        self._id_counter = id_counter
        self._operator_coordinators = operator_coordinators
        self._clock = clock
        self._timers = timers
        self._emit = emit
        self._checkpoint_writer = checkpoint_writer
        self._metadata_write_ms = metadata_write_ms
        self._is_shutdown = is_shutdown
        self._checkpoint_ended = checkpoint_ended
        self._execute_queued_request = execute_queued_request
        self._synchronous_savepoint_failed = synchronous_savepoint_failed
        self.finalizing: _Finalizing | None = None  # the _metadata write under way: the coordinator waits for it
        self.completing = False  # subsumed checkpoints are being aborted: queued requests wait until it is done
        self.recent_expired_checkpoints: deque[int] = deque(maxlen=NUM_GHOST_CHECKPOINT_IDS)
        self.last_checkpoint_completion_relative_time = clock() - min_pause_between_checkpoints
        self.force_full_snapshot = False  # a restore of an unclaimed snapshot, until a checkpoint completes

    def receive_acknowledge_message(self, message: m.AcknowledgeCheckpoint) -> AcknowledgeOutcome:
        if self._is_shutdown():
            return AcknowledgeOutcome.COORDINATOR_SHUTDOWN
        if message.job_id != self.job_id:
            return AcknowledgeOutcome.WRONG_JOB
        checkpoint_id = message.checkpoint_id
        pending = self._pending.get(checkpoint_id)
        if message.subtask_state is not None and (pending is None or not pending.props.is_savepoint):
            # Flink registers shared state whatever became of the checkpoint (not a savepoint's), so that a late
            # acknowledgement's new files are released by a later subsumption
            try:
                registered, discards = self._registry.register_task_state(message.subtask_state, checkpoint_id)
            except SharedStateRegistryError as e:
                # Flink: registerSharedStates throws out of receiveAcknowledgeMessage and the JobMaster logs it; the
                # acknowledgement is lost (a pending checkpoint waits for it until it expires)
                self._emit(m.AcknowledgementRejected(message.attempt_id, checkpoint_id, str(e)))
                return AcknowledgeOutcome.REJECTED
            if discards:
                self._emit(m.DiscardSharedState(tuple(discards), checkpoint_id))
            if registered is not message.subtask_state:
                message = dataclasses.replace(message, subtask_state=registered)
        if pending is not None and not pending.is_disposed:
            now = self._clock()
            result = pending.acknowledge_task(message.attempt_id, message.subtask_state, message.metrics, now)
            if result is TaskAcknowledgeResult.SUCCESS:
                state = message.subtask_state
                self._stats.report_subtask_stats(
                    checkpoint_id,
                    str(message.attempt_id),
                    now,
                    state.state_size if state is not None else 0,
                    message.metrics,
                    state.checkpointed_size if state is not None else 0,
                )
                if pending.is_fully_acknowledged():
                    self.complete_pending_checkpoint(pending)
            elif result is not TaskAcknowledgeResult.DUPLICATE:
                self._discard_subtask_state(message)
            return AcknowledgeOutcome[result.name]
        if pending is not None:
            raise CoordinatorError(
                f"{message!r}: checkpoint {checkpoint_id} is disposed but still pending (job {self.job_id})"
            )
        # Flink 2.3: an acknowledgement of a checkpoint that is not pending reports its figures to the statistics
        # (reportCheckpointMetrics: a failed checkpoint takes them, not completed), then its state is discarded
        if message.metrics is not None:
            state = message.subtask_state
            self._report_incomplete(
                message.attempt_id,
                checkpoint_id,
                message.metrics,
                state.state_size if state is not None else 0,
                state.checkpointed_size if state is not None else 0,
            )
        self._discard_subtask_state(message)
        if checkpoint_id in self.recent_expired_checkpoints:
            return AcknowledgeOutcome.LATE
        return AcknowledgeOutcome.UNKNOWN_CHECKPOINT

    def _discard_subtask_state(self, message: m.AcknowledgeCheckpoint) -> None:
        if message.subtask_state is not None:
            self._emit(m.DiscardSubtaskState(message.attempt_id, message.checkpoint_id))

    def report_checkpoint_metrics(self, message: m.ReportCheckpointMetrics) -> bool:
        """Flink's ``reportCheckpointMetrics`` -> ``CheckpointStatsTracker.reportIncompleteStats``: a closed
        asynchronous part's figures join the checkpoint's statistics while it is pending or after it failed
        (whatever the attempt: Flink looks up no execution), as a subtask that did not acknowledge; whether they
        were taken."""
        if message.job_id != self.job_id:
            return False
        return self._report_incomplete(
            message.attempt_id, message.checkpoint_id, message.metrics, message.state_size, message.checkpointed_size
        )

    def _report_incomplete(
        self, attempt: ExecutionAttemptID, checkpoint_id: int, metrics: Any, state_size: int, checkpointed_size: int
    ) -> bool:
        """``reportIncompleteStats`` of a closed part's figures or a late acknowledgement's (the sizes its state
        says), if its subtask is one of the job's (Flink's ``PendingCheckpointStats`` knows the plan's vertices
        only); whether they were taken."""
        vertex = self._vertex_by_id.get(attempt.vertex_id)
        if vertex is None or not 0 <= attempt.subtask_index < vertex.parallelism:
            return False
        return self._stats.report_incomplete_stats(
            checkpoint_id, str(attempt), self._clock(), state_size, checkpointed_size, metrics
        )

    def receive_decline_message(self, message: m.DeclineCheckpoint) -> DeclineOutcome:
        if self._is_shutdown():
            return DeclineOutcome.COORDINATOR_SHUTDOWN
        if message.job_id != self.job_id:
            raise CoordinatorError(
                f"{message!r}: received a decline for job {message.job_id} "
                f"but this coordinator is for job {self.job_id}"
            )
        pending = self._pending.get(message.checkpoint_id)
        if pending is not None:
            if pending.is_disposed:
                raise CoordinatorError(f"{message!r}: checkpoint {message.checkpoint_id} is disposed but still pending")
            exception = message.exception
            if exception.checkpoint_id is None:
                exception = CheckpointException(exception.reason, message.checkpoint_id, exception.detail)
            self.abort_pending_checkpoint(pending, exception, message.attempt_id)
            return DeclineOutcome.ABORTED
        if message.checkpoint_id in self.recent_expired_checkpoints:
            return DeclineOutcome.LATE
        return DeclineOutcome.UNKNOWN_CHECKPOINT

    # ------------------------------------------------------------------------------------------
    # completing and aborting
    # ------------------------------------------------------------------------------------------

    def complete_pending_checkpoint(self, pending: PendingCheckpoint) -> None:
        checkpoint_id = pending.checkpoint_id
        write_ms = 0.0
        if self._checkpoint_writer is not None and self._metadata_write_ms is not None:
            write_ms = self._metadata_write_ms(
                [subtask for state in pending.operator_states.values() for subtask in state.subtask_states.values()]
            )
        if write_ms > 0:
            # the write takes time: the coordinator is held until it has passed (``handle``); the _metadata appears
            # (atomically) when it ends, and the completion goes on then
            self.finalizing = _Finalizing(checkpoint_id, pending)
            self._timers.start(
                self._clock() + max(1, round(write_ms)), m.TimerFired(m.TimerKind.METADATA_WRITTEN, checkpoint_id)
            )
            return
        self._finalize(pending)

    def metadata_written(self, checkpoint_id: int) -> None:
        finalizing = self.finalizing
        if finalizing is None or finalizing.checkpoint_id != checkpoint_id:
            return
        self.finalizing = None
        self._finalize(finalizing.pending)

    def _finalize(self, pending: PendingCheckpoint) -> None:
        """Flink's ``finalizeCheckpoint``: the ``_metadata`` is written (a failed write aborts the checkpoint), then
        the rest of the completion."""
        checkpoint_id = pending.checkpoint_id
        props = pending.props
        writer = self._checkpoint_writer
        try:
            completed = pending.finalize_checkpoint(
                self._clock(), None if writer is None else (lambda metadata: writer(metadata, props.is_savepoint))
            )
        except Exception as e:  # Flink's finalizeCheckpoint: the _metadata could not be written
            if not pending.is_disposed:
                self.abort_pending_checkpoint(
                    pending,
                    CheckpointException(
                        CheckpointFailureReason.FINALIZE_CHECKPOINT_FAILURE, checkpoint_id, f"{type(e).__name__}: {e}"
                    ),
                    None,
                )
            return
        self._finish_completion(pending, completed)

    def _finish_completion(self, pending: PendingCheckpoint, completed: CompletedCheckpoint) -> None:
        """Flink's ``completePendingCheckpoint`` after ``finalizeCheckpoint``: the store and subsumption, the
        statistics, the notifications."""
        checkpoint_id = pending.checkpoint_id
        props = pending.props
        now = self._clock()
        self._pending.pop(checkpoint_id, None)
        if self._checkpoint_writer is None:
            self._emit(m.PersistCheckpoint(completed.metadata, props.is_savepoint))
        last_subsumed_id = INVALID_CHECKPOINT_ID
        if not props.is_savepoint:
            try:
                result = self._store.add_checkpoint_and_subsume_oldest_one(completed)
            except Exception as e:  # Flink's addCompletedCheckpointToStoreAndSubsumeOldest
                self._on_failed_storing(pending, f"{type(e).__name__}: {e}")
                return
            for subsumed in result.to_discard:
                self.discard_completed(subsumed.checkpoint_id, m.DiscardReason.SUBSUMED)
            last_subsumed_id = result.last_subsumed_checkpoint_id
            self.force_full_snapshot = False  # a full checkpoint (at least) completed: the next may be incremental
            self._registry.checkpoint_completed(checkpoint_id)
            retained = self._store.get_all_checkpoints()
            if retained:  # Flink's store: after subsuming, release what only older checkpoints used
                self.release_shared_state(min(c.checkpoint_id for c in retained))
        self._failure_manager.handle_checkpoint_success(checkpoint_id)
        path = external_path(completed.external_pointer, props.is_savepoint)
        self._stats.report_completed_checkpoint(checkpoint_id, now, path)
        self._emit(m.TriggerRequestCompleted(pending.request_id, checkpoint_id))
        self.last_checkpoint_completion_relative_time = now
        # planted FLINK-10354: a savepoint commits the sinks' side effects, yet recovery never returns to it
        if not props.is_savepoint or props.is_synchronous or is_planted(PlantedBug.SAVEPOINT_COMMITS_OUTSIDE_STORE):
            self.completing = True
            try:
                self._drop_subsumed_checkpoints(checkpoint_id)
            finally:
                self.completing = False
            for task in pending.plan.tasks_to_commit_to:
                self._emit(m.NotifyCheckpointComplete(task, checkpoint_id, last_subsumed_id, completed.timestamp))
            for operator_id in self._operator_coordinators:  # Flink's sendAcknowledgeMessages: tasks, then coordinators
                self._emit(m.NotifyCoordinatorCheckpointComplete(operator_id, checkpoint_id))
        if props.is_synchronous:
            self._emit(m.StopJob(checkpoint_id, props.checkpoint_type is CheckpointType.SAVEPOINT_TERMINATE))
        self._execute_queued_request()

    def discard_completed(self, checkpoint_id: int, reason: m.DiscardReason) -> None:
        """A completed checkpoint the store let go (subsumed, or at shutdown by its retention) is discarded, and its
        statistics say so (Flink's ``CompletedCheckpoint.markAsDiscarded``)."""
        self._stats.report_discarded_checkpoint(checkpoint_id)
        self._emit(m.DiscardCheckpoint(checkpoint_id, reason))

    def _on_failed_storing(self, pending: PendingCheckpoint, detail: str) -> None:
        """The completed checkpoint store could not take a finalized checkpoint: its data is discarded
        (``cleanCheckpointOnFailedStoring``), it fails as ``FINALIZE_CHECKPOINT_FAILURE`` (counted) and every task
        to commit to hears it aborted."""
        checkpoint_id = pending.checkpoint_id
        exception = CheckpointException(
            CheckpointFailureReason.FINALIZE_CHECKPOINT_FAILURE,
            checkpoint_id,
            f"could not add checkpoint {checkpoint_id} to the completed checkpoint store: {detail}",
        )
        self._emit(m.DiscardCheckpoint(checkpoint_id, m.DiscardReason.ABORTED))
        self._stats.report_failed_checkpoint(checkpoint_id, self._clock(), exception.reason, str(exception))
        self._emit(m.TriggerRequestFailed(pending.request_id, checkpoint_id, exception.reason))
        outcome = self._failure_manager.handle_checkpoint_exception(pending.props, exception, checkpoint_id, None)
        self.on_failure_outcome(outcome, exception, None, pending.props)
        self._send_aborted_messages(pending)
        self._checkpoint_ended(pending, exception)

    def _send_aborted_messages(self, pending: PendingCheckpoint) -> None:
        """Flink's ``sendAbortedMessages``: every task to commit to, then every operator coordinator, hears that
        the checkpoint was aborted."""
        latest_completed = self._store.get_latest_checkpoint_id()
        for task in pending.plan.tasks_to_commit_to:
            self._emit(
                m.NotifyCheckpointAborted(task, pending.checkpoint_id, latest_completed, pending.checkpoint_timestamp)
            )
        for operator_id in self._operator_coordinators:
            self._emit(m.NotifyCoordinatorCheckpointAborted(operator_id, pending.checkpoint_id))

    def _drop_subsumed_checkpoints(self, checkpoint_id: int) -> None:
        self.abort_pending_checkpoints(
            CheckpointException(CheckpointFailureReason.CHECKPOINT_SUBSUMED),
            lambda p: p.checkpoint_id < checkpoint_id and p.can_be_subsumed(),
        )

    def abort_pending_checkpoints(
        self, exception: CheckpointException, predicate: Callable[[PendingCheckpoint], bool] = lambda p: True
    ) -> None:
        for pending in sorted(self._pending.values(), key=lambda p: p.checkpoint_id):
            if predicate(pending) and not pending.is_disposed:
                self.abort_pending_checkpoint(pending, exception, None)

    def abort_pending_checkpoint(
        self, pending: PendingCheckpoint, exception: CheckpointException, failing_task: ExecutionAttemptID | None
    ) -> None:
        if pending.is_disposed:
            return
        checkpoint_id = pending.checkpoint_id
        pending.abort(exception.reason)
        self._stats.report_failed_checkpoint(checkpoint_id, self._clock(), exception.reason, str(exception))
        self._pending.pop(checkpoint_id, None)
        self._emit(m.DiscardCheckpoint(checkpoint_id, m.DiscardReason.ABORTED))
        self._emit(m.TriggerRequestFailed(pending.request_id, checkpoint_id, exception.reason))
        outcome = self._failure_manager.handle_checkpoint_exception(
            pending.props, exception, checkpoint_id, failing_task
        )
        self.on_failure_outcome(outcome, exception, failing_task, pending.props)
        self._send_aborted_messages(pending)
        if pending.props.is_synchronous:
            self._synchronous_savepoint_failed(exception.reason)
        self._checkpoint_ended(pending, exception)

    def on_failure_outcome(
        self,
        outcome: FailureOutcome,
        exception: CheckpointException,
        failing_task: ExecutionAttemptID | None,
        props: CheckpointProperties | None = None,
    ) -> None:
        if outcome is not FailureOutcome.FAIL_JOB:
            return
        if props is not None and props.is_synchronous and failing_task is not None:
            message = f"stop-with-savepoint failed: {exception}"  # Flink fails the job with the exception itself
        else:
            message = EXCEEDED_CHECKPOINT_TOLERABLE_FAILURE_MESSAGE
        self._emit(m.FailJob(exception.reason, message, failing_task))

    def expire(self, checkpoint_id: int) -> None:
        """Its expiry timer fired: a checkpoint still pending is aborted as ``CHECKPOINT_EXPIRED``."""
        pending = self._pending.get(checkpoint_id)
        if pending is not None and not pending.is_disposed:
            self.recent_expired_checkpoints.append(checkpoint_id)
            self.abort_pending_checkpoint(
                pending, CheckpointException(CheckpointFailureReason.CHECKPOINT_EXPIRED, checkpoint_id), None
            )

    def release_shared_state(self, lowest_retained: int | None) -> None:
        """Discard the shared files no checkpoint from ``lowest_retained`` on uses (None: no checkpoint is kept)."""
        lowest = lowest_retained if lowest_retained is not None else self._id_counter.get() + 1
        handles = self._registry.unregister_unused_state(lowest)
        if handles:
            self._emit(m.DiscardSharedState(tuple(handles), lowest))
