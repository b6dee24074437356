"""Triggering checkpoints: ``CheckpointTriggering``, a collaborator of ``CheckpointCoordinator`` (Flink's
``triggerCheckpoint`` ... ``onTriggerSuccess`` / ``onTriggerFailure``, its ``CheckpointRequestDecider``,
``CheckpointPlanCalculator`` and ``ScheduledTrigger``, and ``OperatorCoordinatorCheckpoints``). It owns the request
queue, the one trigger in flight with its phases (operator coordinators, master hooks, then the tasks) and the
periodic trigger; a new pending checkpoint goes into the coordinator's pending checkpoints, and completing or
aborting one is the ``CheckpointCompletion``'s. docs/architecture.md ("The control plane") has the narrative."""

from __future__ import annotations

import dataclasses
import enum
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.completion import CheckpointCompletion
from barriersim.runtime.coordinator.configuration import CheckpointCoordinatorConfiguration
from barriersim.runtime.coordinator.failure_manager import UNKNOWN_CHECKPOINT_ID, CheckpointFailureManager
from barriersim.runtime.coordinator.id_counter import StandaloneCheckpointIDCounter
from barriersim.runtime.coordinator.master_hooks import (
    MASTER_STATE_PENDING,
    MasterHookError,
    MasterTriggerRestoreHook,
    master_state_of,
    trigger_hook,
)
from barriersim.runtime.coordinator.outcomes import AcknowledgeOutcome, CoordinatorError, TriggerPhaseOutcome
from barriersim.runtime.coordinator.pending_checkpoint import PendingCheckpoint, TaskAcknowledgeResult
from barriersim.runtime.coordinator.periodic_scheduler import PeriodicScheduler
from barriersim.runtime.coordinator.plan import DefaultCheckpointPlanCalculator, Execution, JobVertexInfo
from barriersim.runtime.coordinator.properties import CheckpointProperties
from barriersim.runtime.coordinator.request_decider import CheckpointRequestDecider, CheckpointTriggerRequest
from barriersim.runtime.coordinator.stats_tracker import CheckpointStatsTracker
from barriersim.runtime.event_timers import Cancellable, EventTimers
from barriersim.runtime.events import CheckpointOptions, CheckpointType
from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason
from barriersim.runtime.ids import JobVertexID, OperatorID


class TriggerPhase(enum.Enum):
    """What a checkpoint being triggered waits for before its tasks are triggered."""

    OPERATOR_COORDINATORS = "OPERATOR_COORDINATORS"  # the operator coordinators' states
    MASTER_HOOKS = "MASTER_HOOKS"  # the master hooks that answered MASTER_STATE_PENDING
    TASKS = "TASKS"  # nothing: the tasks are being triggered, within the event


@dataclass
class TriggeringCheckpoint:
    """The one trigger in flight (Flink's ``isTriggering`` with what its futures wait for)."""

    request: CheckpointTriggerRequest
    pending: PendingCheckpoint
    phase: TriggerPhase = TriggerPhase.OPERATOR_COORDINATORS
    waiting_hooks: set[str] = field(default_factory=set)
    failure: CheckpointException | None = None  # its checkpoint was aborted: the trigger fails at the timer's next turn


