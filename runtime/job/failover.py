"""The JobMaster's failover: ``JobFailover``, a collaborator of ``JobMaster`` that owns the restart strategy and the
job's failures. A task's death or a ``FailJob`` fails the job over (Flink's ``DefaultScheduler`` restarting every
task after the restart strategy's delay, or failing the job); a JobManager's crash loses the coordinator, whose
successor recovers the completed checkpoints from storage (``checkpoint_recovery``); a restore's typed errors end up
in ``restore_failed``, which does what Flink does in that phase (``runtime.job.restore_failure``).
docs/job-failover.md has the narrative."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.checkpoint_recovery import (
    CheckpointRecoveryError,
    next_attempt_number,
    recover_completed_checkpoint_store,
)
from barriersim.runtime.coordinator.properties import JobStatus
from barriersim.runtime.faults.fault_log import FaultLog
from barriersim.runtime.faults.fault_schedule import CrashCoordinator, CrashTaskManager, KillNode
from barriersim.runtime.faults.mutations import PlantedBug, is_planted
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.job import events as je
from barriersim.runtime.job.actions import CoordinatorRecoveryDue, JobEnded, RestartDue, StartTimer, subtask_name
from barriersim.runtime.job.checkpointing import JobCheckpointing
from barriersim.runtime.job.config import JobConfig, JobOutcome
from barriersim.runtime.job.execution_deployer import ExecutionDeployer
from barriersim.runtime.job.fault_injection import FaultInjector
from barriersim.runtime.job.operations import JobOperations
from barriersim.runtime.job.report import Operation, one_line
from barriersim.runtime.job.restart_strategy import (
    ExponentialDelayRestartStrategy,
    FixedDelayRestartStrategy,
    RestartDecision,
    RestartStrategyKind,
)
from barriersim.runtime.job.restore_failure import RESTORE_ERRORS, RestorePhase, describe

if TYPE_CHECKING:
    from barriersim.runtime.storage.checkpoint_storage import CheckpointStorage


class JobFailover:
    """Failovers, restarts, a JobManager's crash and recovery, and how a job fails (see the module)."""

    def __init__(
        self,
        config: JobConfig,
        job_id: str,
        *,
        storage: CheckpointStorage,
        clock: Callable[[], int],
        coordinator_rng: Callable[[], random.Random],
        checkpointing: JobCheckpointing,
        deployer: ExecutionDeployer,
        injector: FaultInjector,
        operations: JobOperations,
        fault_log: FaultLog,
        job_ms: Callable[[], int],
        job_ended: Callable[[], bool],
        fail: Callable[[str], None],
        trace: Callable[[str, str], None],
        emit: Callable[[Any], None],
    ):
        """``fail(reason)``: the job's outcome becomes ``FAILED`` for ``reason`` (one line)."""
        self._config = config
        self.job_id = job_id
        self._storage = storage
        self._clock = clock
        self._coordinator_rng = coordinator_rng
        self._checkpointing = checkpointing
        self._deployer = deployer
        self._injector = injector
        self._operations = operations
        self._fault_log = fault_log
        self._job_ms = job_ms
        self._job_ended = job_ended
        self._fail = fail
        self._trace = trace
        self._emit = emit
        self.restarts = 0  # restarts the strategy allowed (Flink's numRestarts), and JobManager failovers
        self.coordinator_failovers = 0
        self.failures: list[str] = []  # what failed the job over, one line each
        self.failing_over = False
        # the failover whose restart is due (its deployment epoch, the failed task, why), until the restart
        self._restart_pending: tuple[int, str, str] | None = None
        self.restart_strategy = self._new_restart_strategy()

    def record_failure(self, what: str) -> None:
        """What failed the job over (a task's death, a failed deployment), one line."""
        self.failures.append(what)

    def _new_restart_strategy(self) -> FixedDelayRestartStrategy | ExponentialDelayRestartStrategy:
        """A new JobMaster's restart strategy; exponential-delay draws its jitter from the coordinator's stream."""
        settings = self._config.restart
        exponential = settings.strategy is RestartStrategyKind.EXPONENTIAL_DELAY
        return settings.create(random.Random(self._coordinator_rng().getrandbits(64)) if exponential else None)

    # -- a task's death -------------------------------------------------------------------------------------------

    def deploy_failed(self, event: je.DeployFailed) -> None:
        """A task of the deployment could not be deployed (its process died, or it could not restore its state):
        fail over again."""
        if event.epoch == self._deployer.epoch and not self._job_ended():
            restoring_id = self._deployer.restoring
            restoring = f" restoring checkpoint {restoring_id}" if restoring_id is not None else ""
            self.record_failure(f"deploy of attempt {event.epoch}{restoring}: {event.cause}")
            self.fail_over("deploy", f"deploy failed{restoring}: {event.cause}")

    def task_failed(self, event: je.TaskFailed) -> None:
        """A task of the current deployment died (killed by the fault schedule, or not) or raised: the job fails
        over."""
        attempt = event.attempt
        if self._deployer.is_current(attempt) and not self._job_ended():
            name = subtask_name((attempt.vertex_id, attempt.subtask_index))
            self.record_failure(f"{name}: {event.cause}")
            self.fail_over(name, event.cause, failed=attempt)

    def task_crashed_at(self, event: je.TaskCrashedAt) -> None:
        """A task stopped itself at a task-side crash point it was deployed with (``runtime.task.crash_points``):
        it is dead, so the job fails over; the crash of its TaskManager or node takes the others of the group."""
        attempt, point, checkpoint_id = event.attempt, event.point, event.checkpoint_id
        key = (attempt.vertex_id, attempt.subtask_index)
        name = subtask_name(key)
        fault = self._injector.task_crashed_at(key, point, checkpoint_id)
        if self._deployer.is_current(attempt) and not self._job_ended():
            if fault is not None:  # counted only if it killed a running task (a late report of an old attempt did not)
                self._fault_log.fired(fault, self._job_ms())
            self._injector.record_death(f"{name}@{attempt.attempt_number}")
            self.record_failure(f"{name}: crashed at {point.value} of checkpoint {checkpoint_id}")
            if isinstance(fault, (CrashTaskManager, KillNode)):
                self._injector.crash_group(fault, point.value, already_dead=key)
            self.fail_over(name, point.value, failed=attempt)

    # -- failing over ---------------------------------------------------------------------------------------------

    def fail_over(self, task: str, why: str, failed: ExecutionAttemptID | None = None) -> None:
        """The job fails over for ``task``'s failure (``failed``: its attempt, if a task failed); the
        coordinator's ``FailJob``s made meanwhile fail it over once more afterwards."""
        self.failing_over = True
        try:
            self._fail_over(task, why, failed)
        finally:
            self.failing_over = False
        self._checkpointing.fail_over_queued()

    def _fail_over(self, task: str, why: str, failed: ExecutionAttemptID | None) -> None:
        self._trace("failover", f"{task} {why}")
        checkpointing = self._checkpointing
        if self.restart_strategy.on_failure(self._clock()) is RestartDecision.FAIL_JOB:
            self._deployer.cancel()
            # as on FINISHED: the terminal status stops and shuts down the coordinator, whose periodic trigger would
            # otherwise go on triggering checkpoints on the dead attempts (and their expiry fail the job again)
            checkpointing.send(m.JobStatusChanged(JobStatus.FAILED))
            self.fail_job(
                f"the restart strategy gave up after {self.restart_strategy.failures} failures "
                f"(at most {self.restart_strategy.max_attempts} restarts); the last: {task}: {one_line(why)}"
            )
            return
        # a restart the strategy allowed (Flink's ExecutionFailureHandler counts numberOfRestarts, the numRestarts
        # metric, only then: a failure that fails the job is no restart)
        self.restarts += 1
        stop = self._completed_stop()
        if stop is not None and not checkpointing.down:
            self._fail_stopping_job(stop, task, why)
            return
        # Flink's DefaultScheduler.restartTasksWithDelay: the job goes RESTARTING and the tasks are cancelled (the
        # failed attempt ends FAILED, the others CANCELED). The deactivator stops the periodic trigger if it started
        # it (at the first failover), which aborts the pending checkpoints and the queued requests
        # (CHECKPOINT_COORDINATOR_SUSPEND); otherwise the trigger runs on and the pending checkpoints wait. After the
        # restart delay (``RestartDue``) the job is RUNNING again, and ``restartTasks`` gives new attempts, aborts
        # what is pending (JOB_FAILOVER_REGION), restores the latest checkpoint and deploys
        checkpointing.send(m.JobStatusChanged(JobStatus.RESTARTING))
        stop = self._completed_stop()
        if stop is not None:
            # the stop's savepoint, fully acknowledged, was writing its _metadata: the failover's first call took
            # the coordinator's lock after the write, so the savepoint completed first (Flink's order), and the
            # tasks the stop began with end FAILED/CANCELED, not FINISHED
            self._fail_stopping_job(stop, task, why)
            return
        self._deployer.cancel()
        if failed is None:
            failed = checkpointing.current_attempt(self._config.graph.vertices[0].name, 0)
        checkpointing.send(m.TaskFailed(failed, why))
        self._restart_pending = (self._deployer.epoch, task, why)
        self._emit(StartTimer(self.restart_strategy.backoff_ms(self._clock()), RestartDue(self._deployer.epoch)))

    def restart(self, due: RestartDue) -> None:
        """The restart delay has passed (Flink's ``DefaultScheduler.restartTasks``): the job is RUNNING again, the
        coordinator gives every task a new attempt, aborts the pending checkpoints and picks the latest completed
        checkpoint, which the new deployment restores."""
        epoch = self._deployer.epoch
        if due.epoch != epoch or self._job_ended():
            return
        self._restart_pending = None
        self._checkpointing.send(m.JobStatusChanged(JobStatus.RUNNING))
        try:
            restore = self._checkpointing.restore(m.RestartTasks())
            if not self._job_ended() and self._deployer.epoch == epoch:  # (an abort's FailJob may have failed over)
                self._deployer.deploy(restore)
        except RESTORE_ERRORS as err:
            self.restore_failed(RestorePhase.FAILOVER, "restore", describe(err))

    def _completed_stop(self) -> Operation | None:
        """The stop-with-savepoint whose savepoint completed: a failure now fails the job rather than restarting it
        (Flink's ``StopWithSavepointTerminationHandlerImpl``, whichever of the savepoint's completion and a task's
        failure came first)."""
        if is_planted(PlantedBug.STOPPING_JOB_RESTARTS_FROM_CHECKPOINT):
            return None  # planted FLINK-26783: the failure after the stop's savepoint completed is failed over
        return self._operations.stopped_with_savepoint()

    def stop_savepoint_completed(self, stop: Operation) -> None:
        """``stop``'s savepoint completed. If a failover cancelled the tasks meanwhile (the savepoint completed
        during the restart delay, from acknowledgements the tasks sent before they died), the tasks it stopped did
        not finish: the job fails as for a failure after the savepoint (``_fail_stopping_job``), and the pending
        restart never runs. Flink's ``StopWithSavepointTerminationHandlerImpl`` waits for the savepoint, then for
        the termination of the executions the stop began with, whatever the order they ended in: any not FINISHED
        (FAILED, CANCELED) fails the job with a ``StopWithSavepointStoppingException``."""
        pending = self._restart_pending
        if is_planted(PlantedBug.STOPPING_JOB_RESTARTS_FROM_CHECKPOINT):
            return  # planted FLINK-26783: the pending restart goes on
        if pending is not None and pending[0] == self._deployer.epoch and not self._job_ended():
            self._restart_pending = None
            _, task, why = pending
            self._fail_stopping_job(stop, task, why, cancel=False)

    def _fail_stopping_job(self, stop: Operation, task: str, why: str, cancel: bool = True) -> None:
        """A failure after a stop-with-savepoint's savepoint completed, before every task finished: the job fails
        and does not restart. Flink (1.15+, FLINK-26783) fails such a job with a ``StopWithSavepointStoppingException``
        (``NonRecoverableError``), because a restart would restore the latest checkpoint, older than the savepoint
        whose completion the sinks may have committed: the savepoint is consistent, and a restart from it commits
        what it left pending (``ending_snapshot``). The task failure itself was handled as restartable first, so it
        counts as a restart, as Flink's ``numberOfRestarts`` does. ``cancel``: the tasks still run (a failover
        that already cancelled them does not cancel them again)."""
        if cancel:
            self._deployer.cancel()
        self._checkpointing.send(m.JobStatusChanged(JobStatus.FAILED))
        message = (
            f"A savepoint has been created at: {stop.path}, but the corresponding job {self.job_id} failed "
            "during stopping. The savepoint is consistent, but might have uncommitted transactions. If you "
            "want to commit the transaction please restart a job from this savepoint."
        )
        self._operations.stop_failed(stop, message)
        self.fail_job(f"{task}: {one_line(why)}; {message}")

    # -- the JobManager -------------------------------------------------------------------------------------------

    def crash_coordinator(self, fault: CrashCoordinator) -> None:
        """The JobManager dies: every task with it; a new one recovers after the restart delay."""
        if self._job_ended() or self._checkpointing.down:
            return  # no JobManager runs: nothing to crash (and the fault does not count as fired)
        self._fault_log.fired(fault, self._job_ms())
        self._trace("failover", "coordinator crash_coordinator")
        self.restarts += 1
        self.coordinator_failovers += 1
        self._injector.record_death("coordinator")
        self._deployer.cancel()
        self._checkpointing.crash()
        self._emit(StartTimer(self._config.restart.delay_ms, CoordinatorRecoveryDue(self._deployer.epoch)))

    def recover_coordinator(self, due: CoordinatorRecoveryDue) -> None:
        """The new JobManager: a coordinator whose completed checkpoint store is recovered from the checkpoint
        storage and whose id counter is the persisted one; it restores the latest completed checkpoint, starts
        its periodic trigger (job RUNNING) and deploys new attempts (ids no earlier attempt used)."""
        if due.epoch != self._deployer.epoch or self._job_ended():
            return
        checkpointing = self._checkpointing
        try:
            recovered = recover_completed_checkpoint_store(
                self.job_id,
                self._storage,
                self._config.checkpointing.coordinator_configuration(),
                checkpointing.storage_error,
            )
            checkpointing.recover(recovered.store, next_attempt_number(checkpointing.coordinator))
            self.restart_strategy = self._new_restart_strategy()
            self._trace(
                "coordinator-recovered",
                f"checkpoints={list(recovered.recovered_ids)} next_id={checkpointing.id_counter.get()}",
            )
            restore = checkpointing.restore(m.RestoreLatestCheckpoint())
            checkpointing.send(m.JobStatusChanged(JobStatus.RUNNING))
            self._deployer.deploy(restore)
        except RESTORE_ERRORS as err:  # a recovery error's message names the job, the checkpoint and the file
            self.restore_failed(
                RestorePhase.JOBMANAGER_RECOVERY,
                "JobManager failover",
                " ".join(str(err).split()) if isinstance(err, CheckpointRecoveryError) else describe(err),
            )

    # -- how a job fails ------------------------------------------------------------------------------------------

    def restore_failed(self, phase: RestorePhase, where: str, reason: str) -> None:
        """The one place a restore's typed error ends up (``runtime.job.restore_failure``): the job fails to start,
        fails over (the restart strategy decides), or fails, as Flink's does in that phase."""
        if phase is RestorePhase.START:
            self.fail_to_start(f"{where}: {reason}")
        elif phase is RestorePhase.FAILOVER:
            self.failures.append(f"{where}: {reason}")
            self.fail_over(where, reason)
        else:
            self.fail_job(f"{where}: {reason}")

    def fail_to_start(self, reason: str) -> None:
        """The job cannot be deployed (Flink: the JobMaster fails to create the job's execution graph)."""
        self._trace("failover", f"job {reason}")
        self.failures.append(reason)
        self._fail(one_line(reason))
        self._checkpointing.send(m.JobStatusChanged(JobStatus.FAILED))
        self._emit(JobEnded(JobOutcome.FAILED))

    def fail_job(self, reason: str) -> None:
        """The job ends ``FAILED`` for ``reason`` (one line)."""
        self._trace("job-failed", reason)
        self._fail(reason)
        self._emit(JobEnded(JobOutcome.FAILED))
