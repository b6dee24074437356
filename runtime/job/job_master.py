"""The JobMaster of one job, sans-IO: it deploys attempts, runs the checkpoint coordinator, applies the fault
schedule, fails the job over, recovers a crashed JobManager and writes checkpoint metadata. Both drivers run
this one class: the simulator around its event kernel, the Ray job manager actor around its asyncio loop.

How it works: ``docs/modules.md``, ``runtime/job/job_master.py``.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Mapping, Sequence

from barriersim.runtime.checkpoint_cost import Charging, CostCharger
from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.id_counter import StandaloneCheckpointIDCounter
from barriersim.runtime.coordinator.properties import JobStatus
from barriersim.runtime.coordinator.stats_tracker import CheckpointStatsTracker, job_statistics
from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason
from barriersim.runtime.faults.fault_log import FaultLog
from barriersim.runtime.faults.fault_schedule import (
    CRASHES,
    CrashCoordinator,
    CrashTask,
    CrashTaskManager,
    DamageCheckpoint,
    KillNode,
    MessageKind,
    ProtocolPoint,
    SlowTask,
)
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.job.actions import (
    CoordinatorMessage,
    CoordinatorRecoveryDue,
    FaultDue,
    JobEnded,
    JobTimer,
    ReportRunning,
    RestartDue,
    SendToCoordinator,
    SendToTask,
    StartTimer,
    SubtaskKey,
    TaskMessage,
    subtask_name,
)
from barriersim.runtime.job.config import JobConfig, JobOutcome
from barriersim.runtime.job.coordinator_actions import CoordinatorActions
from barriersim.runtime.job.execution_deployer import ExecutionDeployer
from barriersim.runtime.job.failover import FAULT_NAMES, JobFailover
from barriersim.runtime.job.operations import JobOperations
from barriersim.runtime.job.report import JobReport, JobRestore, Operation, one_line
from barriersim.runtime.job.restart_strategy import RestartStrategyKind
from barriersim.runtime.job.restore_failure import RESTORE_ERRORS, RestorePhase, describe
from barriersim.runtime.state.snapshot import CheckpointMetadata
from barriersim.runtime.task.actions import ReportIncompleteSnapshotStats, TaskCheckpointMetrics

ActionSink = Callable[[list], None]
Trace = Callable[[str, str], None]


class JobMaster(CoordinatorActions, JobFailover, JobOperations, ExecutionDeployer):
    def __init__(self, config: JobConfig, job_id: str, *, storage, clock: Callable[[], int], timer_service,
                 coordinator_rng: Callable[[], random.Random], action_sink: ActionSink,
                 trace: Trace | None = None, keep_completed_metadata: bool = False,
                 charging: Charging = Charging.VIRTUAL, cost_rng: random.Random | None = None,
                 savepoint_storage=None, restore: JobRestore | None = None, first_epoch: int = 0,
                 first_attempt_number: int = 0, fault_log: FaultLog | None = None, fired_points: set | None = None,
                 finished: set | None = None, started_ms: int | None = None, arm_timed_faults: bool = True):
        """``storage``: a ``CheckpointStorage`` (checkpoint metadata, recovery); ``savepoint_storage``: where
        savepoints are written (default ``storage``); ``timer_service``: the driver's (``register_timer(at_ms,
        callback)``) for the coordinator's timers; ``coordinator_rng()``: the random stream of each new
        coordinator; ``action_sink``: where actions caused by the coordinator's timers go;
        ``keep_completed_metadata``: keep every completed checkpoint's metadata with its deployment epoch
        (``completed_in_epoch``, for consistent-cut checks); ``charging`` and ``cost_rng``: how the driver charges
        the ``_metadata`` write of the job's checkpoint cost model (``config.storage``) and its random stream.
        ``restore``: the job starts from a savepoint or retained checkpoint. A job after another of the same run
        continues its ``first_epoch`` and ``first_attempt_number``, shares its ``fault_log``, ``fired_points`` and
        ``finished`` set, keeps the run's clock (``started_ms``) and leaves the timed faults to the dispatcher
        (``arm_timed_faults=False``)."""
        self.config = config
        self.graph = config.graph.validate()
        self.job_id = job_id
        self.storage = storage
        self.savepoint_storage = savepoint_storage if savepoint_storage is not None else storage
        self.clock = clock
        self._timer_service = timer_service
        self._coordinator_rng = coordinator_rng
        self._action_sink = action_sink
        self._trace = trace or (lambda label, detail: None)
        self._out: list = []
        self._cost = CostCharger(config.storage, charging, cost_rng or random.Random(0))
        self.subtasks: tuple[SubtaskKey, ...] = tuple((v.name, i) for v in self.graph.vertices for i in range(v.parallelism))
        self.placement = config.placement
        self.lost_nodes: set[int] = set()  # nodes a kill_node took; they do not come back
        self.taskmanager_nodes: tuple[int, ...] = self.placement.taskmanager_nodes()  # of the current deployment
        self.deployments: list[dict] = []
        self._first_source = subtask_name((self.graph.sources[0].name, 0))
        self._slowdowns = {name: tuple(f for f in config.faults.of_type(SlowTask) if f.task == name)
                           for name in map(subtask_name, self.subtasks)}
        self.epoch = first_epoch
        self.attempts: dict[SubtaskKey, ExecutionAttemptID] = {}  # the deployed attempt of each subtask
        self.running = False  # the current deployment's tasks were restored and have not been cancelled
        self.finished: set[SubtaskKey] = finished if finished is not None else set()  # cleared in place: a driver may hold it
        self.finished.clear()
        self._killed_keys: set[SubtaskKey] = set()  # killed by the fault schedule, death not yet reported
        self.outcome: JobOutcome | None = None
        self.failure_reason: str | None = None
        self.restarts = 0
        self.restored_ids: list[int] = []
        self.restored_in_flight = 0
        self.killed: list[str] = []
        self.failures: list[str] = []
        self.storage_errors: list[str] = []
        self.fault_log = fault_log if fault_log is not None else FaultLog(config.faults)
        self._fired_points: set = fired_points if fired_points is not None else set()
        self.started_ms: int | None = started_ms  # the job's clock (fault times) starts when the first tasks restored
        self.source_records_at_start: dict[str, int] = {}  # of the run's first deployment (tasks_restored)
        self._arm_timed_faults = arm_timed_faults
        self._restore_settings = restore
        self.restored_at_start = False  # the job was started from a savepoint or retained checkpoint
        self.operations: list[Operation] = []
        self._operation_of_request: dict[int, Operation] = {}
        self._next_request_id = 1
        self._savepoint_paths: dict[int, str] = {}
        self._savepoint_metadata: dict[int, CheckpointMetadata] = {}
        self.retained_checkpoint: str | None = None
        self._cancelled_at: CheckpointMetadata | None = None  # the latest completed checkpoint when cancelled
        # a stop-with-savepoint whose savepoint completed, after which the job failed before its tasks finished
        # (Flink's StopWithSavepointStoppingException: the job fails, the savepoint is what to restart from)
        self.failed_stop: Operation | None = None
        self._deployments = 0
        self._restore_from: m.RestoreFrom | None = None
        # the coordinator's FailJobs wait here until the outermost coordinator call's actions went out and no failover
        # runs (Flink's failJob is queued on the JobMaster's main thread): ``_fail_over_queued``
        self._failing_over = False
        self._coordinator_calls = 0  # how deep _handle_coordinator is nested (a failover handles coordinator calls)
        self._queued_failures: list[m.FailJob] = []
        self._timer_actions: list = []  # what a coordinator timer's callback produced, handled once it returned
        self._deployed_restore: int | None = None  # the checkpoint the current deployment restores
        self.completed_in_epoch: dict[int, tuple[int, Any]] | None = {} if keep_completed_metadata else None
        # the deployment each checkpoint's tasks were triggered in: a failover can end a _metadata write still in
        # progress after the deployment was cancelled, and the checkpoint still belongs to the one it snapshotted
        self._triggered_in_epoch: dict[int, int] = {}
        # what high availability keeps across a JobManager failover: the checkpoint id counter (the completed
        # checkpoints are recovered from the checkpoint storage)
        self.id_counter = StandaloneCheckpointIDCounter()
        self.coordinator_generation = 0
        self.coordinator_failovers = 0
        self.coordinator_down = False
        self.retired_stats: list[CheckpointStatsTracker] = []  # the statistics of coordinators that died
        self.coordinator = self._new_coordinator(first_attempt_number=first_attempt_number)
        self.restart_strategy = self._new_restart_strategy()

    # -- queries --------------------------------------------------------------------------------------

    def job_ms(self) -> int:
        """The job's clock: ms since the first deployment's tasks were restored (0 before)."""
        return 0 if self.started_ms is None else self.clock() - self.started_ms

    def is_current(self, attempt: ExecutionAttemptID) -> bool:
        """Whether ``attempt`` is a running task of the current deployment (a message for it is delivered)."""
        return self.running and self.attempts.get((attempt.vertex_id, attempt.subtask_index)) == attempt

    def report(self) -> JobReport:
        # while the JobManager is down, its dead coordinator's statistics are already among the retired ones
        trackers = self.retired_stats + ([] if self.coordinator_down else [self.coordinator.stats])
        checkpoints, subtasks, counts = job_statistics(trackers)
        restored = [t.latest_restored for t in trackers if t.latest_restored is not None]
        return JobReport(
            outcome=self.outcome, checkpoints=checkpoints, subtasks=subtasks, counts=counts, restarts=self.restarts,
            restored_checkpoint_ids=list(self.restored_ids), restored_in_flight_bytes=self.restored_in_flight,
            coordinator_failovers=self.coordinator_failovers, fault_log=self.fault_log.report(),
            killed=list(self.killed), failures=list(self.failures), storage_errors=list(self.storage_errors),
            deployments=[dict(d) for d in self.deployments],
            failure_reason=self.failure_reason,
            job_id=self.job_id, final_state=self.final_state, operations=[o.as_dict() for o in self.operations],
            latest_restored=dict(restored[-1]) if restored else None, retained_checkpoint=self.retained_checkpoint,
            parallelism={v.name: v.parallelism for v in self.graph.vertices},
            source_records_at_start=dict(self.source_records_at_start),
        )

    @property
    def final_state(self) -> str | None:
        """Flink's terminal ``JobStatus`` of the job, once it ended (a timed-out simulation has none)."""
        return {JobOutcome.FINISHED: "FINISHED", JobOutcome.CANCELED: "CANCELED",
                JobOutcome.FAILED: "FAILED"}.get(self.outcome)

    # -- events from the driver -----------------------------------------------------------------------

    def start(self) -> list:
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
                self.coordinator.restore_savepoint(loaded.location.external_pointer, lambda _path: loaded.metadata,
                                                   settings.allow_non_restored_state)
                self._restore_from = None
                self._handle_coordinator(self.coordinator.drain_actions())
                restore = self._restore_from
                self.restored_at_start = True
            # Flink's job is RUNNING once it is scheduled, before its tasks are deployed
            self._handle_coordinator(self.coordinator.handle(m.JobStatusChanged(JobStatus.RUNNING)))
            self._deploy(restore)
        except RESTORE_ERRORS as err:
            self._restore_failed(RestorePhase.START, f"restore from {settings.path}" if settings else "deploy",
                                 describe(err))
        return self._take()

    def _fail_to_start(self, reason: str) -> None:
        """The job cannot be deployed (Flink: the JobMaster fails to create the job's execution graph)."""
        self._trace("failover", f"job {reason}")
        self.failures.append(reason)
        self.outcome = JobOutcome.FAILED
        self.failure_reason = one_line(reason)
        self._handle_coordinator(self.coordinator.handle(m.JobStatusChanged(JobStatus.FAILED)))
        self._out.append(JobEnded(JobOutcome.FAILED))

    def tasks_restored(self, epoch: int, restored_in_flight_bytes: int,
                       source_records_read: Mapping[str, int] | None = None) -> list:
        """Every task of deployment ``epoch`` was built and restored its state: they count as running.
        ``source_records_read``: per source subtask (by name), its reader's offset once restored; the run's first
        deployment's are where the run began (``source_records_at_start``)."""
        if epoch != self.epoch or self.outcome is not None:
            return []
        self.running = True
        self.restored_in_flight += restored_in_flight_bytes
        if self.started_ms is None:
            self.started_ms = self.clock()
            self.source_records_at_start = dict(source_records_read or {})
        return self._take()

    def tasks_running(self, epoch: int, attempts: Sequence[ExecutionAttemptID]) -> list:
        """Tasks of deployment ``epoch`` report RUNNING (Flink's ``updateTaskExecutionState``), one after another, in
        order (``ReportRunning``); the periodic trigger starts from these reports (``runtime.coordinator.deactivator``)."""
        for attempt in attempts:
            if epoch != self.epoch or self.outcome is not None or self.coordinator_down:
                break
            # a task that finished meanwhile (one deployed as finished, or one with nothing to read) ran before
            if self.is_current(attempt) and (attempt.vertex_id, attempt.subtask_index) not in self.finished:
                self._handle_coordinator(self.coordinator.handle(m.TaskRunning(attempt)))
        return self._take()

    def tasks_started(self, epoch: int) -> list:
        """The tasks of deployment ``epoch`` work. On the first deployment the fault schedule's timed faults are
        set; on a later one a ``during_restore`` crash fires (once). Then each task reports RUNNING: the first at
        once, the others when the driver hands back ``ReportRunning``."""
        if epoch != self.epoch or self.outcome is not None:
            return []
        self._running_reports(epoch)
        self._deployments += 1
        if self._deployments == 1:
            if self._arm_timed_faults:
                for fault in self.config.faults.of_type(CrashTask):
                    if fault.at_ms is not None:
                        self._out.append(StartTimer(max(0, fault.at_ms - self.job_ms()), FaultDue(fault)))
                for fault in self.config.faults.faults:
                    if isinstance(fault, (CrashTaskManager, KillNode)) and fault.at_ms is not None:
                        self._out.append(StartTimer(max(0, fault.at_ms - self.job_ms()), FaultDue(fault)))
                for fault in sorted(self.config.faults.of_type(DamageCheckpoint) + self.config.faults.of_type(CrashCoordinator),
                                    key=lambda f: f.at_ms):  # a damage before a coordinator crash at the same ms
                    self._out.append(StartTimer(max(0, fault.at_ms - self.job_ms()), FaultDue(fault)))
        if self._deployments > 1 or self.restored_at_start:
            for fault in self.config.faults.faults:
                if (isinstance(fault, CRASHES) and fault.point is ProtocolPoint.DURING_RESTORE
                        and fault not in self._fired_points):
                    self._fired_points.add(fault)
                    if self._crash_fault(fault, "during_restore"):
                        self.fault_log.fired(fault, self.job_ms())
                    break
        return self._take()

    def _running_reports(self, epoch: int) -> None:
        """The deployment's tasks report RUNNING one by one: the first now; the others, ``ReportRunning``, after what
        this report sets off at the same instant. Reported before the rest of ``tasks_started`` (its faults), as
        in Flink a task runs before anything can crash it."""
        attempts = [self.attempts[key] for key in self.subtasks if key not in self.finished]
        if not attempts or self.coordinator_down:
            return
        self._handle_coordinator(self.coordinator.handle(m.TaskRunning(attempts[0])))
        if len(attempts) > 1:
            self._out.append(ReportRunning(epoch, tuple(attempts[1:])))

    def deploy_failed(self, epoch: int, cause: str) -> list:
        """A task of deployment ``epoch`` could not be deployed (its process died, or it could not restore its
        state): fail over again."""
        if epoch == self.epoch and self.outcome is None:
            restoring = f" restoring checkpoint {self._deployed_restore}" if self._deployed_restore is not None else ""
            self.failures.append(f"deploy of attempt {epoch}{restoring}: {cause}")
            self._failover("deploy", f"deploy failed{restoring}: {cause}")
        return self._take()

    def acknowledge_checkpoint(self, attempt: ExecutionAttemptID, checkpoint_id: int, snapshot,
                               metrics: TaskCheckpointMetrics) -> list:
        name = subtask_name((attempt.vertex_id, attempt.subtask_index))
        current = self.is_current(attempt)
        if current and self._crash_point(name, ProtocolPoint.AFTER_SYNC_SNAPSHOT_BEFORE_ACK, checkpoint_id):
            return self._take()  # the task died before its acknowledgement left it
        if self.fault_log.fails_state_write(name, checkpoint_id, self.job_ms()):
            # Flink's AsyncCheckpointRunnable: the asynchronous part failed, so the task declines
            self._decline(attempt, checkpoint_id, CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION,
                          f"{name}: injected by fail_storage_write: the state write failed")
        elif self.fault_log.declines(name, checkpoint_id, self._first_source, self.job_ms()):
            self._decline(attempt, checkpoint_id, CheckpointFailureReason.CHECKPOINT_DECLINED, "injected by fail_checkpoints")
        else:
            self._to_coordinator(MessageKind.ACKNOWLEDGE, name, checkpoint_id,
                                 m.AcknowledgeCheckpoint(self.job_id, attempt, checkpoint_id, snapshot, metrics))
            if current:
                self._crash_point(name, ProtocolPoint.AFTER_ACK_BEFORE_COMPLETION_NOTICE, checkpoint_id)
        return self._take()

    def report_incomplete_snapshot_stats(self, attempt: ExecutionAttemptID, report: ReportIncompleteSnapshotStats) -> list:
        """A cancelled or failed task's closed asynchronous part reports its figures (Flink's
        ``reportIncompleteTaskStateSnapshots``, sent as its task is cancelled): they go to the coordinator, whose
        statistics take them for a checkpoint pending or failed. A task the fault schedule killed or crashed
        (``killed``) reports nothing: its process is gone."""
        name = subtask_name((attempt.vertex_id, attempt.subtask_index))
        if f"{name}@{attempt.attempt_number}" not in self.killed:
            self._to_coordinator(None, name, report.checkpoint_id, m.ReportCheckpointMetrics(
                self.job_id, attempt, report.checkpoint_id, report.metrics, report.state_size, report.checkpointed_size))
        return self._take()

    def decline_checkpoint(self, attempt: ExecutionAttemptID, checkpoint_id: int, reason: CheckpointFailureReason,
                           detail: str) -> list:
        self._decline(attempt, checkpoint_id, reason, detail)
        return self._take()

    def task_finished(self, attempt: ExecutionAttemptID) -> list:
        if not self.is_current(attempt) or self.outcome is not None:
            return []
        key = (attempt.vertex_id, attempt.subtask_index)
        self.finished.add(key)
        self._trace("finished", subtask_name(key))
        self._handle_coordinator(self.coordinator.handle(m.TaskFinished(attempt)))
        if len(self.finished) == len(self.subtasks) and self.outcome is None:
            self.outcome = JobOutcome.FINISHED
            self._handle_coordinator(self.coordinator.handle(m.JobStatusChanged(JobStatus.FINISHED)))
            self._out.append(JobEnded(JobOutcome.FINISHED))
        return self._take()

    def task_failed(self, attempt: ExecutionAttemptID, cause: str) -> list:
        """A task of the current deployment died (killed by the fault schedule, or not) or raised: the job fails
        over."""
        if self.is_current(attempt) and self.outcome is None:
            name = subtask_name((attempt.vertex_id, attempt.subtask_index))
            self.failures.append(f"{name}: {cause}")
            self._failover(name, cause, failed=attempt)
        return self._take()

    def task_crashed_at(self, attempt: ExecutionAttemptID, point: ProtocolPoint, checkpoint_id: int) -> list:
        """A task stopped itself at a task-side crash point it was deployed with (``runtime.task.crash_points``):
        it is dead, so the job fails over."""
        key = (attempt.vertex_id, attempt.subtask_index)
        name = subtask_name(key)
        fault = self.config.faults.crash_at(name, point, checkpoint_id, self._fired_points)
        if fault is None:  # armed by a crash of its TaskManager or node: the others of the group die with it
            fault = self._group_crash_at(key, point, checkpoint_id)
        if fault is not None:
            self._fired_points.add(fault)
        if self.is_current(attempt) and self.outcome is None:
            if fault is not None:  # counted only if it killed a running task (a late report of an old attempt did not)
                self.fault_log.fired(fault, self.job_ms())
            self.killed.append(f"{name}@{attempt.attempt_number}")
            self.failures.append(f"{name}: crashed at {point.value} of checkpoint {checkpoint_id}")
            if isinstance(fault, (CrashTaskManager, KillNode)):
                self._crash_group(fault, point.value, already_dead=key)
            self._failover(name, point.value, failed=attempt)
        return self._take()

    def slowdown_met(self, task: str, index: int, at_ms: int) -> None:
        """The ``index``-th slowdown of ``task`` slowed its work for the first time in a deployment; it fires once
        per run."""
        fault = self._slowdowns[task][index]
        if not self.fault_log.times_fired(fault):
            self.fault_log.fired(fault, at_ms)

    def slowdowns_of(self, task: str) -> tuple[SlowTask, ...]:
        return self._slowdowns[task]

    def coordinator_receives(self, message: CoordinatorMessage) -> list:
        """A task's message reaches the coordinator, unless the coordinator it was sent to died meanwhile."""
        if message.generation == self.coordinator_generation and not self.coordinator_down:
            self._handle_coordinator(self.coordinator.handle(message.event))
        return self._take()

    def timer_fired(self, timer: JobTimer) -> list:
        if type(timer) is FaultDue:
            fault = timer.fault
            if isinstance(fault, CRASHES):
                if self._crash_fault(fault, FAULT_NAMES[type(fault)]):
                    self.fault_log.fired(fault, self.job_ms())
            elif isinstance(fault, CrashCoordinator):
                self._crash_coordinator(fault)
            elif isinstance(fault, DamageCheckpoint):
                self._damage_checkpoint(fault)
        elif type(timer) is RestartDue:
            if timer.epoch == self.epoch and self.outcome is None:
                self._restart()
        elif type(timer) is CoordinatorRecoveryDue:
            if timer.epoch == self.epoch and self.outcome is None:
                self._recover_coordinator()
        else:
            raise TypeError(f"job {self.job_id}: not a JobMaster timer: {timer!r}")
        return self._take()

    def _new_restart_strategy(self):
        """A new JobMaster's restart strategy; exponential-delay draws its jitter from the coordinator's stream."""
        settings = self.config.restart
        exponential = settings.strategy is RestartStrategyKind.EXPONENTIAL_DELAY
        return settings.create(random.Random(self._coordinator_rng().getrandbits(64)) if exponential else None)

    # -- messages -------------------------------------------------------------------------------------

    def _decline(self, attempt: ExecutionAttemptID, checkpoint_id: int, reason: CheckpointFailureReason,
                 detail: str) -> None:
        name = subtask_name((attempt.vertex_id, attempt.subtask_index))
        exc = CheckpointException(reason, checkpoint_id, detail)
        self._to_coordinator(MessageKind.DECLINE, name, checkpoint_id,
                             m.DeclineCheckpoint(self.job_id, attempt, checkpoint_id, exc))

    def _to_coordinator(self, kind: MessageKind | None, task: str, checkpoint_id: int, event) -> None:
        delay_ms = 0
        if kind is not None:  # a kind the fault schedule can drop or delay
            drop, delay_ms = self.fault_log.message_fate(kind, task, checkpoint_id, self.job_ms())
            if drop:
                self._trace("dropped", f"{kind.value} {task} {checkpoint_id}")
                return
        self._out.append(SendToCoordinator(CoordinatorMessage(self.coordinator_generation, event), delay_ms))

    def _to_task(self, kind: MessageKind | None, attempt: ExecutionAttemptID, checkpoint_id: int,
                 message: TaskMessage, delay_ms: int = 0) -> None:
        if kind is not None:
            name = subtask_name((attempt.vertex_id, attempt.subtask_index))
            drop, fault_delay_ms = self.fault_log.message_fate(kind, name, checkpoint_id, self.job_ms())
            delay_ms += fault_delay_ms
            if drop:
                self._trace("dropped", f"{kind.value} {name} {checkpoint_id}")
                return
        self._out.append(SendToTask(attempt, message, delay_ms))

    # -- plumbing -------------------------------------------------------------------------------------

    def _take(self) -> list:
        out, self._out = self._out, []
        return out
