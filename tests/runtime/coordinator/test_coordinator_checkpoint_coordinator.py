"""Ports of Flink's CheckpointCoordinatorTest (trigger, ack, decline, expiry, concurrency, min pause, store, late
or unknown messages, savepoints). Flink's ManuallyTriggeredScheduledExecutor is our ManualTimerService; Flink's
completion futures are our TriggerRequestCompleted / TriggerRequestFailed actions; Flink's task gateway recorder
is the list of actions. Flink's test graphs (CheckpointExecutionGraphBuilder) make every added vertex a source
unless told otherwise; ``sources`` below does the same."""

from __future__ import annotations

import pytest
from coordinator_test_harness import JOB, Harness, keyed_snapshot, make, of, triggered_ids

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.completed_store import INVALID_CHECKPOINT_ID
from barriersim.runtime.coordinator.outcomes import AcknowledgeOutcome, DeclineOutcome
from barriersim.runtime.coordinator.pending_checkpoint import CompletedCheckpoint
from barriersim.runtime.coordinator.plan import JobVertexInfo
from barriersim.runtime.coordinator.properties import CheckpointProperties, JobStatus
from barriersim.runtime.events import CheckpointOptions, CheckpointType
from barriersim.runtime.failure_reason import CheckpointException
from barriersim.runtime.failure_reason import CheckpointFailureReason as R
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.state.snapshot import OperatorState

BIG = 2**31 - 1


def sources(*names: str, parallelism: int = 1) -> list[JobVertexInfo]:
    return [JobVertexInfo(n, parallelism, 256 if parallelism > 1 else 128) for n in names]


def failed_reasons(actions) -> list:
    return [a.reason for a in of(m.TriggerRequestFailed, actions)]


def fire_periodic(h: Harness) -> list:
    """Run the next periodic trigger (Flink: triggerNonPeriodicScheduledTasks(ScheduledTrigger.class))."""
    periodic = [t for t in h.timers.active_timers if t.at_ms < h.timers.now_ms + 10**6]
    assert periodic, "no periodic trigger scheduled"
    h.timers.advance_to(periodic[0].at_ms)
    out, h.sink[:] = list(h.sink), []
    return out


def start(h: Harness) -> list:
    return h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))


# -- triggering -------------------------------------------------------------------------------------------


