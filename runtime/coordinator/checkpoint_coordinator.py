"""The checkpoint coordinator: assembles the small parts of this package into Flink's coordinator.

How this works: sans-IO. ``handle(event)`` takes one event (``messages.py``) and returns the actions to carry out,
in order. Time is the injected ``clock()`` (ms); timers (checkpoint expiry, the periodic trigger) are registered
on the injected ``TimerService``; when one fires the coordinator handles ``TimerFired`` and hands the resulting
actions to the injected ``action_sink`` (a driver may also deliver ``TimerFired`` to ``handle`` itself).
Randomness (the periodic trigger's initial delay) comes from the injected ``random.Random``.

A trigger request goes through the ``CheckpointRequestDecider`` (queue, max concurrent, min pause); when it runs,
the ``DefaultCheckpointPlanCalculator`` picks the tasks, the ``StandaloneCheckpointIDCounter`` the id, master
hooks are snapshotted, an expiry timer is registered and ``TriggerCheckpointOnSources`` is emitted. Each
``AcknowledgeCheckpoint`` goes to its ``PendingCheckpoint``; the last one completes it: ``PersistCheckpoint``, the
``StandaloneCompletedCheckpointStore`` subsumes older checkpoints (``DiscardCheckpoint``), older pending
checkpoints are aborted as subsumed, and every task to commit to gets ``NotifyCheckpointComplete`` (savepoints,
except synchronous ones, notify nobody and stay out of the store, as in recent Flink). A decline, expiry,
failover or suspension aborts the pending checkpoint: every task to commit to gets one
``NotifyCheckpointAborted``, the ``CheckpointFailureManager`` counts the failure and may emit ``FailJob``.
Late or unknown messages are handled as Flink does: acknowledgements for unknown or ended checkpoints have their
state discarded (``DiscardSubtaskState``), declines for them are ignored. Mirrors Flink's
``CheckpointCoordinator`` (and ``CheckpointCoordinatorDeActivator`` for job status changes).
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any, Callable, Sequence

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.configuration import (  # noqa: F401 (re-exported)
    NO_PERIODIC_CHECKPOINTS,
    CheckpointCoordinatorConfiguration,
)
from barriersim.runtime.coordinator.completed_store import INVALID_CHECKPOINT_ID, StandaloneCompletedCheckpointStore
from barriersim.runtime.coordinator.failure_manager import (
    EXCEEDED_CHECKPOINT_TOLERABLE_FAILURE_MESSAGE,
    UNKNOWN_CHECKPOINT_ID,
    CheckpointFailureManager,
    FailureOutcome,
)
from barriersim.runtime.coordinator.id_counter import StandaloneCheckpointIDCounter
from barriersim.runtime.coordinator.master_hooks import (
    MasterHookError,
    MasterTriggerRestoreHook,
    close_hooks,
    trigger_hook,
    validate_hook,
)
from barriersim.runtime.coordinator.outcomes import AcknowledgeOutcome, DeclineOutcome
from barriersim.runtime.coordinator.pending_checkpoint import CompletedCheckpoint, PendingCheckpoint, TaskAcknowledgeResult
from barriersim.runtime.coordinator.periodic_scheduler import PeriodicScheduler
from barriersim.runtime.coordinator.plan import DefaultCheckpointPlanCalculator, Execution, ExecutionState, JobVertexInfo
from barriersim.runtime.coordinator.properties import CheckpointProperties, JobStatus
from barriersim.runtime.coordinator.request_decider import CheckpointRequestDecider, CheckpointTriggerRequest
from barriersim.runtime.coordinator.restore import CoordinatorRestoreMixin
from barriersim.runtime.coordinator.stats_tracker import CheckpointStatsTracker
from barriersim.runtime.events import CheckpointOptions, CheckpointType
from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason
from barriersim.runtime.ids import ExecutionAttemptID, JobVertexID, OperatorID

NUM_GHOST_CHECKPOINT_IDS = 16


class CoordinatorError(Exception):
    """An event the coordinator cannot accept (naming the event and the coordinator's state)."""


class CheckpointCoordinator(CoordinatorRestoreMixin):
    def __init__(
        self,
        job_id: str,
        vertices: Sequence[JobVertexInfo],
        config: CheckpointCoordinatorConfiguration,
        *,
        clock: Callable[[], int],
        timer_service,
        rng: random.Random,
        action_sink: Callable[[Any], None] | None = None,
        master_hooks: Sequence[MasterTriggerRestoreHook] = (),
        operator_coordinators: Sequence[OperatorID] = (),
        completed_checkpoint_store: StandaloneCompletedCheckpointStore | None = None,
        checkpoint_id_counter: StandaloneCheckpointIDCounter | None = None,
        tasks_running: bool = True,
    ):
        self.job_id = job_id
        self.vertices = tuple(vertices)
        self.config = config
        self._clock = clock
        self._timers = timer_service
        self._sink = action_sink
        self.master_hooks: dict[str, MasterTriggerRestoreHook] = {}
        for hook in master_hooks:
            if not self.add_master_hook(hook):
                raise CoordinatorError(f"master hook {hook.identifier!r} registered twice")
        self._vertex_by_id = {v.vertex_id: v for v in self.vertices}
        self._vertex_of_operator = {op: v for v in self.vertices for op in v.operators}
        for op in operator_coordinators:
            if op not in self._vertex_of_operator:
                raise CoordinatorError(f"operator coordinator for unknown operator {op!r}")
        self.operator_coordinators = tuple(operator_coordinators)
        self.checkpoint_properties = CheckpointProperties.for_checkpoint(config.retention_policy)
        self.plan_calculator = DefaultCheckpointPlanCalculator(self.vertices, config.allow_checkpoints_after_tasks_finished)
        self.store = completed_checkpoint_store or StandaloneCompletedCheckpointStore(config.max_retained_checkpoints)
        self.id_counter = checkpoint_id_counter or StandaloneCheckpointIDCounter()
        self.id_counter.start()
        self.failure_manager = CheckpointFailureManager(config.tolerable_checkpoint_failure_number)
        self.stats = CheckpointStatsTracker()
        self.pending_checkpoints: dict[int, PendingCheckpoint] = {}
        self.recent_expired_checkpoints: deque[int] = deque(maxlen=NUM_GHOST_CHECKPOINT_IDS)
        self.last_checkpoint_completion_relative_time = clock() - config.min_pause_between_checkpoints
        self.shutdown_status: JobStatus | None = None
        self.job_status = JobStatus.CREATED
        self.executions: dict[tuple[JobVertexID, int], Execution] = {}
        state = ExecutionState.RUNNING if tasks_running else ExecutionState.CREATED
        for v in self.vertices:
            for i in range(v.parallelism):
                self.executions[(v.vertex_id, i)] = Execution(ExecutionAttemptID(v.vertex_id, i, 0), state)
        self._out: list[Any] = []
        self._completing = False
        self._executing_queue = False
        self._execute_queue_again = False
        self.decider = CheckpointRequestDecider(
            config.max_concurrent_checkpoints,
            self._reschedule_trigger,
            clock,
            config.min_pause_between_checkpoints,
            lambda: len(self.pending_checkpoints),
            lambda: 0,
            config.max_queued_requests,
            self._fail_request,
        )
        self.scheduler = PeriodicScheduler(
            config.checkpoint_interval, config.min_pause_between_checkpoints, rng, self._register_periodic
        )

    # ------------------------------------------------------------------------------------------
    # sans-IO entry points
    # ------------------------------------------------------------------------------------------

    def handle(self, event: m.CoordinatorEvent) -> list:
        if isinstance(event, m.TriggerRequest):
            self.trigger_checkpoint(event)
        elif isinstance(event, m.AcknowledgeCheckpoint):
            self.receive_acknowledge_message(event)
        elif isinstance(event, m.DeclineCheckpoint):
            self.receive_decline_message(event)
        elif isinstance(event, m.AcknowledgeCoordinatorState):
            self.receive_coordinator_state(event)
        elif isinstance(event, m.TimerFired):
            self._on_timer(event)
        elif isinstance(event, m.TaskRunning):
            self._set_execution_state(event.attempt_id, ExecutionState.RUNNING)
        elif isinstance(event, m.TaskFinished):
            self._set_execution_state(event.attempt_id, ExecutionState.FINISHED)
        elif isinstance(event, m.TaskFailed):
            self.on_task_failed(event)
        elif isinstance(event, m.JobStatusChanged):
            self.job_status_changes(event.status)
        else:
            raise CoordinatorError(f"unknown event {event!r} (job {self.job_id}, {len(self.pending_checkpoints)} pending)")
        return self.drain_actions()

    def drain_actions(self) -> list:
        out, self._out = self._out, []
        return out

    def _emit(self, action: Any) -> None:
        self._out.append(action)

    def _deliver_timer(self, event: m.TimerFired) -> None:
        actions = self.handle(event)
        if self._sink is not None:
            for action in actions:
                self._sink(action)

    def add_master_hook(self, hook: MasterTriggerRestoreHook) -> bool:
        """Flink's ``addMasterHook``: False if a hook with that identifier is already registered."""
        validate_hook(hook)
        if hook.identifier in self.master_hooks:
            return False
        self.master_hooks[hook.identifier] = hook
        return True

    # ------------------------------------------------------------------------------------------
    # queries
    # ------------------------------------------------------------------------------------------

    @property
    def number_of_pending_checkpoints(self) -> int:
        return len(self.pending_checkpoints)

    @property
    def number_of_retained_successful_checkpoints(self) -> int:
        return self.store.number_of_retained_checkpoints

    @property
    def is_periodic_checkpointing_started(self) -> bool:
        return self.scheduler.running

    @property
    def is_shutdown(self) -> bool:
        return self.shutdown_status is not None

    def current_attempt(self, vertex_id: JobVertexID, subtask_index: int) -> ExecutionAttemptID:
        return self.executions[(vertex_id, subtask_index)].attempt_id

    # ------------------------------------------------------------------------------------------
    # triggering
    # ------------------------------------------------------------------------------------------

    def trigger_checkpoint(self, request: m.TriggerRequest) -> None:
        """Flink's ``triggerCheckpoint`` / ``triggerSavepoint`` / ``triggerSynchronousSavepoint``."""
        props = CheckpointProperties.for_type(request.checkpoint_type, self.checkpoint_properties, request.forced)
        if props.is_synchronous:
            # stop-with-savepoint: the scheduler stops the periodic trigger first (aborting pending checkpoints)
            self.stop_checkpoint_scheduler()
        self._submit(CheckpointTriggerRequest(props, request.is_periodic, self._clock(), request.request_id))

    def _submit(self, request: CheckpointTriggerRequest) -> None:
        chosen = self.decider.choose_request_to_execute(request, False, self.last_checkpoint_completion_relative_time)
        if chosen is not None:
            self._start_triggering_checkpoint(chosen)

    def _execute_queued_request(self) -> None:
        """Flink runs the next queued request asynchronously; here a trigger that fails at once asks for the next
        request from inside this call, so the nesting is flattened into a loop (a full queue of 1000 requests
        that all fail must not recurse 1000 deep)."""
        if self.is_shutdown or self._completing:
            return  # while completing, queued requests wait until the notifications are out (Flink: async)
        if self._executing_queue:
            self._execute_queue_again = True
            return
        self._executing_queue = True
        try:
            while True:
                self._execute_queue_again = False
                chosen = self.decider.choose_queued_request_to_execute(False, self.last_checkpoint_completion_relative_time)
                if chosen is not None:
                    self._start_triggering_checkpoint(chosen)
                if not self._execute_queue_again or self.is_shutdown or self._completing:
                    break
        finally:
            self._executing_queue = False

    def _pre_check_global_state(self, is_periodic: bool) -> None:
        if self.is_shutdown:
            raise CheckpointException(CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN)
        if is_periodic and not self.scheduler.running:
            raise CheckpointException(CheckpointFailureReason.PERIODIC_SCHEDULER_SHUTDOWN)

    def _options_for(self, checkpoint_type: CheckpointType) -> CheckpointOptions:
        base = self.config.checkpoint_options
        if checkpoint_type is CheckpointType.CHECKPOINT:
            return base
        if not base.is_exactly_once_mode:
            return CheckpointOptions.not_exactly_once(checkpoint_type)
        return CheckpointOptions.aligned(checkpoint_type)

    def _start_triggering_checkpoint(self, request: CheckpointTriggerRequest) -> None:
        try:
            self._pre_check_global_state(request.is_periodic)
            plan = self.plan_calculator.calculate_checkpoint_plan(self.executions)
        except CheckpointException as e:
            self._on_trigger_failure(request, None, e)
            return
        try:
            checkpoint_id = self.id_counter.get_and_increment()
        except Exception as e:  # e.g. an HA counter that cannot be reached: Flink's TRIGGER_CHECKPOINT_FAILURE
            self._on_trigger_failure(
                request, None, CheckpointException(CheckpointFailureReason.TRIGGER_CHECKPOINT_FAILURE, detail=str(e))
            )
            return
        timestamp = self._clock()
        vertex_of_task = {
            e.attempt_id: self._vertex_by_id[key[0]] for key, e in self.executions.items()
        }
        pending = PendingCheckpoint(
            self.job_id, checkpoint_id, timestamp, plan, vertex_of_task, request.props,
            tuple(self.master_hooks), self.operator_coordinators, self.vertices, request.request_id,
        )
        self.pending_checkpoints[checkpoint_id] = pending
        self.stats.report_pending_checkpoint(
            checkpoint_id, timestamp, request.props.is_savepoint, request.props.checkpoint_type.value,
            len(self.executions),
        )
        for finished in plan.finished_tasks:  # finished tasks count as acknowledged (FLIP-147)
            self.stats.report_subtask_stats(checkpoint_id, str(finished), timestamp, 0)
        handle = self._timers.register_timer(
            timestamp + self.config.checkpoint_timeout,
            lambda: self._deliver_timer(m.TimerFired(m.TimerKind.CHECKPOINT_TIMEOUT, checkpoint_id)),
        )
        if not pending.set_canceller_handle(handle):
            handle.cancel()
        try:
            for hook in self.master_hooks.values():
                pending.acknowledge_master_state(hook.identifier, trigger_hook(hook, checkpoint_id, timestamp))
        except MasterHookError as e:
            self._on_trigger_failure(
                request, pending, CheckpointException(CheckpointFailureReason.TRIGGER_CHECKPOINT_FAILURE, checkpoint_id, str(e))
            )
            return
        self._emit(m.TriggerCheckpointOnSources(
            checkpoint_id, timestamp, self._options_for(request.props.checkpoint_type), plan.tasks_to_trigger
        ))
        self._execute_queued_request()

    def _on_trigger_failure(self, request: CheckpointTriggerRequest, pending: PendingCheckpoint | None,
                            exception: CheckpointException) -> None:
        if pending is not None and not pending.is_disposed:
            self._abort_pending_checkpoint(pending, exception, None)
            return
        self.stats.report_failed_checkpoint_without_in_progress()
        self._fail_request(request, exception.reason)
        outcome = self.failure_manager.handle_checkpoint_exception(request.props, exception, UNKNOWN_CHECKPOINT_ID, None)
        self._on_failure_outcome(outcome, exception, None)
        if request.props.is_synchronous:
            self._on_synchronous_savepoint_failed(exception.reason)
        self._execute_queued_request()

    def _fail_request(self, request: CheckpointTriggerRequest, reason: CheckpointFailureReason) -> None:
        self._emit(m.TriggerRequestFailed(request.request_id, None, reason))

    # ------------------------------------------------------------------------------------------
    # periodic scheduling (Flink's startCheckpointScheduler / stopCheckpointScheduler)
    # ------------------------------------------------------------------------------------------

    def _register_periodic(self, delay: int, generation: int):
        return self._timers.register_timer(
            self._clock() + delay,
            lambda: self._deliver_timer(m.TimerFired(m.TimerKind.PERIODIC_TRIGGER, generation)),
        )

    def _reschedule_trigger(self, delay: int) -> None:
        self.scheduler.reschedule(delay)

    def start_checkpoint_scheduler(self) -> bool:
        if self.is_shutdown:
            raise CoordinatorError(f"start the checkpoint scheduler: coordinator of job {self.job_id} is shut down")
        # make sure all prior timers are cancelled
        self.stop_checkpoint_scheduler()
        return self.scheduler.start()

    def stop_checkpoint_scheduler(self) -> None:
        self.scheduler.stop()
        self.abort_pending_and_queued_checkpoints(
            CheckpointException(CheckpointFailureReason.CHECKPOINT_COORDINATOR_SUSPEND)
        )

    def abort_pending_and_queued_checkpoints(self, exception: CheckpointException) -> None:
        self.decider.abort_all(exception.reason)
        self.abort_pending_checkpoints(exception)

    def _on_timer(self, event: m.TimerFired) -> None:
        if event.kind is m.TimerKind.PERIODIC_TRIGGER:
            if self.scheduler.fired(event.token):
                self._submit(CheckpointTriggerRequest(self.checkpoint_properties, True, self._clock(), None))
            return
        pending = self.pending_checkpoints.get(event.token)
        if pending is not None and not pending.is_disposed:
            self.recent_expired_checkpoints.append(event.token)
            self._abort_pending_checkpoint(
                pending, CheckpointException(CheckpointFailureReason.CHECKPOINT_EXPIRED, event.token), None
            )

    # ------------------------------------------------------------------------------------------
    # messages from tasks
    # ------------------------------------------------------------------------------------------

    def receive_acknowledge_message(self, message: m.AcknowledgeCheckpoint) -> AcknowledgeOutcome:
        if self.is_shutdown:
            return AcknowledgeOutcome.COORDINATOR_SHUTDOWN
        if message.job_id != self.job_id:
            return AcknowledgeOutcome.WRONG_JOB
        checkpoint_id = message.checkpoint_id
        pending = self.pending_checkpoints.get(checkpoint_id)
        if pending is not None and not pending.is_disposed:
            now = self._clock()
            result = pending.acknowledge_task(message.attempt_id, message.subtask_state, message.metrics, now)
            if result is TaskAcknowledgeResult.SUCCESS:
                size = message.subtask_state.state_size if message.subtask_state is not None else 0
                self.stats.report_subtask_stats(checkpoint_id, str(message.attempt_id), now, size, message.metrics)
                if pending.is_fully_acknowledged():
                    self._complete_pending_checkpoint(pending)
            elif result is not TaskAcknowledgeResult.DUPLICATE:
                self._discard_subtask_state(message)
            return AcknowledgeOutcome[result.name]
        if pending is not None:
            raise CoordinatorError(
                f"{message!r}: checkpoint {checkpoint_id} is disposed but still pending (job {self.job_id})"
            )
        self._discard_subtask_state(message)
        if checkpoint_id in self.recent_expired_checkpoints:
            return AcknowledgeOutcome.LATE
        return AcknowledgeOutcome.UNKNOWN_CHECKPOINT

    def _discard_subtask_state(self, message: m.AcknowledgeCheckpoint) -> None:
        if message.subtask_state is not None:
            self._emit(m.DiscardSubtaskState(message.attempt_id, message.checkpoint_id))

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

    def receive_coordinator_state(self, message: m.AcknowledgeCoordinatorState) -> AcknowledgeOutcome:
        pending = self.pending_checkpoints.get(message.checkpoint_id)
        if pending is None or pending.is_disposed:
            return AcknowledgeOutcome.UNKNOWN_CHECKPOINT
        vertex = self._vertex_of_operator.get(message.operator_id)
        if vertex is None:
            return AcknowledgeOutcome.UNKNOWN
        result = pending.acknowledge_coordinator_state(vertex, message.operator_id, message.state)
        if result is TaskAcknowledgeResult.SUCCESS and pending.is_fully_acknowledged():
            self._complete_pending_checkpoint(pending)
        return AcknowledgeOutcome[result.name]

    # ------------------------------------------------------------------------------------------
    # completing and aborting
    # ------------------------------------------------------------------------------------------

    def _complete_pending_checkpoint(self, pending: PendingCheckpoint) -> None:
        checkpoint_id = pending.checkpoint_id
        props = pending.props
        now = self._clock()
        completed = pending.finalize_checkpoint(now)
        self.failure_manager.handle_checkpoint_success(checkpoint_id)
        self.pending_checkpoints.pop(checkpoint_id, None)
        self._emit(m.PersistCheckpoint(completed.metadata, props.is_savepoint))
        last_subsumed_id = INVALID_CHECKPOINT_ID
        if not props.is_savepoint:
            result = self.store.add_checkpoint_and_subsume_oldest_one(completed)
            for subsumed in result.to_discard:
                self._emit(m.DiscardCheckpoint(subsumed.checkpoint_id, m.DiscardReason.SUBSUMED))
            last_subsumed_id = result.last_subsumed_checkpoint_id
        self.stats.report_completed_checkpoint(checkpoint_id, now)
        self._emit(m.TriggerRequestCompleted(pending.request_id, checkpoint_id))
        self.last_checkpoint_completion_relative_time = now
        if not props.is_savepoint or props.is_synchronous:
            self._completing = True
            try:
                self._drop_subsumed_checkpoints(checkpoint_id)
            finally:
                self._completing = False
            for task in pending.plan.tasks_to_commit_to:
                self._emit(m.NotifyCheckpointComplete(task, checkpoint_id, last_subsumed_id, completed.timestamp))
        if props.is_synchronous:
            self._emit(m.StopJob(checkpoint_id, props.checkpoint_type is CheckpointType.SAVEPOINT_TERMINATE))
        self._execute_queued_request()

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
        latest_completed = self.store.get_latest_checkpoint_id()
        for task in pending.plan.tasks_to_commit_to:
            self._emit(m.NotifyCheckpointAborted(task, checkpoint_id, latest_completed, pending.checkpoint_timestamp))
        if pending.props.is_synchronous:
            self._on_synchronous_savepoint_failed(exception.reason)
        self._execute_queued_request()

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

    # ------------------------------------------------------------------------------------------
    # tasks and job status
    # ------------------------------------------------------------------------------------------

    def _set_execution_state(self, attempt_id: ExecutionAttemptID, state: ExecutionState) -> None:
        key = (attempt_id.vertex_id, attempt_id.subtask_index)
        current = self.executions.get(key)
        if current is None:
            raise CoordinatorError(f"{state.value} for unknown task {attempt_id} (job {self.job_id})")
        if current.attempt_id != attempt_id:
            return  # a message of an older attempt: ignored
        self.executions[key] = Execution(attempt_id, state)

    def on_task_failed(self, event: m.TaskFailed) -> CompletedCheckpoint | None:
        """Global failover: abort pending checkpoints (JOB_FAILOVER_REGION), give every subtask a new attempt,
        restore the latest completed checkpoint (``RestoreFrom``)."""
        key = (event.attempt_id.vertex_id, event.attempt_id.subtask_index)
        current = self.executions.get(key)
        if current is None or current.attempt_id != event.attempt_id or self.is_shutdown:
            return None  # a failure of an older attempt (already failed over) or after shutdown
        # the new attempts exist before the aborts, so that a queued request released by an abort is not
        # triggered on the dead attempts (in Flink it runs later and finds the tasks not running)
        for k, e in list(self.executions.items()):
            self.executions[k] = Execution(e.attempt_id.next_attempt(), ExecutionState.CREATED)
        self.abort_pending_checkpoints(CheckpointException(CheckpointFailureReason.JOB_FAILOVER_REGION))
        return self.restore_latest_checkpointed_state()

    def job_status_changes(self, status: JobStatus) -> None:
        """Flink's ``CheckpointCoordinatorDeActivator``; a globally terminal status also shuts down."""
        self.job_status = status
        if self.is_shutdown:
            return
        if status is JobStatus.RUNNING:
            if self.scheduler.is_periodic_checkpointing_configured:
                self.start_checkpoint_scheduler()
        else:
            self.stop_checkpoint_scheduler()
        if status.is_terminal:
            self.shutdown(status)

    def shutdown(self, job_status: JobStatus) -> None:
        if self.is_shutdown:
            return
        self.scheduler.stop()
        self.abort_pending_and_queued_checkpoints(
            CheckpointException(CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN)
        )
        self.shutdown_status = job_status
        for checkpoint in self.store.shutdown(job_status):
            self._emit(m.DiscardCheckpoint(checkpoint.checkpoint_id, m.DiscardReason.SHUTDOWN))
        self.id_counter.shutdown()
        close_hooks(self.master_hooks)
