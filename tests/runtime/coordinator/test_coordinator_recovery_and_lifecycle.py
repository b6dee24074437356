"""Failover, job status changes, stop-with-savepoint and restore bookkeeping of the coordinator, with ports of
Flink's CheckpointIDCounterTestBase and CheckpointCoordinatorRestoringTest (the coordinator-side checks)."""

from __future__ import annotations

import pytest
from coordinator_test_harness import JOB, keyed_snapshot, make, of, triggered_ids

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.id_counter import StandaloneCheckpointIDCounter
from barriersim.runtime.coordinator.outcomes import AcknowledgeOutcome
from barriersim.runtime.coordinator.plan import ExecutionState, JobVertexInfo
from barriersim.runtime.coordinator.properties import CheckpointRetentionPolicy, JobStatus
from barriersim.runtime.coordinator.restore import StateRestoreError, check_state_mapping
from barriersim.runtime.events import CheckpointType
from barriersim.runtime.failure_reason import CheckpointFailureReason as R
from barriersim.runtime.state.snapshot import CheckpointMetadata, OperatorState, OperatorSubtaskState


def failed_reasons(actions) -> list:
    return [a.reason for a in of(m.TriggerRequestFailed, actions)]


# -- CheckpointIDCounterTestBase ------------------------------------------------------------------------


def test_counter_is_never_negative():
    """Port of Flink CheckpointIDCounterTestBase.testCounterIsNeverNegative."""
    counter = StandaloneCheckpointIDCounter()
    counter.start()
    assert counter.get() >= 0
    counter.shutdown()


def test_serial_increment_and_get():
    """Port of Flink CheckpointIDCounterTestBase.testSerialIncrementAndGet."""
    counter = StandaloneCheckpointIDCounter()
    counter.start()
    for expected in (1, 2, 3):
        assert counter.get_and_increment() == expected
        assert counter.get() == expected + 1
    assert counter.get_and_increment() == 4


def test_set_count():
    """Port of Flink CheckpointIDCounterTestBase.testSetCount."""
    counter = StandaloneCheckpointIDCounter()
    counter.start()
    counter.set_count(1337)
    assert counter.get() == 1337
    assert counter.get_and_increment() == 1337
    assert counter.get() == 1338
    assert counter.get_and_increment() == 1338


# -- CheckpointCoordinatorRestoringTest ----------------------------------------------------------------


def test_restore_latest_checkpoint_failure_when_max_parallelism_changes():
    """Port of Flink CheckpointCoordinatorRestoringTest.testRestoreLatestCheckpointFailureWhenMaxParallelismChanges.

    Adapted: the checkpoint is taken with max parallelism 128 and restored into a job whose vertex now has 256."""
    h = make([JobVertexInfo("v", 2, 128)])
    h.trigger()
    for i in range(2):
        h.ack(h.attempt("v", i), 1, keyed_snapshot("v"))
    checkpoint = h.coord.completed_checkpoint_store().get_latest_checkpoint()
    assert checkpoint is not None
    with pytest.raises(StateRestoreError, match="max parallelism of operator 'v' changed from 128 to 256"):
        check_state_mapping(checkpoint.metadata, [JobVertexInfo("v", 2, 256)], allow_non_restored_state=False)
    check_state_mapping(checkpoint.metadata, [JobVertexInfo("v", 4, 128)], allow_non_restored_state=False)


# -- failover ----------------------------------------------------------------------------------------------


def complete_one(h, cid: int, states: bool = True) -> list:
    out = []
    for a in h.all_attempts:
        out += h.ack(a, cid, keyed_snapshot(a.vertex_id) if states else None)
    return out


