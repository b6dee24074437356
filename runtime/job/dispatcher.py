"""The run's jobs in sequence, sans-IO: the first job, the experiment actions applied to each job, and the jobs
restored from a savepoint or retained checkpoint of the job before, as a user would submit them. Both drivers
run this one class in place of a single JobMaster.

How this works: the ``Dispatcher`` has the interface a driver uses with a ``JobMaster`` (``start``, the task and
coordinator events, ``timer_fired``, ``is_current``, ``report``) and forwards each event to the JobMaster of the
current job. The first job starts fresh, or from the run's ``RestoreSettings`` (``--from``), read by the driver's
``restore_storage`` (a checkpoint storage that reads the path; the new job's store adopts the snapshot). Its timed actions (``runtime.faults.experiment``: savepoint, stop-with-savepoint, cancel) are armed
on the run's clock once it runs (``ActionDue``) and carried out on the job they belong to; an action whose job
has ended (or not started) is not performed. When a job ends by a stop-with-savepoint or a cancel and a
``Restore`` follows, the next job is submitted at once: its graph has the restore's parallelism, its state is the
run's latest savepoint or the checkpoint the cancelled job retained (read by the storage that wrote it), its
checkpoints go to a storage of its own (``storage_for(job_id)``, job ids ``<id>-<n>``), and it continues the
epochs and attempt numbers of the job before (attempt ids are never reused, so nothing of an old job reaches a
new one) and shares the fault schedule's log: the run's timed faults (armed by the first job) hit whichever job
runs when they are due. Every timer and coordinator message a job hands out is wrapped with its job
(``JobScoped``), so it goes back to that job. ``JobEnded`` reaches the driver only when the last job ended. The
run's report (``RunReport``) sums the jobs' counts and lists their checkpoints (each row with its ``job`` when
there are several), with every job's own report and the account of every action. Mirrors Flink's
``Dispatcher`` submitting jobs (with ``SavepointRestoreSettings``) and the REST handlers of ``triggerSavepoint``,
``stopWithSavepoint`` and ``cancel``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from barriersim.runtime.checkpoint_cost import Charging
from barriersim.runtime.coordinator.checkpoint_recovery import next_attempt_number
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
from barriersim.runtime.faults.fault_schedule import CrashCoordinator, CrashTask, CrashTaskManager, KillNode
from barriersim.runtime.job import actions as a
from barriersim.runtime.job.config import JobConfig, JobOutcome
from barriersim.runtime.job.job_master import JobMaster, JobReport, JobRestore
from barriersim.runtime.state.snapshot import CheckpointMetadata


@dataclass(frozen=True)
class JobScoped:
    """A timer or coordinator message of job ``job`` (its index in the run)."""

    job: int
    value: Any


@dataclass(frozen=True)
class ActionDue:
    """The experiment action ``index`` of the schedule is due on job ``job``."""

    job: int
    index: int


@dataclass
class RunReport(JobReport):
    """The run's account: the jobs' figures summed (checkpoints listed with their job when there are several),
    each job's own report, and every action of the schedule with what became of it."""

    jobs: list[JobReport] = field(default_factory=list)
    actions: list[dict] = field(default_factory=list)


