"""Ports of Flink's CompletedCheckpointStoreTest, StandaloneCompletedCheckpointStoreTest and (the retention
tests of) DefaultCompletedCheckpointStoreTest. Flink discards through the checkpoint objects; our store returns
the checkpoints to discard (the coordinator turns them into ``DiscardCheckpoint`` actions), so "is discarded"
is asserted as "returned for discarding"."""

from __future__ import annotations

import pytest

from barriersim.runtime.coordinator.completed_store import (
    INVALID_CHECKPOINT_ID,
    CompletedCheckpointStoreError,
    StandaloneCompletedCheckpointStore,
)
from barriersim.runtime.coordinator.pending_checkpoint import CompletedCheckpoint
from barriersim.runtime.coordinator.properties import CheckpointProperties, CheckpointRetentionPolicy, JobStatus
from barriersim.runtime.state.snapshot import OperatorState, OperatorSubtaskState


def create_checkpoint(checkpoint_id: int, props: CheckpointProperties | None = None) -> CompletedCheckpoint:
    operator = f"op-{checkpoint_id}"
    state = OperatorState(operator, 4, 4, {i: OperatorSubtaskState() for i in range(4)})
    return CompletedCheckpoint(
        "job", checkpoint_id, 0, 0, {operator: state}, (), props or CheckpointProperties.for_standard_checkpoint()
    )


def savepoint(checkpoint_id: int) -> CompletedCheckpoint:
    return create_checkpoint(checkpoint_id, CheckpointProperties.for_savepoint(True))


def test_exception_on_no_retained_checkpoints():
    """Port of Flink CompletedCheckpointStoreTest.testExceptionOnNoRetainedCheckpoints."""
    with pytest.raises(CompletedCheckpointStoreError, match="at least one"):
        StandaloneCompletedCheckpointStore(0)


def test_add_and_get_latest_checkpoint():
    """Port of Flink CompletedCheckpointStoreTest.testAddAndGetLatestCheckpoint."""
    store = StandaloneCompletedCheckpointStore(4)
    assert store.number_of_retained_checkpoints == 0 and store.get_all_checkpoints() == []
    expected = [create_checkpoint(0), create_checkpoint(1)]
    store.add_checkpoint_and_subsume_oldest_one(expected[0])
    assert store.number_of_retained_checkpoints == 1
    assert store.get_latest_checkpoint() == expected[0]
    store.add_checkpoint_and_subsume_oldest_one(expected[1])
    assert store.number_of_retained_checkpoints == 2
    assert store.get_latest_checkpoint() == expected[1]


def test_add_checkpoint_more_than_max_retained():
    """Port of Flink CompletedCheckpointStoreTest.testAddCheckpointMoreThanMaxRetained."""
    store = StandaloneCompletedCheckpointStore(1)
    expected = [create_checkpoint(i) for i in range(4)]
    store.add_checkpoint_and_subsume_oldest_one(expected[0])
    assert store.number_of_retained_checkpoints == 1
    for i in range(1, len(expected)):
        result = store.add_checkpoint_and_subsume_oldest_one(expected[i])
        assert result.to_discard == (expected[i - 1],)
        assert result.last_subsumed_checkpoint_id == i - 1
        assert store.number_of_retained_checkpoints == 1


def test_empty_state():
    """Port of Flink CompletedCheckpointStoreTest.testEmptyState."""
    store = StandaloneCompletedCheckpointStore(1)
    assert store.get_latest_checkpoint() is None
    assert store.get_all_checkpoints() == []
    assert store.number_of_retained_checkpoints == 0
    assert store.get_latest_checkpoint_id() == 0


def test_get_all_checkpoints():
    """Port of Flink CompletedCheckpointStoreTest.testGetAllCheckpoints."""
    store = StandaloneCompletedCheckpointStore(4)
    expected = [create_checkpoint(i) for i in range(4)]
    for c in expected:
        store.add_checkpoint_and_subsume_oldest_one(c)
    assert store.get_all_checkpoints() == expected


def test_discard_all_checkpoints():
    """Port of Flink CompletedCheckpointStoreTest.testDiscardAllCheckpoints."""
    store = StandaloneCompletedCheckpointStore(4)
    expected = [create_checkpoint(i) for i in range(4)]
    for c in expected:
        store.add_checkpoint_and_subsume_oldest_one(c)
    discarded = store.shutdown(JobStatus.FINISHED)
    assert store.get_latest_checkpoint() is None
    assert store.get_all_checkpoints() == [] and store.number_of_retained_checkpoints == 0
    assert discarded == expected


def test_shutdown_discards_checkpoints():
    """Port of Flink StandaloneCompletedCheckpointStoreTest.testShutdownDiscardsCheckpoints."""
    store = StandaloneCompletedCheckpointStore(1)
    checkpoint = create_checkpoint(0)
    store.add_checkpoint_and_subsume_oldest_one(checkpoint)
    assert store.number_of_retained_checkpoints == 1
    assert store.shutdown(JobStatus.FINISHED) == [checkpoint]
    assert store.number_of_retained_checkpoints == 0


def test_suspend_discards_checkpoints():
    """Port of Flink StandaloneCompletedCheckpointStoreTest.testSuspendDiscardsCheckpoints."""
    store = StandaloneCompletedCheckpointStore(1)
    checkpoint = create_checkpoint(0)
    store.add_checkpoint_and_subsume_oldest_one(checkpoint)
    assert store.shutdown(JobStatus.SUSPENDED) == [checkpoint]
    assert store.number_of_retained_checkpoints == 0