def test_the_restart_aborts_pending_checkpoints_and_restores_the_latest_completed_one():
    """A failover whose periodic trigger runs on (the deactivator did not start it): the failure only ends the
    attempts; the pending checkpoints wait until the restart (Flink's ``DefaultScheduler.restartTasks``), which gives
    new attempts, aborts them (``JOB_FAILOVER_REGION``, ``SchedulerBase.restoreState``) and restores."""
    h = make(max_concurrent_checkpoints=5)
    h.trigger()
    complete_one(h, 1)
    h.trigger()
    h.trigger()
    src = h.attempt("src")
    assert h.coord.handle(m.TaskFailed(src, "boom")) == []
    assert h.coord.number_of_pending_checkpoints == 2 and h.attempt("src") == src
    # a request while the tasks are cancelled fails its pre-flight check, without an id
    assert failed_reasons(h.trigger()) == [R.NOT_ALL_REQUIRED_TASKS_RUNNING]
    # a failure of another ended attempt is not a second failover
    assert h.coord.handle(m.TaskFailed(h.attempt("map"))) == []
    actions = h.coord.handle(m.RestartTasks())
    assert sorted(a.checkpoint_id for a in of(m.TriggerRequestFailed, actions)) == [2, 3]
    assert set(failed_reasons(actions)) == {R.JOB_FAILOVER_REGION}
    assert of(m.FailJob, actions) == []  # JOB_FAILOVER_REGION does not count
    [restore] = of(m.RestoreFrom, actions)
    assert restore.checkpoint_id == 1 and restore.metadata is not None
    assert {s.operator_id for s in restore.metadata.operator_states} == {"src", "map"}
    assert h.coord.number_of_pending_checkpoints == 0
    new_src = h.attempt("src")
    assert new_src == src.next_attempt()
    # ids never go back after a failover
    assert h.coord.checkpoint_id_counter().get() == 4
    # messages of the dead attempt are ignored; a failure of it is not a second failover
    assert h.coord.handle(m.TaskFailed(src)) == []
    assert failed_reasons(h.trigger()) == [R.NOT_ALL_REQUIRED_TASKS_RUNNING]  # new attempts not running yet
    for a in h.all_attempts:
        h.coord.handle(m.TaskRunning(a))
    assert triggered_ids(h.trigger()) == [4]  # the pre-flight failures above used no id
    assert h.call(m.AcknowledgeCheckpoint(JOB, src, 4)) is AcknowledgeOutcome.UNKNOWN


def test_an_acknowledgement_of_an_old_attempt_during_the_restart_delay_completes_the_checkpoint_the_restart_restores():
    """The pending checkpoint outlives the failure: the cancelled task's acknowledgement, sent before it was
    cancelled, still counts (the checkpoint's tasks to acknowledge are the old attempts), and the restart restores the
    checkpoint it completed."""
    h = make()
    h.trigger()
    complete_one(h, 1)
    h.trigger()
    src, map_ = h.attempt("src"), h.attempt("map")
    h.ack(src, 2, keyed_snapshot("src"))
    h.coord.handle(m.TaskFailed(src, "boom"))  # after its acknowledgement
    h.ack(map_, 2, keyed_snapshot("map"))  # the cancelled task's, in flight
    assert h.coord.completed_checkpoint_store().get_latest_checkpoint_id() == 2
    [restore] = of(m.RestoreFrom, h.coord.handle(m.RestartTasks()))
    assert restore.checkpoint_id == 2


def test_an_attempt_the_failover_ended_stays_ended():
    """Flink's ``Execution`` leaves no terminal state: a late FINISHED or RUNNING of a cancelled attempt, before the
    restart, changes nothing (its state stays CANCELED, it stays in the deactivator's pending set, and its RUNNING
    does not start the periodic trigger)."""
    h = make(checkpoint_interval=100)
    h.coord.handle(m.TaskFailed(h.attempt("src")))
    cancelled = h.attempt("map")
    h.coord.handle(m.TaskFinished(cancelled))
    h.coord.handle(m.TaskRunning(cancelled))
    assert h.coord.executions()[("map", 0)].state is ExecutionState.CANCELED
    assert cancelled in h.coord.pending_executions()
    assert not h.coord.is_periodic_checkpointing_started


