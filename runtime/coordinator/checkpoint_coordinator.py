"""The checkpoint coordinator, sans-IO: ``handle(event)`` takes one event (``messages.py``) and returns the actions
to carry out, in order; its timers are ``EventTimers`` whose ``TimerFired`` comes back through ``handle``. It is the
composition root of Flink's ``CheckpointCoordinator``: it holds the shared state (the pending checkpoints, the
executions and the job's status) and its collaborators own the rest: ``CheckpointTriggering`` (request queue,
trigger in flight, periodic trigger), ``CheckpointCompletion`` (acknowledgements, declines, completing, aborting)
and ``CheckpointRestore``. docs/architecture.md ("The control plane") has the narrative."""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.completed_store import StandaloneCompletedCheckpointStore
from barriersim.runtime.coordinator.completion import CheckpointCompletion
from barriersim.runtime.coordinator.configuration import (  # noqa: F401 (re-exported)
    NO_PERIODIC_CHECKPOINTS,
    CheckpointCoordinatorConfiguration,
)
from barriersim.runtime.coordinator.deactivator import ExecutionTrackingDeActivator
from barriersim.runtime.coordinator.failure_manager import CheckpointFailureManager
from barriersim.runtime.coordinator.id_counter import StandaloneCheckpointIDCounter
from barriersim.runtime.coordinator.master_hooks import MasterTriggerRestoreHook, close_hooks, validate_hook
from barriersim.runtime.coordinator.outcomes import CoordinatorError  # noqa: F401 (re-exported)
from barriersim.runtime.coordinator.pending_checkpoint import CompletedCheckpoint, PendingCheckpoint
from barriersim.runtime.coordinator.plan import Execution, ExecutionState, JobVertexInfo
from barriersim.runtime.coordinator.properties import JobStatus
from barriersim.runtime.coordinator.restore import CheckpointRestore
from barriersim.runtime.coordinator.shared_state_registry import RecoveryClaimMode, SharedStateRegistry
from barriersim.runtime.coordinator.stats_tracker import CheckpointStatsTracker
from barriersim.runtime.coordinator.triggering import CheckpointTriggering, TriggeringCheckpoint
from barriersim.runtime.event_timers import EventTimers
from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason
from barriersim.runtime.ids import ExecutionAttemptID, JobVertexID, OperatorID
from barriersim.runtime.state.snapshot import CheckpointMetadata, OperatorSubtaskState

_ENDED_BY_FAILOVER = (ExecutionState.FAILED, ExecutionState.CANCELED)
_TERMINAL = (ExecutionState.FINISHED, *_ENDED_BY_FAILOVER)