def test_prefer_checkpoint_without_savepoint():
    """Port of Flink StandaloneCompletedCheckpointStoreTest.testPreferCheckpointWithoutSavepoint."""
    store = StandaloneCompletedCheckpointStore(5)
    for i in (1, 2, 3):
        store.add_checkpoint_and_subsume_oldest_one(
            create_checkpoint(i, CheckpointProperties.for_checkpoint(CheckpointRetentionPolicy.RETAIN_ON_FAILURE))
        )
    assert store.get_latest_checkpoint(True).checkpoint_id == 3


def test_prefer_checkpoint_with_savepoint():
    """Port of Flink StandaloneCompletedCheckpointStoreTest.testPreferCheckpointWithSavepoint."""
    store = StandaloneCompletedCheckpointStore(5)
    store.add_checkpoint_and_subsume_oldest_one(create_checkpoint(1))
    store.add_checkpoint_and_subsume_oldest_one(savepoint(2))
    store.add_checkpoint_and_subsume_oldest_one(savepoint(3))
    assert store.get_latest_checkpoint(True).checkpoint_id == 1
    assert store.get_latest_checkpoint().checkpoint_id == 3


def test_prefer_checkpoint_with_only_savepoint():
    """Port of Flink StandaloneCompletedCheckpointStoreTest.testPreferCheckpointWithOnlySavepoint."""
    store = StandaloneCompletedCheckpointStore(5)
    store.add_checkpoint_and_subsume_oldest_one(savepoint(1))
    store.add_checkpoint_and_subsume_oldest_one(savepoint(2))
    assert store.get_latest_checkpoint(True).checkpoint_id == 2


def retention(num_retain: int, completed: list, expected: list) -> None:
    store = StandaloneCompletedCheckpointStore(num_retain)
    for c in completed:
        store.add_checkpoint_and_subsume_oldest_one(c)
    assert store.get_all_checkpoints() == expected


def test_at_least_one_checkpoint_retained():
    """Port of Flink DefaultCompletedCheckpointStoreTest.testAtLeastOneCheckpointRetained."""
    cp1, cp2, sp1, sp2, sp3 = create_checkpoint(1), create_checkpoint(2), savepoint(3), savepoint(4), savepoint(5)
    retention(1, [cp1, cp2, sp1, sp2, sp3], [cp2, sp3])


def test_older_savepoint_subsumed():
    """Port of Flink DefaultCompletedCheckpointStoreTest.testOlderSavepointSubsumed."""
    cp1, sp1, cp2 = create_checkpoint(1), savepoint(2), create_checkpoint(3)
    retention(1, [cp1, sp1, cp2], [cp2])


def test_subsume_after_stopping_with_savepoint():
    """Port of Flink DefaultCompletedCheckpointStoreTest.testSubsumeAfterStoppingWithSavepoint."""
    cp1, sp1 = create_checkpoint(1), savepoint(2)
    stop = create_checkpoint(3, CheckpointProperties.for_sync_savepoint(False, False))
    retention(1, [cp1, sp1, stop], [stop])


def test_not_subsumed_if_not_needed():
    """Port of Flink DefaultCompletedCheckpointStoreTest.testNotSubsumedIfNotNeeded."""
    cps = [create_checkpoint(i) for i in (1, 2, 3)]
    retention(3, cps, cps)


def test_add_checkpoint_successfully_should_remove_old_ones():
    """Port of Flink DefaultCompletedCheckpointStoreTest.testAddCheckpointSuccessfullyShouldRemoveOldOnes."""
    store = StandaloneCompletedCheckpointStore(1)
    store.add_checkpoint_and_subsume_oldest_one(create_checkpoint(1))
    store.add_checkpoint_and_subsume_oldest_one(create_checkpoint(100))
    assert [c.checkpoint_id for c in store.get_all_checkpoints()] == [100]


def test_shutdown_fails_any_future_calls_to_add_checkpoint():
    """Port of Flink DefaultCompletedCheckpointStoreTest.testShutdownFailsAnyFutureCallsToAddCheckpoint."""
    for status in JobStatus:
        store = StandaloneCompletedCheckpointStore(1)
        store.shutdown(status)
        with pytest.raises(CompletedCheckpointStoreError, match="shut down"):
            store.add_checkpoint_and_subsume_oldest_one(create_checkpoint(0))


def test_retention_policies_decide_what_shutdown_discards():
    retained_on_cancel = create_checkpoint(
        1, CheckpointProperties.for_checkpoint(CheckpointRetentionPolicy.RETAIN_ON_CANCELLATION)
    )
    store = StandaloneCompletedCheckpointStore(1)
    store.add_checkpoint_and_subsume_oldest_one(retained_on_cancel)
    assert store.shutdown(JobStatus.CANCELED) == []
    sp = StandaloneCompletedCheckpointStore(1)
    sp.add_checkpoint_and_subsume_oldest_one(savepoint(1))
    assert sp.shutdown(JobStatus.FINISHED) == []


def test_savepoints_and_unclaimed_snapshots_are_subsumed_without_discarding():
    store = StandaloneCompletedCheckpointStore(1)
    store.add_checkpoint_and_subsume_oldest_one(create_checkpoint(1, CheckpointProperties.for_unclaimed_snapshot()))
    result = store.add_checkpoint_and_subsume_oldest_one(create_checkpoint(2))
    assert result.last_subsumed is not None and result.to_discard == ()
    assert result.last_subsumed_checkpoint_id == INVALID_CHECKPOINT_ID
