"""The checkpoint coordinator: assembles the small parts of this package into Flink's coordinator.

How this works: sans-IO. ``handle(event)`` takes one event (``messages.py``) and returns the actions to carry out,
in order. Time is the injected ``clock()`` (ms); timers (checkpoint expiry, the periodic trigger) are registered
on the injected ``TimerService``; when one fires the coordinator handles ``TimerFired`` and hands the resulting
actions to the injected ``action_sink`` (a driver may also deliver ``TimerFired`` to ``handle`` itself).
Randomness (the periodic trigger's initial delay) comes from the injected ``random.Random``. The class is
composed of three halves, one module each: ``triggering`` (request queue, plan, new pending checkpoints, the
trigger's phases: operator coordinators, master hooks, tasks; the periodic trigger), ``completion`` (acknowledgements, declines, completing and aborting) and ``restore``
(restoring the latest checkpoint or a savepoint); this module holds the state they share, the event dispatch,
the task and job-status bookkeeping (a failover: ``TaskFailed`` ends the attempts, ``RestartTasks`` after the restart
delay gives new ones, aborts the pending checkpoints and restores) and shutdown. A driver that injects a
``checkpoint_writer(metadata, is_savepoint)`` (Flink's ``CheckpointStorageCoordinatorView``) has the coordinator
write each ``_metadata`` while finalizing, so a failed write aborts the checkpoint (``FINALIZE_CHECKPOINT_FAILURE``)
before it reaches the store; without one the coordinator emits ``PersistCheckpoint`` and trusts the driver.
With ``metadata_write_ms``, a checkpoint's ``_metadata`` write takes that long (the cost model's time): the file
appears and the completion's rest (the store, subsumption, notifications) happens when it has passed, and every event that
arrives meanwhile waits for it, as under Flink's coordinator lock (a failover or a job status change ends the write
at once instead, so that it sees the completed checkpoint, as it would after taking the lock). ``first_attempt_number`` lets a coordinator recovered after a JobManager failover hand out attempt ids that no
earlier attempt used (Flink's new ``ExecutionGraph`` has fresh attempt ids). The periodic trigger starts and stops as
Flink 2.3's does, from the job's status and the executions' states (``deactivator``: a deployment's ``TaskDeploying``,
each task's ``TaskRunning``, its ``TaskFinished`` or ``TaskFailed``). Mirrors Flink's ``CheckpointCoordinator``.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any, Callable, Sequence

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.completed_store import StandaloneCompletedCheckpointStore
from barriersim.runtime.coordinator.completion import CheckpointCompletion
from barriersim.runtime.coordinator.deactivator import ExecutionTrackingDeActivator
from barriersim.runtime.coordinator.configuration import (  # noqa: F401 (re-exported)
    NO_PERIODIC_CHECKPOINTS,
    CheckpointCoordinatorConfiguration,
)
from barriersim.runtime.coordinator.failure_manager import CheckpointFailureManager
from barriersim.runtime.coordinator.id_counter import StandaloneCheckpointIDCounter
from barriersim.runtime.coordinator.master_hooks import MasterTriggerRestoreHook, close_hooks, validate_hook
from barriersim.runtime.coordinator.outcomes import CoordinatorError  # noqa: F401 (re-exported)
from barriersim.runtime.coordinator.pending_checkpoint import CompletedCheckpoint, PendingCheckpoint
from barriersim.runtime.coordinator.periodic_scheduler import PeriodicScheduler
from barriersim.runtime.coordinator.plan import DefaultCheckpointPlanCalculator, Execution, ExecutionState, JobVertexInfo
from barriersim.runtime.coordinator.properties import CheckpointProperties, JobStatus
from barriersim.runtime.coordinator.request_decider import CheckpointRequestDecider
from barriersim.runtime.coordinator.restore import CoordinatorRestoreMixin
from barriersim.runtime.coordinator.shared_state_registry import RecoveryClaimMode, SharedStateRegistry
from barriersim.runtime.coordinator.stats_tracker import CheckpointStatsTracker
from barriersim.runtime.coordinator.triggering import CheckpointTriggering, TriggeringCheckpoint
from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason
from barriersim.runtime.ids import ExecutionAttemptID, JobVertexID, OperatorID
from barriersim.runtime.state.snapshot import CheckpointMetadata

_ENDED_BY_FAILOVER = (ExecutionState.FAILED, ExecutionState.CANCELED)
_TERMINAL = (ExecutionState.FINISHED, *_ENDED_BY_FAILOVER)

NUM_GHOST_CHECKPOINT_IDS = 16


class CheckpointCoordinator(CheckpointTriggering, CheckpointCompletion, CoordinatorRestoreMixin):
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
        checkpoint_writer: Callable[[CheckpointMetadata, bool], Any] | None = None,
        first_attempt_number: int = 0,
        metadata_write_ms: Callable[[list], float] | None = None,
        claim_mode: RecoveryClaimMode = RecoveryClaimMode.NO_CLAIM,
    ):
        """``metadata_write_ms(subtask_states)``: how long the ``_metadata`` write of a checkpoint of these
        ``OperatorSubtaskState``s holds the coordinator (``runtime.checkpoint_cost``; default: no time): the
        ``checkpoint_writer`` writes it when that time has passed. ``claim_mode``: whether
        the checkpoints of a recovered ``completed_checkpoint_store`` are the job's to discard once unused."""
        self.job_id = job_id
        self.vertices = tuple(vertices)
        self.config = config
        self._clock = clock
        self._timers = timer_service
        self._sink = action_sink
        self.checkpoint_writer = checkpoint_writer
        self.metadata_write_ms = metadata_write_ms
        # a checkpoint whose _metadata write is under way holds the coordinator's lock: events wait meanwhile
        self._finalizing: Any = None
        self._held_events: deque = deque()
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
        # Flink's store owns the registry; a store recovered by a new JobManager registers its checkpoints again
        self.shared_state_registry = SharedStateRegistry()
        for checkpoint in self.store.get_all_checkpoints():
            self.shared_state_registry.register_all_after_restored(
                checkpoint.checkpoint_id, checkpoint.operator_states.values(), claim_mode)
        self.force_full_snapshot = False  # set by a restore of an unclaimed snapshot (restore.py)
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
                self.executions[(v.vertex_id, i)] = Execution(
                    ExecutionAttemptID(v.vertex_id, i, first_attempt_number), state)
        self._out: list[Any] = []
        self.triggering: TriggeringCheckpoint | None = None
        self._completing = False
        self._queue_held = False  # a failover ended a _metadata write: the next queued request runs after it
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
        self.deactivator = ExecutionTrackingDeActivator(self._start_if_configured, self.stop_checkpoint_scheduler)

    # ------------------------------------------------------------------------------------------
    # sans-IO entry points
    # ------------------------------------------------------------------------------------------

    def handle(self, event: m.CoordinatorEvent) -> list:
        if self._finalizing is not None and not self._ends_finalization(event):
            if not isinstance(event, (m.TaskFailed, m.RestartTasks, m.JobStatusChanged)):
                self._held_events.append(event)  # Flink: the coordinator's lock is held while the _metadata is written
                return []
            # a failover (its failure or its restart) or a job status change takes the lock after the write: the
            # completion ends now (a little early), so that a restore sees the completed checkpoint and a stop does
            # not abort it, as in Flink. The completion only
            # schedules the next queued request (Flink's scheduleTriggerRequest, on the timer thread), so it runs
            # after the event: a request is not triggered on the tasks the failover is about to cancel
            self._queue_held = True
            try:
                self._on_metadata_written(self._finalizing.checkpoint_id)
                self._dispatch(event)
            finally:
                self._queue_held = False
            self._execute_queued_request()
        else:
            self._dispatch(event)
        while self._held_events and self._finalizing is None:
            self._dispatch(self._held_events.popleft())
        return self.drain_actions()

    def _ends_finalization(self, event: m.CoordinatorEvent) -> bool:
        return (isinstance(event, m.TimerFired) and event.kind is m.TimerKind.METADATA_WRITTEN
                and event.token == self._finalizing.checkpoint_id)

    def _dispatch(self, event: m.CoordinatorEvent) -> None:
        if isinstance(event, m.TriggerRequest):
            self.trigger_checkpoint(event)
        elif isinstance(event, m.AcknowledgeCheckpoint):
            self.receive_acknowledge_message(event)
        elif isinstance(event, m.DeclineCheckpoint):
            self.receive_decline_message(event)
        elif isinstance(event, m.ReportCheckpointMetrics):
            self.report_checkpoint_metrics(event)
        elif isinstance(event, m.AcknowledgeCoordinatorState):
            self.receive_coordinator_state(event)
        elif isinstance(event, m.CoordinatorCheckpointFailed):
            self.receive_coordinator_checkpoint_failure(event)
        elif isinstance(event, m.MasterHookCompleted):
            self.receive_master_hook_completed(event)
        elif isinstance(event, m.TimerFired):
            self._on_timer(event)
        elif isinstance(event, m.TaskRunning):
            self.on_task_running(event.attempt_id)
        elif isinstance(event, m.TaskDeploying):
            self._set_execution_state(event.attempt_id, ExecutionState.DEPLOYING)
        elif isinstance(event, m.TaskFinished):
            self._set_execution_state(event.attempt_id, ExecutionState.FINISHED)
        elif isinstance(event, m.TaskFailed):
            self.on_task_failed(event)
        elif isinstance(event, m.RestartTasks):
            self.restart_tasks()
        elif isinstance(event, m.JobStatusChanged):
            self.job_status_changes(event.status)
        else:
            raise CoordinatorError(f"unknown event {event!r} (job {self.job_id}, {len(self.pending_checkpoints)} pending)")

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
    def finalizing_checkpoint_id(self) -> int | None:
        """The checkpoint whose ``_metadata`` write is under way (written, not yet in the store), if any."""
        return None if self._finalizing is None else self._finalizing.checkpoint_id

    @property
    def is_shutdown(self) -> bool:
        return self.shutdown_status is not None

    def current_attempt(self, vertex_id: JobVertexID, subtask_index: int) -> ExecutionAttemptID:
        return self.executions[(vertex_id, subtask_index)].attempt_id

    # ------------------------------------------------------------------------------------------
    # tasks and job status
    # ------------------------------------------------------------------------------------------

    def _is_live(self, attempt_id: ExecutionAttemptID, state: ExecutionState) -> bool:
        """Whether ``attempt_id`` is its subtask's current execution and not in a terminal state: Flink's
        ``DefaultExecutionGraph`` updates only its current executions, and an ``Execution`` leaves no terminal state
        (a report of an older attempt, or a late one of an attempt a failover ended, changes nothing)."""
        current = self.executions.get((attempt_id.vertex_id, attempt_id.subtask_index))
        if current is None:
            raise CoordinatorError(f"{state.value} for unknown task {attempt_id} (job {self.job_id})")
        return current.attempt_id == attempt_id and current.state not in _TERMINAL

    def _set_execution_state(self, attempt_id: ExecutionAttemptID, state: ExecutionState) -> None:
        """The execution's new state, heard by the deactivator (``_is_live``)."""
        if not self._is_live(attempt_id, state):
            return
        self.executions[(attempt_id.vertex_id, attempt_id.subtask_index)] = Execution(attempt_id, state)
        if not self.is_shutdown:
            self.deactivator.on_state_update(attempt_id, state)

    def on_task_running(self, attempt_id: ExecutionAttemptID) -> None:
        """A task reports RUNNING: Flink's ``DefaultExecutionGraph.updateStateInternal`` (``case RUNNING``) starts the
        periodic trigger if it is not running, then the execution switches to RUNNING (heard by the deactivator)."""
        if not self._is_live(attempt_id, ExecutionState.RUNNING):
            return
        if not self.is_shutdown and not self.scheduler.running:
            self._start_if_configured()
        self._set_execution_state(attempt_id, ExecutionState.RUNNING)

    def _start_if_configured(self) -> None:
        if self.scheduler.is_periodic_checkpointing_configured:
            self.start_checkpoint_scheduler()

    def on_task_failed(self, event: m.TaskFailed) -> None:
        """The job fails over (a region of every task, Flink's ``DefaultScheduler.restartTasksWithDelay``): the failed
        attempt ends FAILED, the others CANCELED (a finished one stays FINISHED), heard by the deactivator. Nothing
        else happens before the restart (``restart_tasks``): a periodic trigger the deactivator did not stop runs on
        (its requests fail their pre-flight check while no task runs), and the pending checkpoints stay pending (the
        old attempts' acknowledgements still count)."""
        key = (event.attempt_id.vertex_id, event.attempt_id.subtask_index)
        current = self.executions.get(key)
        if (current is None or current.attempt_id != event.attempt_id or self.is_shutdown
                or current.state in _ENDED_BY_FAILOVER):
            return  # a failure of an older attempt, one the failover already ended, or after shutdown
        for e in list(self.executions.values()):
            if e.state is not ExecutionState.FINISHED:
                self._set_execution_state(
                    e.attempt_id, ExecutionState.FAILED if e.attempt_id == event.attempt_id else ExecutionState.CANCELED)

    def restart_tasks(self) -> CompletedCheckpoint | None:
        """The restart after the delay (Flink's ``DefaultScheduler.restartTasks``): every subtask gets a new attempt
        (``resetForNewExecutions``), then ``SchedulerBase.restoreState`` aborts the pending checkpoints
        (``JOB_FAILOVER_REGION``) and restores the latest completed checkpoint (``RestoreFrom``)."""
        if self.is_shutdown:
            return None
        # the new attempts exist before the aborts, so that a queued request released by an abort is not
        # triggered on the old attempts (it fails its pre-flight check: no task runs yet)
        for k, e in list(self.executions.items()):
            self.executions[k] = Execution(e.attempt_id.next_attempt(), ExecutionState.CREATED)
        self.abort_pending_checkpoints(CheckpointException(CheckpointFailureReason.JOB_FAILOVER_REGION))
        # Flink's SchedulerBase.restoreState allows state no operator takes on a failover's restore (global:
        # restoreLatestCheckpointedStateToAll(.., true); regional: restoreLatestCheckpointedStateToSubtasks): the
        # latest may be the savepoint the job started from, allowing it
        return self.restore_latest_checkpointed_state(allow_non_restored_state=True)

    def job_status_changes(self, status: JobStatus) -> None:
        """The job's status, heard by the deactivator (which stops a periodic trigger it started when the job leaves
        RUNNING: at a job's first failover, not after; ``deactivator``). A terminal status also shuts down."""
        self.job_status = status
        if self.is_shutdown:
            return
        self.deactivator.job_status_changes(status)
        if status.is_terminal:
            self.shutdown(status)

    def _release_shared_state(self, lowest_retained: int | None) -> None:
        """Discard the shared files no checkpoint from ``lowest_retained`` on uses (None: no checkpoint is kept)."""
        lowest = lowest_retained if lowest_retained is not None else self.id_counter.get() + 1
        handles = self.shared_state_registry.unregister_unused_state(lowest)
        if handles:
            self._emit(m.DiscardSharedState(tuple(handles), lowest))

    def shutdown(self, job_status: JobStatus) -> None:
        if self.is_shutdown:
            return
        self.scheduler.stop()
        self.abort_pending_and_queued_checkpoints(
            CheckpointException(CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN)
        )
        self.shutdown_status = job_status
        retained = self.store.get_all_checkpoints()
        discarded = self.store.shutdown(job_status)
        for checkpoint in discarded:
            self._discard_completed(checkpoint.checkpoint_id, m.DiscardReason.SHUTDOWN)
        if job_status.is_globally_terminal:
            # the shared state no checkpoint the retention keeps uses (Flink's store shutdown)
            gone = {id(c) for c in discarded}
            lowest = min((c.checkpoint_id for c in retained if id(c) not in gone), default=None)
            self._release_shared_state(lowest)
        self.id_counter.shutdown()
        close_hooks(self.master_hooks)
