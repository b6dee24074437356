"""When the periodic trigger starts (Flink 2.3): ``ExecutionTrackingCheckpointCoordinatorDeActivatorTest`` ported,
the trigger delay (random once per coordinator, then the min pause) and the RUNNING rule of ``DefaultExecutionGraph``,
on the coordinator and in a whole simulated job."""

from __future__ import annotations

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.configuration import CheckpointingConfig
from barriersim.runtime.coordinator.deactivator import ExecutionTrackingDeActivator
from barriersim.runtime.coordinator.plan import ExecutionState
from barriersim.runtime.coordinator.properties import JobStatus
from barriersim.runtime.failure_reason import CheckpointFailureReason as R
from barriersim.runtime.faults.fault_schedule import CrashTask, FaultSchedule
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.job.config import JobConfig, WorkloadConfig
from barriersim.runtime.job.restart_strategy import RestartStrategyConfig
from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobVertex, OperatorKind, Partitioner
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.scenarios.workload import local_splits
from tests.runtime.coordinator.coordinator_test_harness import make, of, triggered_ids

S = ExecutionState


class Recorder:
    """A coordinator's ``startCheckpointScheduler`` / ``stopCheckpointScheduler`` as Flink's test sees it:
    ``isPeriodicCheckpointingStarted``."""

    def __init__(self):
        self.started = False

    def start(self):
        self.started = True

    def stop(self):
        self.started = False


def activator() -> tuple[ExecutionTrackingDeActivator, Recorder, ExecutionAttemptID, ExecutionAttemptID]:
    rec = Recorder()
    return (
        ExecutionTrackingDeActivator(rec.start, rec.stop),
        rec,
        ExecutionAttemptID("v1", 0, 0),
        ExecutionAttemptID("v2", 0, 0),
    )


def test_basic_lifecycle():
    act, rec, e1, e2 = activator()
    act.on_state_update(e1, S.DEPLOYING)
    act.on_state_update(e2, S.DEPLOYING)
    assert not rec.started
    act.job_status_changes(JobStatus.RUNNING)
    act.on_state_update(e1, S.RUNNING)
    assert not rec.started
    act.on_state_update(e2, S.RUNNING)
    assert rec.started


def running() -> tuple[ExecutionTrackingDeActivator, Recorder, ExecutionAttemptID, ExecutionAttemptID]:
    """Flink's tests' common start: both executions deployed, the job RUNNING, both executions RUNNING."""
    act, rec, e1, e2 = activator()
    act.on_state_update(e1, S.DEPLOYING)
    act.on_state_update(e2, S.DEPLOYING)
    act.job_status_changes(JobStatus.RUNNING)
    act.on_state_update(e1, S.RUNNING)
    act.on_state_update(e2, S.RUNNING)
    assert rec.started
    return act, rec, e1, e2


def test_task_failure():
    act, rec, e1, _ = running()
    act.on_state_update(e1, S.FAILED)
    assert not rec.started


def test_job_restart():
    act, rec, _, _ = running()
    for status in (JobStatus.FAILED, JobStatus.RESTARTING, JobStatus.INITIALIZING):
        act.job_status_changes(status)
        assert not rec.started
    act.job_status_changes(JobStatus.RUNNING)
    assert rec.started


def test_job_finish():
    act, rec, _, _ = activator()
    act.job_status_changes(JobStatus.RUNNING)
    assert rec.started
    act.job_status_changes(JobStatus.FINISHED)
    assert not rec.started


def test_an_attempt_that_ended_cancelled_keeps_the_deactivator_from_starting_again():
    """Not in Flink's test, but what its class does: an attempt that ended CANCELED or FAILED never leaves the pending
    set, so the new attempts of a failover running does not start the trigger (the RUNNING rule does)."""
    act, rec, e1, e2 = running()
    act.on_state_update(e1, S.FAILED)
    act.on_state_update(e2, S.CANCELED)
    assert not rec.started
    for new in (e1.next_attempt(), e2.next_attempt()):
        act.on_state_update(new, S.DEPLOYING)
        act.on_state_update(new, S.RUNNING)
    assert not rec.started and act.pending_executions == {e1, e2}


# -- on the coordinator ---------------------------------------------------------------------------------------


def deploying(interval: int = 100, min_pause: int = 0, seed: int = 0):
    """A coordinator whose job is RUNNING and whose two tasks are being deployed."""
    h = make(tasks_running=False, checkpoint_interval=interval, min_pause_between_checkpoints=min_pause, seed=seed)
    h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))
    for attempt in h.all_attempts:
        h.coord.handle(m.TaskDeploying(attempt))
    return h