class CheckpointCoordinator:
    def __init__(
        self,
        job_id: str,
        vertices: Sequence[JobVertexInfo],
        config: CheckpointCoordinatorConfiguration,
        *,
        clock: Callable[[], int],
        timers: EventTimers,
        rng: random.Random,
        master_hooks: Sequence[MasterTriggerRestoreHook] = (),
        operator_coordinators: Sequence[OperatorID] = (),
        completed_checkpoint_store: StandaloneCompletedCheckpointStore | None = None,
        checkpoint_id_counter: StandaloneCheckpointIDCounter | None = None,
        tasks_running: bool = True,
        checkpoint_writer: Callable[[CheckpointMetadata, bool], Any] | None = None,
        first_attempt_number: int = 0,
        metadata_write_ms: Callable[[list[OperatorSubtaskState]], float] | None = None,
        claim_mode: RecoveryClaimMode = RecoveryClaimMode.NO_CLAIM,
    ):
        """``checkpoint_writer(metadata, is_savepoint)`` (Flink's ``CheckpointStorageCoordinatorView``) writes each
        ``_metadata`` while the checkpoint is finalized (a failed write aborts it as ``FINALIZE_CHECKPOINT_FAILURE``;
        without one, ``PersistCheckpoint`` is emitted); ``metadata_write_ms(subtask_states)``: how long that write
        holds the coordinator (the cost model's time; events wait meanwhile, as under Flink's lock);
        ``first_attempt_number``: above every attempt of an earlier JobManager; ``claim_mode``: whether the
        checkpoints of a recovered ``completed_checkpoint_store`` are the job's to discard once unused."""
        self.job_id = job_id
        self.vertices = tuple(vertices)
        self.config = config
        self._clock = clock
        self._out: list[m.CoordinatorAction] = []
        self._last_outcome: Any = None
        # events that wait for a _metadata write (Flink: the coordinator's lock)
        self._held_events: deque[m.CoordinatorEvent] = deque()
        self._master_hooks: dict[str, MasterTriggerRestoreHook] = {}
        for hook in master_hooks:
            if not self.add_master_hook(hook):
                raise CoordinatorError(f"master hook {hook.identifier!r} registered twice")
        vertex_of_operator = {op: v for v in self.vertices for op in v.operators}
        for op in operator_coordinators:
            if op not in vertex_of_operator:
                raise CoordinatorError(f"operator coordinator for unknown operator {op!r}")
        operator_coordinators = tuple(operator_coordinators)
        self._store = completed_checkpoint_store or StandaloneCompletedCheckpointStore(config.max_retained_checkpoints)
        # Flink's store owns the registry; a store recovered by a new JobManager registers its checkpoints again
        self._registry = SharedStateRegistry()
        for checkpoint in self._store.get_all_checkpoints():
            self._registry.register_all_after_restored(
                checkpoint.checkpoint_id, checkpoint.operator_states.values(), claim_mode
            )
        self._id_counter = checkpoint_id_counter or StandaloneCheckpointIDCounter()
        self._id_counter.start()
        self._failure_manager = CheckpointFailureManager(config.tolerable_checkpoint_failure_number)
        self._stats = CheckpointStatsTracker()
        self._pending: dict[int, PendingCheckpoint] = {}
        self._shutdown_status: JobStatus | None = None
        self._job_status = JobStatus.CREATED
        self._executions: dict[tuple[JobVertexID, int], Execution] = {}
        state = ExecutionState.RUNNING if tasks_running else ExecutionState.CREATED
        for v in self.vertices:
            for i in range(v.parallelism):
                self._executions[(v.vertex_id, i)] = Execution(
                    ExecutionAttemptID(v.vertex_id, i, first_attempt_number), state
                )
        is_shutdown = self._is_shut_down
        self._completion = CheckpointCompletion(
            job_id,
            self.vertices,
            pending=self._pending,
            store=self._store,
            shared_state_registry=self._registry,
            stats=self._stats,
            failure_manager=self._failure_manager,
            id_counter=self._id_counter,
            operator_coordinators=operator_coordinators,
            clock=clock,
            timers=timers,
            emit=self._emit,
            checkpoint_writer=checkpoint_writer,
            metadata_write_ms=metadata_write_ms,
            min_pause_between_checkpoints=config.min_pause_between_checkpoints,
            is_shutdown=is_shutdown,
            checkpoint_ended=lambda pending, exception: self._triggering.checkpoint_ended(pending, exception),
            execute_queued_request=lambda: self._triggering.execute_queued_request(),
            synchronous_savepoint_failed=lambda reason: self._triggering.synchronous_savepoint_failed(reason),
        )
        self._triggering = CheckpointTriggering(
            job_id,
            self.vertices,
            config,
            pending=self._pending,
            executions=self._executions,
            master_hooks=self._master_hooks,
            operator_coordinators=operator_coordinators,
            id_counter=self._id_counter,
            stats=self._stats,
            failure_manager=self._failure_manager,
            completion=self._completion,
            clock=clock,
            timers=timers,
            rng=rng,
            emit=self._emit,
            is_shutdown=is_shutdown,
            job_running=lambda: self._job_status is JobStatus.RUNNING and self._shutdown_status is None,
        )
        self._restore = CheckpointRestore(
            job_id,
            self.vertices,
            store=self._store,
            id_counter=self._id_counter,
            shared_state_registry=self._registry,
            master_hooks=self._master_hooks,
            stats=self._stats,
            completion=self._completion,
            clock=clock,
            emit=self._emit,
            is_shutdown=is_shutdown,
        )
        self._deactivator = ExecutionTrackingDeActivator(
            self._start_if_configured, self._triggering.stop_checkpoint_scheduler
        )
        self._handlers = self._event_handlers()

    # ------------------------------------------------------------------------------------------
    # the one way in
    # ------------------------------------------------------------------------------------------

    def handle(self, event: m.CoordinatorEvent) -> list[m.CoordinatorAction]:
        """Everything ``event`` causes, in order. While a ``_metadata`` write holds the coordinator, events wait for
        it (Flink's lock), but a failover (its failure or its restart) or a job status change takes the lock after
        the write: the completion ends now (a little early), so that a restore sees the completed checkpoint and a
        stop does not abort it, as in Flink; the next queued request runs after the event (Flink's
        ``scheduleTriggerRequest``, on the timer thread), not on the tasks the failover is about to cancel."""
        finalizing = self._completion.finalizing
        if finalizing is not None and not self._ends_finalization(event, finalizing.checkpoint_id):
            if not isinstance(event, (m.TaskFailed, m.RestartTasks, m.JobStatusChanged)):
                self._held_events.append(event)
                return []
            with self._triggering.queue_held():
                self._completion.metadata_written(finalizing.checkpoint_id)
                self._dispatch(event)
            self._triggering.execute_queued_request()
        else:
            self._dispatch(event)
        while self._held_events and self._completion.finalizing is None:
            self._dispatch(self._held_events.popleft())
        out, self._out = self._out, []
        return out

    @staticmethod
    def _ends_finalization(event: m.CoordinatorEvent, checkpoint_id: int) -> bool:
        return (
            isinstance(event, m.TimerFired)
            and event.kind is m.TimerKind.METADATA_WRITTEN
            and event.token == checkpoint_id
        )

    def _dispatch(self, event: m.CoordinatorEvent) -> None:
        handler = self._handlers.get(type(event))
        if handler is None:
            raise CoordinatorError(f"unknown event {event!r} (job {self.job_id}, {len(self._pending)} pending)")
        self._last_outcome = handler(event)

    def _event_handlers(self) -> dict[type, Callable[[Any], object]]:
        triggering, completion, restore = self._triggering, self._completion, self._restore
        return {
            m.TriggerRequest: triggering.trigger_checkpoint,
            m.AcknowledgeCheckpoint: completion.receive_acknowledge_message,
            m.DeclineCheckpoint: completion.receive_decline_message,
            m.ReportCheckpointMetrics: completion.report_checkpoint_metrics,
            m.AcknowledgeCoordinatorState: triggering.receive_coordinator_state,
            m.CoordinatorCheckpointFailed: triggering.receive_coordinator_checkpoint_failure,
            m.MasterHookCompleted: triggering.receive_master_hook_completed,
            m.TimerFired: self._on_timer,
            m.TaskRunning: lambda e: self._on_task_running(e.attempt_id),
            m.TaskDeploying: lambda e: self._set_execution_state(e.attempt_id, ExecutionState.DEPLOYING),
            m.TaskFinished: lambda e: self._set_execution_state(e.attempt_id, ExecutionState.FINISHED),
            m.TaskFailed: self._on_task_failed,
            m.RestartTasks: lambda e: self._restart_tasks(),
            m.JobStatusChanged: lambda e: self._job_status_changes(e.status),
            m.RestoreLatestCheckpoint: lambda e: restore.restore_latest_checkpointed_state(e.allow_non_restored_state),
            m.RestoreSavepoint: lambda e: restore.restore_savepoint(e.path, e.loader, e.allow_non_restored_state),
            m.StartCheckpointScheduler: lambda e: triggering.start_checkpoint_scheduler(),
            m.StopCheckpointScheduler: lambda e: triggering.stop_checkpoint_scheduler(),
            m.AbortPendingCheckpoints: lambda e: completion.abort_pending_checkpoints(e.exception),
            m.Shutdown: lambda e: self._shutdown(e.job_status),
        }

    def _on_timer(self, event: m.TimerFired) -> None:
        if event.kind is m.TimerKind.METADATA_WRITTEN:
            self._completion.metadata_written(event.token)
        elif event.kind is m.TimerKind.PERIODIC_TRIGGER:
            self._triggering.periodic_timer_fired(event.token)
        elif event.kind is m.TimerKind.TRIGGER_FAILURE:
            self._triggering.trigger_failure_due(event.token)
        else:
            self._completion.expire(event.token)

    def _emit(self, action: m.CoordinatorAction) -> None:
        self._out.append(action)

    def add_master_hook(self, hook: MasterTriggerRestoreHook) -> bool:
        """Flink's ``addMasterHook`` (configuration, before the job runs): False if a hook with that identifier is
        already registered."""
        validate_hook(hook)
        if hook.identifier in self._master_hooks:
            return False
        self._master_hooks[hook.identifier] = hook
        return True

    # ------------------------------------------------------------------------------------------
    # queries
    # ------------------------------------------------------------------------------------------

    def last_outcome(self) -> Any:
        """What became of the last event handled (Flink's return values of ``receiveAcknowledgeMessage`` and
        friends): an ``AcknowledgeOutcome``, ``DeclineOutcome`` or ``TriggerPhaseOutcome``; whether the figures of a
        ``ReportCheckpointMetrics`` were taken or ``StartCheckpointScheduler`` started the trigger; the checkpoint a
        restore restored (None: none). None for other events."""
        return self._last_outcome

    @property
    def number_of_pending_checkpoints(self) -> int:
        return len(self._pending)

    @property
    def number_of_retained_successful_checkpoints(self) -> int:
        return self._store.number_of_retained_checkpoints

    @property
    def is_periodic_checkpointing_started(self) -> bool:
        return self._triggering.is_periodic_checkpointing_started

    @property
    def is_triggering(self) -> bool:
        """Flink's ``isTriggering``: a trigger is in flight (new requests wait in the queue)."""
        return self._triggering.in_flight is not None

    def trigger_in_flight(self) -> TriggeringCheckpoint | None:
        return self._triggering.in_flight

    def pending_checkpoints(self) -> Mapping[int, PendingCheckpoint]:
        """Flink's ``getPendingCheckpoints``: checkpoint id -> pending checkpoint (a read-only view)."""
        return MappingProxyType(self._pending)

    def executions(self) -> Mapping[tuple[JobVertexID, int], Execution]:
        """(vertex, subtask index) -> its current execution: attempt and state (a read-only view)."""
        return MappingProxyType(self._executions)

    def pending_executions(self) -> frozenset[ExecutionAttemptID]:
        """The executions the periodic trigger's deactivator waits for (Flink's ``pendingExecutions``)."""
        return frozenset(self._deactivator.pending_executions)

    def checkpoint_stats(self) -> CheckpointStatsTracker:
        """The checkpoint statistics (Flink's ``CheckpointStatsTracker``)."""
        return self._stats

    def checkpoint_counts(self) -> dict[str, int]:
        """The statistics' counts: total, in progress, completed, failed, restored."""
        return dict(self._stats.counts)

    def completed_checkpoint_store(self) -> StandaloneCompletedCheckpointStore:
        """Flink's ``getCheckpointStore``."""
        return self._store

    def latest_completed_checkpoint(self) -> CompletedCheckpoint | None:
        return self._store.get_latest_checkpoint()

    def checkpoint_id_counter(self) -> StandaloneCheckpointIDCounter:
        return self._id_counter

    def shared_state_registry(self) -> SharedStateRegistry:
        return self._registry

    def continuous_failure_count(self) -> int:
        """The failure manager's count of failed checkpoints since the last success."""
        return self._failure_manager.continuous_failure_counter

    def num_queued_requests(self) -> int:
        """How many trigger requests wait in the queue (Flink's ``getTriggerRequestQueue().size()``)."""
        return self._triggering.num_queued_requests

    @property
    def finalizing_checkpoint_id(self) -> int | None:
        """The checkpoint whose ``_metadata`` write is under way (written, not yet in the store), if any."""
        finalizing = self._completion.finalizing
        return None if finalizing is None else finalizing.checkpoint_id

    @property
    def last_checkpoint_completion_relative_time(self) -> int:
        return self._completion.last_checkpoint_completion_relative_time

    @property
    def is_shutdown(self) -> bool:
        return self._shutdown_status is not None

    def _is_shut_down(self) -> bool:
        return self._shutdown_status is not None

    def current_attempt(self, vertex_id: JobVertexID, subtask_index: int) -> ExecutionAttemptID:
        return self._executions[(vertex_id, subtask_index)].attempt_id

    # ------------------------------------------------------------------------------------------
    # tasks and job status
    # ------------------------------------------------------------------------------------------

    def _is_live(self, attempt_id: ExecutionAttemptID, state: ExecutionState) -> bool:
        """Whether ``attempt_id`` is its subtask's current execution and not in a terminal state: Flink's
        ``DefaultExecutionGraph`` updates only its current executions, and an ``Execution`` leaves no terminal state
        (a report of an older attempt, or a late one of an attempt a failover ended, changes nothing)."""
        current = self._executions.get((attempt_id.vertex_id, attempt_id.subtask_index))
        if current is None:
            raise CoordinatorError(f"{state.value} for unknown task {attempt_id} (job {self.job_id})")
        return current.attempt_id == attempt_id and current.state not in _TERMINAL

    def _set_execution_state(self, attempt_id: ExecutionAttemptID, state: ExecutionState) -> None:
        """The execution's new state, heard by the deactivator (``_is_live``)."""
        if not self._is_live(attempt_id, state):
            return
        self._executions[(attempt_id.vertex_id, attempt_id.subtask_index)] = Execution(attempt_id, state)
        if not self.is_shutdown:
            self._deactivator.on_state_update(attempt_id, state)

    def _on_task_running(self, attempt_id: ExecutionAttemptID) -> None:
        """A task reports RUNNING: Flink's ``DefaultExecutionGraph.updateStateInternal`` (``case RUNNING``) starts the
        periodic trigger if it is not running, then the execution switches to RUNNING (heard by the deactivator)."""
        if not self._is_live(attempt_id, ExecutionState.RUNNING):
            return
        if not self.is_shutdown and not self._triggering.is_periodic_checkpointing_started:
            self._start_if_configured()
        self._set_execution_state(attempt_id, ExecutionState.RUNNING)

    def _start_if_configured(self) -> None:
        if self._triggering.is_periodic_checkpointing_configured:
            self._triggering.start_checkpoint_scheduler()

    def _on_task_failed(self, event: m.TaskFailed) -> None:
        """The job fails over (a region of every task, Flink's ``DefaultScheduler.restartTasksWithDelay``): the failed
        attempt ends FAILED, the others CANCELED (a finished one stays FINISHED), heard by the deactivator. Nothing
        else happens before the restart (``RestartTasks``): a periodic trigger the deactivator did not stop runs on
        (its requests fail their pre-flight check while no task runs), and the pending checkpoints stay pending (the
        old attempts' acknowledgements still count)."""
        key = (event.attempt_id.vertex_id, event.attempt_id.subtask_index)
        current = self._executions.get(key)
        if (
            current is None
            or current.attempt_id != event.attempt_id
            or self.is_shutdown
            or current.state in _ENDED_BY_FAILOVER
        ):
            return  # a failure of an older attempt, one the failover already ended, or after shutdown
        for e in list(self._executions.values()):
            if e.state is not ExecutionState.FINISHED:
                self._set_execution_state(
                    e.attempt_id, ExecutionState.FAILED if e.attempt_id == event.attempt_id else ExecutionState.CANCELED
                )

    def _restart_tasks(self) -> CompletedCheckpoint | None:
        """The restart after the delay (Flink's ``DefaultScheduler.restartTasks``): every subtask gets a new attempt
        (``resetForNewExecutions``), then ``SchedulerBase.restoreState`` aborts the pending checkpoints
        (``JOB_FAILOVER_REGION``) and restores the latest completed checkpoint (``RestoreFrom``)."""
        if self.is_shutdown:
            return None
        # the new attempts exist before the aborts, so that a queued request released by an abort is not
        # triggered on the old attempts (it fails its pre-flight check: no task runs yet)
        for k, e in list(self._executions.items()):
            self._executions[k] = Execution(e.attempt_id.next_attempt(), ExecutionState.CREATED)
        self._completion.abort_pending_checkpoints(CheckpointException(CheckpointFailureReason.JOB_FAILOVER_REGION))
        # Flink's SchedulerBase.restoreState allows state no operator takes on a failover's restore (global:
        # restoreLatestCheckpointedStateToAll(.., true); regional: restoreLatestCheckpointedStateToSubtasks): the
        # latest may be the savepoint the job started from, allowing it
        return self._restore.restore_latest_checkpointed_state(allow_non_restored_state=True)

    def _job_status_changes(self, status: JobStatus) -> None:
        """The job's status, heard by the deactivator (which stops a periodic trigger it started when the job leaves
        RUNNING: at a job's first failover, not after; ``deactivator``). A terminal status also shuts down."""
        self._job_status = status
        if self.is_shutdown:
            return
        self._deactivator.job_status_changes(status)
        if status.is_terminal:
            self._shutdown(status)

    def _shutdown(self, job_status: JobStatus) -> None:
        if self.is_shutdown:
            return
        self._triggering.stop_periodic_trigger()
        self._triggering.abort_pending_and_queued_checkpoints(
            CheckpointException(CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN)
        )
        self._shutdown_status = job_status
        retained = self._store.get_all_checkpoints()
        discarded = self._store.shutdown(job_status)
        for checkpoint in discarded:
            self._completion.discard_completed(checkpoint.checkpoint_id, m.DiscardReason.SHUTDOWN)
        if job_status.is_globally_terminal:
            # the shared state no checkpoint the retention keeps uses (Flink's store shutdown)
            gone = {id(c) for c in discarded}
            lowest = min((c.checkpoint_id for c in retained if id(c) not in gone), default=None)
            self._completion.release_shared_state(lowest)
        self._id_counter.shutdown()
        close_hooks(self._master_hooks)
