"""Ports of Flink's PendingCheckpointTest. Flink's completion future is our ``finalize_checkpoint`` return value /
``is_disposed``; state discarding is the coordinator's ``DiscardCheckpoint`` action (see the coordinator tests)."""

from __future__ import annotations

import pytest
from coordinator_test_harness import keyed_snapshot, make, of

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.manual_time import ManualTimer
from barriersim.runtime.coordinator.master_hooks import trigger_hook
from barriersim.runtime.coordinator.pending_checkpoint import (
    PendingCheckpoint,
    PendingCheckpointError,
    TaskAcknowledgeResult,
)
from barriersim.runtime.coordinator.plan import (
    CheckpointPlan,
    DefaultCheckpointPlanCalculator,
    Execution,
    ExecutionState,
    JobVertexInfo,
)
from barriersim.runtime.coordinator.properties import CheckpointProperties, CheckpointRetentionPolicy
from barriersim.runtime.events import CheckpointType
from barriersim.runtime.failure_reason import CheckpointFailureReason as R
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.state.snapshot import OperatorState, OperatorSubtaskState, TaskStateSnapshot

OPERATOR_ID = "op"
PARALLELISM = 1
MAX_PARALLELISM = 128
VERTEX = JobVertexInfo("v", PARALLELISM, MAX_PARALLELISM, (OPERATOR_ID,))
ATTEMPT_ID = ExecutionAttemptID("v", 0)
NEVER_RETAIN = CheckpointProperties.for_checkpoint(CheckpointRetentionPolicy.NEVER_RETAIN_AFTER_TERMINATION)


def create_pending(props=NEVER_RETAIN, masters=(), coordinators=(), extra_vertices=()) -> PendingCheckpoint:
    plan = CheckpointPlan((ATTEMPT_ID,), (ATTEMPT_ID,), (ATTEMPT_ID,))
    return PendingCheckpoint(
        "job", 0, 1, plan, {ATTEMPT_ID: VERTEX}, props, tuple(masters), tuple(coordinators), (VERTEX, *extra_vertices)
    )


class Hook:
    def __init__(self, identifier: str, state: bytes | None):
        self.identifier, self.version, self.state = identifier, 1, state
        self.restored: list = []

    def trigger_checkpoint(self, checkpoint_id, timestamp):
        return self.state

    def restore_checkpoint(self, checkpoint_id, data):
        self.restored.append((checkpoint_id, data))


def test_can_be_subsumed():
    """Port of Flink PendingCheckpointTest.testCanBeSubsumed."""
    forced = CheckpointProperties(True, CheckpointType.SAVEPOINT, False, False, False, False, False)
    pending = create_pending(forced)
    assert not pending.can_be_subsumed()
    with pytest.raises(PendingCheckpointError, match="cannot be subsumed"):
        pending.abort(R.CHECKPOINT_SUBSUMED)
    not_forced = CheckpointProperties(False, CheckpointType.SAVEPOINT, False, False, False, False, False)
    assert not create_pending(not_forced).can_be_subsumed()
    assert create_pending(NEVER_RETAIN).can_be_subsumed()


def test_sync_savepoint_cannot_be_subsumed():
    """Port of Flink PendingCheckpointTest.testSyncSavepointCannotBeSubsumed."""
    pending = create_pending(CheckpointProperties.for_sync_savepoint(True, False))
    assert not pending.can_be_subsumed()
    with pytest.raises(PendingCheckpointError):
        pending.abort(R.CHECKPOINT_SUBSUMED)


def test_completion_future():
    """Port of Flink PendingCheckpointTest.testCompletionFuture."""
    props = CheckpointProperties(False, CheckpointType.SAVEPOINT, False, False, False, False, False)
    for reason in (R.CHECKPOINT_DECLINED, R.CHECKPOINT_EXPIRED):
        pending = create_pending(props)
        assert not pending.is_disposed
        pending.abort(reason)
        assert pending.is_disposed and pending.failure_reason is reason
    pending = create_pending(props)
    assert pending.acknowledge_task(ATTEMPT_ID, None) is TaskAcknowledgeResult.SUCCESS
    assert pending.are_tasks_fully_acknowledged()
    completed = pending.finalize_checkpoint(5)
    assert pending.is_disposed and completed.checkpoint_id == 0
    pending = create_pending(props)
    with pytest.raises(PendingCheckpointError, match="not fully acknowledged"):
        pending.finalize_checkpoint(5)
    assert not pending.is_disposed