def test_the_job_running_spends_the_random_delay_and_the_deployment_stops_the_trigger():
    h = make(tasks_running=False, checkpoint_interval=1000, min_pause_between_checkpoints=200, seed=3)
    h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))  # no execution changed state yet: all "running"
    [timer] = h.timers.active_timers
    assert 200 <= timer.at_ms <= 1000
    h.coord.handle(m.TaskDeploying(h.attempt("src")))
    assert not h.coord.is_periodic_checkpointing_started and h.timers.active_timers == []


def test_the_first_running_task_starts_the_trigger_at_once_and_it_fails_until_every_task_runs():
    h = deploying(interval=100, min_pause=20)
    src, mapper = h.attempt("src"), h.attempt("map")
    h.coord.handle(m.TaskRunning(src))
    assert h.coord.is_periodic_checkpointing_started
    [timer] = h.timers.active_timers
    assert timer.at_ms == 20  # the min pause: the random delay was spent by the job's RUNNING
    fired = h.advance(20)
    assert triggered_ids(fired) == []
    assert [a.reason for a in of(m.TriggerRequestFailed, fired)] == [R.NOT_ALL_REQUIRED_TASKS_RUNNING]
    assert h.coord.checkpoint_counts()["failed"] == 1 and h.coord.checkpoint_counts()["total"] == 1
    h.coord.handle(m.TaskRunning(mapper))  # the last task: the deactivator starts the trigger again
    assert [t.at_ms for t in h.timers.active_timers] == [40]
    assert triggered_ids(h.advance(20)) == [1]


def test_every_task_running_at_once_triggers_checkpoint_one_after_the_min_pause():
    h = deploying(interval=100)
    for attempt in h.all_attempts:
        h.coord.handle(m.TaskRunning(attempt))
    assert triggered_ids(h.advance(0)) == [1]
    assert h.coord.checkpoint_counts()["failed"] == 0
    assert triggered_ids(h.advance(99)) == [] and triggered_ids(h.advance(1)) == []  # one concurrent checkpoint


def test_after_a_failover_the_first_running_task_starts_the_trigger_with_the_min_pause():
    h = deploying(interval=100)
    for attempt in h.all_attempts:
        h.coord.handle(m.TaskRunning(attempt))
    h.advance(0)
    h.coord.handle(m.JobStatusChanged(JobStatus.RESTARTING))
    h.coord.handle(m.TaskFailed(h.attempt("map")))
    assert not h.coord.is_periodic_checkpointing_started
    h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))  # the old attempts are pending for good: no start
    assert not h.coord.is_periodic_checkpointing_started
    h.coord.handle(m.RestartTasks())
    for attempt in h.all_attempts:
        h.coord.handle(m.TaskDeploying(attempt))
    h.advance(500)
    h.coord.handle(m.TaskRunning(h.attempt("src")))
    assert [t.at_ms for t in h.timers.active_timers] == [500]
    failed = h.coord.checkpoint_counts()["failed"]
    assert triggered_ids(h.advance(0)) == [] and h.coord.checkpoint_counts()["failed"] == failed + 1
    h.coord.handle(m.TaskRunning(h.attempt("map")))
    assert h.timers.active_timers[0].at_ms == 600  # the deactivator does not start it again: one interval later
    assert triggered_ids(h.advance(100)) == [2]


def test_from_the_second_failover_on_the_trigger_runs_on_through_the_restart():
    """The deactivator did not start the trigger the first restarted task's RUNNING started, so it does not stop it:
    at the second failover checkpoint 3 stays pending, the periodic request queues behind it, the restart aborts it
    (``JOB_FAILOVER_REGION``) and the released request fails its pre-flight check; the trigger keeps its period."""
    h = deploying(interval=100)
    for attempt in h.all_attempts:
        h.coord.handle(m.TaskRunning(attempt))
    assert triggered_ids(h.advance(0)) == [1]
    h.coord.handle(m.JobStatusChanged(JobStatus.RESTARTING))  # the first failover: stopped, 1 aborted
    h.coord.handle(m.TaskFailed(h.attempt("map")))
    h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))
    h.coord.handle(m.RestartTasks())
    for attempt in h.all_attempts:
        h.coord.handle(m.TaskDeploying(attempt))
    for attempt in h.all_attempts:
        h.coord.handle(m.TaskRunning(attempt))
    assert triggered_ids(h.advance(0)) == [2]  # the first RUNNING's trigger, every task running by then
    h.ack_all(2)
    assert triggered_ids(h.advance(100)) == [3]
    h.coord.handle(m.JobStatusChanged(JobStatus.RESTARTING))  # the second failover, checkpoint 3 pending
    h.coord.handle(m.TaskFailed(h.attempt("src")))
    assert h.coord.is_periodic_checkpointing_started and h.coord.number_of_pending_checkpoints == 1
    failed = h.coord.checkpoint_counts()["failed"]
    assert triggered_ids(h.advance(100)) == []  # the periodic request queues behind checkpoint 3
    assert h.coord.checkpoint_counts()["failed"] == failed
    h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))
    restart = h.coord.handle(m.RestartTasks())
    # 3, and the request its abort released: no task runs yet
    assert [a.reason for a in of(m.TriggerRequestFailed, restart)] == [
        R.JOB_FAILOVER_REGION,
        R.NOT_ALL_REQUIRED_TASKS_RUNNING,
    ]
    assert h.coord.checkpoint_stats().history[3]["failure_reason"] == "JOB_FAILOVER_REGION"
    assert [a.checkpoint_id for a in of(m.RestoreFrom, restart)] == [2]
    assert h.coord.checkpoint_counts()["failed"] == failed + 2
    for attempt in h.all_attempts:
        h.coord.handle(m.TaskDeploying(attempt))
        h.coord.handle(m.TaskRunning(attempt))
    assert h.coord.is_periodic_checkpointing_started
    assert triggered_ids(h.advance(100)) == [4]  # the period it kept


