"""The JobMaster's faults and failover: crashes of tasks, TaskManagers and nodes (at a time or at a protocol point),
the failover that follows a death (Flink's ``DefaultScheduler`` restarting every task after the restart strategy's
delay), damaged checkpoint storage, and a JobManager's crash and recovery (a new coordinator over the recovered
completed checkpoint store, ``checkpoint_recovery``). ``JobFailover`` is a base class of ``JobMaster`` sharing its
state. A restore's typed errors end up in one place, ``_restore_failed``, which does what Flink does in that phase
(``runtime.job.restore_failure``). Storage faults the job goes on after are reported (``storage_errors``), never
silent. docs/job-failover.md has the narrative.
"""

from __future__ import annotations

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.checkpoint_recovery import (
    CheckpointRecoveryError,
    next_attempt_number,
    recover_completed_checkpoint_store,
    retire_coordinator,
)
from barriersim.runtime.coordinator.properties import JobStatus
from barriersim.runtime.faults.fault_schedule import (
    CrashCoordinator, CrashTask, CrashTaskManager, DamageCheckpoint, KillNode, ProtocolPoint,
)
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.job.actions import (
    CancelTasks,
    CoordinatorRecoveryDue,
    JobEnded,
    KillTask,
    KillTaskManagers,
    RestartDue,
    StartTimer,
    SubtaskKey,
    subtask_name,
)
from barriersim.runtime.job.config import JobOutcome
from barriersim.runtime.job.report import one_line
from barriersim.runtime.job.restart_strategy import RestartDecision
from barriersim.runtime.job.restore_failure import RESTORE_ERRORS, RestorePhase, describe
from barriersim.runtime.storage.damage import damage_checkpoint
from barriersim.runtime.storage.errors import CheckpointStorageError

# the fault schedule's name of each crash fault, as the trace and the fault log say it
FAULT_NAMES = {CrashTask: "crash_task", CrashTaskManager: "crash_taskmanager", KillNode: "kill_node"}


