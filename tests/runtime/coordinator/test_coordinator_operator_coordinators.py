"""Ports of Flink's CheckpointCoordinatorTest on operator coordinators: they checkpoint before the master hooks
and the tasks (the trigger's first phase), a trigger waits for them, and a failing or silent one ends the
trigger. Flink's MockOperatorCoordinatorCheckpointContext is the test answering ``TriggerCoordinatorCheckpoint``
with ``AcknowledgeCoordinatorState``; Flink's master hook that acknowledges the tasks from inside its trigger call
(an externally induced source) is a hook answering ``MASTER_STATE_PENDING`` while the test acknowledges the tasks,
since a sans-IO hook does not call back into the coordinator."""

from __future__ import annotations

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.master_hooks import MASTER_STATE_PENDING
from barriersim.runtime.coordinator.outcomes import AcknowledgeOutcome, TriggerPhaseOutcome
from barriersim.runtime.failure_reason import CheckpointFailureReason as R

from coordinator_test_harness import make, of, triggered_ids, two_vertices

BIG = 2**31 - 1


def coordinator_requests(actions) -> list[tuple[str, int]]:
    return [(a.operator_id, a.checkpoint_id) for a in of(m.TriggerCoordinatorCheckpoint, actions)]


def test_tasks_are_triggered_after_the_operator_coordinators_answered():
    """The order of Flink's startTriggeringCheckpoint: operator coordinators, then master hooks, then tasks."""
    h = make(operator_coordinators=("src",), max_concurrent_checkpoints=BIG)
    actions = h.trigger(request_id=1)
    assert coordinator_requests(actions) == [("src", 1)] and triggered_ids(actions) == []
    assert h.coord.is_triggering and h.coord.pending_checkpoints[1].number_of_non_acknowledged_operator_coordinators == 1
    assert h.trigger(request_id=2) == []  # waits for the trigger in flight
    assert h.coord.decider.num_queued_requests == 1
    actions = h.coord.handle(m.AcknowledgeCoordinatorState(1, "src", b"coordinator state"))
    assert triggered_ids(actions) == [1]
    assert coordinator_requests(actions) == [("src", 2)]  # the queued request started, with its own first phase
    assert h.coord.is_triggering
    assert triggered_ids(h.coord.handle(m.AcknowledgeCoordinatorState(2, "src", None))) == [2]
    assert not h.coord.is_triggering
    h.ack_all(1)
    [operator_state] = [s for s in h.coord.store.get_latest_checkpoint().metadata.operator_states if s.operator_id == "src"]
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
            seen.append(h.coord.pending_checkpoints[checkpoint_id].are_coordinators_fully_acknowledged())
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
        assert h.coord.receive_acknowledge_message(m.AcknowledgeCheckpoint(
            "job-1", attempt, checkpoint_id)) is AcknowledgeOutcome.SUCCESS
    assert h.coord.number_of_pending_checkpoints == 1  # the master state is still missing
    actions = h.coord.handle(m.MasterHookCompleted(checkpoint_id, "anything", None))
    assert triggered_ids(actions) == [checkpoint_id]  # the tasks got their trigger
    assert of(m.TriggerRequestCompleted, actions) == [m.TriggerRequestCompleted(1, checkpoint_id)]
    assert h.coord.number_of_retained_successful_checkpoints == 1 and h.coord.number_of_pending_checkpoints == 0
    assert h.timers.active_timers == []  # the canceller is gone
    assert not h.coord.is_triggering
    assert len(h.coord.store.get_latest_checkpoint().operator_states) == 2


def test_timeout_while_checkpoint_operator_coordinator_not_finishing():
    """Port of Flink CheckpointCoordinatorTest.testTimeoutWhileCheckpointOperatorCoordinatorNotFinishing."""
    h = make(operator_coordinators=("src",), checkpoint_timeout=10)
    h.trigger()
    assert h.coord.is_triggering
    actions = h.advance(10)
    assert not h.coord.is_triggering
    assert [a.reason for a in of(m.TriggerRequestFailed, actions)] == [R.CHECKPOINT_EXPIRED]
    assert of(m.AbortCoordinatorTriggering, actions) == [m.AbortCoordinatorTriggering("src")]
    assert h.coord.receive_coordinator_state(m.AcknowledgeCoordinatorState(1, "src", b"late")) \
        is AcknowledgeOutcome.UNKNOWN_CHECKPOINT


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
    assert of(m.AbortCoordinatorTriggering, actions) == [m.AbortCoordinatorTriggering("src"),
                                                         m.AbortCoordinatorTriggering("map")]
    assert h.coord.receive_coordinator_checkpoint_failure(m.CoordinatorCheckpointFailed(1, "map", "again")) \
        is TriggerPhaseOutcome.NOT_TRIGGERING
