"""Ports of Flink's CheckpointCoordinatorTest on operator coordinators: they checkpoint before the master hooks and the
tasks (the trigger's first phase), a trigger waits for them, a failing or silent one ends the trigger, and they hear
of every checkpoint that completes or is aborted. Flink's MockOperatorCoordinatorCheckpointContext is the test
answering ``TriggerCoordinatorCheckpoint`` with ``AcknowledgeCoordinatorState``; Flink's master hook that
acknowledges the tasks from inside its trigger call (an externally induced source) is a hook answering
``MASTER_STATE_PENDING`` while the test acknowledges the tasks, since a sans-IO hook does not call back into the
coordinator."""

from __future__ import annotations

from coordinator_test_harness import make, of, triggered_ids, two_vertices

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.completed_store import StandaloneCompletedCheckpointStore
from barriersim.runtime.coordinator.master_hooks import MASTER_STATE_PENDING
from barriersim.runtime.coordinator.outcomes import AcknowledgeOutcome, TriggerPhaseOutcome
from barriersim.runtime.coordinator.plan import JobVertexInfo
from barriersim.runtime.events import CheckpointType
from barriersim.runtime.failure_reason import CheckpointFailureReason as R

BIG = 2**31 - 1


def coordinator_requests(actions) -> list[tuple[str, int]]:
    return [(a.operator_id, a.checkpoint_id) for a in of(m.TriggerCoordinatorCheckpoint, actions)]


def test_tasks_are_triggered_after_the_operator_coordinators_answered():
    """The order of Flink's startTriggeringCheckpoint: operator coordinators, then master hooks, then tasks."""
    h = make(operator_coordinators=("src",), max_concurrent_checkpoints=BIG)
    actions = h.trigger(request_id=1)
    assert coordinator_requests(actions) == [("src", 1)] and triggered_ids(actions) == []
    assert (
        h.coord.is_triggering and h.coord.pending_checkpoints()[1].number_of_non_acknowledged_operator_coordinators == 1
    )
    assert h.trigger(request_id=2) == []  # waits for the trigger in flight
    assert h.coord.num_queued_requests() == 1
    actions = h.coord.handle(m.AcknowledgeCoordinatorState(1, "src", b"coordinator state"))
    assert triggered_ids(actions) == [1]
    assert coordinator_requests(actions) == [("src", 2)]  # the queued request started, with its own first phase
    assert h.coord.is_triggering
    assert triggered_ids(h.coord.handle(m.AcknowledgeCoordinatorState(2, "src", None))) == [2]
    assert not h.coord.is_triggering
    h.ack_all(1)
    [operator_state] = [
        s
        for s in h.coord.completed_checkpoint_store().get_latest_checkpoint().metadata.operator_states
        if s.operator_id == "src"
    ]
    assert operator_state.coordinator_state == b"coordinator state"


def test_externally_induced_source_with_operator_coordinator():
    """Port of Flink CheckpointCoordinatorTest.testExternallyInducedSourceWithOperatorCoordinator: the operator
    coordinator has checkpointed before the master hook is called; the tasks acknowledge before the master hook
    finished; the checkpoint then completes as its tasks are triggered."""
    h = make(operator_coordinators=("src",), max_concurrent_checkpoints=BIG)
    seen: list[bool] = []

    class InducingHook:
        identifier, version = "anything", 0

        def trigger_checkpoint(self, checkpoint_id, timestamp):
            seen.append(h.coord.pending_checkpoints()[checkpoint_id].are_coordinators_fully_acknowledged())
            return MASTER_STATE_PENDING

        def restore_checkpoint(self, checkpoint_id, data):
            pass

    h.coord.add_master_hook(InducingHook())
    assert h.coord.number_of_pending_checkpoints == 0 and h.coord.number_of_retained_successful_checkpoints == 0
    assert h.timers.active_timers == []
    actions = h.trigger(request_id=1)
    [(_, checkpoint_id)] = coordinator_requests(actions)
    h.coord.handle(m.AcknowledgeCoordinatorState(checkpoint_id, "src", b""))
    assert seen == [True]  # the coordinator checkpoint had finished
    for attempt in h.all_attempts:  # the source induced the tasks' checkpoints itself
        assert h.call(m.AcknowledgeCheckpoint("job-1", attempt, checkpoint_id)) is AcknowledgeOutcome.SUCCESS
    assert h.coord.number_of_pending_checkpoints == 1  # the master state is still missing
    actions = h.coord.handle(m.MasterHookCompleted(checkpoint_id, "anything", None))
    assert triggered_ids(actions) == [checkpoint_id]  # the tasks got their trigger
    assert of(m.TriggerRequestCompleted, actions) == [m.TriggerRequestCompleted(1, checkpoint_id)]
    assert h.coord.number_of_retained_successful_checkpoints == 1 and h.coord.number_of_pending_checkpoints == 0
    assert h.timers.active_timers == []  # the canceller is gone
    assert not h.coord.is_triggering
    assert len(h.coord.completed_checkpoint_store().get_latest_checkpoint().operator_states) == 2