class JobFailover:
    """The faults-and-failover part of ``JobMaster`` (see the module's docstring)."""

    def _crash_point(self, task: str, point: ProtocolPoint, checkpoint_id: int) -> bool:
        """Crash ``task`` if the fault schedule kills it, its TaskManager or its node at the JobMaster-side
        ``point`` of ``checkpoint_id``."""
        fault = self.config.faults.crash_at(task, point, checkpoint_id, self._fired_points)
        if fault is None:
            vertex, _, index = task.partition("#")
            fault = self._group_crash_at((vertex, int(index or 0)), point, checkpoint_id)
        if fault is None:
            return False
        self._fired_points.add(fault)
        if self._crash_fault(fault, point.value):
            self.fault_log.fired(fault, self.job_ms())
        return True

    def _group_crash_at(self, key: SubtaskKey, point: ProtocolPoint, checkpoint_id: int | None):
        """The TaskManager or node crash of the subtask ``key``'s TaskManager that strikes at ``point``."""
        tm = self.placement.taskmanager_of.get(key)
        if tm is None:
            return None
        return self.config.faults.group_crash_at(tm, self.taskmanager_nodes[tm], point, checkpoint_id,
                                                 self._fired_points)

    def _crash_fault(self, fault, why: str) -> bool:
        """Carry out a crash fault (of a task, a TaskManager or a node); False if it met no running task."""
        if isinstance(fault, CrashTask):
            return self._crash(fault.task, why)
        return self._crash_group(fault, why)

    def _crash_group(self, fault, why: str, already_dead: SubtaskKey | None = None) -> bool:
        """Kill every running task of the TaskManagers a ``CrashTaskManager`` or ``KillNode`` takes, at once; a
        node kill also loses the node for good. ``already_dead``: the task whose reaching a task-side crash point
        set the fault off (it stopped itself). False (nothing happens) if the job is not running or none of those
        TaskManagers runs a task."""
        if isinstance(fault, CrashTaskManager):
            taskmanagers, node = (fault.taskmanager,), None
        else:
            node = fault.node
            taskmanagers = tuple(t for t, n in enumerate(self.taskmanager_nodes) if n == node)
        if not self.running or self.outcome is not None:
            return False
        victims = [key for tm in taskmanagers for key in self.placement.subtasks_of(tm)
                   if key in self.attempts and key not in self.finished and key not in self._killed_keys
                   and key != already_dead]
        if not victims and already_dead is None:
            return False
        for key in victims:
            self._killed_keys.add(key)
            self.killed.append(f"{subtask_name(key)}@{self.attempts[key].attempt_number}")
        if node is not None:
            self.lost_nodes.add(node)
        self._trace("crash-group", f"{FAULT_NAMES[type(fault)]} taskmanagers={list(taskmanagers)} node={node} {why}")
        self._out.append(KillTaskManagers(taskmanagers, tuple(self.attempts[key] for key in victims), node, why))
        return True

    def _crash(self, task: str, why: str) -> bool:
        """Kill ``task`` (its death, once the driver sees it, fails the job over); False (nothing happens) if it is
        unknown, finished, already killed or not running."""
        vertex, _, index = task.partition("#")
        key = (vertex, int(index or 0))
        if (not self.running or key not in self.attempts or key in self.finished or key in self._killed_keys
                or self.outcome is not None):
            return False
        attempt = self.attempts[key]
        self._killed_keys.add(key)
        self.killed.append(f"{task}@{attempt.attempt_number}")
        self._out.append(KillTask(attempt, why))
        return True

    def _cancel_deployment(self) -> None:
        self._out.append(CancelTasks(self.epoch))
        self.epoch += 1
        self.running = False
        self.finished.clear()

    def _failover(self, task: str, why: str, failed: ExecutionAttemptID | None = None) -> None:
        self._failing_over = True
        try:
            self._fail_over(task, why, failed)
        finally:
            self._failing_over = False
        self._fail_over_queued()

    def _fail_over(self, task: str, why: str, failed: ExecutionAttemptID | None) -> None:
        self._trace("failover", f"{task} {why}")
        if self.restart_strategy.on_failure(self.clock()) is RestartDecision.FAIL_JOB:
            self._cancel_deployment()
            # as on FINISHED: the terminal status stops and shuts down the coordinator, whose periodic trigger would
            # otherwise go on triggering checkpoints on the dead attempts (and their expiry fail the job again)
            self._handle_coordinator(self.coordinator.handle(m.JobStatusChanged(JobStatus.FAILED)))
            self._fail_job(f"the restart strategy gave up after {self.restart_strategy.failures} failures "
                           f"(at most {self.restart_strategy.max_attempts} restarts); the last: {task}: {one_line(why)}")
            return
        # a restart the strategy allowed (Flink's ExecutionFailureHandler counts numberOfRestarts, the numRestarts
        # metric, only then: a failure that fails the job is no restart)
        self.restarts += 1
        stop = self.stopped_with_savepoint
        if stop is not None and not self.coordinator_down:
            self._fail_stopping_job(stop, task, why)
            return
        # Flink's DefaultScheduler.restartTasksWithDelay: the job goes RESTARTING and the tasks are cancelled (the
        # failed attempt ends FAILED, the others CANCELED). The deactivator stops the periodic trigger if it started
        # it (at the first failover), which aborts the pending checkpoints and the queued requests
        # (CHECKPOINT_COORDINATOR_SUSPEND); otherwise the trigger runs on and the pending checkpoints wait. After the
        # restart delay (``timer_fired``, ``RestartDue``) the job is RUNNING again, and ``restartTasks`` gives new
        # attempts, aborts what is pending (JOB_FAILOVER_REGION), restores the latest checkpoint and deploys
        self._handle_coordinator(self.coordinator.handle(m.JobStatusChanged(JobStatus.RESTARTING)))
        self._cancel_deployment()
        if failed is None:
            failed = self.coordinator.current_attempt(self.graph.vertices[0].name, 0)
        self._handle_coordinator(self.coordinator.handle(m.TaskFailed(failed, why)))
        self._out.append(StartTimer(self.restart_strategy.backoff_ms(self.clock()), RestartDue(self.epoch)))

    def _restart(self) -> None:
        """The restart delay has passed (Flink's ``DefaultScheduler.restartTasks``): the job is RUNNING again, the
        coordinator gives every task a new attempt, aborts the pending checkpoints and picks the latest completed
        checkpoint, which the new deployment restores."""
        epoch = self.epoch
        self._handle_coordinator(self.coordinator.handle(m.JobStatusChanged(JobStatus.RUNNING)))
        self._restore_from = None
        try:
            self._handle_coordinator(self.coordinator.handle(m.RestartTasks()))
            if self.outcome is None and self.epoch == epoch:  # (an abort's FailJob may have failed the job over again)
                self._deploy(self._restore_from)
        except RESTORE_ERRORS as err:
            self._restore_failed(RestorePhase.FAILOVER, "restore", describe(err))

    def _fail_stopping_job(self, stop, task: str, why: str) -> None:
        """A failure after a stop-with-savepoint's savepoint completed, before every task finished: the job fails
        and does not restart. Flink (1.15+, FLINK-26783) fails such a job with a ``StopWithSavepointStoppingException``
        (``NonRecoverableError``), because a restart would restore the latest checkpoint, older than the savepoint
        whose completion the sinks may have committed: the savepoint is consistent, and a restart from it commits
        what it left pending (``ending_snapshot``). The task failure itself was handled as restartable first, so it
        counts as a restart, as Flink's ``numberOfRestarts`` does."""
        self._cancel_deployment()
        self._handle_coordinator(self.coordinator.handle(m.JobStatusChanged(JobStatus.FAILED)))
        message = (f"A savepoint has been created at: {stop.path}, but the corresponding job {self.job_id} failed "
                   "during stopping. The savepoint is consistent, but might have uncommitted transactions. If you "
                   "want to commit the transaction please restart a job from this savepoint.")
        stop.status, stop.failure = "FAILED", message
        self.failed_stop = stop
        self._fail_job(f"{task}: {one_line(why)}; {message}")

    def _damage_checkpoint(self, fault: DamageCheckpoint) -> None:
        """The storage is damaged (fault injection); it fires if there was a checkpoint it could strike."""
        if self.outcome is not None:
            return
        try:
            checkpoint_id = fault.checkpoint_id
            if checkpoint_id is None:
                listed = self.storage.completed_checkpoint_pointers() or ()
                if not listed:
                    return
                checkpoint_id = listed[-1].checkpoint_id
            what = damage_checkpoint(self.storage, checkpoint_id, fault.damage, fault.target)
        except (CheckpointStorageError, OSError) as err:
            self._trace("damage-missed", str(err))
            return
        self._trace("damage", what)
        self.fault_log.fired(fault, self.job_ms())

    def _crash_coordinator(self, fault: CrashCoordinator) -> None:
        if self.outcome is not None or self.coordinator_down:
            return  # no JobManager runs: nothing to crash (and the fault does not count as fired)
        self.fault_log.fired(fault, self.job_ms())
        self._trace("failover", "coordinator crash_coordinator")
        self.restarts += 1
        self.coordinator_failovers += 1
        self.killed.append("coordinator")
        self._cancel_deployment()
        self.retired_stats.append(retire_coordinator(self.coordinator, self.clock()))
        self.coordinator_generation += 1
        self.coordinator_down = True
        self._restore_from = None
        self._out.append(StartTimer(self.config.restart.delay_ms, CoordinatorRecoveryDue(self.epoch)))

    def _recover_coordinator(self) -> None:
        """The new JobManager: a coordinator whose completed checkpoint store is recovered from the checkpoint
        storage and whose id counter is the persisted one; it restores the latest completed checkpoint, starts
        its periodic trigger (job RUNNING) and deploys new attempts (ids no earlier attempt used)."""
        try:
            recovered = recover_completed_checkpoint_store(self.job_id, self.storage,
                                                           self.config.checkpointing.coordinator_configuration(),
                                                           self._storage_error)
            self.coordinator = self._new_coordinator(recovered.store, next_attempt_number(self.coordinator))
            self.restart_strategy = self._new_restart_strategy()
            self.coordinator_down = False
            self._trace("coordinator-recovered",
                        f"checkpoints={list(recovered.recovered_ids)} next_id={self.id_counter.get()}")
            self._restore_from = None
            self.coordinator.restore_latest_checkpointed_state()
            self._handle_coordinator(self.coordinator.drain_actions())
            restore = self._restore_from
            self._handle_coordinator(self.coordinator.handle(m.JobStatusChanged(JobStatus.RUNNING)))
            self._deploy(restore)
        except RESTORE_ERRORS as err:  # a recovery error's message names the job, the checkpoint and the file
            self._restore_failed(RestorePhase.JOBMANAGER_RECOVERY, "JobManager failover",
                                 " ".join(str(err).split()) if isinstance(err, CheckpointRecoveryError) else describe(err))

    def _restore_failed(self, phase: RestorePhase, where: str, reason: str) -> None:
        """The one place a restore's typed error ends up (``runtime.job.restore_failure``): the job fails to start,
        fails over (the restart strategy decides), or fails, as Flink's does in that phase."""
        if phase is RestorePhase.START:
            self._fail_to_start(f"{where}: {reason}")
        elif phase is RestorePhase.FAILOVER:
            self.failures.append(f"{where}: {reason}")
            self._failover(where, reason)
        else:
            self._fail_job(f"{where}: {reason}")

    def _fail_job(self, reason: str) -> None:
        """The job ends ``FAILED`` for ``reason`` (one line)."""
        self._trace("job-failed", reason)
        self.outcome = JobOutcome.FAILED
        self.failure_reason = reason
        self._out.append(JobEnded(JobOutcome.FAILED))

    def _storage_error(self, message: str) -> None:
        """A storage fault the job goes on after (as in Flink): reported, never silent."""
        self._trace("storage-error", message)
        self.storage_errors.append(message)