def test_the_first_failover_stops_the_trigger_the_deactivator_started_and_aborts_at_once():
    """Every task ran, so the deactivator started the trigger: the job's RESTARTING stops it, which aborts the pending
    checkpoint at the failure (``CHECKPOINT_COORDINATOR_SUSPEND``); the restart finds nothing to abort."""
    h = make()
    h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))
    h.trigger()
    actions = h.coord.handle(m.JobStatusChanged(JobStatus.RESTARTING))
    actions += h.coord.handle(m.TaskFailed(h.attempt("map")))
    assert failed_reasons(actions) == [R.CHECKPOINT_COORDINATOR_SUSPEND]
    restart = h.coord.handle(m.RestartTasks())
    # (a failover's restore allows state no operator takes, as Flink's SchedulerBase.restoreState does)
    assert failed_reasons(restart) == [] and of(m.RestoreFrom, restart) == [m.RestoreFrom(None, None, False, True)]


def test_failover_without_a_completed_checkpoint_starts_fresh():
    h = make()
    h.trigger()
    h.coord.handle(m.TaskFailed(h.attempt("map")))
    actions = h.coord.handle(m.RestartTasks())
    assert of(m.RestoreFrom, actions) == [m.RestoreFrom(None, None, False, True)]


def test_every_task_gets_one_abort_notice_per_checkpoint():
    h = make([JobVertexInfo("a", 2), JobVertexInfo("b", 3, inputs=("a",))], max_concurrent_checkpoints=3)
    for _ in range(3):
        h.trigger()
    actions = h.decline(h.attempt("b", 1), 2)
    actions += h.coord.handle(m.TaskFailed(h.attempt("a", 0)))
    actions += h.coord.handle(m.RestartTasks())
    notices = [(n.task, n.checkpoint_id) for n in of(m.NotifyCheckpointAborted, actions)]
    assert len(notices) == len(set(notices)) == 3 * 5


# -- job status -------------------------------------------------------------------------------------------


def test_leaving_running_stops_the_scheduler_and_aborts_with_coordinator_suspend():
    h = make(checkpoint_interval=100, max_concurrent_checkpoints=1)
    h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))
    assert h.coord.is_periodic_checkpointing_started
    h.trigger()
    h.trigger(request_id=9)  # queued
    actions = h.coord.handle(m.JobStatusChanged(JobStatus.RESTARTING))
    assert set(failed_reasons(actions)) == {R.CHECKPOINT_COORDINATOR_SUSPEND}
    assert m.TriggerRequestFailed(9, None, R.CHECKPOINT_COORDINATOR_SUSPEND) in actions
    assert not h.coord.is_periodic_checkpointing_started
    assert h.advance(10_000) == []
    h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))
    assert triggered_ids(h.advance(100))


def test_interval_under_ten_ms_means_no_periodic_checkpoints():
    h = make(checkpoint_interval=9)
    h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))
    assert not h.coord.is_periodic_checkpointing_started and h.timers.active_timers == []


def test_first_periodic_trigger_comes_after_a_seeded_random_delay_between_min_pause_and_interval():
    delays = set()
    for seed in range(20):
        h = make(checkpoint_interval=1000, min_pause_between_checkpoints=200, seed=seed)
        h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))
        [timer] = h.timers.active_timers
        assert 200 <= timer.at_ms <= 1000
        delays.add(timer.at_ms)
        again = make(checkpoint_interval=1000, min_pause_between_checkpoints=200, seed=seed)
        again.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))
        assert again.timers.active_timers[0].at_ms == timer.at_ms
    assert len(delays) > 1


def test_terminal_status_shuts_down_and_discards_per_retention_policy():
    h = make()
    h.trigger()
    complete_one(h, 1)
    actions = h.coord.handle(m.JobStatusChanged(JobStatus.FINISHED))
    assert m.DiscardCheckpoint(1, m.DiscardReason.SHUTDOWN) in actions
    assert h.coord.is_shutdown
    assert h.call(m.AcknowledgeCheckpoint(JOB, h.attempt("src"), 1)) is AcknowledgeOutcome.COORDINATOR_SHUTDOWN
    kept = make(retention_policy=CheckpointRetentionPolicy.RETAIN_ON_CANCELLATION)
    kept.trigger()
    complete_one(kept, 1)
    assert of(m.DiscardCheckpoint, kept.coord.handle(m.JobStatusChanged(JobStatus.CANCELED))) == []


# -- stop-with-savepoint -----------------------------------------------------------------------------------


