"""Acknowledging, completing and aborting pending checkpoints.

How it works: docs/module-notes.md, section ``runtime/coordinator/completion.py``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.completed_store import INVALID_CHECKPOINT_ID
from barriersim.runtime.coordinator.failure_manager import EXCEEDED_CHECKPOINT_TOLERABLE_FAILURE_MESSAGE, FailureOutcome
from barriersim.runtime.coordinator.outcomes import AcknowledgeOutcome, CoordinatorError, DeclineOutcome
from barriersim.runtime.coordinator.pending_checkpoint import PendingCheckpoint, TaskAcknowledgeResult
from barriersim.runtime.coordinator.properties import CheckpointProperties, JobStatus
from barriersim.runtime.coordinator.shared_state_registry import SharedStateRegistryError
from barriersim.runtime.faults.mutations import PlantedBug, is_planted
from barriersim.runtime.events import CheckpointType
from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.storage.memory_storage import external_path


@dataclass(frozen=True)
class _Finalizing:
    """A checkpoint whose ``_metadata`` write is under way (the coordinator is held until it ends)."""

    checkpoint_id: int
    pending: PendingCheckpoint


class CheckpointCompletion:
    """The completion half of ``CheckpointCoordinator``."""

    def receive_acknowledge_message(self, message: m.AcknowledgeCheckpoint) -> AcknowledgeOutcome:
        if self.is_shutdown:
            return AcknowledgeOutcome.COORDINATOR_SHUTDOWN
        if message.job_id != self.job_id:
            return AcknowledgeOutcome.WRONG_JOB
        checkpoint_id = message.checkpoint_id
        pending = self.pending_checkpoints.get(checkpoint_id)
        if message.subtask_state is not None and (pending is None or not pending.props.is_savepoint):
            # Flink registers shared state whatever became of the checkpoint (not a savepoint's), so that a late
            # acknowledgement's new files are released by a later subsumption
            try:
                registered, discards = self.shared_state_registry.register_task_state(message.subtask_state,
                                                                                      checkpoint_id)
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
                self.stats.report_subtask_stats(checkpoint_id, str(message.attempt_id), now,
                                                state.state_size if state is not None else 0, message.metrics,
                                                state.checkpointed_size if state is not None else 0)
                if pending.is_fully_acknowledged():
                    self._complete_pending_checkpoint(pending)
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
            self._report_incomplete(message.attempt_id, checkpoint_id, message.metrics,
                                    state.state_size if state is not None else 0,
                                    state.checkpointed_size if state is not None else 0)
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
        return self._report_incomplete(message.attempt_id, message.checkpoint_id, message.metrics, message.state_size,
                                       message.checkpointed_size)

    def _report_incomplete(self, attempt: ExecutionAttemptID, checkpoint_id: int, metrics, state_size: int,
                           checkpointed_size: int) -> bool:
        """``reportIncompleteStats`` of a closed part's figures or a late acknowledgement's (the sizes its state
        says), if its subtask is one of the job's (Flink's ``PendingCheckpointStats`` knows the plan's vertices
        only); whether they were taken."""
        vertex = self._vertex_by_id.get(attempt.vertex_id)
        if vertex is None or not 0 <= attempt.subtask_index < vertex.parallelism:
            return False
        return self.stats.report_incomplete_stats(checkpoint_id, str(attempt), self._clock(), state_size,
                                                  checkpointed_size, metrics)

    def receive_decline_message(self, message: m.DeclineCheckpoint) -> DeclineOutcome:
        if self.is_shutdown:
            return DeclineOutcome.COORDINATOR_SHUTDOWN
        if message.job_id != self.job_id:
            raise CoordinatorError(
                f"{message!r}: received a decline for job {message.job_id} but this coordinator is for job {self.job_id}"
            )
        pending = self.pending_checkpoints.get(message.checkpoint_id)
        if pending is not None:
            if pending.is_disposed:
                raise CoordinatorError(f"{message!r}: checkpoint {message.checkpoint_id} is disposed but still pending")
            exception = message.exception
            if exception.checkpoint_id is None:
                exception = CheckpointException(exception.reason, message.checkpoint_id, exception.detail)
            self._abort_pending_checkpoint(pending, exception, message.attempt_id)
            return DeclineOutcome.ABORTED
        if message.checkpoint_id in self.recent_expired_checkpoints:
            return DeclineOutcome.LATE
        return DeclineOutcome.UNKNOWN_CHECKPOINT

    # ------------------------------------------------------------------------------------------
    # completing and aborting
    # ------------------------------------------------------------------------------------------

    def _complete_pending_checkpoint(self, pending: PendingCheckpoint) -> None:
        checkpoint_id = pending.checkpoint_id
        write_ms = 0.0
        if self.checkpoint_writer is not None and self.metadata_write_ms is not None:
            write_ms = self.metadata_write_ms([subtask for state in pending.operator_states.values()
                                              for subtask in state.subtask_states.values()])
        if write_ms > 0:
            # the write takes time: the coordinator is held until it has passed (``handle``); the _metadata appears
            # (atomically) when it ends, and the completion goes on then
            self._finalizing = _Finalizing(checkpoint_id, pending)
            self._timers.register_timer(
                self._clock() + max(1, round(write_ms)),
                lambda: self._deliver_timer(m.TimerFired(m.TimerKind.METADATA_WRITTEN, checkpoint_id)))
            return
        self._finalize(pending)

    def _on_metadata_written(self, checkpoint_id: int) -> None:
        finalizing = self._finalizing
        if finalizing is None or finalizing.checkpoint_id != checkpoint_id:
            return
        self._finalizing = None
        self._finalize(finalizing.pending)

    def _finalize(self, pending: PendingCheckpoint) -> None:
        """Flink's ``finalizeCheckpoint``: the ``_metadata`` is written (a failed write aborts the checkpoint), then
        the rest of the completion."""
        checkpoint_id = pending.checkpoint_id
        props = pending.props
        writer = self.checkpoint_writer
        try:
            completed = pending.finalize_checkpoint(
                self._clock(), None if writer is None else (lambda metadata: writer(metadata, props.is_savepoint)))
        except Exception as e:  # Flink's finalizeCheckpoint: the _metadata could not be written
            if not pending.is_disposed:
                self._abort_pending_checkpoint(pending, CheckpointException(
                    CheckpointFailureReason.FINALIZE_CHECKPOINT_FAILURE, checkpoint_id, f"{type(e).__name__}: {e}"), None)
            return
        self._finish_completion(pending, completed)

    def _finish_completion(self, pending: PendingCheckpoint, completed) -> None:
        """Flink's ``completePendingCheckpoint`` after ``finalizeCheckpoint``: the store and subsumption, the
        statistics, the notifications."""
        checkpoint_id = pending.checkpoint_id
        props = pending.props
        now = self._clock()
        self.pending_checkpoints.pop(checkpoint_id, None)
        if self.checkpoint_writer is None:
            self._emit(m.PersistCheckpoint(completed.metadata, props.is_savepoint))
        last_subsumed_id = INVALID_CHECKPOINT_ID
        if not props.is_savepoint:
            try:
                result = self.store.add_checkpoint_and_subsume_oldest_one(completed)
            except Exception as e:  # Flink's addCompletedCheckpointToStoreAndSubsumeOldest
                self._on_failed_storing(pending, f"{type(e).__name__}: {e}")
                return
            for subsumed in result.to_discard:
                self._discard_completed(subsumed.checkpoint_id, m.DiscardReason.SUBSUMED)
            last_subsumed_id = result.last_subsumed_checkpoint_id
            self.force_full_snapshot = False  # a full checkpoint (at least) completed: the next may be incremental
            self.shared_state_registry.checkpoint_completed(checkpoint_id)
            retained = self.store.get_all_checkpoints()
            if retained:  # Flink's store: after subsuming, release what only older checkpoints used
                self._release_shared_state(min(c.checkpoint_id for c in retained))
        self.failure_manager.handle_checkpoint_success(checkpoint_id)
        path = external_path(completed.external_pointer, props.is_savepoint)
        self.stats.report_completed_checkpoint(checkpoint_id, now, path)
        self._emit(m.TriggerRequestCompleted(pending.request_id, checkpoint_id))
        self.last_checkpoint_completion_relative_time = now
        # planted FLINK-10354: a savepoint commits the sinks' side effects, yet recovery never returns to it
        if not props.is_savepoint or props.is_synchronous or is_planted(PlantedBug.SAVEPOINT_COMMITS_OUTSIDE_STORE):
            self._completing = True
            try:
                self._drop_subsumed_checkpoints(checkpoint_id)
            finally:
                self._completing = False
            for task in pending.plan.tasks_to_commit_to:
                self._emit(m.NotifyCheckpointComplete(task, checkpoint_id, last_subsumed_id, completed.timestamp))
            for operator_id in self.operator_coordinators:  # Flink's sendAcknowledgeMessages: tasks, then coordinators
                self._emit(m.NotifyCoordinatorCheckpointComplete(operator_id, checkpoint_id))
        if props.is_synchronous:
            self._emit(m.StopJob(checkpoint_id, props.checkpoint_type is CheckpointType.SAVEPOINT_TERMINATE))
        self._execute_queued_request()

    def _discard_completed(self, checkpoint_id: int, reason: m.DiscardReason) -> None:
        """A completed checkpoint the store let go (subsumed, or at shutdown by its retention) is discarded, and its
        statistics say so (Flink's ``CompletedCheckpoint.markAsDiscarded``)."""
        self.stats.report_discarded_checkpoint(checkpoint_id)
        self._emit(m.DiscardCheckpoint(checkpoint_id, reason))

    def _on_failed_storing(self, pending: PendingCheckpoint, detail: str) -> None:
        """The completed checkpoint store could not take a finalized checkpoint: its data is discarded
        (``cleanCheckpointOnFailedStoring``), it fails as ``FINALIZE_CHECKPOINT_FAILURE`` (counted) and every task
        to commit to hears it aborted."""
        checkpoint_id = pending.checkpoint_id
        exception = CheckpointException(CheckpointFailureReason.FINALIZE_CHECKPOINT_FAILURE, checkpoint_id,
                                        f"could not add checkpoint {checkpoint_id} to the completed checkpoint store: {detail}")
        self._emit(m.DiscardCheckpoint(checkpoint_id, m.DiscardReason.ABORTED))
        self.stats.report_failed_checkpoint(checkpoint_id, self._clock(), exception.reason, str(exception))
        self._emit(m.TriggerRequestFailed(pending.request_id, checkpoint_id, exception.reason))
        outcome = self.failure_manager.handle_checkpoint_exception(pending.props, exception, checkpoint_id, None)
        self._on_failure_outcome(outcome, exception, None, pending.props)
        self._send_aborted_messages(pending)
        self._pending_checkpoint_ended(pending, exception)

    def _send_aborted_messages(self, pending: PendingCheckpoint) -> None:
        """Flink's ``sendAbortedMessages``: every task to commit to, then every operator coordinator, hears that
        the checkpoint was aborted."""
        latest_completed = self.store.get_latest_checkpoint_id()
        for task in pending.plan.tasks_to_commit_to:
            self._emit(m.NotifyCheckpointAborted(task, pending.checkpoint_id, latest_completed,
                                                 pending.checkpoint_timestamp))
        for operator_id in self.operator_coordinators:
            self._emit(m.NotifyCoordinatorCheckpointAborted(operator_id, pending.checkpoint_id))

    def _drop_subsumed_checkpoints(self, checkpoint_id: int) -> None:
        self.abort_pending_checkpoints(
            CheckpointException(CheckpointFailureReason.CHECKPOINT_SUBSUMED),
            lambda p: p.checkpoint_id < checkpoint_id and p.can_be_subsumed(),
        )

    def abort_pending_checkpoints(self, exception: CheckpointException,
                                  predicate: Callable[[PendingCheckpoint], bool] = lambda p: True) -> None:
        for pending in sorted(self.pending_checkpoints.values(), key=lambda p: p.checkpoint_id):
            if predicate(pending) and not pending.is_disposed:
                self._abort_pending_checkpoint(pending, exception, None)

    def _abort_pending_checkpoint(self, pending: PendingCheckpoint, exception: CheckpointException,
                                  failing_task: ExecutionAttemptID | None) -> None:
        if pending.is_disposed:
            return
        checkpoint_id = pending.checkpoint_id
        pending.abort(exception.reason)
        self.stats.report_failed_checkpoint(checkpoint_id, self._clock(), exception.reason, str(exception))
        self.pending_checkpoints.pop(checkpoint_id, None)
        self._emit(m.DiscardCheckpoint(checkpoint_id, m.DiscardReason.ABORTED))
        self._emit(m.TriggerRequestFailed(pending.request_id, checkpoint_id, exception.reason))
        outcome = self.failure_manager.handle_checkpoint_exception(pending.props, exception, checkpoint_id, failing_task)
        self._on_failure_outcome(outcome, exception, failing_task, pending.props)
        self._send_aborted_messages(pending)
        if pending.props.is_synchronous:
            self._on_synchronous_savepoint_failed(exception.reason)
        self._pending_checkpoint_ended(pending, exception)

    def _on_failure_outcome(self, outcome: FailureOutcome, exception: CheckpointException,
                            failing_task: ExecutionAttemptID | None,
                            props: CheckpointProperties | None = None) -> None:
        if outcome is not FailureOutcome.FAIL_JOB:
            return
        if props is not None and props.is_synchronous and failing_task is not None:
            message = f"stop-with-savepoint failed: {exception}"  # Flink fails the job with the exception itself
        else:
            message = EXCEEDED_CHECKPOINT_TOLERABLE_FAILURE_MESSAGE
        self._emit(m.FailJob(exception.reason, message, failing_task))

    def _on_synchronous_savepoint_failed(self, reason: CheckpointFailureReason) -> None:
        """Stop-with-savepoint failed while the job keeps running: periodic checkpoints resume."""
        if reason in (CheckpointFailureReason.CHECKPOINT_COORDINATOR_SUSPEND,
                      CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN):
            return  # the scheduler is being stopped on purpose
        if self.job_status is JobStatus.RUNNING and not self.is_shutdown:
            self.scheduler.start()
