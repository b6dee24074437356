"""The run's jobs in sequence, sans-IO: ``Dispatcher.handle(event)`` is the one way in for a driver, as a
``JobMaster``'s is for one job. It runs the first job (fresh, or from the run's ``--from`` snapshot), carries out
the experiment's timed actions (savepoint, stop-with-savepoint, cancel) on the job they belong to and submits the
job a ``Restore`` asks for when the one before ended by a stop or a cancel; every timer and coordinator message a
job hands out comes back ``JobScoped`` to that job. Its query methods are what a driver reads of the run, and
``report()`` sums the jobs' (``RunReport``). Mirrors Flink's ``Dispatcher`` submitting jobs (with
``SavepointRestoreSettings``) and the REST handlers of ``triggerSavepoint``, ``stopWithSavepoint`` and ``cancel``.
docs/architecture.md ("The control plane") has the narrative."""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from barriersim.runtime.checkpoint_cost import Charging
from barriersim.runtime.coordinator.stats_tracker import CheckpointStatsTracker
from barriersim.runtime.event_timers import EventTimers, WrappingTimers
from barriersim.runtime.faults.experiment import (
    Action,
    Cancel,
    Restore,
    RestoreSource,
    Savepoint,
    StopWithSavepoint,
    action_to_plain,
)
from barriersim.runtime.faults.fault_log import FaultLog
from barriersim.runtime.faults.fault_schedule import CrashCoordinator, CrashTask, CrashTaskManager, Fault, KillNode
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.job import actions as a
from barriersim.runtime.job import events as je
from barriersim.runtime.job.config import JobConfig, JobOutcome
from barriersim.runtime.job.events import CoordinatorTimerFired
from barriersim.runtime.job.job_master import JobMaster
from barriersim.runtime.job.report import JobReport, JobRestore
from barriersim.runtime.jobgraph import JobGraph
from barriersim.runtime.state.snapshot import CheckpointMetadata
from barriersim.runtime.storage.checkpoint_storage import CheckpointStorage

# checkpoint id -> (the deployment it snapshotted, its metadata), of a job that keeps them (JobMaster)
CompletedInEpoch: TypeAlias = dict[int, tuple[int, CheckpointMetadata]]
RUN_FAULTS = (CrashTask, CrashCoordinator, CrashTaskManager, KillNode)  # armed by the first job, hit the one that runs


@dataclass(frozen=True)
class JobScoped:
    """A timer or coordinator message of job ``job`` (its index in the run)."""

    job: int
    value: je.JobEvent


@dataclass(frozen=True)
class ActionDue:
    """The experiment action ``index`` of the schedule is due on job ``job``."""

    job: int
    index: int


# what the Dispatcher hands out: its jobs' actions, their timers and coordinator messages wrapped (JobScoped), and
# the timers of the schedule's actions (ActionDue)
DispatcherAction: TypeAlias = (
    a.DeployTasks
    | a.ReportRunning
    | a.KillTask
    | a.KillTaskManagers
    | a.CancelTasks
    | a.SendToTask
    | a.SendToCoordinator[JobScoped]
    | a.StartTimer[JobScoped | ActionDue]
    | a.JobEnded
)


@dataclass
class RunReport(JobReport):
    """The run's account: the jobs' figures summed (checkpoints listed with their job when there are several),
    each job's own report, and every action of the schedule with what became of it."""

    jobs: list[JobReport] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)