class Dispatcher:
    def __init__(self, config: JobConfig, job_id: str, *, storage_for: Callable[[str], tuple[Any, Any]],
                 clock: Callable[[], int], timer_service, coordinator_rng: Callable[[], random.Random],
                 action_sink: Callable[[list], None], trace=None, keep_completed_metadata: bool = False,
                 restore_storage=None, first_attempt_number: int = 0, charging: Charging = Charging.VIRTUAL,
                 cost_rng: random.Random | None = None):
        """``storage_for(job_id)``: the (checkpoint storage, savepoint storage) of a job; ``restore_storage``: a
        checkpoint storage that reads
        the metadata at the run's ``--from`` path; ``first_attempt_number``: above every attempt of earlier runs
        whose external system this run continues; ``charging`` and ``cost_rng``: how the driver charges the
        ``_metadata`` writes of the checkpoint cost model, and its random stream (the jobs' in turn)."""
        self.config = config
        self.base_job_id = job_id
        self._storage_for = storage_for
        self.clock = clock
        self._timer_service = timer_service
        self._coordinator_rng = coordinator_rng
        self._action_sink = action_sink
        self._trace = trace or (lambda label, detail: None)
        self._keep_completed_metadata = keep_completed_metadata
        self._restore_storage = restore_storage
        self._first_attempt_number = first_attempt_number
        self._charging = charging
        self._cost_rng = cost_rng
        self.graphs = config.job_graphs
        self._job_actions = config.actions.jobs()  # per job: (the restore that starts it, its timed actions)
        self._action_index = {id(action): i for i, action in enumerate(config.actions.actions)}
        self._action_log: list[dict] = [{**action_to_plain(action), "job": None, "status": "NOT_PERFORMED"}
                                        for action in config.actions.actions]
        self.fault_log = FaultLog(config.faults)
        self._fired_points: set = set()
        self.finished: set = set()  # the current job's finished subtasks, cleared in place for each job
        self.jobs: list[JobMaster] = []
        self.outcome: Optional[JobOutcome] = None
        self._armed_jobs: set[int] = set()
        self.current = self._new_job(0, self._initial_restore(), first_epoch=0,
                                     first_attempt_number=first_attempt_number)

    # -- jobs ---------------------------------------------------------------------------------------------

    def _initial_restore(self) -> Optional[JobRestore]:
        settings = self.config.restore
        if settings is None:
            return None
        if self._restore_storage is None:
            raise ValueError(f"job {self.base_job_id}: restoring from {settings.path} needs a restore_storage")
        return JobRestore(settings.path, self._restore_storage, settings.allow_non_restored_state)

    def _new_job(self, index: int, restore: Optional[JobRestore], *, first_epoch: int,
                 first_attempt_number: int) -> JobMaster:
        job_id = self.base_job_id if index == 0 else f"{self.base_job_id}-{index}"
        storage, savepoint_storage = self._storage_for(job_id)
        previous = self.jobs[-1] if self.jobs else None
        graph = self.graphs[index]
        job = JobMaster(
            self.config if graph is self.config.graph else self.config.for_job(graph), job_id,
            storage=storage, savepoint_storage=savepoint_storage, clock=self.clock, timer_service=self._timer_service,
            coordinator_rng=self._coordinator_rng, action_sink=lambda actions, k=index: self._from_sink(k, actions),
            trace=self._trace, keep_completed_metadata=self._keep_completed_metadata, charging=self._charging,
            cost_rng=self._cost_rng, restore=restore,
            first_epoch=first_epoch, first_attempt_number=first_attempt_number, fault_log=self.fault_log,
            fired_points=self._fired_points, finished=self.finished,
            started_ms=previous.started_ms if previous is not None else None, arm_timed_faults=index == 0,
        )
        if previous is not None:  # a node the run lost stays lost: a restored job places its TaskManagers elsewhere
            job.lost_nodes |= previous.lost_nodes
        self.jobs.append(job)
        return job

    @property
    def index(self) -> int:
        return len(self.jobs) - 1

    # -- what the jobs hand out ----------------------------------------------------------------------------

    def _from_sink(self, job: int, actions: list) -> None:
        out = self._scoped(job, actions)
        if out:
            self._action_sink(out)

    def _scoped(self, job: int, actions: list) -> list:
        """Wrap the timers and coordinator messages of ``job``; arm a job's timed actions once it runs; a job's
        end starts the next job of the schedule, or ends the run."""
        out = []
        for action in actions:
            kind = type(action)
            if kind is a.StartTimer:
                out.append(a.StartTimer(action.delay_ms, JobScoped(job, action.timer)))
            elif kind is a.SendToCoordinator:
                out.append(a.SendToCoordinator(JobScoped(job, action.message), action.delay_ms))
            elif kind is a.JobEnded:
                out.extend(self._job_ended(job, action))
            else:
                out.append(action)
        return out

    def _forward(self, actions: list) -> list:
        out = self._scoped(self.index, actions)
        if self.index not in self._armed_jobs and self.current.started_ms is not None and self.outcome is None:
            out.extend(self._arm_actions(self.index))
        return out

    def _arm_actions(self, job: int) -> list:
        self._armed_jobs.add(job)
        now = self.current.job_ms()
        timers = []
        for action in self._job_actions[job][1]:
            index = self._action_index[id(action)]
            timers.append(a.StartTimer(max(0, action.at_ms - now), ActionDue(job, index)))
        return timers

    def _job_ended(self, job: int, ended: a.JobEnded) -> list:
        if job != self.index:
            return []
        ended_job = self.jobs[job]
        if job + 1 < len(self._job_actions):
            restore_action, _ = self._job_actions[job + 1]
            index = self._action_index[id(restore_action)]
            path = self._restore_path(restore_action, ended_job)
            if path is not None:
                self._action_log[index].update(job=job + 1, status="COMPLETED", path=path[0])
                self._trace("restore", f"job {job + 1} from {path[0]}")
                self.current = self._new_job(
                    job + 1, JobRestore(path[0], path[1], restore_action.allow_non_restored_state),
                    first_epoch=ended_job.epoch + 1, first_attempt_number=next_attempt_number(ended_job.coordinator))
                started = self.current.start()
                if not self.current.restored_at_start:
                    self._action_log[index].update(status="FAILED", failure=self.current.failures[-1])
                return self._scoped(job + 1, started)
            if ended_job.outcome in (JobOutcome.FINISHED, JobOutcome.CANCELED):
                self._action_log[index].update(job=job + 1, status="FAILED",
                                               failure="the job before it left no savepoint or retained checkpoint")
        self.outcome = ended.outcome
        return [ended]

    def _restore_path(self, restore: Restore, ended: JobMaster) -> Optional[tuple[str, Any]]:
        """The path a restore reads, and the storage that wrote it; None if there is none: the job
        before did not end by its stop or cancel, or left no savepoint (or no retained checkpoint)."""
        if restore.source is RestoreSource.CHECKPOINT:
            if ended.outcome is not JobOutcome.CANCELED or ended.retained_checkpoint is None:
                return None
            return ended.retained_checkpoint, ended.storage
        if ended.outcome is JobOutcome.FINISHED and ended.stopped_with_savepoint is None:
            return None  # it finished its input before it could be stopped
        if ended.outcome is JobOutcome.FAILED and ended.failed_stop is not None:
            return ended.failed_stop.path, ended.savepoint_storage  # Flink's message: restart from this savepoint
        if ended.outcome not in (JobOutcome.FINISHED, JobOutcome.CANCELED):
            return None
        for job in reversed(self.jobs):
            if job.savepoints:
                return job.savepoints[-1].path, job.savepoint_storage
        return None

    # -- events from the driver (forwarded to the current job) ---------------------------------------------

    def start(self) -> list:
        return self._forward(self.current.start())

    def tasks_restored(self, epoch: int, restored_in_flight_bytes: int,
                       source_records_read: Mapping[str, int] | None = None) -> list:
        return self._forward(self.current.tasks_restored(epoch, restored_in_flight_bytes, source_records_read))

    def tasks_started(self, epoch: int) -> list:
        return self._forward(self.current.tasks_started(epoch))

    def tasks_running(self, epoch: int, attempts) -> list:
        return self._forward(self.current.tasks_running(epoch, attempts))

    def deploy_failed(self, epoch: int, cause: str) -> list:
        return self._forward(self.current.deploy_failed(epoch, cause))

    def acknowledge_checkpoint(self, attempt, checkpoint_id: int, snapshot, metrics) -> list:
        return self._forward(self.current.acknowledge_checkpoint(attempt, checkpoint_id, snapshot, metrics))

    def report_incomplete_snapshot_stats(self, attempt, report) -> list:
        return self._forward(self.current.report_incomplete_snapshot_stats(attempt, report))

    def decline_checkpoint(self, attempt, checkpoint_id: int, reason, detail: str) -> list:
        return self._forward(self.current.decline_checkpoint(attempt, checkpoint_id, reason, detail))

    def task_finished(self, attempt) -> list:
        return self._forward(self.current.task_finished(attempt))

    def cancel(self) -> list:
        """The user cancels the job that runs (``JobMaster.cancel``)."""
        return self._forward(self.current.cancel())

    def task_failed(self, attempt, cause: str) -> list:
        return self._forward(self.current.task_failed(attempt, cause))

    def task_crashed_at(self, attempt, point, checkpoint_id: int) -> list:
        return self._forward(self.current.task_crashed_at(attempt, point, checkpoint_id))

    def slowdown_met(self, task: str, index: int, at_ms: int) -> None:
        self.current.slowdown_met(task, index, at_ms)

    def coordinator_receives(self, message: JobScoped) -> list:
        job = self.jobs[message.job]
        return self._forward_from(message.job, job.coordinator_receives(message.value))

    def timer_fired(self, timer) -> list:
        if type(timer) is ActionDue:
            return self._forward(self._action_due(timer))
        if type(timer) is not JobScoped:
            raise TypeError(f"job {self.base_job_id}: not a dispatcher timer: {timer!r}")
        inner = timer.value
        if type(inner) is a.FaultDue and isinstance(inner.fault, (CrashTask, CrashCoordinator, CrashTaskManager, KillNode)):
            return self._forward(self.current.timer_fired(inner))  # the run's timed faults hit the job that runs
        return self._forward_from(timer.job, self.jobs[timer.job].timer_fired(inner))

    def _forward_from(self, job: int, actions: list) -> list:
        return self._forward(actions) if job == self.index else self._scoped(job, actions)

    def _action_due(self, due: ActionDue) -> list:
        action: Action = self.config.actions.actions[due.index]
        log = self._action_log[due.index]
        job = self.jobs[due.job] if due.job < len(self.jobs) else None
        if job is None or due.job != self.index or job.outcome is not None:
            log.update(job=due.job, status="NOT_PERFORMED", failure="its job had ended")
            return []
        log["job"] = due.job
        self._trace("action", f"{log['type']} on job {due.job}")
        if isinstance(action, Savepoint):
            out = job.trigger_savepoint()
        elif isinstance(action, StopWithSavepoint):
            out = job.stop_with_savepoint(action.drain)
        elif isinstance(action, Cancel):
            out = job.cancel()
        else:
            raise TypeError(f"not a timed action: {action!r}")
        log["operation"] = len(job.operations) - 1
        return out

    # -- queries --------------------------------------------------------------------------------------------

    @property
    def killed(self) -> list[str]:
        """The subtasks the fault schedule killed, over the run's jobs (``JobMaster.killed``)."""
        return [k for job in self.jobs for k in job.killed]

    @property
    def lost_nodes(self) -> set[int]:
        """The nodes the run lost (``JobMaster.lost_nodes``: they do not come back)."""
        return self.current.lost_nodes

    def is_current(self, attempt) -> bool:
        return self.current.is_current(attempt)

    @property
    def epoch(self) -> int:
        return self.current.epoch

    @property
    def started_ms(self) -> Optional[int]:
        return self.jobs[0].started_ms

    @property
    def restarts(self) -> int:
        return sum(job.restarts for job in self.jobs)

    @property
    def coordinator(self):
        return self.current.coordinator

    @property
    def retired_stats(self):
        """The statistics of the current job's coordinators that died (JobManager failovers)."""
        return self.current.retired_stats

    def job_ms(self) -> int:
        return self.current.job_ms()

    @property
    def next_attempt_number(self) -> int:
        """Above every execution attempt the run made (a run that continues this one starts there)."""
        return next_attempt_number(self.current.coordinator)

    @property
    def ending_snapshot(self):
        """The last job's ending snapshot (``JobMaster.ending_snapshot``), for the run's verification."""
        return self.current.ending_snapshot

    def slowdowns_of(self, task: str):
        return self.current.slowdowns_of(task)

    def action_report(self) -> list[dict]:
        """Every action of the schedule: its fields, the job it applied to and its status (COMPLETED, FAILED,
        IN_PROGRESS or NOT_PERFORMED), with the operation's savepoint id, path and failure."""
        out = []
        for entry in self._action_log:
            entry = dict(entry)
            op_index = entry.pop("operation", None)
            if op_index is not None:
                op = self.jobs[entry["job"]].operations[op_index]
                entry.update(status=op.status, checkpoint_id=op.checkpoint_id, path=op.path, failure=op.failure)
            out.append(entry)
        return out

    def report(self) -> RunReport:
        reports = [job.report() for job in self.jobs]
        counts: dict[str, int] = {}
        checkpoints: list[dict] = []
        subtasks: list[dict] = []
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
            outcome=self.outcome if self.outcome is not None else last.outcome, checkpoints=checkpoints,
            subtasks=subtasks, counts=counts, restarts=sum(r.restarts for r in reports),
            restored_checkpoint_ids=[cid for r in reports for cid in r.restored_checkpoint_ids],
            restored_in_flight_bytes=sum(r.restored_in_flight_bytes for r in reports),
            coordinator_failovers=sum(r.coordinator_failovers for r in reports), fault_log=self.fault_log.report(),
            killed=[k for r in reports for k in r.killed], failures=[f for r in reports for f in r.failures],
            storage_errors=[e for r in reports for e in r.storage_errors],
            deployments=(list(last.deployments) if len(reports) == 1
                         else [{"job": k, **d} for k, r in enumerate(reports) for d in r.deployments]),
            failure_reason=last.failure_reason, job_id=last.job_id,
            final_state=last.final_state, operations=[o for r in reports for o in r.operations],
            latest_restored=last.latest_restored, retained_checkpoint=last.retained_checkpoint,
            parallelism=last.parallelism, source_records_at_start=reports[0].source_records_at_start,
            jobs=reports, actions=self.action_report(),
        )

    @property
    def source_records_at_start(self) -> dict[str, int]:
        """Where the run's sources began reading: the first job's (``JobMaster.source_records_at_start``)."""
        return self.jobs[0].source_records_at_start

    @property
    def completed_in_epoch(self):
        """The first job's completed checkpoints, ``checkpoint id -> (epoch, metadata)`` (see ``JobMaster``)."""
        return self.jobs[0].completed_in_epoch

    def completed_in_epoch_by_job(self) -> list[tuple[Any, dict]]:
        """Per job: (its graph, its completed checkpoints' ``checkpoint id -> (epoch, metadata)``)."""
        return [(job.graph, job.completed_in_epoch or {}) for job in self.jobs]