def test_timeout_while_checkpoint_operator_coordinator_not_finishing():
    """Port of Flink CheckpointCoordinatorTest.testTimeoutWhileCheckpointOperatorCoordinatorNotFinishing."""
    h = make(operator_coordinators=("src",), checkpoint_timeout=10)
    h.trigger()
    assert h.coord.is_triggering
    actions = h.advance(10)
    assert not h.coord.is_triggering
    assert [a.reason for a in of(m.TriggerRequestFailed, actions)] == [R.CHECKPOINT_EXPIRED]
    assert of(m.AbortCoordinatorTriggering, actions) == [m.AbortCoordinatorTriggering("src")]
    assert h.call(m.AcknowledgeCoordinatorState(1, "src", b"late")) is AcknowledgeOutcome.UNKNOWN_CHECKPOINT


def test_failing_operator_coordinator_fails_the_trigger():
    """Flink: a coordinator's failed checkpoint future fails the trigger (TRIGGER_CHECKPOINT_FAILURE, via
    onTriggerFailure, which also tells every coordinator to stop waiting); the tasks are not triggered."""
    h = make(two_vertices(), operator_coordinators=("src", "map"), tolerable_checkpoint_failure_number=5)
    h.trigger(request_id=1)
    h.coord.handle(m.AcknowledgeCoordinatorState(1, "src", b"ok"))
    assert h.coord.is_triggering
    actions = h.coord.handle(m.CoordinatorCheckpointFailed(1, "map", "by design"))
    assert not h.coord.is_triggering and h.coord.number_of_pending_checkpoints == 0
    assert of(m.TriggerRequestFailed, actions) == [m.TriggerRequestFailed(1, 1, R.TRIGGER_CHECKPOINT_FAILURE)]
    assert triggered_ids(actions) == []
    assert of(m.AbortCoordinatorTriggering, actions) == [
        m.AbortCoordinatorTriggering("src"),
        m.AbortCoordinatorTriggering("map"),
    ]
    assert h.call(m.CoordinatorCheckpointFailed(1, "map", "again")) is TriggerPhaseOutcome.NOT_TRIGGERING


def answering(h, actions) -> list:
    """Answer every ``TriggerCoordinatorCheckpoint`` at once with an empty state (Flink's mock context that
    completes its future with ``new byte[0]``)."""
    out = list(actions)
    for operator_id, checkpoint_id in coordinator_requests(actions):
        out += answering(h, h.coord.handle(m.AcknowledgeCoordinatorState(checkpoint_id, operator_id, b"")))
    return out


def coordinator_notices(actions) -> tuple[list[int], list[int]]:
    return (
        [a.checkpoint_id for a in of(m.NotifyCoordinatorCheckpointAborted, actions)],
        [a.checkpoint_id for a in of(m.NotifyCoordinatorCheckpointComplete, actions)],
    )


def test_notify_checkpoint_abortion_in_operator_coordinator():
    """Port of Flink CheckpointCoordinatorTest.testNotifyCheckpointAbortionInOperatorCoordinator: completing
    checkpoint 2 subsumes checkpoint 1; the operator coordinator hears both (until now it heard neither)."""
    h = make([JobVertexInfo("v", 1)], operator_coordinators=("v",), max_concurrent_checkpoints=BIG)
    actions = answering(h, h.trigger())
    checkpoint_id1 = max(h.coord.pending_checkpoints())
    actions += answering(h, h.trigger())
    checkpoint_id2 = max(h.coord.pending_checkpoints())
    assert coordinator_notices(actions) == ([], [])
    actions = h.ack(h.attempt("v"), checkpoint_id2)  # completes 2, which aborts 1
    assert coordinator_notices(actions) == ([checkpoint_id1], [checkpoint_id2])
    assert [(a.operator_id, a.checkpoint_id) for a in of(m.NotifyCoordinatorCheckpointAborted, actions)] == [
        ("v", checkpoint_id1)
    ]


def test_operator_coordinators_hear_of_every_abort_but_of_no_savepoint_completing():
    """Flink's sendAbortedMessages reaches the coordinators for every aborted checkpoint or savepoint (decline,
    expiry, a completed checkpoint the store could not take); sendAcknowledgeMessages only for checkpoints and
    synchronous savepoints."""
    h = make(
        two_vertices(), operator_coordinators=("src", "map"), max_concurrent_checkpoints=BIG, checkpoint_timeout=100
    )
    answering(h, h.trigger(CheckpointType.SAVEPOINT))
    assert coordinator_notices(h.ack_all(1)) == ([], [])  # a savepoint completing notifies nobody
    answering(h, h.trigger())
    assert coordinator_notices(h.decline(h.attempt("map"), 2)) == ([2, 2], [])
    answering(h, h.trigger())
    assert coordinator_notices(h.advance(100)) == ([3, 3], [])  # expired

    class FailingStore(StandaloneCompletedCheckpointStore):
        def add_checkpoint_and_subsume_oldest_one(self, checkpoint):
            raise RuntimeError("by design")

    h = make(two_vertices(), operator_coordinators=("src",), store=FailingStore(1))
    answering(h, h.trigger())
    assert coordinator_notices(h.ack_all(1)) == ([1], [])