class Dispatcher:
    def __init__(
        self,
        config: JobConfig,
        job_id: str,
        *,
        storage_for: Callable[[str], tuple[Any, Any]],
        clock: Callable[[], int],
        timers: EventTimers,
        coordinator_rng: Callable[[], random.Random],
        trace: Callable[[str, str], None] | None = None,
        keep_completed_metadata: bool = False,
        restore_storage: CheckpointStorage | None = None,
        first_attempt_number: int = 0,
        charging: Charging = Charging.VIRTUAL,
        cost_rng: random.Random | None = None,
    ):
        """``storage_for(job_id)``: the (checkpoint storage, savepoint storage) of a job; ``restore_storage``: a
        checkpoint storage that reads
        the metadata at the run's ``--from`` path; ``first_attempt_number``: above every attempt of earlier runs
        whose external system this run continues; ``charging`` and ``cost_rng``: how the driver charges the
        ``_metadata`` writes of the checkpoint cost model, and its random stream (the jobs' in turn)."""
        self.config = config
        self.base_job_id = job_id
        self._storage_for = storage_for
        self.clock = clock
        self._timers = timers
        self._coordinator_rng = coordinator_rng
        self._trace = trace or (lambda label, detail: None)
        self._keep_completed_metadata = keep_completed_metadata
        self._restore_storage = restore_storage
        self._first_attempt_number = first_attempt_number
        self._charging = charging
        self._cost_rng = cost_rng
        self.graphs = config.job_graphs
        self._job_actions = config.actions.jobs()  # per job: (the restore that starts it, its timed actions)
        self._action_index = {id(action): i for i, action in enumerate(config.actions.actions)}
        self._action_log: list[dict[str, Any]] = [
            {**action_to_plain(action), "job": None, "status": "NOT_PERFORMED"} for action in config.actions.actions
        ]
        self.fault_log = FaultLog(config.faults)
        self._fired_points: set[Fault] = set()
        self.finished: set[a.SubtaskKey] = set()  # the current job's finished subtasks, cleared in place for each job
        self.jobs: list[JobMaster] = []
        self._outcome: JobOutcome | None = None
        self._armed_jobs: set[int] = set()
        self.current = self._new_job(
            0, self._initial_restore(), first_epoch=0, first_attempt_number=first_attempt_number
        )

    # -- jobs ---------------------------------------------------------------------------------------------

    def _initial_restore(self) -> JobRestore | None:
        settings = self.config.restore
        if settings is None:
            return None
        if self._restore_storage is None:
            raise ValueError(f"job {self.base_job_id}: restoring from {settings.path} needs a restore_storage")
        return JobRestore(settings.path, self._restore_storage, settings.allow_non_restored_state)

    def _new_job(
        self, index: int, restore: JobRestore | None, *, first_epoch: int, first_attempt_number: int
    ) -> JobMaster:
        job_id = self.base_job_id if index == 0 else f"{self.base_job_id}-{index}"
        storage, savepoint_storage = self._storage_for(job_id)
        previous = self.jobs[-1] if self.jobs else None
        graph = self.graphs[index]
        job = JobMaster(
            self.config if graph is self.config.graph else self.config.for_job(graph),
            job_id,
            storage=storage,
            savepoint_storage=savepoint_storage,
            clock=self.clock,
            timers=WrappingTimers(self._timers, functools.partial(JobScoped, index)),
            coordinator_rng=self._coordinator_rng,
            trace=self._trace,
            keep_completed_metadata=self._keep_completed_metadata,
            charging=self._charging,
            cost_rng=self._cost_rng,
            restore=restore,
            first_epoch=first_epoch,
            first_attempt_number=first_attempt_number,
            fault_log=self.fault_log,
            fired_points=self._fired_points,
            finished=self.finished,
            started_ms=previous.started_ms if previous is not None else None,
            arm_timed_faults=index == 0,
            # a node the run lost stays lost: a restored job places its TaskManagers elsewhere
            lost_nodes=previous.lost_nodes() if previous is not None else frozenset(),
        )
        self.jobs.append(job)
        return job

    @property
    def index(self) -> int:
        return len(self.jobs) - 1

    # -- what the jobs hand out ----------------------------------------------------------------------------

    def _scoped(self, job: int, actions: list[a.JobAction]) -> list[DispatcherAction]:
        """Wrap the timers and coordinator messages of ``job``; arm a job's timed actions once it runs; a job's
        end starts the next job of the schedule, or ends the run."""
        out: list[DispatcherAction] = []
        for action in actions:
            if isinstance(action, a.StartTimer):
                out.append(a.StartTimer(action.delay_ms, JobScoped(job, action.timer)))
            elif isinstance(action, a.SendToCoordinator):
                out.append(a.SendToCoordinator(JobScoped(job, action.message), action.delay_ms))
            elif isinstance(action, a.JobEnded):
                out.extend(self._job_ended(job, action))
            else:
                out.append(action)
        return out

    def _forward(self, actions: list[a.JobAction]) -> list[DispatcherAction]:
        out = self._scoped(self.index, actions)
        if self.index not in self._armed_jobs and self.current.started_ms is not None and self._outcome is None:
            out.extend(self._arm_actions(self.index))
        return out

    def _arm_actions(self, job: int) -> list[DispatcherAction]:
        self._armed_jobs.add(job)
        now = self.current.job_ms()
        timers: list[DispatcherAction] = []
        for action in self._job_actions[job][1]:
            index = self._action_index[id(action)]
            timers.append(a.StartTimer(max(0, action.at_ms - now), ActionDue(job, index)))
        return timers

    def _job_ended(self, job: int, ended: a.JobEnded) -> list[DispatcherAction]:
        if job != self.index:
            return []
        ended_job = self.jobs[job]
        if job + 1 < len(self._job_actions):
            restore_action, _ = self._job_actions[job + 1]
            assert restore_action is not None  # every job after the first starts by a Restore (ActionSchedule.jobs)
            index = self._action_index[id(restore_action)]
            path = self._restore_path(restore_action, ended_job)
            if path is not None:
                self._action_log[index].update(job=job + 1, status="COMPLETED", path=path[0])
                self._trace("restore", f"job {job + 1} from {path[0]}")
                self.current = self._new_job(
                    job + 1,
                    JobRestore(path[0], path[1], restore_action.allow_non_restored_state),
                    first_epoch=ended_job.epoch() + 1,
                    first_attempt_number=ended_job.next_attempt_number(),
                )
                started = self.current.handle(je.Start())
                if not self.current.restored_at_start:
                    self._action_log[index].update(status="FAILED", failure=self.current.failures()[-1])
                return self._scoped(job + 1, started)
            if ended_job.outcome in (JobOutcome.FINISHED, JobOutcome.CANCELED):
                self._action_log[index].update(
                    job=job + 1, status="FAILED", failure="the job before it left no savepoint or retained checkpoint"
                )
        self._outcome = ended.outcome
        return [ended]

    def _restore_path(self, restore: Restore, ended: JobMaster) -> tuple[str, Any] | None:
        """The path a restore reads, and the storage that wrote it; None if there is none: the job
        before did not end by its stop or cancel, or left no savepoint (or no retained checkpoint)."""
        if restore.source is RestoreSource.CHECKPOINT:
            retained = ended.retained_checkpoint()
            if ended.outcome is not JobOutcome.CANCELED or retained is None:
                return None
            return retained, ended.storage
        if ended.outcome is JobOutcome.FINISHED and ended.stopped_with_savepoint() is None:
            return None  # it finished its input before it could be stopped
        failed_stop = ended.failed_stop()
        if ended.outcome is JobOutcome.FAILED and failed_stop is not None:
            assert failed_stop.path is not None  # its savepoint completed (JobOperations.failed_stop)
            return failed_stop.path, ended.savepoint_storage  # Flink's message: restart from this savepoint
        if ended.outcome not in (JobOutcome.FINISHED, JobOutcome.CANCELED):
            return None
        for job in reversed(self.jobs):
            savepoints = job.savepoints()
            if savepoints:
                path = savepoints[-1].path
                assert path is not None  # a completed savepoint (JobOperations.savepoints)
                return path, job.savepoint_storage
        return None

    # -- the one way in -----------------------------------------------------------------------------------------

    def handle(self, event: je.JobEvent | JobScoped | ActionDue) -> list[DispatcherAction]:
        """Everything ``event`` causes, in order: a value a job handed out (``JobScoped``) goes back to that job (the
        run's timed faults to the job that runs when they are due), an ``ActionDue`` is carried out on its job,
        anything else (``runtime.job.events``) goes to the current job."""
        if isinstance(event, JobScoped):
            inner = event.value
            if type(inner) is CoordinatorTimerFired:  # never arms the job's actions (a job runs its own timers)
                return self._scoped(event.job, self.jobs[event.job].handle(inner))
            if isinstance(inner, a.FaultDue) and isinstance(inner.fault, RUN_FAULTS):
                return self._forward(self.current.handle(inner))
            return self._forward_from(event.job, self.jobs[event.job].handle(inner))
        if isinstance(event, ActionDue):
            return self._forward(self._action_due(event))
        return self._forward(self.current.handle(event))

    def _forward_from(self, job: int, actions: list[a.JobAction]) -> list[DispatcherAction]:
        return self._forward(actions) if job == self.index else self._scoped(job, actions)

    def _action_due(self, due: ActionDue) -> list[a.JobAction]:
        action: Action = self.config.actions.actions[due.index]
        log = self._action_log[due.index]
        job = self.jobs[due.job] if due.job < len(self.jobs) else None
        if job is None or due.job != self.index or job.outcome is not None:
            log.update(job=due.job, status="NOT_PERFORMED", failure="its job had ended")
            return []
        log["job"] = due.job
        self._trace("action", f"{log['type']} on job {due.job}")
        if isinstance(action, Savepoint):
            out = job.handle(je.TriggerSavepoint())
        elif isinstance(action, StopWithSavepoint):
            out = job.handle(je.StopWithSavepoint(action.drain))
        elif isinstance(action, Cancel):
            out = job.handle(je.CancelJob())
        else:
            raise TypeError(f"not a timed action: {action!r}")
        log["operation"] = len(job.operations()) - 1
        return out

    # -- queries ----------------------------------------------------------------------------------------------

    def outcome(self) -> JobOutcome | None:
        """How the run ended (its last job's outcome), once it did."""
        return self._outcome

    def is_current(self, attempt: ExecutionAttemptID) -> bool:
        """Whether ``attempt`` is a running task of the current job's deployment (a message for it is delivered)."""
        return self.current.is_current(attempt)

    def epoch(self) -> int:
        """The current job's deployment."""
        return self.current.epoch()

    def finished_subtasks(self) -> set[a.SubtaskKey]:
        """The current job's finished subtasks: one set for the whole run, cleared in place for each deployment (a
        driver may keep it)."""
        return self.finished

    def task_count(self) -> int:
        """The current job's subtasks."""
        return sum(v.parallelism for v in self.current.graph.vertices)

    def started_ms(self) -> int | None:
        """When the run's clock started (the first deployment's tasks restored), on the driver's clock."""
        return self.jobs[0].started_ms

    def job_ms(self) -> int:
        return self.current.job_ms()

    def restarts(self) -> int:
        return sum(job.restarts() for job in self.jobs)

    def killed(self) -> list[str]:
        """The subtasks the fault schedule killed, over the run's jobs (``JobMaster.killed``)."""
        return [k for job in self.jobs for k in job.killed()]

    def lost_nodes(self) -> frozenset[int]:
        """The nodes the run lost (``JobMaster.lost_nodes``: they do not come back)."""
        return self.current.lost_nodes()

    def checkpoint_counts(self) -> dict[str, int]:
        """The current job's checkpoint counts so far (its coordinator's statistics)."""
        return self.current.coordinator().checkpoint_counts()

    def checkpoint_stats(self) -> CheckpointStatsTracker:
        """The statistics of the current job's coordinator."""
        return self.current.coordinator().checkpoint_stats()

    def retired_stats(self) -> list[CheckpointStatsTracker]:
        """The statistics of the current job's coordinators that died (JobManager failovers)."""
        return self.current.retired_stats()

    def next_attempt_number(self) -> int:
        """Above every execution attempt the run made (a run that continues this one starts there)."""
        return self.current.next_attempt_number()

    def ending_snapshot(self) -> tuple[bool, CheckpointMetadata | None]:
        """The last job's ending snapshot (``JobMaster.ending_snapshot``), for the run's verification."""
        return self.current.ending_snapshot()

    def source_records_at_start(self) -> dict[str, int]:
        """Where the run's sources began reading: the first job's (``JobMaster.source_records_at_start``)."""
        return self.jobs[0].source_records_at_start

    def completed_in_epoch(self) -> CompletedInEpoch | None:
        """The first job's completed checkpoints, ``checkpoint id -> (epoch, metadata)`` (see ``JobMaster``)."""
        return self.jobs[0].completed_in_epoch()

    def completed_in_epoch_by_job(self) -> list[tuple[JobGraph, CompletedInEpoch]]:
        """Per job: (its graph, its completed checkpoints' ``checkpoint id -> (epoch, metadata)``)."""
        return [(job.graph, job.completed_in_epoch() or {}) for job in self.jobs]

    def action_report(self) -> list[dict[str, Any]]:
        """Every action of the schedule: its fields, the job it applied to and its status (COMPLETED, FAILED,
        IN_PROGRESS or NOT_PERFORMED), with the operation's savepoint id, path and failure."""
        out = []
        for entry in self._action_log:
            entry = dict(entry)
            op_index = entry.pop("operation", None)
            if op_index is not None:
                op = self.jobs[entry["job"]].operations()[op_index]
                entry.update(status=op.status, checkpoint_id=op.checkpoint_id, path=op.path, failure=op.failure)
            out.append(entry)
        return out

    def report(self) -> RunReport:
        reports = [job.report() for job in self.jobs]
        counts: dict[str, int] = {}
        checkpoints: list[dict[str, Any]] = []
        subtasks: list[dict[str, Any]] = []
        for k, r in enumerate(reports):
            for name, n in r.counts.items():
                counts[name] = counts.get(name, 0) + n
            if len(reports) == 1:
                checkpoints, subtasks = list(r.checkpoints), list(r.subtasks)
            else:
                checkpoints.extend({"job": k, **row} for row in r.checkpoints)
                subtasks.extend({"job": k, **row} for row in r.subtasks)
        last = reports[-1]
        return RunReport(
            outcome=self._outcome if self._outcome is not None else last.outcome,
            checkpoints=checkpoints,
            subtasks=subtasks,
            counts=counts,
            restarts=sum(r.restarts for r in reports),
            restored_checkpoint_ids=[cid for r in reports for cid in r.restored_checkpoint_ids],
            restored_in_flight_bytes=sum(r.restored_in_flight_bytes for r in reports),
            coordinator_failovers=sum(r.coordinator_failovers for r in reports),
            fault_log=self.fault_log.report(),
            killed=[k for r in reports for k in r.killed],
            failures=[f for r in reports for f in r.failures],
            storage_errors=[e for r in reports for e in r.storage_errors],
            deployments=(
                list(last.deployments)
                if len(reports) == 1
                else [{"job": k, **d} for k, r in enumerate(reports) for d in r.deployments]
            ),
            failure_reason=last.failure_reason,
            job_id=last.job_id,
            final_state=last.final_state,
            operations=[o for r in reports for o in r.operations],
            latest_restored=last.latest_restored,
            retained_checkpoint=last.retained_checkpoint,
            parallelism=last.parallelism,
            source_records_at_start=reports[0].source_records_at_start,
            jobs=reports,
            actions=self.action_report(),
        )