def test_stop_with_savepoint_stops_the_scheduler_completes_then_stops_the_job():
    h = make(checkpoint_interval=100, max_concurrent_checkpoints=5)
    h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))
    h.trigger()  # a checkpoint in flight is aborted by stopping the scheduler
    actions = h.trigger(CheckpointType.SAVEPOINT_TERMINATE, request_id=42)
    assert failed_reasons(actions) == [R.CHECKPOINT_COORDINATOR_SUSPEND]
    [trigger] = of(m.TriggerCheckpointOnSources, actions)
    assert trigger.options.checkpoint_type is CheckpointType.SAVEPOINT_TERMINATE
    assert not h.coord.is_periodic_checkpointing_started
    assert h.advance(1000) == []
    done = complete_one(h, trigger.checkpoint_id)
    assert of(m.StopJob, done) == [m.StopJob(trigger.checkpoint_id, True)]
    assert len(of(m.NotifyCheckpointComplete, done)) == 2  # synchronous savepoints notify the tasks
    assert of(m.PersistCheckpoint, done)[0].is_savepoint
    assert h.coord.number_of_retained_successful_checkpoints == 0


def test_failed_stop_with_savepoint_fails_the_job_and_restarts_the_scheduler():
    h = make(checkpoint_interval=100, tolerable_checkpoint_failure_number=10)
    h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))
    [trigger] = of(m.TriggerCheckpointOnSources, h.trigger(CheckpointType.SAVEPOINT_SUSPEND))
    actions = h.decline(h.attempt("map"), trigger.checkpoint_id, R.CHECKPOINT_DECLINED_TASK_NOT_READY)
    [fail] = of(m.FailJob, actions)
    assert fail.failing_task == h.attempt("map") and "stop-with-savepoint" in fail.message
    assert h.coord.is_periodic_checkpointing_started
    assert triggered_ids(h.advance(100))


# -- savepoint restore ------------------------------------------------------------------------------------


def savepoint_metadata(*operators: str, checkpoint_id: int = 7) -> CheckpointMetadata:
    states = tuple(
        OperatorState(op, 1, 128, {0: keyed_snapshot(op).subtask_states_by_operator[op]}) for op in operators
    )
    return CheckpointMetadata(checkpoint_id, states)


def test_restore_savepoint_sets_the_counter_and_rejects_unknown_operators_unless_allowed():
    metadata = savepoint_metadata("src", "map", "gone")
    loaded = []

    def loader(path: str) -> CheckpointMetadata:
        loaded.append(path)
        return metadata

    h = make()
    with pytest.raises(StateRestoreError, match="'gone'"):
        h.call(m.RestoreSavepoint("/sp/1", loader))
    h.call(m.RestoreSavepoint("/sp/1", loader, allow_non_restored_state=True))
    assert loaded == ["/sp/1", "/sp/1"]
    [restore] = of(m.RestoreFrom, h.take())
    assert restore.checkpoint_id == 7 and restore.allow_non_restored_state and restore.is_savepoint
    assert h.coord.checkpoint_id_counter().get() == 8
    assert triggered_ids(h.trigger()) == [8]
    complete_one(h, 8)
    # the restored savepoint is subsumed but never discarded by us
    assert of(m.DiscardCheckpoint, h.take()) == []
    assert [c.checkpoint_id for c in h.coord.completed_checkpoint_store().get_all_checkpoints()] == [8]


def test_empty_state_of_a_removed_operator_does_not_block_restore():
    metadata = CheckpointMetadata(3, (OperatorState("gone", 1, 128, {0: OperatorSubtaskState()}),))
    assert check_state_mapping(metadata, [JobVertexInfo("src", 1)], allow_non_restored_state=False) == ["gone"]


# -- plan (FLIP-147) ---------------------------------------------------------------------------------------