def test_abort_discards_state():
    """Port of Flink PendingCheckpointTest.testAbortDiscardsState.

    Adapted: discarding is an action of the coordinator; here an aborted checkpoint's acknowledged state is gone
    for good (later acknowledgements are DISCARDED) and the coordinator emits ``DiscardCheckpoint(ABORTED)``."""
    for reason in (R.CHECKPOINT_DECLINED, R.CHECKPOINT_EXPIRED, R.CHECKPOINT_SUBSUMED):
        pending = create_pending(NEVER_RETAIN)
        pending.abort(reason)
        assert pending.acknowledge_task(ATTEMPT_ID, keyed_snapshot(OPERATOR_ID)) is TaskAcknowledgeResult.DISCARDED
    h = make()
    h.trigger()
    h.ack(h.attempt("src"), 1, keyed_snapshot("src"))
    actions = h.decline(h.attempt("map"), 1)
    assert of(m.DiscardCheckpoint, actions) == [m.DiscardCheckpoint(1, m.DiscardReason.ABORTED)]


def test_pending_checkpoint_stats_callbacks():
    """Port of Flink PendingCheckpointTest.testPendingCheckpointStatsCallbacks.

    Adapted: checked through the coordinator's stats tracker (our pending checkpoint has no stats callback)."""
    h = make()
    h.trigger()
    h.ack(h.attempt("src"), 1)
    assert h.coord.checkpoint_stats().history[1]["num_acknowledged_subtasks"] == 1
    assert len(h.coord.checkpoint_stats().subtask_stats[1]) == 1
    h.ack(h.attempt("map"), 1)
    assert h.coord.checkpoint_stats().history[1]["status"] == "COMPLETED"
    for reason in (R.CHECKPOINT_DECLINED, R.CHECKPOINT_EXPIRED):
        h.trigger()
        cid = max(h.coord.checkpoint_stats().history)
        h.decline(h.attempt("map"), cid, reason)
        assert h.coord.checkpoint_stats().history[cid]["status"] == "FAILED"
        assert h.coord.checkpoint_stats().history[cid]["failure_reason"] == reason.name


def test_null_subtask_state_leads_to_stateless_task():
    """Port of Flink PendingCheckpointTest.testNullSubtaskStateLeadsToStatelessTask."""
    pending = create_pending()
    pending.acknowledge_task(ATTEMPT_ID, None)
    assert pending.operator_states == {OPERATOR_ID: OperatorState(OPERATOR_ID, PARALLELISM, MAX_PARALLELISM)}


def test_non_null_subtask_state_leads_to_stateful_task():
    """Port of Flink PendingCheckpointTest.testNonNullSubtaskStateLeadsToStatefulTask."""
    pending = create_pending()
    pending.acknowledge_task(ATTEMPT_ID, keyed_snapshot(OPERATOR_ID))
    states = pending.operator_states
    assert states and states[OPERATOR_ID].subtask_states[0].has_state


def test_set_canceller():
    """Port of Flink PendingCheckpointTest.testSetCanceller."""
    props = CheckpointProperties(False, CheckpointType.CHECKPOINT, True, True, True, True, True)
    aborted = create_pending(props)
    aborted.abort(R.CHECKPOINT_DECLINED)
    assert aborted.is_disposed
    assert not aborted.set_canceller_handle(ManualTimer(0, 0, lambda: None))
    pending = create_pending(props)
    canceller = ManualTimer(0, 0, lambda: None)
    assert pending.set_canceller_handle(canceller)
    pending.abort(R.CHECKPOINT_DECLINED)
    assert canceller.cancelled


def test_master_state():
    """Port of Flink PendingCheckpointTest.testMasterState."""
    hook = Hook("master hook", b"state")
    pending = create_pending(NEVER_RETAIN, masters=[hook.identifier])
    pending.acknowledge_master_state(hook.identifier, trigger_hook(hook, 0, 0))
    assert pending.are_master_states_fully_acknowledged()
    assert not pending.are_tasks_fully_acknowledged()
    pending.acknowledge_task(ATTEMPT_ID, None)
    assert pending.are_tasks_fully_acknowledged()
    assert len(pending.master_states) == 1 and pending.master_states[0].data == b"state"


def test_master_state_with_null_state():
    """Port of Flink PendingCheckpointTest.testMasterStateWithNullState."""
    hook, nullable = Hook("master hook", b"state"), Hook("nullable master hook", None)
    pending = create_pending(NEVER_RETAIN, masters=[hook.identifier, nullable.identifier])
    pending.acknowledge_master_state(hook.identifier, trigger_hook(hook, 0, 0))
    assert not pending.are_master_states_fully_acknowledged()
    pending.acknowledge_master_state(nullable.identifier, trigger_hook(nullable, 0, 0))
    assert pending.are_master_states_fully_acknowledged()
    assert not pending.are_tasks_fully_acknowledged()
    pending.acknowledge_task(ATTEMPT_ID, None)
    assert pending.are_tasks_fully_acknowledged()
    assert [s.data for s in pending.master_states] == [b"state"]