def test_min_checkpoint_pause():
    """Port of Flink CheckpointCoordinatorTest.testMinCheckpointPause.

    Adapted: the second (periodic) request is queued while the first is pending; when the first completes the
    queued one falls inside the min pause, is dropped and the periodic trigger rescheduled ``pause`` later."""
    pause = 1000
    h = make(
        sources("v"),
        checkpoint_interval=pause,
        checkpoint_timeout=BIG,
        max_concurrent_checkpoints=1,
        min_pause_between_checkpoints=pause,
    )
    start(h)
    assert triggered_ids(h.trigger(is_periodic=True)) == [1]
    assert h.trigger(is_periodic=True) == [] and h.coord.num_queued_requests() == 1
    actions = h.ack(h.attempt("v"), 1)
    assert failed_reasons(actions) == [R.MINIMUM_TIME_BETWEEN_CHECKPOINTS]
    assert h.coord.number_of_pending_checkpoints == 0
    h.advance(pause // 2)
    assert h.coord.number_of_pending_checkpoints == 0
    assert triggered_ids(h.advance(pause // 2)) == [2]
    assert h.coord.number_of_pending_checkpoints == 1


def test_checkpoint_aborts_if_trigger_tasks_are_not_executed():
    """Port of Flink CheckpointCoordinatorTest.testCheckpointAbortsIfTriggerTasksAreNotExecuted."""
    h = make([JobVertexInfo("v1", 1), JobVertexInfo("v2", 1, inputs=("v1",))], tasks_running=False)
    assert h.coord.number_of_pending_checkpoints == 0
    actions = h.trigger()
    assert failed_reasons(actions) == [R.NOT_ALL_REQUIRED_TASKS_RUNNING]
    assert h.coord.number_of_pending_checkpoints == 0
    assert h.coord.number_of_retained_successful_checkpoints == 0


def test_checkpoint_aborts_if_trigger_tasks_are_finished():
    """Port of Flink CheckpointCoordinatorTest.testCheckpointAbortsIfTriggerTasksAreFinished."""
    h = make(
        [JobVertexInfo("v1", 1), JobVertexInfo("v2", 1, inputs=("v1",))], allow_checkpoints_after_tasks_finished=False
    )
    h.coord.handle(m.TaskFinished(h.attempt("v1")))
    actions = h.trigger()
    assert failed_reasons(actions) == [R.NOT_ALL_REQUIRED_TASKS_RUNNING]
    assert h.coord.number_of_pending_checkpoints == 0
    assert h.coord.number_of_retained_successful_checkpoints == 0


def test_checkpoint_triggered_after_some_tasks_finished_if_allowed():
    """Port of Flink CheckpointCoordinatorTest.testCheckpointTriggeredAfterSomeTasksFinishedIfAllowed."""
    h = make(sources("v1", "v2", parallelism=3), allow_checkpoints_after_tasks_finished=True)
    finished = [h.attempt("v1", 0), h.attempt("v1", 1), h.attempt("v2", 1)]
    for a in finished:
        h.coord.handle(m.TaskFinished(a))
    actions = h.trigger()
    assert failed_reasons(actions) == []
    assert h.coord.number_of_pending_checkpoints == 1
    pending = h.coord.pending_checkpoints()[1]
    record = h.coord.checkpoint_stats().history[1]
    assert record["num_acknowledged_subtasks"] == 3  # finished tasks count as acknowledged
    assert {s["task"] for s in h.coord.checkpoint_stats().subtask_stats[1]} == {str(a) for a in finished}
    assert set(pending.not_yet_acknowledged_tasks) == {h.attempt("v1", 2), h.attempt("v2", 0), h.attempt("v2", 2)}


def test_trigger_and_decline_checkpoint_then_failure_manager_throws_exception():
    """Port of Flink CheckpointCoordinatorTest.testTriggerAndDeclineCheckpointThenFailureManagerThrowsException.

    Flink's failure manager callback throws; ours emits ``FailJob`` naming the failing task."""
    h = make(sources("v1", "v2"), tolerable_checkpoint_failure_number=0)
    h.trigger()
    pending = h.coord.pending_checkpoints()[1]
    h.ack(h.attempt("v2"), 1)
    assert not pending.is_disposed and not pending.are_tasks_fully_acknowledged()
    actions = h.decline(h.attempt("v1"), 1)
    assert of(m.FailJob, actions) == [
        m.FailJob(R.CHECKPOINT_DECLINED, "Exceeded checkpoint tolerable failure threshold.", h.attempt("v1"))
    ]


def test_io_exception_checkpoint_exceeds_tolerable_failure_number():
    """Port of Flink CheckpointCoordinatorTest.testIOExceptionCheckpointExceedsTolerableFailureNumber."""
    h = make(sources("v1", "v2"), tolerable_checkpoint_failure_number=0)
    h.trigger()
    h.call(m.AbortPendingCheckpoints(CheckpointException(R.IO_EXCEPTION)))
    assert [a.reason for a in of(m.FailJob, h.take())] == [R.IO_EXCEPTION]


def test_expired_checkpoint_exceeds_tolerable_failure_number():
    """Port of Flink CheckpointCoordinatorTest.testExpiredCheckpointExceedsTolerableFailureNumber."""
    h = make(sources("v1", "v2"), tolerable_checkpoint_failure_number=0)
    h.trigger()
    h.call(m.AbortPendingCheckpoints(CheckpointException(R.CHECKPOINT_EXPIRED)))
    assert [a.reason for a in of(m.FailJob, h.take())] == [R.CHECKPOINT_EXPIRED]


def trigger_and_decline_checkpoint_simple(reason: R) -> None:
    h = make(sources("v1", "v2"), max_concurrent_checkpoints=BIG, tolerable_checkpoint_failure_number=0)
    v1, v2 = h.attempt("v1"), h.attempt("v2")
    actions = h.trigger()
    assert h.coord.number_of_pending_checkpoints == 1
    assert h.coord.number_of_retained_successful_checkpoints == 0
    assert len(h.timers.active_timers) == 1  # the canceller
    pending = h.coord.pending_checkpoints()[1]
    assert pending.job_id == JOB
    assert pending.number_of_non_acknowledged_tasks == 2 and pending.number_of_acknowledged_tasks == 0
    assert pending.operator_states == {} and not pending.is_disposed
    [trigger] = of(m.TriggerCheckpointOnSources, actions)
    assert set(trigger.tasks) == {v1, v2}
    assert trigger.timestamp == pending.checkpoint_timestamp
    assert trigger.options == CheckpointOptions.for_checkpoint_with_default_location()
    h.ack(v2, 1)
    assert pending.number_of_acknowledged_tasks == 1 and pending.number_of_non_acknowledged_tasks == 1
    assert not pending.is_disposed and not pending.are_tasks_fully_acknowledged()
    assert h.call(m.AcknowledgeCheckpoint(JOB, v2, 1)) is AcknowledgeOutcome.DUPLICATE
    assert not pending.is_disposed
    failures = of(m.FailJob, h.decline(v1, 1, reason))
    assert pending.is_disposed
    assert h.timers.active_timers == []  # the canceller is removed
    assert h.coord.number_of_pending_checkpoints == 0
    assert h.coord.number_of_retained_successful_checkpoints == 0
    exc = CheckpointException(reason)
    for a in (v1, v2):
        assert h.call(m.DeclineCheckpoint(JOB, a, 1, exc)) is DeclineOutcome.UNKNOWN_CHECKPOINT
    assert of(m.FailJob, h.take()) == []
    assert len(failures) == 1


def test_trigger_and_decline_sync_checkpoint_failure_simple():
    """Port of Flink CheckpointCoordinatorTest.testTriggerAndDeclineSyncCheckpointFailureSimple."""
    trigger_and_decline_checkpoint_simple(R.CHECKPOINT_DECLINED)


def test_trigger_and_decline_async_checkpoint_failure_simple():
    """Port of Flink CheckpointCoordinatorTest.testTriggerAndDeclineAsyncCheckpointFailureSimple."""
    trigger_and_decline_checkpoint_simple(R.CHECKPOINT_ASYNC_EXCEPTION)


def test_trigger_and_decline_checkpoint_complex():
    """Port of Flink CheckpointCoordinatorTest.testTriggerAndDeclineCheckpointComplex."""
    h = make(sources("v1", "v2"), max_concurrent_checkpoints=BIG, tolerable_checkpoint_failure_number=BIG)
    v1, v2 = h.attempt("v1"), h.attempt("v2")
    assert triggered_ids(h.trigger() + h.trigger()) == [1, 2]
    assert h.coord.number_of_pending_checkpoints == 2 and len(h.timers.active_timers) == 2
    cp1, cp2 = h.coord.pending_checkpoints()[1], h.coord.pending_checkpoints()[2]
    for cp in (cp1, cp2):
        assert cp.number_of_non_acknowledged_tasks == 2 and cp.number_of_acknowledged_tasks == 0
        assert not cp.is_disposed
    actions = h.decline(v1, 1)
    assert cp1.is_disposed
    assert triggered_ids(actions) == []  # a later checkpoint is in progress: no new one
    assert h.pending_ids == [2] and len(h.timers.active_timers) == 1
    assert cp2.number_of_non_acknowledged_tasks == 2 and not cp2.is_disposed
    h.decline(v1, 1)
    h.decline(v2, 1)
    assert cp1.is_disposed and h.pending_ids == [2]


def test_trigger_and_confirm_simple_checkpoint():
    """Port of Flink CheckpointCoordinatorTest.testTriggerAndConfirmSimpleCheckpoint."""
    h = make(sources("v1", "v2"), max_concurrent_checkpoints=BIG)
    v1, v2 = h.attempt("v1"), h.attempt("v2")
    h.trigger()
    pending = h.coord.pending_checkpoints()[1]
    assert len(h.timers.active_timers) == 1
    h.ack(v2, 1, keyed_snapshot("v2"))
    assert pending.number_of_acknowledged_tasks == 1 and pending.number_of_non_acknowledged_tasks == 1
    assert of(m.DiscardSubtaskState, h.ack(v2, 1, keyed_snapshot("v2"))) == []  # duplicate: kept, not discarded
    actions = h.ack(v1, 1, keyed_snapshot("v1"))
    assert pending.is_disposed
    assert h.coord.number_of_retained_successful_checkpoints == 1
    assert h.coord.number_of_pending_checkpoints == 0
    assert h.timers.active_timers == []
    assert of(m.NotifyCheckpointComplete, actions) == [
        m.NotifyCheckpointComplete(v1, 1, INVALID_CHECKPOINT_ID, 0),
        m.NotifyCheckpointComplete(v2, 1, INVALID_CHECKPOINT_ID, 0),
    ]
    success = h.coord.completed_checkpoint_store().get_all_checkpoints()[0]
    assert success.job_id == JOB and success.checkpoint_id == 1 and set(success.operator_states) == {"v1", "v2"}
    # another checkpoint replaces the first one
    h.timers.advance(7)
    h.trigger()
    actions = h.ack(v1, 2) + h.ack(v2, 2)
    assert h.coord.number_of_pending_checkpoints == 0
    assert [c.checkpoint_id for c in h.coord.completed_checkpoint_store().get_all_checkpoints()] == [2]
    assert h.coord.completed_checkpoint_store().get_latest_checkpoint().timestamp == 7
    assert of(m.DiscardCheckpoint, actions) == [m.DiscardCheckpoint(1, m.DiscardReason.SUBSUMED)]
    assert {(a.task, a.last_subsumed_id) for a in of(m.NotifyCheckpointComplete, actions)} == {(v1, 1), (v2, 1)}


def test_multiple_concurrent_checkpoints():
    """Port of Flink CheckpointCoordinatorTest.testMultipleConcurrentCheckpoints.

    Adapted: trigger/ack/commit sets come from the plan (two sources and a downstream task)."""
    h = make(
        [JobVertexInfo("t1", 1), JobVertexInfo("t2", 1), JobVertexInfo("a", 1, inputs=("t1", "t2"))],
        max_concurrent_checkpoints=BIG,
        max_retained_checkpoints=2,
    )
    t1, t2, a = h.attempt("t1"), h.attempt("t2"), h.attempt("a")
    [trigger1] = of(m.TriggerCheckpointOnSources, h.trigger())
    assert set(trigger1.tasks) == {t1, t2}
    h.ack(t2, 1)
    h.timers.advance(8617)
    [trigger2] = of(m.TriggerCheckpointOnSources, h.trigger())
    assert (trigger2.checkpoint_id, trigger2.timestamp) == (2, 8617)
    assert h.pending_ids == [1, 2]
    h.ack(t1, 1)
    h.ack(t1, 2)
    done1 = h.ack(a, 1)
    assert [x.task for x in of(m.NotifyCheckpointComplete, done1)] == [t1, t2, a]
    assert h.pending_ids == [2]
    done2 = h.ack(a, 2) + h.ack(t2, 2)
    assert [x.checkpoint_id for x in of(m.NotifyCheckpointComplete, done2)] == [2, 2, 2]
    assert [c.checkpoint_id for c in h.coord.completed_checkpoint_store().get_all_checkpoints()] == [1, 2]


def test_successful_checkpoint_subsumes_unsuccessful():
    """Port of Flink CheckpointCoordinatorTest.testSuccessfulCheckpointSubsumesUnsuccessful."""
    h = make(sources("v1", "v2", "v3"), max_concurrent_checkpoints=BIG, max_retained_checkpoints=10)
    v1, v2, v3 = h.attempt("v1"), h.attempt("v2"), h.attempt("v3")
    h.trigger()
    cp1 = h.coord.pending_checkpoints()[1]
    h.ack(v1, 1, keyed_snapshot("v1"))
    h.ack(v3, 1, keyed_snapshot("v3"))
    h.trigger()
    cp2 = h.coord.pending_checkpoints()[2]
    h.ack(v3, 2)
    h.ack(v1, 2)
    actions = h.ack(v2, 2)
    assert cp1.is_disposed and cp1.failure_reason is R.CHECKPOINT_SUBSUMED and cp2.is_disposed
    assert h.coord.number_of_pending_checkpoints == 0
    assert [c.checkpoint_id for c in h.coord.completed_checkpoint_store().get_all_checkpoints()] == [2]
    assert {a.task for a in of(m.NotifyCheckpointAborted, actions) if a.checkpoint_id == 1} == {v1, v2, v3}
    assert m.DiscardCheckpoint(1, m.DiscardReason.ABORTED) in actions
    assert {a.task for a in of(m.NotifyCheckpointComplete, actions)} == {v1, v2, v3}
    late = h.ack(v2, 1, keyed_snapshot("v2"))
    assert of(m.DiscardSubtaskState, late) == [m.DiscardSubtaskState(v2, 1)]


def test_checkpoint_timeout_isolated():
    """Port of Flink CheckpointCoordinatorTest.testCheckpointTimeoutIsolated."""
    h = make(sources("v1", "v2"), checkpoint_timeout=200)
    v1, v2 = h.attempt("v1"), h.attempt("v2")
    h.trigger()
    pending = h.coord.pending_checkpoints()[1]
    h.ack(v1, 1, keyed_snapshot("v1"))
    actions = h.advance(200)
    assert pending.is_disposed and pending.failure_reason is R.CHECKPOINT_EXPIRED
    assert h.coord.number_of_pending_checkpoints == 0
    assert m.DiscardCheckpoint(1, m.DiscardReason.ABORTED) in actions
    assert [a.task for a in of(m.NotifyCheckpointAborted, actions)] == [v1, v2]
    assert failed_reasons(actions) == [R.CHECKPOINT_EXPIRED]
    assert h.call(m.AcknowledgeCheckpoint(JOB, v2, 1, keyed_snapshot("v2"))) is AcknowledgeOutcome.LATE
    assert of(m.DiscardSubtaskState, h.take()) == [m.DiscardSubtaskState(v2, 1)]


def test_handle_messages_for_non_existing_checkpoints():
    """Port of Flink CheckpointCoordinatorTest.testHandleMessagesForNonExistingCheckpoints."""
    h = make([JobVertexInfo("v1", 1), JobVertexInfo("v2", 1, inputs=("v1",))])
    v1 = h.attempt("v1")
    h.trigger()
    receive = h.call
    assert receive(m.AcknowledgeCheckpoint("other-job", v1, 1)) is AcknowledgeOutcome.WRONG_JOB
    assert receive(m.AcknowledgeCheckpoint(JOB, v1, 1 + 1)) is AcknowledgeOutcome.UNKNOWN_CHECKPOINT
    assert receive(m.AcknowledgeCheckpoint(JOB, ExecutionAttemptID("nope", 0), 1)) is AcknowledgeOutcome.UNKNOWN
    assert h.coord.pending_checkpoints()[1].number_of_acknowledged_tasks == 0


def test_state_cleanup_for_late_or_unknown_messages():
    """Port of Flink CheckpointCoordinatorTest.testStateCleanupForLateOrUnknownMessages."""
    h = make([JobVertexInfo("v1", 1), JobVertexInfo("v2", 1, inputs=("v1",))], max_concurrent_checkpoints=1)
    v1, v2, unknown = h.attempt("v1"), h.attempt("v2"), ExecutionAttemptID("unknown", 0)
    h.trigger()
    pending = h.coord.pending_checkpoints()[1]
    state = keyed_snapshot("v1")
    assert of(m.DiscardSubtaskState, h.ack(v1, 1, state)) == []
    assert of(m.DiscardSubtaskState, h.ack(unknown, 1, state)) == [m.DiscardSubtaskState(unknown, 1)]
    assert of(m.DiscardSubtaskState, h.ack(unknown, 1, state, job="other")) == []
    assert of(m.DiscardSubtaskState, h.ack(v1, 1, state)) == []  # duplicate
    actions = h.decline(v1, 1)
    assert pending.is_disposed
    assert m.DiscardCheckpoint(1, m.DiscardReason.ABORTED) in actions  # the acknowledged state is cleaned up
    assert of(m.DiscardSubtaskState, h.ack(v2, 1, keyed_snapshot("v2"))) == [m.DiscardSubtaskState(v2, 1)]
    assert of(m.DiscardSubtaskState, h.ack(unknown, 1, state, job="other")) == []
    assert of(m.DiscardSubtaskState, h.ack(unknown, 1, state)) == [m.DiscardSubtaskState(unknown, 1)]


def max_concurrent_attempts(n: int) -> None:
    h = make(
        sources("v"),
        checkpoint_interval=10,
        checkpoint_timeout=200_000,
        min_pause_between_checkpoints=0,
        max_concurrent_checkpoints=n,
        max_retained_checkpoints=2,
    )
    start(h)
    triggered: list[int] = []
    for _ in range(n):
        triggered += triggered_ids(fire_periodic(h))
    assert triggered == list(range(1, n + 1))
    assert h.ack(h.attempt("v"), 1) and not triggered_ids(h.take())
    assert of(m.NotifyCheckpointComplete, []) == []
    triggered += triggered_ids(fire_periodic(h))
    assert len(triggered) == n + 1
    triggered += triggered_ids(fire_periodic(h))  # no further checkpoints: the request waits in the queue
    assert len(triggered) == n + 1


def test_max_concurrent_attempts1():
    """Port of Flink CheckpointCoordinatorTest.testMaxConcurrentAttempts1."""
    max_concurrent_attempts(1)


def test_max_concurrent_attempts2():
    """Port of Flink CheckpointCoordinatorTest.testMaxConcurrentAttempts2."""
    max_concurrent_attempts(2)


def test_max_concurrent_attempts5():
    """Port of Flink CheckpointCoordinatorTest.testMaxConcurrentAttempts5."""
    max_concurrent_attempts(5)


def test_max_concurrent_attempts_with_subsumption():
    """Port of Flink CheckpointCoordinatorTest.testMaxConcurrentAttemptsWithSubsumption."""
    h = make(
        sources("v"),
        checkpoint_interval=10,
        checkpoint_timeout=200_000,
        max_concurrent_checkpoints=2,
        max_retained_checkpoints=2,
    )
    start(h)
    while h.coord.number_of_pending_checkpoints < 2:
        fire_periodic(h)
    assert h.pending_ids == [1, 2]
    h.ack(h.attempt("v"), 2)  # subsumes 1
    while h.coord.number_of_pending_checkpoints < 2:
        fire_periodic(h)
    assert h.pending_ids == [3, 4]


def test_periodic_scheduling_with_inactive_tasks():
    """Port of Flink CheckpointCoordinatorTest.testPeriodicSchedulingWithInactiveTasks."""
    h = make(sources("v"), checkpoint_interval=10, tasks_running=False)
    start(h)
    assert failed_reasons(fire_periodic(h)) == [R.NOT_ALL_REQUIRED_TASKS_RUNNING]
    assert h.coord.number_of_pending_checkpoints == 0
    h.coord.handle(m.TaskRunning(h.attempt("v")))
    fire_periodic(h)
    assert h.coord.number_of_pending_checkpoints > 0


# -- savepoints -------------------------------------------------------------------------------------------


def test_trigger_and_confirm_simple_savepoint():
    """Port of Flink CheckpointCoordinatorTest.testTriggerAndConfirmSimpleSavepoint."""
    h = make(sources("v1", "v2"), max_concurrent_checkpoints=BIG)
    v1, v2 = h.attempt("v1"), h.attempt("v2")
    actions = h.trigger(CheckpointType.SAVEPOINT, request_id=7)
    [trigger] = of(m.TriggerCheckpointOnSources, actions)
    assert trigger.options.checkpoint_type is CheckpointType.SAVEPOINT and not trigger.options.is_unaligned_checkpoint
    pending = h.coord.pending_checkpoints()[1]
    assert pending.number_of_non_acknowledged_tasks == 2 and not pending.can_be_subsumed()
    assert of(m.TriggerRequestCompleted, h.ack(v2, 1, keyed_snapshot("v2"))) == []
    assert of(m.TriggerRequestCompleted, h.ack(v2, 1, keyed_snapshot("v2"))) == []
    actions = h.ack(v1, 1, keyed_snapshot("v1"))
    assert pending.is_disposed
    assert of(m.TriggerRequestCompleted, actions) == [m.TriggerRequestCompleted(7, 1)]
    [persist] = of(m.PersistCheckpoint, actions)
    assert persist.is_savepoint and len(persist.metadata.operator_states) == 2
    assert h.coord.number_of_retained_successful_checkpoints == 0  # savepoints are not retained checkpoints
    assert h.coord.number_of_pending_checkpoints == 0
    assert of(m.NotifyCheckpointComplete, actions) == []  # nor notified
    assert (
        h.coord.checkpoint_stats().history[1]["status"] == "COMPLETED"
        and h.coord.checkpoint_stats().history[1]["is_savepoint"]
    )


def test_savepoints_are_not_subsumed():
    """Port of Flink CheckpointCoordinatorTest.testSavepointsAreNotSubsumed."""
    h = make(sources("v1", "v2"), max_concurrent_checkpoints=BIG, max_retained_checkpoints=1)
    v1, v2 = h.attempt("v1"), h.attempt("v2")

    def ack_both(cid):
        return h.ack(v1, cid) + h.ack(v2, cid)

    h.trigger(CheckpointType.SAVEPOINT)
    sp1 = 1
    h.trigger()
    h.trigger()
    cp2 = 3
    assert h.coord.number_of_pending_checkpoints == 3
    notified = of(m.NotifyCheckpointComplete, ack_both(cp2))
    assert {(n.checkpoint_id, n.last_subsumed_id) for n in notified} == {(cp2, INVALID_CHECKPOINT_ID)}
    assert h.pending_ids == [sp1] and h.coord.number_of_retained_successful_checkpoints == 1
    assert not h.coord.pending_checkpoints()[sp1].is_disposed
    h.trigger()
    h.trigger(CheckpointType.SAVEPOINT)
    sp2 = 5
    assert h.coord.number_of_pending_checkpoints == 3
    assert of(m.NotifyCheckpointComplete, ack_both(sp2)) == []  # savepoints do not subsume checkpoints
    assert h.coord.number_of_pending_checkpoints == 2 and h.coord.number_of_retained_successful_checkpoints == 1
    assert not h.coord.pending_checkpoints()[sp1].is_disposed
    assert of(m.NotifyCheckpointComplete, ack_both(sp1)) == []
    assert h.coord.number_of_pending_checkpoints == 1
    h.trigger()
    cp4 = 6
    notified = of(m.NotifyCheckpointComplete, ack_both(cp4))
    assert {(n.checkpoint_id, n.last_subsumed_id) for n in notified} == {(cp4, cp2)}


def test_concurrent_savepoints():
    """Port of Flink CheckpointCoordinatorTest.testConcurrentSavepoints."""
    num_savepoints = 5
    h = make(sources("v"), max_concurrent_checkpoints=1)
    for i in range(num_savepoints):
        h.trigger(CheckpointType.SAVEPOINT, request_id=i)
    assert h.coord.number_of_pending_checkpoints == num_savepoints  # savepoints are forced
    completed = []
    for cid in range(1, num_savepoints + 1):
        completed += of(m.TriggerRequestCompleted, h.ack(h.attempt("v"), cid))
    assert [c.request_id for c in completed] == list(range(num_savepoints))


def test_min_delay_between_savepoints():
    """Port of Flink CheckpointCoordinatorTest.testMinDelayBetweenSavepoints."""
    h = make(sources("v"), max_concurrent_checkpoints=1, min_pause_between_checkpoints=100_000_000)
    a0 = h.trigger(CheckpointType.SAVEPOINT)
    a1 = h.trigger(CheckpointType.SAVEPOINT)
    assert failed_reasons(a0 + a1) == []
    assert h.pending_ids == [1, 2]


@pytest.mark.parametrize(
    "options",
    [CheckpointOptions.unaligned(), CheckpointOptions.aligned_with_timeout(CheckpointType.CHECKPOINT, 500)],
    ids=["unaligned", "aligned-with-timeout"],
)
def test_savepoint_scheduled_in_unaligned_mode(options):
    """Port of Flink CheckpointCoordinatorTest.testSavepointScheduledInUnalignedMode: with unaligned checkpoints
    enabled (aligned with a timeout counts, as in Flink) a savepoint is not forced: it waits while the one
    allowed checkpoint is pending, ahead of the queued periodic requests, and starts when that one ends."""
    max_concurrent, requests = 1, 10
    h = make(
        sources("v"), checkpoint_interval=10_000, max_concurrent_checkpoints=max_concurrent, checkpoint_options=options
    )
    assert h.call(m.StartCheckpointScheduler())
    actions = []
    for i in range(requests):
        actions += h.trigger(is_periodic=True, request_id=i)
    assert h.coord.num_queued_requests() == requests - max_concurrent
    actions += h.trigger(CheckpointType.SAVEPOINT, request_id=100)
    assert h.coord.num_queued_requests() == requests + 1 - max_concurrent
    actions += h.coord.handle(
        m.DeclineCheckpoint(JOB, ExecutionAttemptID("unknown", 0), 1, CheckpointException(R.CHECKPOINT_DECLINED))
    )
    assert h.coord.num_queued_requests() == requests - max_concurrent  # the savepoint was triggered
    done = {a.request_id for a in actions if isinstance(a, (m.TriggerRequestCompleted, m.TriggerRequestFailed))}
    assert done == {0}  # only the declined checkpoint is done
    assert h.coord.number_of_pending_checkpoints == max_concurrent
    [pending] = h.coord.pending_checkpoints().values()
    assert pending.request_id == 100 and pending.props.is_savepoint and not pending.props.forced


@pytest.mark.parametrize(
    "options, forced",
    [
        (CheckpointOptions.aligned(), True),
        (CheckpointOptions.not_exactly_once(), True),
        (CheckpointOptions.unaligned(), False),
        (CheckpointOptions.aligned_with_timeout(CheckpointType.CHECKPOINT, 500), False),
    ],
)
@pytest.mark.parametrize(
    "checkpoint_type", [CheckpointType.SAVEPOINT, CheckpointType.SAVEPOINT_SUSPEND, CheckpointType.SAVEPOINT_TERMINATE]
)
def test_savepoint_forced_only_when_unaligned_checkpoints_are_disabled(options, forced, checkpoint_type):
    """Flink's triggerSavepoint and triggerSynchronousSavepoint: ``forced = !unalignedCheckpointsEnabled``."""
    h = make(sources("v"), checkpoint_options=options)
    [trigger] = of(m.TriggerCheckpointOnSources, h.trigger(checkpoint_type))
    assert h.coord.pending_checkpoints()[trigger.checkpoint_id].props.forced is forced


# -- statistics -------------------------------------------------------------------------------------------


def test_checkpoint_stats_tracker_pending_checkpoint_callback():
    """Port of Flink CheckpointCoordinatorTest.testCheckpointStatsTrackerPendingCheckpointCallback."""
    h = make(sources("v1", "v2"))
    h.timers.advance(5)
    h.trigger()
    record = h.coord.checkpoint_stats().history[1]
    assert record["status"] == "IN_PROGRESS" and record["trigger_timestamp"] == 5
    assert record["num_subtasks"] == 2 and not record["is_savepoint"]
    assert h.coord.checkpoint_counts()["in_progress"] == 1 and h.coord.checkpoint_counts()["total"] == 1


def test_checkpoint_stats_tracker_restore_callback():
    """Port of Flink CheckpointCoordinatorTest.testCheckpointStatsTrackerRestoreCallback."""
    h = make(sources("v"))
    h.coord.completed_checkpoint_store().add_checkpoint_and_subsume_oldest_one(
        CompletedCheckpoint(
            JOB, 0, 1, 2, {"v": OperatorState("v", 1, 128)}, (), CheckpointProperties.for_standard_checkpoint()
        )
    )
    assert h.call(m.RestoreLatestCheckpoint()) is not None
    assert h.coord.checkpoint_counts()["restored"] == 1
    assert h.coord.checkpoint_stats().latest_restored["id"] == 0


def test_checkpoint_type_becomes_unaligned_once_a_subtask_checkpointed_unaligned():
    """Flink's PendingCheckpointStats/RestAPICheckpointType: a checkpoint is reported as UNALIGNED_CHECKPOINT
    once one subtask's metrics say it checkpointed unaligned (also after an alignment timeout); savepoints keep
    their type."""
    from barriersim.runtime.coordinator.stats_tracker import CheckpointStatsTracker
    from barriersim.runtime.task.actions import TaskCheckpointMetrics

    stats = CheckpointStatsTracker()
    stats.report_pending_checkpoint(1, 0, False, "CHECKPOINT", 2)
    stats.report_subtask_stats(1, "a", 1, 0, TaskCheckpointMetrics(1))
    assert stats.history[1]["checkpoint_type"] == "CHECKPOINT"
    stats.report_subtask_stats(1, "b", 2, 0, TaskCheckpointMetrics(1, unaligned_checkpoint=True))
    assert stats.history[1]["checkpoint_type"] == "UNALIGNED_CHECKPOINT"
    stats.report_pending_checkpoint(2, 0, True, "SAVEPOINT", 1)
    stats.report_subtask_stats(2, "a", 1, 0, TaskCheckpointMetrics(2, unaligned_checkpoint=True))
    assert stats.history[2]["checkpoint_type"] == "SAVEPOINT"


@pytest.mark.parametrize("late", ["closed part", "acknowledgement"])
def test_checkpoint_stats_updated_after_failure(late):
    """Port of Flink CheckpointCoordinatorTest.testAbortedCheckpointStatsUpdatedAfterFailure and
    testCheckpointStatsUpdatedAfterFailure: one task declines, then another's figures arrive, from a closed
    asynchronous part (``reportCheckpointMetrics``) or in a late acknowledgement; the failed checkpoint's statistics
    take them (Flink 2.3's ``FailedCheckpointStats`` is a ``PendingCheckpointStats``), as no acknowledgement."""
    from barriersim.runtime.coordinator.stats_tracker import job_statistics
    from barriersim.runtime.task.actions import TaskCheckpointMetrics

    h = make([JobVertexInfo("declining", 1), JobVertexInfo("late-report", 1)])
    h.trigger()
    assert h.pending_ids == [1]
    h.decline(h.attempt("declining"), 1)
    metrics = TaskCheckpointMetrics(
        1,
        async_duration_ms=20,
        alignment_duration_ms=123,
        checkpoint_start_delay_ms=567,
        bytes_processed_during_alignment=19,
        total_bytes_persisted=18,
    )
    attempt = h.attempt("late-report")
    if late == "closed part":
        h.coord.handle(m.ReportCheckpointMetrics(JOB, attempt, 1, metrics, state_size=18, checkpointed_size=18))
    else:
        assert (
            h.call(m.AcknowledgeCheckpoint(JOB, attempt, 1, keyed_snapshot("late-report", b"x" * 18), metrics))
            is AcknowledgeOutcome.UNKNOWN_CHECKPOINT
        )
    (checkpoint,), rows, _ = job_statistics([h.coord.checkpoint_stats()])
    assert checkpoint["status"] == "FAILED" and checkpoint["num_acknowledged_subtasks"] == 0
    assert checkpoint["state_size"] == 18
    (row,) = rows
    assert row["task"] == "late-report#0" and row["aborted"]
    assert (row["alignment_duration"], row["start_delay"], row["checkpoint_async"]) == (123, 567, 20)
    assert not row["unaligned_checkpoint"]