def test_plan_from_job_graph_triggers_tasks_whose_upstream_finished_over_forward_and_all_to_all_edges():
    from barriersim.runtime.coordinator.plan import (
        DefaultCheckpointPlanCalculator,
        Execution,
        ExecutionState,
        vertices_from_job_graph,
    )
    from barriersim.runtime.ids import ExecutionAttemptID
    from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobVertex, OperatorKind, Partitioner

    graph = JobGraph(
        (
            JobVertex("src", OperatorKind.SOURCE, 2),
            JobVertex("map", OperatorKind.MAP, 2),
            JobVertex("sum", OperatorKind.KEYED_SUM, 2),
        ),
        (JobEdge("src", "map", Partitioner.FORWARD), JobEdge("map", "sum", Partitioner.HASH)),
    )
    vertices = vertices_from_job_graph(graph)
    assert [(v.vertex_id, v.inputs, v.pointwise_inputs) for v in vertices] == [
        ("src", (), ()),
        ("map", (), ("src",)),
        ("sum", ("map",), ()),
    ]
    state = {("src", 0): ExecutionState.FINISHED, ("src", 1): ExecutionState.RUNNING}
    executions = {
        (v.vertex_id, i): Execution(
            ExecutionAttemptID(v.vertex_id, i), state.get((v.vertex_id, i), ExecutionState.RUNNING)
        )
        for v in vertices
        for i in range(v.parallelism)
    }
    plan = DefaultCheckpointPlanCalculator(vertices).calculate_checkpoint_plan(executions)
    assert plan.tasks_to_trigger == (ExecutionAttemptID("src", 1), ExecutionAttemptID("map", 0))
    assert ExecutionAttemptID("src", 0) in plan.finished_tasks
    assert ExecutionAttemptID("src", 0) not in plan.tasks_to_wait_for and plan.fully_finished_job_vertices == ()


def test_runs_on_the_simulation_kernel_as_timer_service_and_clock():
    from barriersim.runtime.coordinator.checkpoint_coordinator import (
        CheckpointCoordinator,
        CheckpointCoordinatorConfiguration,
    )
    from barriersim.runtime.event_timers import DeliveringTimers
    from barriersim.runtime.sim.kernel import Simulation

    sim = Simulation(seed=7)
    out: list = []
    coord = CheckpointCoordinator(
        JOB,
        [JobVertexInfo("v", 1)],
        CheckpointCoordinatorConfiguration(checkpoint_interval=100, checkpoint_timeout=50),
        clock=sim.clock_ms,
        timers=DeliveringTimers(sim, lambda event: out.extend(coord.handle(event))),
        rng=sim.random("coordinator"),
    )
    coord.handle(m.JobStatusChanged(JobStatus.RUNNING))
    sim.run(until_us=1_000 * 1000)
    triggers = of(m.TriggerCheckpointOnSources, out)
    assert len(triggers) >= 9  # every 100 ms for a second, each expiring after 50 ms
    assert {a.reason for a in of(m.TriggerRequestFailed, out)} == {R.CHECKPOINT_EXPIRED}
    assert all(b.timestamp - a.timestamp == 100 for a, b in zip(triggers, triggers[1:]))


def test_a_request_released_by_the_restart_abort_is_not_triggered_on_dead_attempts():
    h = make(max_concurrent_checkpoints=1)
    h.trigger()
    h.trigger(request_id=5)  # queued behind checkpoint 1
    assert h.coord.handle(m.TaskFailed(h.attempt("map"))) == []  # it stays queued through the restart delay
    actions = h.coord.handle(m.RestartTasks())
    assert triggered_ids(actions) == []
    assert m.TriggerRequestFailed(5, None, R.NOT_ALL_REQUIRED_TASKS_RUNNING) in actions
    assert h.coord.number_of_pending_checkpoints == 0


def test_completion_notifies_the_tasks_before_a_released_request_triggers():
    h = make(max_concurrent_checkpoints=2)
    h.trigger()
    h.trigger()
    h.trigger(request_id=3)  # queued
    actions = h.ack_all(2)  # completes 2, subsumes 1, releases the queued request
    kinds = [type(a).__name__ for a in actions]
    assert kinds.index("NotifyCheckpointComplete") < kinds.index("TriggerCheckpointOnSources")
    assert triggered_ids(actions) == [3]


# -- NO_CLAIM restore: shared files registered, the first checkpoint full (ports of Flink's
# CheckpointCoordinatorTriggeringTest.testTriggeringFullCheckpoints / testTriggeringFullSnapshotAfterJobmasterFailover)


