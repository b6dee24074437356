"""The JobMaster of one job, sans-IO: ``handle(event)`` (``runtime.job.events``) returns the actions to carry out
(``runtime.job.actions``). Both drivers run this one class. It is the composition root: it owns the job's outcome
and its clock, answers what its tasks tell of their lifecycle, and its collaborators own the rest:
``ExecutionDeployer`` (the deployments), ``JobCheckpointing`` (the coordinator of each JobManager generation and what
it asks), ``TaskCheckpointReports`` (what a task tells of a checkpoint), ``FaultInjector`` (the fault schedule),
``JobFailover`` (a task's death, restarts, JobManager recovery, how a job fails) and ``JobOperations`` (savepoints,
stop-with-savepoint, cancel). Mirrors Flink's ``JobMaster`` with its ``DefaultScheduler``. docs/architecture.md
("The control plane") has the narrative."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from barriersim.runtime.checkpoint_cost import Charging, CostCharger
from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.checkpoint_coordinator import CheckpointCoordinator
from barriersim.runtime.coordinator.checkpoint_recovery import next_attempt_number
from barriersim.runtime.coordinator.properties import JobStatus
from barriersim.runtime.coordinator.stats_tracker import CheckpointStatsTracker, job_statistics
from barriersim.runtime.event_timers import EventTimers
from barriersim.runtime.faults.fault_log import FaultLog
from barriersim.runtime.faults.fault_schedule import (
    CRASHES,
    CrashCoordinator,
    DamageCheckpoint,
    Fault,
    SlowTask,
)
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.job import events as je
from barriersim.runtime.job.actions import (
    CoordinatorMessage,
    CoordinatorRecoveryDue,
    FaultDue,
    JobAction,
    JobEnded,
    ReportRunning,
    RestartDue,
    SubtaskKey,
    subtask_name,
)
from barriersim.runtime.job.checkpointing import JobCheckpointing
from barriersim.runtime.job.config import JobConfig, JobOutcome
from barriersim.runtime.job.execution_deployer import ExecutionDeployer
from barriersim.runtime.job.failover import JobFailover
from barriersim.runtime.job.fault_injection import FaultInjector
from barriersim.runtime.job.operations import JobOperations
from barriersim.runtime.job.report import JobReport, JobRestore, Operation
from barriersim.runtime.job.restart_strategy import ExponentialDelayRestartStrategy, FixedDelayRestartStrategy
from barriersim.runtime.job.restore_failure import RESTORE_ERRORS, RestorePhase, describe
from barriersim.runtime.job.task_checkpoint_reports import TaskCheckpointReports
from barriersim.runtime.state.snapshot import CheckpointMetadata
from barriersim.runtime.storage.checkpoint_storage import CheckpointStorage

Trace = Callable[[str, str], None]


class JobMaster:
    def __init__(
        self,
        config: JobConfig,
        job_id: str,
        *,
        storage: CheckpointStorage,
        clock: Callable[[], int],
        timers: EventTimers,
        coordinator_rng: Callable[[], random.Random],
        trace: Trace | None = None,
        keep_completed_metadata: bool = False,
        charging: Charging = Charging.VIRTUAL,
        cost_rng: random.Random | None = None,
        savepoint_storage: CheckpointStorage | None = None,
        restore: JobRestore | None = None,
        first_epoch: int = 0,
        first_attempt_number: int = 0,
        fault_log: FaultLog | None = None,
        fired_points: set[Fault] | None = None,
        finished: set[SubtaskKey] | None = None,
        started_ms: int | None = None,
        arm_timed_faults: bool = True,
        lost_nodes: frozenset[int] = frozenset(),
    ) -> None:
        """``storage``: a ``CheckpointStorage`` (checkpoint metadata, recovery); ``savepoint_storage``: where
        savepoints are written (default ``storage``); ``timers``: the driver's, for the coordinator's timers;
        ``coordinator_rng()``: the random stream of each new coordinator; ``keep_completed_metadata``: keep every
        completed checkpoint's metadata with its deployment epoch (``completed_in_epoch``, for consistent-cut
        checks); ``charging`` and ``cost_rng``: how the driver charges the ``_metadata`` write of the job's
        checkpoint cost model (``config.storage``) and its random stream. ``restore``: the job starts from a
        savepoint or retained checkpoint. A job after another of the same run continues its ``first_epoch`` and
        ``first_attempt_number``, shares its ``fault_log``, ``fired_points`` and ``finished`` set (cleared in place:
        a driver may hold it), keeps the run's clock (``started_ms``) and the nodes it lost (``lost_nodes``) and
        leaves the timed faults to the dispatcher (``arm_timed_faults=False``)."""
        self.config = config
        self.graph = config.graph.validate()
        self.job_id = job_id
        self.storage = storage
        self.savepoint_storage = savepoint_storage if savepoint_storage is not None else storage
        self._clock = clock
        self._trace = trace or (lambda label, detail: None)
        self._out: list[JobAction] = []
        self.outcome: JobOutcome | None = None
        self.failure_reason: str | None = None
        self.started_ms: int | None = started_ms  # the job's clock (fault times) starts when the first tasks restored
        self.source_records_at_start: dict[str, int] = {}  # of the run's first deployment (TasksRestored)
        self._restored_in_flight = 0
        self._arm_timed_faults = arm_timed_faults
        self._restore_settings = restore
        self.restored_at_start = False  # the job was started from a savepoint or retained checkpoint
        fired_points = fired_points if fired_points is not None else set()
        self._fault_log = fault_log if fault_log is not None else FaultLog(config.faults)
        emit = self._out_append
        # the collaborators; where two call each other, the one built first calls the other through a lambda
        self._deployer = ExecutionDeployer(
            config,
            storage=storage,
            fired_points=fired_points,
            finished=finished if finished is not None else set(),
            first_epoch=first_epoch,
            lost_nodes=lost_nodes,
            current_attempt=lambda vertex, index: self._checkpointing.current_attempt(vertex, index),
            deploying=lambda attempt: self._checkpointing.send(m.TaskDeploying(attempt)),
            restore_failed=lambda reason: self._failover.restore_failed(RestorePhase.FAILOVER, "restore", reason),
            emit=emit,
        )
        self._injector = FaultInjector(
            config.faults,
            config.placement,
            fault_log=self._fault_log,
            fired_points=fired_points,
            deployer=self._deployer,
            storage=storage,
            job_ms=self.job_ms,
            job_ended=self._ended,
            trace=self._trace,
            emit=emit,
        )
        self._checkpointing = JobCheckpointing(
            config,
            job_id,
            storage=storage,
            savepoint_storage=self.savepoint_storage,
            clock=clock,
            timers=timers,
            coordinator_rng=coordinator_rng,
            cost=CostCharger(config.storage, charging, cost_rng or random.Random(0)),
            keep_completed_metadata=keep_completed_metadata,
            first_attempt_number=first_attempt_number,
            fault_log=self._fault_log,
            job_ms=self.job_ms,
            epoch=lambda: self._deployer.epoch,
            trace=self._trace,
            to_task=self._injector.to_task,
            crash_point=self._injector.crash_point,
            request_completed=self._request_completed,
            checkpoint_completed=self._injector.checkpoint_completed,
            request_failed=lambda request, cid, reason: self._operations.request_failed(request, cid, reason),
            savepoint_written=lambda cid, path, metadata: self._operations.savepoint_written(cid, path, metadata),
            fail_over=lambda task, why: self._failover.fail_over(task, why),
            job_ended=self._ended,
            failing_over=lambda: self._failover.failing_over,
        )
        self._operations = JobOperations(
            storage=storage,
            checkpointing=self._checkpointing,
            deployer=self._deployer,
            job_ms=self.job_ms,
            outcome=lambda: self.outcome,
            cancelled=self._cancelled,
            trace=self._trace,
            emit=emit,
        )
        self._failover = JobFailover(
            config,
            job_id,
            storage=storage,
            clock=clock,
            coordinator_rng=coordinator_rng,
            checkpointing=self._checkpointing,
            deployer=self._deployer,
            injector=self._injector,
            operations=self._operations,
            fault_log=self._fault_log,
            job_ms=self.job_ms,
            job_ended=self._ended,
            fail=self._failed,
            trace=self._trace,
            emit=emit,
        )
        self._checkpoint_reports = TaskCheckpointReports(
            job_id,
            self.graph,
            checkpointing=self._checkpointing,
            deployer=self._deployer,
            injector=self._injector,
            job_ms=self.job_ms,
        )
        self._handlers: dict[type, Callable[[Any], None]] = {
            je.Start: self._start,
            je.TasksRestored: self._tasks_restored,
            je.TasksStarted: self._tasks_started,
            je.TasksRunning: self._tasks_running,
            je.DeployFailed: self._failover.deploy_failed,
            je.CheckpointAcknowledged: self._checkpoint_reports.acknowledge,
            je.CheckpointDeclined: self._checkpoint_reports.decline,
            je.IncompleteStatsReported: self._checkpoint_reports.report_incomplete_snapshot_stats,
            je.TaskFinished: self._task_finished,
            je.TaskFailed: self._failover.task_failed,
            je.TaskCrashedAt: self._failover.task_crashed_at,
            je.SlowdownMet: self._injector.slowdown_met,
            je.TriggerSavepoint: lambda e: self._operations.trigger_savepoint(),
            je.StopWithSavepoint: lambda e: self._operations.stop_with_savepoint(e.drain),
            je.CancelJob: lambda e: self._operations.cancel(),
            je.CoordinatorTimerFired: self._checkpointing.timer_fired,
            CoordinatorMessage: lambda e: self._checkpointing.receives(e.generation, e.event),
            FaultDue: self._fault_due,
            RestartDue: self._failover.restart,
            CoordinatorRecoveryDue: self._failover.recover_coordinator,
        }

    def handle(self, event: je.JobEvent) -> list[JobAction]:
        """The one way in: everything ``event`` causes, in order (``runtime.job.actions``)."""
        handler = self._handlers.get(type(event))
        if handler is None:
            raise TypeError(f"job {self.job_id}: not a JobMaster event: {event!r}")
        handler(event)
        out, self._out = self._out, []
        return out

    def _out_append(self, action: JobAction) -> None:
        self._out.append(action)

    # -- the job's outcome ----------------------------------------------------------------------------------------

    def _request_completed(self, request_id: int, checkpoint_id: int) -> None:
        """A savepoint request completed: crashes due after it are armed; a stop-with-savepoint's may find its
        tasks failed over (``JobFailover.stop_savepoint_completed``)."""
        op = self._operations.request_completed(request_id, checkpoint_id)
        if op is None:
            return
        self._injector.savepoint_completed(checkpoint_id)
        if op.operation == "stop_with_savepoint":
            self._failover.stop_savepoint_completed(op)

    def _ended(self) -> bool:
        return self.outcome is not None

    def _failed(self, reason: str) -> None:
        self.outcome = JobOutcome.FAILED
        self.failure_reason = reason

    def _cancelled(self) -> None:
        self.outcome = JobOutcome.CANCELED

    # -- queries --------------------------------------------------------------------------------------------------

    def job_ms(self) -> int:
        """The job's clock: ms since the first deployment's tasks were restored (0 before)."""
        return 0 if self.started_ms is None else self._clock() - self.started_ms

    def is_current(self, attempt: ExecutionAttemptID) -> bool:
        """Whether ``attempt`` is a running task of the current deployment (a message for it is delivered)."""
        return self._deployer.is_current(attempt)

    def epoch(self) -> int:
        """The current deployment (the next one is ``epoch() + 1``)."""
        return self._deployer.epoch

    def is_running(self) -> bool:
        """The current deployment's tasks were restored and have not been cancelled."""
        return self._deployer.running

    def finished_subtasks(self) -> set[SubtaskKey]:
        """The current deployment's finished subtasks (the run's set, cleared in place for each deployment)."""
        return self._deployer.finished

    def attempt_of(self, vertex: str, index: int) -> ExecutionAttemptID:
        """The attempt of subtask ``index`` of ``vertex`` in the current deployment."""
        return self._deployer.attempts[(vertex, index)]

    def lost_nodes(self) -> frozenset[int]:
        """The nodes a ``kill_node`` took; they do not come back."""
        return frozenset(self._deployer.lost_nodes)

    def killed(self) -> list[str]:
        """What the fault schedule killed: ``name@attempt`` of a task, or ``coordinator``."""
        return list(self._injector.killed)

    def restarts(self) -> int:
        return self._failover.restarts

    def failures(self) -> list[str]:
        """What failed the job over (or failed it), one line each."""
        return list(self._failover.failures)

    def restart_strategy(self) -> FixedDelayRestartStrategy | ExponentialDelayRestartStrategy:
        """The current JobMaster's restart strategy (a new JobManager starts a new one)."""
        return self._failover.restart_strategy

    def fault_report(self) -> list[dict[str, Any]]:
        """What the fault schedule fired so far (``FaultLog.report``)."""
        return self._fault_log.report()

    def coordinator_generation(self) -> int:
        """The JobManager generation whose coordinator runs (a message for an older one is lost)."""
        return self._checkpointing.generation

    def coordinator_down(self) -> bool:
        """The JobManager died and its successor has not recovered yet."""
        return self._checkpointing.down

    def coordinator(self) -> CheckpointCoordinator:
        """The current JobManager's checkpoint coordinator (a dead one while ``coordinator_down()``)."""
        return self._checkpointing.coordinator

    def retired_stats(self) -> list[CheckpointStatsTracker]:
        """The statistics of the coordinators that died (JobManager failovers)."""
        return list(self._checkpointing.retired_stats)

    def next_attempt_number(self) -> int:
        """Above every execution attempt the job made (a job or run that continues this one starts there)."""
        return next_attempt_number(self._checkpointing.coordinator)

    def completed_in_epoch(self) -> dict[int, tuple[int, CheckpointMetadata]] | None:
        """With ``keep_completed_metadata``: checkpoint id -> (the deployment it snapshotted, its metadata)."""
        return self._checkpointing.completed_in_epoch

    def operations(self) -> list[Operation]:
        return list(self._operations.operations)

    def savepoints(self) -> list[Operation]:
        return self._operations.savepoints()

    def stopped_with_savepoint(self) -> Operation | None:
        return self._operations.stopped_with_savepoint()

    def failed_stop(self) -> Operation | None:
        """The stop-with-savepoint whose savepoint completed before the job failed (Flink: restart from it)."""
        return self._operations.failed_stop

    def retained_checkpoint(self) -> str | None:
        """The checkpoint a cancelled job retained."""
        return self._operations.retained_checkpoint

    def ending_snapshot(self) -> tuple[bool, CheckpointMetadata | None]:
        """Whether the job ended by a snapshot a restore would resume from, and that snapshot (``JobOperations``)."""
        return self._operations.ending_snapshot()

    def slowdowns_of(self, task: str) -> tuple[SlowTask, ...]:
        return self._deployer.slowdowns[task]

    def final_state(self) -> str | None:
        """Flink's terminal ``JobStatus`` of the job, once it ended (a timed-out simulation has none)."""
        if self.outcome is None:
            return None
        return {JobOutcome.FINISHED: "FINISHED", JobOutcome.CANCELED: "CANCELED", JobOutcome.FAILED: "FAILED"}.get(
            self.outcome
        )

    def report(self) -> JobReport:
        trackers = self._checkpointing.statistics()
        checkpoints, subtasks, counts = job_statistics(trackers)
        restored = [t.latest_restored for t in trackers if t.latest_restored is not None]
        return JobReport(
            outcome=self.outcome,
            checkpoints=checkpoints,
            subtasks=subtasks,
            counts=counts,
            restarts=self._failover.restarts,
            restored_checkpoint_ids=list(self._deployer.restored_ids),
            restored_in_flight_bytes=self._restored_in_flight,
            coordinator_failovers=self._failover.coordinator_failovers,
            fault_log=self._fault_log.report(),
            killed=list(self._injector.killed),
            failures=list(self._failover.failures),
            storage_errors=list(self._checkpointing.storage_errors),
            deployments=[dict(d) for d in self._deployer.deployments],
            failure_reason=self.failure_reason,
            job_id=self.job_id,
            final_state=self.final_state(),
            operations=[o.as_dict() for o in self._operations.operations],
            latest_restored=dict(restored[-1]) if restored else None,
            retained_checkpoint=self._operations.retained_checkpoint,
            parallelism={v.name: v.parallelism for v in self.graph.vertices},
            source_records_at_start=dict(self.source_records_at_start),
        )

    # -- the deployment -------------------------------------------------------------------------------------------

    def _start(self, event: je.Start) -> None:
        """Deploy the first attempt: fresh state, or the state of the savepoint or checkpoint to restore."""
        restore = None
        settings = self._restore_settings
        try:
            if settings is not None:
                loaded = settings.source.load_checkpoint(settings.path)
                # the job's completed-checkpoint store points to the restored snapshot (Flink keeps an unclaimed
                # savepoint in the new job's CompletedCheckpointStore)
                self.storage.adopt_restored(loaded.location, settings.source)
                # the restored snapshot is known by its resolved location's pointer (Flink's restoreSavepoint keeps
                # the CompletedCheckpoint of checkpointStorage.resolveCheckpoint(pointer)): an object store URI
                # without the client options a user's pointer carries in its query
                restore = self._checkpointing.restore(
                    m.RestoreSavepoint(
                        loaded.location.external_pointer,
                        lambda _path: loaded.metadata,
                        settings.allow_non_restored_state,
                    )
                )
                self.restored_at_start = True
            # Flink's job is RUNNING once it is scheduled, before its tasks are deployed
            self._checkpointing.send(m.JobStatusChanged(JobStatus.RUNNING))
            self._deployer.deploy(restore)
        except RESTORE_ERRORS as err:
            self._failover.restore_failed(
                RestorePhase.START, f"restore from {settings.path}" if settings else "deploy", describe(err)
            )

    def _tasks_restored(self, event: je.TasksRestored) -> None:
        """Every task of the deployment was built and restored its state: they count as running. The run's first
        deployment's source offsets are where the run began (``source_records_at_start``)."""
        if event.epoch != self._deployer.epoch or self.outcome is not None:
            return
        self._deployer.running = True
        self._restored_in_flight += event.restored_in_flight_bytes
        if self.started_ms is None:
            self.started_ms = self._clock()
            self.source_records_at_start = dict(event.source_records_read or {})

    def _tasks_started(self, event: je.TasksStarted) -> None:
        """The tasks of the deployment work. Each reports RUNNING: the first at once, the others when the driver
        hands back ``ReportRunning`` (the periodic trigger starts from these reports, as Flink 2.3's does:
        ``runtime.coordinator.deactivator``). On the first deployment the fault schedule's timed faults are set;
        on a later one (or a restored job's first) a ``during_restore`` crash fires, once per run."""
        epoch = event.epoch
        deployer = self._deployer
        if epoch != deployer.epoch or self.outcome is not None:
            return
        attempts = deployer.running_attempts()
        if attempts and not self._checkpointing.down:  # reported before the faults: a task runs before a crash
            self._checkpointing.send(m.TaskRunning(attempts[0]))
            if len(attempts) > 1:
                self._out.append(ReportRunning(epoch, tuple(attempts[1:])))
        deployer.started += 1
        if deployer.started == 1 and self._arm_timed_faults:
            self._injector.arm_timed_faults()
        if deployer.started > 1 or self.restored_at_start:
            self._injector.crash_during_restore()

    def _tasks_running(self, event: je.TasksRunning) -> None:
        """Tasks of the deployment report RUNNING (Flink's ``updateTaskExecutionState``), one after another."""
        for attempt in event.attempts:
            if event.epoch != self._deployer.epoch or self.outcome is not None or self._checkpointing.down:
                break
            # a task that finished meanwhile (one deployed as finished, or one with nothing to read) ran before
            if self.is_current(attempt) and (attempt.vertex_id, attempt.subtask_index) not in self._deployer.finished:
                self._checkpointing.send(m.TaskRunning(attempt))

    # -- what the tasks tell --------------------------------------------------------------------------------------

    def _task_finished(self, event: je.TaskFinished) -> None:
        attempt = event.attempt
        if not self.is_current(attempt) or self.outcome is not None:
            return
        key = (attempt.vertex_id, attempt.subtask_index)
        finished = self._deployer.finished
        finished.add(key)
        self._trace("finished", subtask_name(key))
        self._checkpointing.send(m.TaskFinished(attempt))
        if len(finished) == len(self._deployer.subtasks) and self.outcome is None:
            self.outcome = JobOutcome.FINISHED
            self._checkpointing.send(m.JobStatusChanged(JobStatus.FINISHED))
            self._out.append(JobEnded(JobOutcome.FINISHED))

    def _fault_due(self, due: FaultDue) -> None:
        fault = due.fault
        if isinstance(fault, CRASHES):
            self._injector.crash_due(fault)
        elif isinstance(fault, CrashCoordinator):
            self._failover.crash_coordinator(fault)
        elif isinstance(fault, DamageCheckpoint):
            self._injector.damage_checkpoint(fault)
