"""Triggering checkpoints: the request queue, the plan, a new pending checkpoint, the trigger's phases and the
periodic trigger.

How this works: ``CheckpointTriggering`` is the triggering half of ``CheckpointCoordinator`` (it uses the
coordinator's decider, plan calculator, id counter, hooks, timers, stats and outbox). A trigger request goes
through the ``CheckpointRequestDecider`` (queue, max concurrent, min pause); when it runs, the global state is
checked, the ``DefaultCheckpointPlanCalculator`` picks the tasks, the id counter the id, and a
``PendingCheckpoint`` is created with its expiry timer. The trigger then runs in phases, one at a time
(``TriggeringCheckpoint``; while it is in flight, ``is_triggering``, new requests wait in the queue):
``OPERATOR_COORDINATORS`` (every operator coordinator is asked for its state, ``TriggerCoordinatorCheckpoint``, and
answers with ``AcknowledgeCoordinatorState``), then ``MASTER_HOOKS`` (every master hook is called; one that
answers ``MASTER_STATE_PENDING`` finishes with ``MasterHookCompleted``), then the tasks are triggered
(``TriggerCheckpointOnSources``; a checkpoint whose tasks all acknowledged already completes at once) and the next
queued request may start. While ``force_full_snapshot`` holds (the job was restored from a snapshot it does not
own, and no checkpoint completed since), a checkpoint's tasks are triggered with ``FULL_CHECKPOINT``. A phase with
nothing to wait for ends at once, so a job without operator coordinators and without hooks that answer later
triggers within the one event, as Flink's chain of futures does within a few
executor hops. A failing coordinator or hook fails the trigger (``TRIGGER_CHECKPOINT_FAILURE``); a checkpoint
aborted before its trigger finished (expired, declined, failed over, suspended) ends the trigger too, and as in
Flink that late trigger failure is reported once more to the failure manager (which counts a checkpoint once)
and to the statistics (as a failure without a checkpoint in progress). A request that cannot start fails
(``TriggerRequestFailed``) and is counted by the failure manager. The periodic trigger is the
``PeriodicScheduler``'s timer delivering ``TimerFired(PERIODIC_TRIGGER)``; an expiry timer aborts its checkpoint as
``CHECKPOINT_EXPIRED``. Mirrors Flink's ``CheckpointCoordinator.triggerCheckpoint`` / ``startTriggeringCheckpoint``
/ ``createPendingCheckpoint`` / ``snapshotMasterState`` / ``triggerCheckpointRequest`` / ``triggerTasks`` /
``maybeCompleteCheckpoint`` / ``onTriggerSuccess`` / ``onTriggerFailure`` / ``startCheckpointScheduler`` /
``stopCheckpointScheduler``, its ``ScheduledTrigger``, and ``OperatorCoordinatorCheckpoints``.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.failure_manager import UNKNOWN_CHECKPOINT_ID
from barriersim.runtime.coordinator.master_hooks import (
    MASTER_STATE_PENDING,
    MasterHookError,
    master_state_of,
    trigger_hook,
)
from barriersim.runtime.coordinator.outcomes import AcknowledgeOutcome, CoordinatorError, TriggerPhaseOutcome
from barriersim.runtime.coordinator.pending_checkpoint import PendingCheckpoint, TaskAcknowledgeResult
from barriersim.runtime.coordinator.properties import CheckpointProperties
from barriersim.runtime.coordinator.request_decider import CheckpointTriggerRequest
from barriersim.runtime.events import CheckpointOptions, CheckpointType
from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason


class TriggerPhase(enum.Enum):
    """What a checkpoint being triggered waits for before its tasks are triggered."""

    OPERATOR_COORDINATORS = "OPERATOR_COORDINATORS"  # the operator coordinators' states
    MASTER_HOOKS = "MASTER_HOOKS"  # the master hooks that answered MASTER_STATE_PENDING


@dataclass
class TriggeringCheckpoint:
    """The one trigger in flight (Flink's ``isTriggering`` with what its futures wait for)."""

    request: CheckpointTriggerRequest
    pending: PendingCheckpoint
    phase: TriggerPhase = TriggerPhase.OPERATOR_COORDINATORS
    waiting_hooks: set[str] = field(default_factory=set)


class CheckpointTriggering:
    """The triggering half of ``CheckpointCoordinator``."""

    def trigger_checkpoint(self, request: m.TriggerRequest) -> None:
        """Flink's ``triggerCheckpoint`` / ``triggerSavepoint`` / ``triggerSynchronousSavepoint``. A savepoint is
        forced only when unaligned checkpoints are disabled (Flink's ``CheckpointProperties.forSavepoint(
        !unalignedCheckpointsEnabled)``): with them enabled (aligned with a timeout included) it respects max
        concurrent checkpoints, waits in the queue ahead of checkpoints and starts when a slot frees."""
        forced = request.forced
        if forced is None and request.checkpoint_type.is_savepoint:
            forced = not self.config.unaligned_checkpoints_enabled
        props = CheckpointProperties.for_type(request.checkpoint_type, self.checkpoint_properties, forced)
        if props.is_synchronous:
            # stop-with-savepoint: the scheduler stops the periodic trigger first (aborting pending checkpoints)
            self.stop_checkpoint_scheduler()
        self._submit(CheckpointTriggerRequest(props, request.is_periodic, self._clock(), request.request_id))

    @property
    def is_triggering(self) -> bool:
        """Flink's ``isTriggering``: a trigger is in flight (new requests wait in the queue)."""
        return self.triggering is not None

    def _submit(self, request: CheckpointTriggerRequest) -> None:
        chosen = self.decider.choose_request_to_execute(request, self.is_triggering,
                                                         self.last_checkpoint_completion_relative_time)
        if chosen is not None:
            self._start_triggering_checkpoint(chosen)

    def _execute_queued_request(self) -> None:
        """Flink runs the next queued request asynchronously; here a trigger that ends at once asks for the next
        request from inside this call, so the nesting is flattened into a loop (a full queue of 1000 requests
        that all fail must not recurse 1000 deep)."""
        if self.is_shutdown or self._completing or self._queue_held:
            return  # while completing, queued requests wait until the notifications are out (Flink: async)
        if self._executing_queue:
            self._execute_queue_again = True
            return
        self._executing_queue = True
        try:
            while True:
                self._execute_queue_again = False
                chosen = self.decider.choose_queued_request_to_execute(
                    self.is_triggering, self.last_checkpoint_completion_relative_time)
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
        if checkpoint_type is CheckpointType.FULL_CHECKPOINT:
            return dataclasses.replace(base, checkpoint_type=checkpoint_type)
        if not base.is_exactly_once_mode:
            return CheckpointOptions.not_exactly_once(checkpoint_type)
        return CheckpointOptions.aligned(checkpoint_type)

    def _start_triggering_checkpoint(self, request: CheckpointTriggerRequest) -> None:
        """Flink's ``startTriggeringCheckpoint``: plan, id and pending checkpoint, then the phases."""
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
            checkpoint_id, timestamp, request.props.is_savepoint, request.props.checkpoint_type.rest_name,
            len(self.executions),
        )
        for finished in plan.finished_tasks:  # finished tasks count as acknowledged (FLIP-147)
            self.stats.report_subtask_stats(checkpoint_id, str(finished), timestamp, 0, finished=True)
        handle = self._timers.start(timestamp + self.config.checkpoint_timeout,
                                    m.TimerFired(m.TimerKind.CHECKPOINT_TIMEOUT, checkpoint_id))
        if not pending.set_canceller_handle(handle):
            handle.cancel()
        self.triggering = TriggeringCheckpoint(request, pending)
        self._trigger_operator_coordinators(self.triggering)

    # -- the phases -----------------------------------------------------------------------------

    def _trigger_operator_coordinators(self, triggering: TriggeringCheckpoint) -> None:
        """Flink's ``OperatorCoordinatorCheckpoints.triggerAndAcknowledgeAllCoordinatorCheckpointsWithCompletion``:
        ask every operator coordinator; the master hooks follow once all answered."""
        if not self.operator_coordinators:
            self._snapshot_master_state(triggering)
            return
        for operator_id in self.operator_coordinators:
            self._emit(m.TriggerCoordinatorCheckpoint(operator_id, triggering.pending.checkpoint_id))

    def receive_coordinator_state(self, message: m.AcknowledgeCoordinatorState) -> AcknowledgeOutcome:
        """An operator coordinator's state (``None``: stateless); the last one of a checkpoint being triggered
        moves it on to the master hooks."""
        pending = self.pending_checkpoints.get(message.checkpoint_id)
        if pending is None or pending.is_disposed:
            return AcknowledgeOutcome.UNKNOWN_CHECKPOINT
        vertex = self._vertex_of_operator.get(message.operator_id)
        if vertex is None:
            return AcknowledgeOutcome.UNKNOWN
        result = pending.acknowledge_coordinator_state(vertex, message.operator_id, message.state)
        triggering = self.triggering
        if (result is TaskAcknowledgeResult.SUCCESS and triggering is not None and triggering.pending is pending
                and triggering.phase is TriggerPhase.OPERATOR_COORDINATORS
                and pending.are_coordinators_fully_acknowledged()):
            self._snapshot_master_state(triggering)
        return AcknowledgeOutcome[result.name]

    def receive_coordinator_checkpoint_failure(self, message: m.CoordinatorCheckpointFailed) -> TriggerPhaseOutcome:
        triggering = self.triggering
        if (triggering is None or triggering.pending.checkpoint_id != message.checkpoint_id
                or triggering.phase is not TriggerPhase.OPERATOR_COORDINATORS
                or message.operator_id not in triggering.pending.not_yet_acknowledged_operator_coordinators):
            return TriggerPhaseOutcome.NOT_TRIGGERING
        self._on_trigger_failure(triggering.request, triggering.pending, CheckpointException(
            CheckpointFailureReason.TRIGGER_CHECKPOINT_FAILURE, message.checkpoint_id,
            f"operator coordinator {message.operator_id!r} failed to checkpoint: {message.detail}"))
        return TriggerPhaseOutcome.ACCEPTED

    def _snapshot_master_state(self, triggering: TriggeringCheckpoint) -> None:
        """Flink's ``snapshotMasterState``: call every master hook, after the operator coordinators have
        checkpointed (a source whose checkpoints a hook induces then checkpoints after its coordinator); the first
        failure fails the trigger."""
        triggering.phase = TriggerPhase.MASTER_HOOKS
        pending = triggering.pending
        failure: MasterHookError | None = None
        for hook in self.master_hooks.values():
            try:
                state = trigger_hook(hook, pending.checkpoint_id, pending.checkpoint_timestamp)
            except MasterHookError as e:
                failure = failure or e
                continue
            if state is MASTER_STATE_PENDING:
                triggering.waiting_hooks.add(hook.identifier)
            elif failure is None:
                pending.acknowledge_master_state(hook.identifier, state)
        if failure is not None:
            self._on_trigger_failure(triggering.request, pending, CheckpointException(
                CheckpointFailureReason.TRIGGER_CHECKPOINT_FAILURE, pending.checkpoint_id, str(failure)))
        elif not triggering.waiting_hooks:
            self._trigger_checkpoint_request(triggering)

    def receive_master_hook_completed(self, message: m.MasterHookCompleted) -> TriggerPhaseOutcome:
        triggering = self.triggering
        if (triggering is None or triggering.pending.checkpoint_id != message.checkpoint_id
                or message.identifier not in triggering.waiting_hooks):
            return TriggerPhaseOutcome.NOT_TRIGGERING  # Flink: the hook's future completes after the checkpoint ended
        triggering.waiting_hooks.discard(message.identifier)
        pending = triggering.pending
        if message.failure is not None:
            self._on_trigger_failure(triggering.request, pending, CheckpointException(
                CheckpointFailureReason.TRIGGER_CHECKPOINT_FAILURE, pending.checkpoint_id,
                f"master hook {message.identifier!r} failed to trigger checkpoint {pending.checkpoint_id}: "
                f"{message.failure}"))
            return TriggerPhaseOutcome.ACCEPTED
        pending.acknowledge_master_state(message.identifier,
                                         master_state_of(self.master_hooks[message.identifier], message.data))
        if not triggering.waiting_hooks:
            self._trigger_checkpoint_request(triggering)
        return TriggerPhaseOutcome.ACCEPTED

    def _trigger_checkpoint_request(self, triggering: TriggeringCheckpoint) -> None:
        """Flink's ``triggerCheckpointRequest``: trigger the tasks (``triggerTasks``), complete the checkpoint if
        its tasks already acknowledged (``maybeCompleteCheckpoint``: an externally induced source), then the
        trigger succeeded (``onTriggerSuccess``: the next queued request may start)."""
        pending = triggering.pending
        checkpoint_type = pending.props.checkpoint_type
        if self.force_full_snapshot and not pending.props.is_savepoint:
            checkpoint_type = CheckpointType.FULL_CHECKPOINT  # the props (and the statistics) keep their type
        self._emit(m.TriggerCheckpointOnSources(
            pending.checkpoint_id, pending.checkpoint_timestamp, self._options_for(checkpoint_type),
            pending.plan.tasks_to_trigger,
        ))
        if pending.is_fully_acknowledged() and not self.is_shutdown:
            self._complete_pending_checkpoint(pending)
        if self.triggering is triggering:  # a completion that failed already ended the trigger
            self.triggering = None
            self._execute_queued_request()

    def _on_trigger_failure(self, request: CheckpointTriggerRequest, pending: PendingCheckpoint | None,
                            exception: CheckpointException) -> None:
        """Flink's ``onTriggerFailure``: the operator coordinators stop waiting, the checkpoint (if it is still
        pending) is aborted, the trigger ends and the next queued request may start. A checkpoint that had already
        ended (aborted while it was being triggered) is reported to the failure manager once more, with no
        statistics of its own: Flink passes it without its ``PendingCheckpointStats``, so the statistics count one
        more failed checkpoint without one in progress."""
        if self.triggering is not None and self.triggering.request is request:
            self.triggering = None
        for operator_id in self.operator_coordinators:
            self._emit(m.AbortCoordinatorTriggering(operator_id))
        if pending is not None and not pending.is_disposed:
            self._abort_pending_checkpoint(pending, exception, None)
            return
        self.stats.report_failed_checkpoint_without_in_progress()
        if pending is None:
            self._fail_request(request, exception.reason)
            outcome = self.failure_manager.handle_checkpoint_exception(request.props, exception, UNKNOWN_CHECKPOINT_ID,
                                                                       None)
            self._on_failure_outcome(outcome, exception, None)
            if request.props.is_synchronous:
                self._on_synchronous_savepoint_failed(exception.reason)
        else:
            outcome = self.failure_manager.handle_checkpoint_exception(pending.props, exception,
                                                                       pending.checkpoint_id, None)
            self._on_failure_outcome(outcome, exception, None)
        self._execute_queued_request()

    def _pending_checkpoint_ended(self, pending: PendingCheckpoint, exception: CheckpointException) -> None:
        """A pending checkpoint failed: if it was still being triggered, the trigger fails with it (Flink: the
        abort fails the trigger's ``masterTriggerCompletionPromise``); then the next queued request may start."""
        triggering = self.triggering
        if triggering is not None and triggering.pending is pending:
            self._on_trigger_failure(triggering.request, pending, exception)
        else:
            self._execute_queued_request()

    def _fail_request(self, request: CheckpointTriggerRequest, reason: CheckpointFailureReason) -> None:
        self._emit(m.TriggerRequestFailed(request.request_id, None, reason))

    # ------------------------------------------------------------------------------------------
    # periodic scheduling (Flink's startCheckpointScheduler / stopCheckpointScheduler)
    # ------------------------------------------------------------------------------------------

    def _register_periodic(self, delay: int, generation: int):
        return self._timers.start(self._clock() + delay, m.TimerFired(m.TimerKind.PERIODIC_TRIGGER, generation))

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
        if event.kind is m.TimerKind.METADATA_WRITTEN:
            self._on_metadata_written(event.token)
            return
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