# -- in a simulated job -----------------------------------------------------------------------------------------


def _job(faults=(), restart_delay_ms: int = 50) -> JobSimulation:
    graph = JobGraph(
        (
            JobVertex("source", OperatorKind.SOURCE, 2),
            JobVertex("sum", OperatorKind.KEYED_SUM, 2),
            JobVertex("sink", OperatorKind.TWO_PHASE_COMMIT_SINK, 1),
        ),
        (JobEdge("source", "sum", Partitioner.HASH), JobEdge("sum", "sink", Partitioner.REBALANCE)),
    )
    config = JobConfig(
        graph,
        checkpointing=CheckpointingConfig(mode="aligned", interval_ms=100),
        workload=WorkloadConfig(rate_per_source=2000),
        faults=FaultSchedule(tuple(faults)),
        restart=RestartStrategyConfig(delay_ms=restart_delay_ms),
    )
    return JobSimulation(config, {"source": local_splits(4000, 16, 1.0, 100, 2, seed=1, rate_per_source=2000)}, seed=5)


def test_a_simulated_job_triggers_checkpoint_one_when_its_last_task_runs_after_one_failed_trigger():
    result = _job().run()
    first = min(result.checkpoints, key=lambda c: c["id"])
    assert first["id"] == 1 and first["trigger_timestamp"] == 0
    assert result.counts["failed"] == 1  # the first task's trigger: NOT_ALL_REQUIRED_TASKS_RUNNING
    assert all(c["status"] == "COMPLETED" for c in result.checkpoints)


def test_after_a_failover_the_next_checkpoint_comes_one_interval_after_the_restart():
    result = _job([CrashTask("sum#1", at_ms=250)]).run()
    restarted_at = 250 + 50
    later = sorted(c["trigger_timestamp"] for c in result.checkpoints if c["trigger_timestamp"] >= restarted_at)
    assert later[0] == restarted_at + 100
    assert result.counts["failed"] >= 2  # one at the start, one at the restart (and the checkpoint the crash aborted)


def test_a_simulated_job_second_failover_keeps_the_trigger_and_aborts_the_pending_checkpoint_at_the_restart():
    """The first crash stops the trigger; the first restarted task's RUNNING (at 500) starts it again. The second
    crash (605) meets checkpoint 4 pending: it stays pending through the 250 ms restart delay, the periodic requests
    of 700 and 800 queue behind it, and the restart (855) aborts it with ``JOB_FAILOVER_REGION``; the two requests
    its abort releases fail their pre-flight check (no task runs yet); the trigger kept its period (900). Flink's
    ``DefaultSchedulerTest.abortPendingCheckpointsWhenRestartingTasks`` asserts the abort after the restart too."""
    result = _job([CrashTask("sum#1", at_ms=250), CrashTask("sum#0", at_ms=605)], restart_delay_ms=250).run()
    by_id = {c["id"]: c for c in result.checkpoints}
    assert by_id[4]["trigger_timestamp"] == 600 and by_id[4]["status"] == "FAILED"
    assert by_id[4]["failure_reason"] == "JOB_FAILOVER_REGION" and by_id[4]["failure_timestamp"] == 605 + 250
    assert by_id[5]["trigger_timestamp"] == 900 and by_id[5]["status"] == "COMPLETED"
    # the start's and the first restart's first triggers, checkpoint 4, and the two released requests
    assert result.counts["failed"] == 5
