"""The JobMaster's side of its checkpoint coordinator: it builds the coordinator of each JobManager generation and
carries out what the coordinator asks (triggers and notifications to the tasks, discards in the checkpoint storage,
the restore it decides, the results of trigger requests, ``FailJob``) and writes each checkpoint's ``_metadata``.

How it works: ``docs/modules.md``, ``runtime/job/coordinator_actions.py``.
"""

from __future__ import annotations

from typing import Any

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.checkpoint_coordinator import CheckpointCoordinator
from barriersim.runtime.coordinator.completed_store import DefaultCompletedCheckpointStore
from barriersim.runtime.coordinator.plan import vertices_from_job_graph
from barriersim.runtime.faults.fault_schedule import MessageKind, ProtocolPoint
from barriersim.runtime.job.actions import (
    NotifyCheckpointAborted,
    NotifyCheckpointComplete,
    TriggerCheckpoint,
    subtask_name,
)
from barriersim.runtime.state.snapshot import metadata_bytes_estimate
from barriersim.runtime.storage.atomic_file import WriteFault
from barriersim.runtime.storage.errors import CheckpointStorageError


class CoordinatorActions:
    """The coordinator's actions carried out by the JobMaster (a base class of ``JobMaster``; see the module)."""

    def _new_coordinator(self, store=None, first_attempt_number: int = 0) -> CheckpointCoordinator:
        if store is None:
            store = DefaultCompletedCheckpointStore(self.config.checkpointing.max_retained, self.storage,
                                                    on_error=self._storage_error)
        return CheckpointCoordinator(
            self.job_id, vertices_from_job_graph(self.graph), self.config.checkpointing.coordinator_configuration(),
            clock=self.clock, timer_service=_GenerationTimers(self, self.coordinator_generation),
            rng=self._coordinator_rng(), action_sink=self._on_coordinator_timer_action, tasks_running=False,
            completed_checkpoint_store=store, checkpoint_id_counter=self.id_counter,
            checkpoint_writer=self._write_metadata, first_attempt_number=first_attempt_number,
            metadata_write_ms=lambda states: self._cost.metadata_ms(
                metadata_bytes_estimate(states, self.config.checkpointing.memory_threshold_bytes)),
            claim_mode=self.config.checkpointing.recovery_claim_mode,
        )

    def _on_coordinator_timer_action(self, action: Any) -> None:
        """The coordinator's timer callback hands its actions over one by one; they are handled together once the
        callback returned (``_flush_to_sink``), as the one batch its call produced."""
        self._timer_actions.append(action)

    def _flush_to_sink(self) -> None:
        """Handle what a coordinator timer's callback produced, then hand the result to the driver's action sink."""
        while self._timer_actions:
            batch, self._timer_actions = self._timer_actions, []
            self._handle_coordinator(batch)
        actions = self._take()
        if actions:
            self._action_sink(actions)

    def _handle_coordinator(self, actions: list) -> None:
        """Carry out the coordinator's actions in order. A ``FailJob`` among them fails the job over only after the
        rest of them went out, as Flink's ``failJob`` is queued on the JobMaster's main thread while the coordinator's
        call goes on: a queued request the same call started has triggered its tasks before the failover cancels
        them, not after (a trigger of a checkpoint the failover already aborted, to a cancelled deployment)."""
        self._coordinator_calls += 1
        try:
            for action in actions:
                self._carry_out_coordinator_action(action)
        finally:
            self._coordinator_calls -= 1
        self._fail_over_queued()

    def _carry_out_coordinator_action(self, action: Any) -> None:
        self._trace("coordinator", type(action).__name__ + " " + str(getattr(action, "checkpoint_id", "")))
        if isinstance(action, m.TriggerCheckpointOnSources):
            if self.completed_in_epoch is not None:
                self._triggered_in_epoch[action.checkpoint_id] = self.epoch
            trigger_ms = round(self._cost.trigger_ms())  # the trigger path, before the RPCs leave
            for attempt in action.tasks:
                self._to_task(None, attempt, action.checkpoint_id,
                              TriggerCheckpoint(action.checkpoint_id, action.timestamp, action.options), trigger_ms)
        elif isinstance(action, m.NotifyCheckpointComplete):
            if not self._crash_point(subtask_name((action.task.vertex_id, action.task.subtask_index)),
                                     ProtocolPoint.AFTER_ACK_BEFORE_COMPLETION_NOTICE, action.checkpoint_id):
                self._to_task(MessageKind.NOTIFY_COMPLETE, action.task, action.checkpoint_id,
                              NotifyCheckpointComplete(action.checkpoint_id))
        elif isinstance(action, m.NotifyCheckpointAborted):
            self._to_task(MessageKind.NOTIFY_ABORTED, action.task, action.checkpoint_id,
                          NotifyCheckpointAborted(action.checkpoint_id, action.latest_completed_checkpoint_id))
        elif isinstance(action, m.DiscardCheckpoint):
            # a checkpoint an earlier JobManager completed (recovered, then subsumed): its statistics are that
            # coordinator's, so the run's report says it was discarded there (the current one marked its own)
            for stats in self.retired_stats:
                stats.report_discarded_checkpoint(action.checkpoint_id)
            try:
                self.storage.discard_checkpoint(action.checkpoint_id)
            except CheckpointStorageError as err:  # Flink's CheckpointsCleaner logs it; the job goes on
                self._storage_error(f"discarding checkpoint {action.checkpoint_id}: {err}")
        elif isinstance(action, m.DiscardSharedState):
            try:
                self.storage.discard_shared_state([h.key for h in action.handles])
            except CheckpointStorageError as err:  # as a failed discard of a checkpoint: the job goes on
                self._storage_error(f"discarding shared state: {err}")
        elif isinstance(action, m.AcknowledgementRejected):  # Flink's JobMaster logs it; the job goes on
            task = subtask_name((action.task.vertex_id, action.task.subtask_index))
            self._storage_error(f"checkpoint {action.checkpoint_id}: the acknowledgement of {task} was dropped: "
                                f"{action.detail}")
        elif isinstance(action, m.RestoreFrom):
            self._restore_from = action
        elif isinstance(action, m.TriggerRequestCompleted):
            op = self._operation_of_request.pop(action.request_id, None) if action.request_id else None
            if op is not None:
                op.status, op.checkpoint_id = "COMPLETED", action.checkpoint_id
                op.path = self._savepoint_paths.get(action.checkpoint_id)
        elif isinstance(action, m.TriggerRequestFailed):
            op = self._operation_of_request.pop(action.request_id, None) if action.request_id else None
            if op is not None:
                op.status, op.checkpoint_id, op.failure = "FAILED", action.checkpoint_id, action.reason.name
        elif isinstance(action, m.FailJob):
            self._queued_failures.append(action)

    def _fail_over_queued(self) -> None:
        """Fail the job over for each queued ``FailJob``, in order, once no coordinator call is being handled and no
        failover runs (a ``FailJob`` made during a failover, as a ``_metadata`` write that the failover ended and that
        failed, waits for its end; ``_failover`` calls this when done). One that finds the job ended is dropped, as
        Flink's ``DefaultExecutionGraph.failJob`` returns at once for a job that is failing or ended."""
        while self._queued_failures and not self._coordinator_calls and not self._failing_over:
            action = self._queued_failures.pop(0)
            if self.outcome is not None:
                continue
            failing = action.failing_task
            name = subtask_name((failing.vertex_id, failing.subtask_index)) if failing else "coordinator"
            self._failover(name, action.reason.name)

    def _write_metadata(self, metadata, is_savepoint: bool):
        """The coordinator's ``checkpoint_writer``: write ``_metadata`` to the checkpoint storage while the
        coordinator finalizes the checkpoint; a failure (``FailStorageWrite`` without a task) raises into the
        coordinator, which aborts the checkpoint as ``FINALIZE_CHECKPOINT_FAILURE``."""
        cid = metadata.checkpoint_id
        self._trace("coordinator", "PersistCheckpoint ")
        storage = self.savepoint_storage if is_savepoint else self.storage
        if self.fault_log.fails_storage_write(cid, self.job_ms()):
            storage.fail_next_write(WriteFault.FAIL_BEFORE_WRITE)
        try:
            location = storage.persist_checkpoint(metadata, is_savepoint=is_savepoint)
        except Exception as err:
            self._trace("storage-failed", f"{cid} {type(err).__name__}")
            self.storage_errors.append(f"{cid}: {type(err).__name__}: {err}")
            raise
        if is_savepoint:
            self._savepoint_paths[cid] = location.external_pointer
            self._savepoint_metadata[cid] = metadata
        if self.completed_in_epoch is not None and not is_savepoint:
            self.completed_in_epoch[cid] = (self._triggered_in_epoch.pop(cid, self.epoch), metadata)
        return location


class _GenerationTimers:
    """The driver's timer service for one coordinator: the timers of a coordinator that crashed never fire, and
    what a timer causes goes to the driver's action sink."""

    def __init__(self, job_master: CoordinatorActions, generation: int):
        self._job_master = job_master
        self._generation = generation

    def register_timer(self, at_ms: int, callback):
        job_master, generation = self._job_master, self._generation

        def fire() -> None:
            if generation == job_master.coordinator_generation:
                callback()
                job_master._flush_to_sink()

        return job_master._timer_service.register_timer(at_ms, fire)
