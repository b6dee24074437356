"""Triggering checkpoints: the request queue, the plan, a new pending checkpoint and the periodic trigger.

How this works: ``CheckpointTriggering`` is the triggering half of ``CheckpointCoordinator`` (it uses the
coordinator's decider, plan calculator, id counter, hooks, timers, stats and outbox). A trigger request goes
through the ``CheckpointRequestDecider`` (queue, max concurrent, min pause); when it runs, the global state is
checked, the ``DefaultCheckpointPlanCalculator`` picks the tasks, the id counter the id, a ``PendingCheckpoint``
is created with an expiry timer, master hooks are snapshotted and ``TriggerCheckpointOnSources`` is emitted. A
request that cannot start fails (``TriggerRequestFailed``) and is counted by the failure manager. The periodic
trigger is the ``PeriodicScheduler``'s timer delivering ``TimerFired(PERIODIC_TRIGGER)``; an expiry timer aborts
its checkpoint as ``CHECKPOINT_EXPIRED``. Mirrors Flink's ``CheckpointCoordinator.triggerCheckpoint`` /
``startTriggeringCheckpoint`` / ``createPendingCheckpoint`` / ``onTriggerFailure`` / ``startCheckpointScheduler``
/ ``stopCheckpointScheduler`` and its ``ScheduledTrigger``.
"""

from __future__ import annotations

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.failure_manager import UNKNOWN_CHECKPOINT_ID
from barriersim.runtime.coordinator.master_hooks import MasterHookError, trigger_hook
from barriersim.runtime.coordinator.outcomes import CoordinatorError
from barriersim.runtime.coordinator.pending_checkpoint import PendingCheckpoint
from barriersim.runtime.coordinator.properties import CheckpointProperties
from barriersim.runtime.coordinator.request_decider import CheckpointTriggerRequest
from barriersim.runtime.events import CheckpointOptions, CheckpointType
from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason


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