class CheckpointTriggering:
    """The request queue, the trigger in flight and the periodic trigger (see the module)."""

    def __init__(
        self,
        job_id: str,
        vertices: Sequence[JobVertexInfo],
        config: CheckpointCoordinatorConfiguration,
        *,
        pending: dict[int, PendingCheckpoint],
        executions: Mapping[tuple[JobVertexID, int], Execution],
        master_hooks: Mapping[str, MasterTriggerRestoreHook],
        operator_coordinators: tuple[OperatorID, ...],
        id_counter: StandaloneCheckpointIDCounter,
        stats: CheckpointStatsTracker,
        failure_manager: CheckpointFailureManager,
        completion: CheckpointCompletion,
        clock: Callable[[], int],
        timers: EventTimers,
        rng: random.Random,
        emit: Callable[[Any], None],
        is_shutdown: Callable[[], bool],
        job_running: Callable[[], bool],
    ):
        """``pending`` and ``executions``: the coordinator's (a new pending checkpoint goes in there; the plan is made
        of the executions); ``master_hooks``: the coordinator's registered hooks; ``job_running``: whether the job
        is RUNNING and the coordinator not shut down (a failed stop-with-savepoint then resumes the periodic
        trigger)."""
        self.job_id = job_id
        self._vertices = tuple(vertices)
        self._vertex_by_id = {v.vertex_id: v for v in self._vertices}
        self._vertex_of_operator = {op: v for v in self._vertices for op in v.operators}
        self._config = config
        self._pending = pending
        self._executions = executions
        self._master_hooks = master_hooks
        self._operator_coordinators = operator_coordinators
        self._id_counter = id_counter
        self._stats = stats
        self._failure_manager = failure_manager
        self._completion = completion
        self._clock = clock
        self._timers = timers
        self._emit = emit
        self._is_shutdown = is_shutdown
        self._job_running = job_running
        self.checkpoint_properties = CheckpointProperties.for_checkpoint(config.retention_policy)
        self._plan_calculator = DefaultCheckpointPlanCalculator(
            self._vertices, config.allow_checkpoints_after_tasks_finished
        )
        self.in_flight: TriggeringCheckpoint | None = None
        self._queue_holds = 0  # while held (a failover ended a _metadata write), the queue waits
        self._executing_queue = False
        self._execute_queue_again = False
        self._decider = CheckpointRequestDecider(
            config.max_concurrent_checkpoints,
            self._reschedule_trigger,
            clock,
            config.min_pause_between_checkpoints,
            lambda: len(pending),
            lambda: 0,
            config.max_queued_requests,
            self._fail_request,
        )
        self._scheduler = PeriodicScheduler(
            config.checkpoint_interval, config.min_pause_between_checkpoints, rng, self._register_periodic
        )

    # -- queries --------------------------------------------------------------------------------------------------

    @property
    def num_queued_requests(self) -> int:
        return self._decider.num_queued_requests

    @property
    def is_periodic_checkpointing_started(self) -> bool:
        return self._scheduler.running

    @property
    def is_periodic_checkpointing_configured(self) -> bool:
        return self._scheduler.is_periodic_checkpointing_configured

    @contextmanager
    def queue_held(self) -> Iterator[None]:
        """The next queued request waits until the block ends (then the caller starts it)."""
        self._queue_holds += 1
        try:
            yield
        finally:
            self._queue_holds -= 1

    def trigger_checkpoint(self, request: m.TriggerRequest) -> None:
        """Flink's ``triggerCheckpoint`` / ``triggerSavepoint`` / ``triggerSynchronousSavepoint``. A savepoint is
        forced only when unaligned checkpoints are disabled (Flink's ``CheckpointProperties.forSavepoint(
        !unalignedCheckpointsEnabled)``): with them enabled (aligned with a timeout included) it respects max
        concurrent checkpoints, waits in the queue ahead of checkpoints and starts when a slot frees."""
        forced = request.forced
        if forced is None and request.checkpoint_type.is_savepoint:
            forced = not self._config.unaligned_checkpoints_enabled
        props = CheckpointProperties.for_type(request.checkpoint_type, self.checkpoint_properties, forced)
        if props.is_synchronous:
            # stop-with-savepoint: the scheduler stops the periodic trigger first (aborting pending checkpoints)
            self.stop_checkpoint_scheduler()
        self._submit(CheckpointTriggerRequest(props, request.is_periodic, self._clock(), request.request_id))

    @property
    def is_triggering(self) -> bool:
        """Flink's ``isTriggering``: a trigger is in flight (new requests wait in the queue)."""
        return self.in_flight is not None

    def _submit(self, request: CheckpointTriggerRequest) -> None:
        chosen = self._decider.choose_request_to_execute(
            request, self.is_triggering, self._completion.last_checkpoint_completion_relative_time
        )
        if chosen is not None:
            self._start_triggering_checkpoint(chosen)

    def execute_queued_request(self) -> None:
        """Flink runs the next queued request asynchronously; here a trigger that ends at once asks for the next
        request from inside this call, so the nesting is flattened into a loop (a full queue of 1000 requests
        that all fail must not recurse 1000 deep)."""
        if self._is_shutdown() or self._completion.completing or self._queue_holds:
            return  # while completing, queued requests wait until the notifications are out (Flink: async)
        if self._executing_queue:
            self._execute_queue_again = True
            return
        self._executing_queue = True
        try:
            while True:
                self._execute_queue_again = False
                chosen = self._decider.choose_queued_request_to_execute(
                    self.is_triggering, self._completion.last_checkpoint_completion_relative_time
                )
                if chosen is not None:
                    self._start_triggering_checkpoint(chosen)
                if not self._execute_queue_again or self._is_shutdown() or self._completion.completing:
                    break
        finally:
            self._executing_queue = False

    def _pre_check_global_state(self, is_periodic: bool) -> None:
        if self._is_shutdown():
            raise CheckpointException(CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN)
        if is_periodic and not self._scheduler.running:
            raise CheckpointException(CheckpointFailureReason.PERIODIC_SCHEDULER_SHUTDOWN)

    def _options_for(self, checkpoint_type: CheckpointType) -> CheckpointOptions:
        base = self._config.checkpoint_options
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
            plan = self._plan_calculator.calculate_checkpoint_plan(self._executions)
        except CheckpointException as e:
            self._on_trigger_failure(request, None, e)
            return
        try:
            checkpoint_id = self._id_counter.get_and_increment()
        except Exception as e:  # e.g. an HA counter that cannot be reached: Flink's TRIGGER_CHECKPOINT_FAILURE
            self._on_trigger_failure(
                request, None, CheckpointException(CheckpointFailureReason.TRIGGER_CHECKPOINT_FAILURE, detail=str(e))
            )
            return
        timestamp = self._clock()
        vertex_of_task = {e.attempt_id: self._vertex_by_id[key[0]] for key, e in self._executions.items()}
        pending = PendingCheckpoint(
            self.job_id,
            checkpoint_id,
            timestamp,
            plan,
            vertex_of_task,
            request.props,
            tuple(self._master_hooks),
            self._operator_coordinators,
            self._vertices,
            request.request_id,
        )
        self._pending[checkpoint_id] = pending
        self._stats.report_pending_checkpoint(
            checkpoint_id,
            timestamp,
            request.props.is_savepoint,
            request.props.checkpoint_type.rest_name,
            len(self._executions),
        )
        for finished in plan.finished_tasks:  # finished tasks count as acknowledged (FLIP-147)
            self._stats.report_subtask_stats(checkpoint_id, str(finished), timestamp, 0, finished=True)
        handle = self._timers.start(
            timestamp + self._config.checkpoint_timeout, m.TimerFired(m.TimerKind.CHECKPOINT_TIMEOUT, checkpoint_id)
        )
        if not pending.set_canceller_handle(handle):
            handle.cancel()
        self.in_flight = TriggeringCheckpoint(request, pending)
        self._trigger_operator_coordinators(self.in_flight)

    # -- the phases -----------------------------------------------------------------------------

    def _trigger_operator_coordinators(self, triggering: TriggeringCheckpoint) -> None:
        """Flink's ``OperatorCoordinatorCheckpoints.triggerAndAcknowledgeAllCoordinatorCheckpointsWithCompletion``:
        ask every operator coordinator; the master hooks follow once all answered."""
        if not self._operator_coordinators:
            self._snapshot_master_state(triggering)
            return
        for operator_id in self._operator_coordinators:
            self._emit(m.TriggerCoordinatorCheckpoint(operator_id, triggering.pending.checkpoint_id))

    def receive_coordinator_state(self, message: m.AcknowledgeCoordinatorState) -> AcknowledgeOutcome:
        """An operator coordinator's state (``None``: stateless); the last one of a checkpoint being triggered
        moves it on to the master hooks."""
        pending = self._pending.get(message.checkpoint_id)
        if pending is None or pending.is_disposed:
            return AcknowledgeOutcome.UNKNOWN_CHECKPOINT
        vertex = self._vertex_of_operator.get(message.operator_id)
        if vertex is None:
            return AcknowledgeOutcome.UNKNOWN
        result = pending.acknowledge_coordinator_state(vertex, message.operator_id, message.state)
        triggering = self.in_flight
        if (
            result is TaskAcknowledgeResult.SUCCESS
            and triggering is not None
            and triggering.pending is pending
            and triggering.phase is TriggerPhase.OPERATOR_COORDINATORS
            and pending.are_coordinators_fully_acknowledged()
        ):
            self._snapshot_master_state(triggering)
        return AcknowledgeOutcome[result.name]

    def receive_coordinator_checkpoint_failure(self, message: m.CoordinatorCheckpointFailed) -> TriggerPhaseOutcome:
        triggering = self.in_flight
        if (
            triggering is None
            or triggering.pending.checkpoint_id != message.checkpoint_id
            or triggering.phase is not TriggerPhase.OPERATOR_COORDINATORS
            or triggering.failure is not None
            or message.operator_id not in triggering.pending.not_yet_acknowledged_operator_coordinators
        ):
            return TriggerPhaseOutcome.NOT_TRIGGERING
        self._on_trigger_failure(
            triggering.request,
            triggering.pending,
            CheckpointException(
                CheckpointFailureReason.TRIGGER_CHECKPOINT_FAILURE,
                message.checkpoint_id,
                f"operator coordinator {message.operator_id!r} failed to checkpoint: {message.detail}",
            ),
        )
        return TriggerPhaseOutcome.ACCEPTED

    def _snapshot_master_state(self, triggering: TriggeringCheckpoint) -> None:
        """Flink's ``snapshotMasterState``: call every master hook, after the operator coordinators have
        checkpointed (a source whose checkpoints a hook induces then checkpoints after its coordinator); the first
        failure fails the trigger."""
        triggering.phase = TriggerPhase.MASTER_HOOKS
        pending = triggering.pending
        failure: MasterHookError | None = None
        for hook in self._master_hooks.values():
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
            self._on_trigger_failure(
                triggering.request,
                pending,
                CheckpointException(
                    CheckpointFailureReason.TRIGGER_CHECKPOINT_FAILURE, pending.checkpoint_id, str(failure)
                ),
            )
        elif not triggering.waiting_hooks:
            self._trigger_checkpoint_request(triggering)

    def receive_master_hook_completed(self, message: m.MasterHookCompleted) -> TriggerPhaseOutcome:
        triggering = self.in_flight
        if (
            triggering is None
            or triggering.pending.checkpoint_id != message.checkpoint_id
            or message.identifier not in triggering.waiting_hooks
            or triggering.failure is not None
        ):
            return TriggerPhaseOutcome.NOT_TRIGGERING  # Flink: the hook's future completes after the checkpoint ended
        triggering.waiting_hooks.discard(message.identifier)
        pending = triggering.pending
        if message.failure is not None:
            self._on_trigger_failure(
                triggering.request,
                pending,
                CheckpointException(
                    CheckpointFailureReason.TRIGGER_CHECKPOINT_FAILURE,
                    pending.checkpoint_id,
                    f"master hook {message.identifier!r} failed to trigger checkpoint {pending.checkpoint_id}: "
                    f"{message.failure}",
                ),
            )
            return TriggerPhaseOutcome.ACCEPTED
        pending.acknowledge_master_state(
            message.identifier, master_state_of(self._master_hooks[message.identifier], message.data)
        )
        if not triggering.waiting_hooks:
            self._trigger_checkpoint_request(triggering)
        return TriggerPhaseOutcome.ACCEPTED

    def _trigger_checkpoint_request(self, triggering: TriggeringCheckpoint) -> None:
        """Flink's ``triggerCheckpointRequest``: trigger the tasks (``triggerTasks``), complete the checkpoint if
        its tasks already acknowledged (``maybeCompleteCheckpoint``: an externally induced source), then the
        trigger succeeded (``onTriggerSuccess``: the next queued request may start)."""
        triggering.phase = TriggerPhase.TASKS
        pending = triggering.pending
        checkpoint_type = pending.props.checkpoint_type
        if self._completion.force_full_snapshot and not pending.props.is_savepoint:
            checkpoint_type = CheckpointType.FULL_CHECKPOINT  # the props (and the statistics) keep their type
        self._emit(
            m.TriggerCheckpointOnSources(
                pending.checkpoint_id,
                pending.checkpoint_timestamp,
                self._options_for(checkpoint_type),
                pending.plan.tasks_to_trigger,
            )
        )
        if pending.is_fully_acknowledged() and not self._is_shutdown():
            self._completion.complete_pending_checkpoint(pending)
        if self.in_flight is triggering:  # a completion that failed already ended the trigger
            self.in_flight = None
            self.execute_queued_request()

    def _on_trigger_failure(
        self, request: CheckpointTriggerRequest, pending: PendingCheckpoint | None, exception: CheckpointException
    ) -> None:
        """Flink's ``onTriggerFailure``: the operator coordinators stop waiting, the checkpoint (if it is still
        pending) is aborted, the trigger ends and the next queued request may start. A checkpoint that had already
        ended (aborted while it was being triggered) is reported to the failure manager once more, with no
        statistics of its own: Flink passes it without its ``PendingCheckpointStats``, so the statistics count one
        more failed checkpoint without one in progress."""
        if self.in_flight is not None and self.in_flight.request is request:
            self.in_flight = None
        for operator_id in self._operator_coordinators:
            self._emit(m.AbortCoordinatorTriggering(operator_id))
        if pending is not None and not pending.is_disposed:
            self._completion.abort_pending_checkpoint(pending, exception, None)
            return
        self._stats.report_failed_checkpoint_without_in_progress()
        if pending is None:
            self._fail_request(request, exception.reason)
            outcome = self._failure_manager.handle_checkpoint_exception(
                request.props, exception, UNKNOWN_CHECKPOINT_ID, None
            )
            self._completion.on_failure_outcome(outcome, exception, None)
            if request.props.is_synchronous:
                self.synchronous_savepoint_failed(exception.reason)
        else:
            outcome = self._failure_manager.handle_checkpoint_exception(
                pending.props, exception, pending.checkpoint_id, None
            )
            self._completion.on_failure_outcome(outcome, exception, None)
        self.execute_queued_request()

    def checkpoint_ended(self, pending: PendingCheckpoint, exception: CheckpointException) -> None:
        """A pending checkpoint failed: if it was still being triggered, the trigger fails with it; then the next
        queued request may start. Flink's abort fails the trigger's ``masterTriggerCompletionPromise``, whose handler
        (``onTriggerFailure``) runs on the timer's next turn: a trigger that waits for its operator coordinators or
        master hooks stays in flight (``isTriggering``) until ``TimerFired(TRIGGER_FAILURE)`` at the same time.
        One whose tasks are being triggered fails at once (``maybeCompleteCheckpoint``'s completion failed), as
        does every trigger of a coordinator shutting down (nothing of it runs after the shutdown)."""
        triggering = self.in_flight
        if triggering is None or triggering.pending is not pending:
            self.execute_queued_request()
        elif (
            triggering.phase is TriggerPhase.TASKS
            or exception.reason is CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN
        ):
            self._on_trigger_failure(triggering.request, pending, exception)
        elif triggering.failure is None:
            triggering.failure = exception
            self._timers.start(self._clock(), m.TimerFired(m.TimerKind.TRIGGER_FAILURE, pending.checkpoint_id))

    def trigger_failure_due(self, checkpoint_id: int) -> None:
        """The timer's next turn after the abort of a checkpoint being triggered: its trigger fails."""
        triggering = self.in_flight
        if (
            triggering is not None
            and triggering.pending.checkpoint_id == checkpoint_id
            and triggering.failure is not None
        ):
            self._on_trigger_failure(triggering.request, triggering.pending, triggering.failure)

    def _fail_request(self, request: CheckpointTriggerRequest, reason: CheckpointFailureReason) -> None:
        self._emit(m.TriggerRequestFailed(request.request_id, None, reason))

    # ------------------------------------------------------------------------------------------
    # periodic scheduling (Flink's startCheckpointScheduler / stopCheckpointScheduler)
    # ------------------------------------------------------------------------------------------

    def _register_periodic(self, delay: int, generation: int) -> Cancellable:
        return self._timers.start(self._clock() + delay, m.TimerFired(m.TimerKind.PERIODIC_TRIGGER, generation))

    def _reschedule_trigger(self, delay: int) -> None:
        self._scheduler.reschedule(delay)

    def start_checkpoint_scheduler(self) -> bool:
        if self._is_shutdown():
            raise CoordinatorError(f"start the checkpoint scheduler: coordinator of job {self.job_id} is shut down")
        # make sure all prior timers are cancelled
        self.stop_checkpoint_scheduler()
        return self._scheduler.start()

    def stop_checkpoint_scheduler(self) -> None:
        self._scheduler.stop()
        self.abort_pending_and_queued_checkpoints(
            CheckpointException(CheckpointFailureReason.CHECKPOINT_COORDINATOR_SUSPEND)
        )

    def abort_pending_and_queued_checkpoints(self, exception: CheckpointException) -> None:
        self._decider.abort_all(exception.reason)
        self._completion.abort_pending_checkpoints(exception)

    def periodic_timer_fired(self, generation: int) -> None:
        if self._scheduler.fired(generation):
            self._submit(CheckpointTriggerRequest(self.checkpoint_properties, True, self._clock(), None))

    def stop_periodic_trigger(self) -> None:
        """The periodic trigger stops; nothing is aborted (Flink's ``stopCheckpointScheduler`` without its aborts)."""
        self._scheduler.stop()

    def synchronous_savepoint_failed(self, reason: CheckpointFailureReason) -> None:
        """Stop-with-savepoint failed while the job keeps running: periodic checkpoints resume."""
        if reason in (
            CheckpointFailureReason.CHECKPOINT_COORDINATOR_SUSPEND,
            CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN,
        ):
            return  # the scheduler is being stopped on purpose
        if self._job_running():
            self._scheduler.start()