def _types(actions) -> list[CheckpointType]:
    return [t.options.checkpoint_type for t in of(m.TriggerCheckpointOnSources, actions)]


def _restored(h, checkpoint_id: int = 7):
    h.call(m.RestoreSavepoint("/sp/1", lambda path: savepoint_metadata("src", "map", checkpoint_id=checkpoint_id)))
    h.take()


def test_after_a_no_claim_restore_checkpoints_are_full_until_one_completes_and_savepoints_stay_savepoints():
    h = make(max_concurrent_checkpoints=5)
    _restored(h)
    # a savepoint before any checkpoint completed: still a savepoint, and it does not end the full checkpoints
    actions = h.trigger(CheckpointType.SAVEPOINT)
    assert _types(actions) == [CheckpointType.SAVEPOINT]
    complete_one(h, 8)
    assert _types(h.trigger()) == [CheckpointType.FULL_CHECKPOINT]
    assert _types(h.trigger()) == [CheckpointType.FULL_CHECKPOINT]  # 9 has not completed yet
    complete_one(h, 9)
    assert _types(h.trigger()) == [CheckpointType.CHECKPOINT]
    # the statistics show a full checkpoint as Flink's REST does: CHECKPOINT
    row = h.coord.checkpoint_stats().history[9]
    assert (row["checkpoint_type"], row["status"]) == ("CHECKPOINT", "COMPLETED")


def test_a_new_job_manager_that_restores_the_unclaimed_snapshot_from_the_store_triggers_a_full_checkpoint():
    first = make()
    _restored(first)
    second = make(
        store=first.coord.completed_checkpoint_store(), id_counter=first.coord.checkpoint_id_counter()
    )  # the JobManager failed over
    assert second.call(m.RestoreLatestCheckpoint()) is not None
    assert _types(second.trigger()) == [CheckpointType.FULL_CHECKPOINT]
    fresh = make()
    assert _types(fresh.trigger()) == [CheckpointType.CHECKPOINT]  # no restore: incremental as configured


def test_a_restored_snapshots_shared_files_are_registered_and_never_discarded_by_the_job():
    """Flink's ``restoreSavepoint`` registers the snapshot's shared state before the store takes it (NO_CLAIM): a later
    checkpoint may refer to a file by a placeholder, and once no checkpoint uses the file the job lets it be
    without deleting it (it is the snapshot owner's)."""
    from barriersim.runtime.state.snapshot import (
        HandleAndLocalPath,
        IncrementalKeyedStateHandle,
        KeyGroupRange,
        PlaceholderStateHandle,
        SharedStateHandle,
        TaskStateSnapshot,
    )

    def incremental(checkpoint_id: int, entry) -> TaskStateSnapshot:
        handle = IncrementalKeyedStateHandle(
            "b", KeyGroupRange(0, 127), checkpoint_id, (HandleAndLocalPath("L1-1.sst", entry),)
        )
        return TaskStateSnapshot({"map": OperatorSubtaskState(managed_keyed_state=(handle,))})

    restored_file = SharedStateHandle("restored-1", 1, 0, 100, b"r")
    restored_map = incremental(7, restored_file).subtask_states_by_operator["map"]
    metadata = CheckpointMetadata(
        7, (OperatorState("src", 1, 128, {0: OperatorSubtaskState()}), OperatorState("map", 1, 128, {0: restored_map}))
    )
    h = make()
    h.call(m.RestoreSavepoint("/sp/1", lambda path: metadata))
    h.take()
    h.trigger()
    h.ack(h.attempt("src"), 8)
    actions = h.ack(h.attempt("map"), 8, incremental(8, PlaceholderStateHandle("restored-1", 100)))
    assert of(m.NotifyCheckpointComplete, actions)  # the placeholder resolved to the restored file
    h.trigger()
    h.ack(h.attempt("src"), 9)
    done = h.ack(h.attempt("map"), 9, incremental(9, SharedStateHandle("new-1", 1, 0, 100, b"n")))
    assert of(m.NotifyCheckpointComplete, done)
    discarded = [k.key for d in of(m.DiscardSharedState, done + h.take()) for k in d.handles]
    assert "restored-1" not in discarded and h.coord.shared_state_registry().handle("restored-1") is None