COORD_VERTEX = JobVertexInfo("cv", 1, MAX_PARALLELISM, ("c1", "c2", "c3"))


def with_coordinators(*ids: str) -> PendingCheckpoint:
    pending = create_pending(NEVER_RETAIN, coordinators=ids, extra_vertices=(COORD_VERTEX,))
    pending.acknowledge_task(ATTEMPT_ID, None)
    return pending


def test_initially_unacknowledged_coordinator_states():
    """Port of Flink PendingCheckpointTest.testInitiallyUnacknowledgedCoordinatorStates."""
    pending = with_coordinators("c1", "c2")
    assert pending.number_of_non_acknowledged_operator_coordinators == 2
    assert not pending.is_fully_acknowledged()


def test_acknowledged_coordinator_states():
    """Port of Flink PendingCheckpointTest.testAcknowledgedCoordinatorStates."""
    pending = with_coordinators("c1", "c2")
    assert pending.acknowledge_coordinator_state(COORD_VERTEX, "c1", b"coord") is TaskAcknowledgeResult.SUCCESS
    assert pending.acknowledge_coordinator_state(COORD_VERTEX, "c2", None) is TaskAcknowledgeResult.SUCCESS
    assert pending.number_of_non_acknowledged_operator_coordinators == 0
    assert pending.is_fully_acknowledged()
    assert set(pending.operator_states) == {OPERATOR_ID, "c1", "c2"}


def test_duplicate_acknowledge_coordinator():
    """Port of Flink PendingCheckpointTest.testDuplicateAcknowledgeCoordinator."""
    pending = with_coordinators("c1")
    pending.acknowledge_coordinator_state(COORD_VERTEX, "c1", b"coord")
    assert pending.acknowledge_coordinator_state(COORD_VERTEX, "c1", None) is TaskAcknowledgeResult.DUPLICATE


def test_acknowledge_unknown_coordinator():
    """Port of Flink PendingCheckpointTest.testAcknowledgeUnknownCoordinator."""
    pending = with_coordinators("c1")
    assert pending.acknowledge_coordinator_state(COORD_VERTEX, "c3", None) is TaskAcknowledgeResult.UNKNOWN


def test_finalize_checkpoint_with_fully_finished_operators():
    """Port of Flink PendingCheckpointTest.testFinalizeCheckpointWithFullyFinishedOperators."""
    finished_v = JobVertexInfo("finished", 1, 256, ("finishedOp",))
    running_v = JobVertexInfo("running", 1, 256, ("runningOp",))
    finished_attempt, running_attempt = ExecutionAttemptID("finished", 0), ExecutionAttemptID("running", 0)
    executions = {
        ("finished", 0): Execution(finished_attempt, ExecutionState.FINISHED),
        ("running", 0): Execution(running_attempt, ExecutionState.RUNNING),
    }
    plan = DefaultCheckpointPlanCalculator([finished_v, running_v], True).calculate_checkpoint_plan(executions)
    assert plan.fully_finished_job_vertices == ("finished",)
    pending = PendingCheckpoint(
        "job",
        0,
        1,
        plan,
        {finished_attempt: finished_v, running_attempt: running_v},
        NEVER_RETAIN,
        all_vertices=(finished_v, running_v),
    )
    snapshot = TaskStateSnapshot({"runningOp": OperatorSubtaskState()})
    assert pending.acknowledge_task(running_attempt, snapshot) is TaskAcknowledgeResult.SUCCESS
    completed = pending.finalize_checkpoint(1)
    assert len(completed.operator_states) == 2
    assert completed.operator_states["finishedOp"].fully_finished
    assert not completed.operator_states["runningOp"].fully_finished


def test_acknowledge_results_duplicate_and_unknown_tasks():
    pending = create_pending()
    assert pending.acknowledge_task(ExecutionAttemptID("other", 0), None) is TaskAcknowledgeResult.UNKNOWN
    assert pending.acknowledge_task(ATTEMPT_ID, None) is TaskAcknowledgeResult.SUCCESS
    assert pending.acknowledge_task(ATTEMPT_ID, None) is TaskAcknowledgeResult.DUPLICATE
    pending.finalize_checkpoint(0)
    assert pending.acknowledge_task(ATTEMPT_ID, None) is TaskAcknowledgeResult.DISCARDED
    with pytest.raises(PendingCheckpointError, match="already disposed"):
        pending.abort(R.CHECKPOINT_EXPIRED)


def test_tasks_deployed_as_finished_mark_their_operators_fully_finished():
    pending = create_pending()
    pending.acknowledge_task(
        ATTEMPT_ID, TaskStateSnapshot({}, is_task_finished=True, is_task_deployed_as_finished=True)
    )
    assert pending.finalize_checkpoint(0).operator_states[OPERATOR_ID].fully_finished
