"""Writing ``_metadata`` while finalizing (a failed write aborts as FINALIZE_CHECKPOINT_FAILURE, counted against
the tolerable failures as in Flink 1.15+) and the coordinator of a new JobManager (completed checkpoints recovered
from storage, the persisted id counter, fresh attempt ids)."""

from __future__ import annotations

import pytest
from coordinator_test_harness import JOB, NO_PERIODIC_CHECKPOINTS, keyed_snapshot, make, of

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.checkpoint_recovery import (
    CheckpointRecoveryError,
    recover_completed_checkpoint_store,
)
from barriersim.runtime.coordinator.completed_store import (
    DefaultCompletedCheckpointStore,
    StandaloneCompletedCheckpointStore,
)
from barriersim.runtime.coordinator.configuration import CheckpointCoordinatorConfiguration
from barriersim.runtime.coordinator.id_counter import StandaloneCheckpointIDCounter
from barriersim.runtime.coordinator.plan import JobVertexInfo
from barriersim.runtime.failure_reason import CheckpointFailureReason
from barriersim.runtime.state.snapshot import CheckpointMetadata
from barriersim.runtime.storage.damage import corrupt_checkpoint
from barriersim.runtime.storage.errors import CheckpointStorageWriteError
from barriersim.runtime.storage.memory_storage import JobManagerCheckpointStorage

NO_PERIODIC = dict(checkpoint_interval=NO_PERIODIC_CHECKPOINTS)


class FlakyWriter:
    """Writes into an in-memory storage; the writes of the ids in ``failing`` raise."""

    def __init__(self, failing=()):
        self.storage = JobManagerCheckpointStorage(JOB)
        self.failing = set(failing)
        self.written: list[int] = []

    def __call__(self, metadata, is_savepoint):
        if metadata.checkpoint_id in self.failing:
            raise CheckpointStorageWriteError(f"checkpoint {metadata.checkpoint_id}: disk full")
        self.written.append(metadata.checkpoint_id)
        return self.storage.persist_checkpoint(metadata, is_savepoint=is_savepoint)


def complete(h, checkpoint_id: int) -> list:
    out = []
    for a in h.all_attempts:
        out += h.ack(a, checkpoint_id, keyed_snapshot(a.vertex_id))
    return out


def test_a_failed_metadata_write_aborts_the_checkpoint_as_finalize_checkpoint_failure():
    writer = FlakyWriter(failing={1})
    h = make(checkpoint_writer=writer, tolerable_checkpoint_failure_number=5, **NO_PERIODIC)
    h.trigger()
    actions = complete(h, 1)
    assert not of(m.NotifyCheckpointComplete, actions) and not of(m.PersistCheckpoint, actions)
    assert sorted(a.task for a in of(m.NotifyCheckpointAborted, actions)) == sorted(h.all_attempts)
    assert [(a.checkpoint_id, a.reason) for a in of(m.DiscardCheckpoint, actions)] == [(1, m.DiscardReason.ABORTED)]
    assert [a.reason for a in of(m.TriggerRequestFailed, actions)] == [
        CheckpointFailureReason.FINALIZE_CHECKPOINT_FAILURE
    ]
    assert h.coord.number_of_retained_successful_checkpoints == 0 and h.pending_ids == []
    row = h.coord.checkpoint_stats().history[1]
    assert row["status"] == "FAILED" and row["failure_reason"] == "FINALIZE_CHECKPOINT_FAILURE"
    assert "disk full" in row["failure_message"] and h.coord.continuous_failure_count() == 1
    assert writer.storage.list_retained_checkpoints() == ()


def test_a_written_checkpoint_is_stored_without_a_persist_action():
    writer = FlakyWriter()
    h = make(checkpoint_writer=writer, **NO_PERIODIC)
    h.trigger()
    actions = complete(h, 1)
    assert not of(m.PersistCheckpoint, actions) and len(of(m.NotifyCheckpointComplete, actions)) == 2
    assert writer.written == [1] and h.coord.completed_checkpoint_store().get_latest_checkpoint_id() == 1
    assert (
        writer.storage.load_latest_checkpoint().metadata
        == h.coord.completed_checkpoint_store().get_latest_checkpoint().metadata
    )


def test_finalize_failures_fail_the_job_once_past_the_tolerable_number():
    h = make(checkpoint_writer=FlakyWriter(failing={1, 2}), tolerable_checkpoint_failure_number=1, **NO_PERIODIC)
    h.trigger()
    assert not of(m.FailJob, complete(h, 1))
    h.trigger()
    fail = of(m.FailJob, complete(h, 2))
    assert [f.reason for f in fail] == [CheckpointFailureReason.FINALIZE_CHECKPOINT_FAILURE]
    assert fail[0].failing_task is None  # a coordinator-side (job level) failure


def test_a_successful_write_resets_the_count_of_finalize_failures():
    h = make(checkpoint_writer=FlakyWriter(failing={1, 3}), tolerable_checkpoint_failure_number=1, **NO_PERIODIC)
    for cid in (1, 2, 3):
        h.trigger()
        assert not of(m.FailJob, complete(h, cid))
    assert h.coord.completed_checkpoint_store().get_latest_checkpoint_id() == 2


def test_a_new_coordinator_recovers_completed_checkpoints_and_keeps_ids_and_attempts_increasing():
    writer = FlakyWriter()
    counter = StandaloneCheckpointIDCounter()
    old = make(
        checkpoint_writer=writer,
        id_counter=counter,
        store=DefaultCompletedCheckpointStore(2, writer.storage),
        max_retained_checkpoints=2,
        **NO_PERIODIC,
    )
    for cid in (1, 2, 3):
        old.trigger()
        complete(old, cid)
    old.trigger()
    old.trigger()  # checkpoint 4 pending when the JobManager dies (5 is queued)
    assert old.pending_ids == [4]
    config = CheckpointCoordinatorConfiguration(max_retained_checkpoints=2, **NO_PERIODIC)
    recovered = recover_completed_checkpoint_store(JOB, writer.storage, config)
    assert recovered.recovered_ids == (2, 3)
    new = make(
        checkpoint_writer=writer,
        id_counter=counter,
        store=recovered.store,
        first_attempt_number=1,
        tasks_running=False,
        max_retained_checkpoints=2,
        **NO_PERIODIC,
    )
    assert {a.attempt_number for a in new.all_attempts} == {1}
    new.call(m.RestoreLatestCheckpoint())
    restore = of(m.RestoreFrom, new.take())
    assert [r.checkpoint_id for r in restore] == [3] and restore[0].metadata.checkpoint_id == 3
    for a in new.all_attempts:
        new.coord.handle(m.TaskRunning(a))
    new.trigger()
    assert new.pending_ids == [5]  # above every id the old coordinator used, the pending 4 included
    actions = complete(new, 5)
    assert [d.checkpoint_id for d in of(m.DiscardCheckpoint, actions)] == [2]  # the recovered 2 is subsumed
    assert [c.checkpoint_id for c in new.coord.completed_checkpoint_store().get_all_checkpoints()] == [3, 5]


def test_retrieved_checkpoints_are_ordered_chronologically():
    """Port of Flink DefaultCompletedCheckpointStoreUtilsTest.testRetrievedCheckpointsAreOrderedChronologically.

    Adapted: the checkpoints are written to the checkpoint storage and listed in the completed-checkpoint list in
    shuffled order (Flink: shuffled handles in the HA state handle store); the recovered store holds them oldest
    first."""
    storage = JobManagerCheckpointStorage(JOB)
    for cid in (2, 3, 1):
        storage.persist_checkpoint(CheckpointMetadata(cid, ()))
    storage.update_completed_checkpoints([2, 3, 1])
    recovered = recover_completed_checkpoint_store(
        JOB, storage, CheckpointCoordinatorConfiguration(max_retained_checkpoints=3, **NO_PERIODIC)
    )
    assert recovered.recovered_ids == (1, 2, 3)
    assert [c.checkpoint_id for c in recovered.store.get_all_checkpoints()] == [1, 2, 3]


def test_retrieving_checkpoints_fails_if_retrieval_of_any_checkpoint_fails():
    """Port of Flink DefaultCompletedCheckpointStoreUtilsTest
    .testRetrievingCheckpointsFailsIfRetrievalOfAnyCheckpointFails.

    Adapted: the broken handle is a retained checkpoint whose ``_metadata`` was truncated."""
    writer = FlakyWriter()
    h = make(
        checkpoint_writer=writer,
        store=DefaultCompletedCheckpointStore(3, writer.storage),
        max_retained_checkpoints=3,
        **NO_PERIODIC,
    )
    for cid in (1, 2, 3):
        h.trigger()
        complete(h, cid)
    corrupt_checkpoint(writer.storage, 2, lambda data: data[:-3])
    with pytest.raises(CheckpointRecoveryError, match="could not retrieve checkpoint 2 from .*chk-2"):
        recover_completed_checkpoint_store(
            JOB, writer.storage, CheckpointCoordinatorConfiguration(max_retained_checkpoints=3, **NO_PERIODIC)
        )


class FailingCompletedCheckpointStore(StandaloneCompletedCheckpointStore):
    def __init__(self, failure: Exception):
        super().__init__(1)
        self.failure = failure

    def add_checkpoint_and_subsume_oldest_one(self, checkpoint):
        raise self.failure


def test_failing_completed_checkpoint_store_add():
    """Port of Flink CheckpointCoordinatorFailureTest.testFailingCompletedCheckpointStoreAdd.

    Adapted: the checkpoint fails as FINALIZE_CHECKPOINT_FAILURE and is disposed; its written data is discarded
    through a ``DiscardCheckpoint`` action (Flink verifies discardState() on every handle) and the task hears
    the checkpoint aborted."""
    writer = FlakyWriter()
    h = make(
        [JobVertexInfo("v", 1)],
        checkpoint_writer=writer,
        tolerable_checkpoint_failure_number=5,
        store=FailingCompletedCheckpointStore(
            RuntimeError("The failing completed checkpoint store failed again... :-(")
        ),
        **NO_PERIODIC,
    )
    h.trigger()
    assert h.pending_ids == [1]
    pending = h.coord.pending_checkpoints()[1]
    actions = complete(h, 1)
    assert pending.is_disposed and h.pending_ids == []
    assert [(d.checkpoint_id, d.reason) for d in of(m.DiscardCheckpoint, actions)] == [(1, m.DiscardReason.ABORTED)]
    assert [a.task for a in of(m.NotifyCheckpointAborted, actions)] == h.all_attempts
    assert not of(m.NotifyCheckpointComplete, actions)
    assert [a.reason for a in of(m.TriggerRequestFailed, actions)] == [
        CheckpointFailureReason.FINALIZE_CHECKPOINT_FAILURE
    ]


def test_cleanup_for_generic_failure():
    """Port of Flink CheckpointCoordinatorFailureTest.testCleanupForGenericFailure.

    Adapted: the cleanup is the one ``DiscardCheckpoint`` action; the statistics show the checkpoint FAILED with
    FINALIZE_CHECKPOINT_FAILURE, and the failure is counted (tolerable 0: the job fails)."""
    h = make(
        [JobVertexInfo("v", 1)],
        checkpoint_writer=FlakyWriter(),
        store=FailingCompletedCheckpointStore(RuntimeError("Expected exception")),
        **NO_PERIODIC,
    )
    h.trigger()
    actions = complete(h, 1)
    assert len(of(m.DiscardCheckpoint, actions)) == 1
    row = h.coord.checkpoint_stats().history[1]
    assert row["status"] == "FAILED" and row["failure_reason"] == "FINALIZE_CHECKPOINT_FAILURE"
    assert "Expected exception" in row["failure_message"] and row["num_acknowledged_subtasks"] == 1
    assert [f.reason for f in of(m.FailJob, actions)] == [CheckpointFailureReason.FINALIZE_CHECKPOINT_FAILURE]


# -- the completed-checkpoint list is not the only witness (docs/recovery-store.md) ---------------------------


def files_storage(tmp_path, written=(), listed=None):
    from barriersim.runtime.storage.fs_storage import FileSystemCheckpointStorage

    storage = FileSystemCheckpointStorage(tmp_path, JOB)
    storage.initialize_base_locations()
    for cid in written:
        storage.persist_checkpoint(CheckpointMetadata(cid, ()))
    if listed is not None:
        storage.update_completed_checkpoints(listed)
    return storage


def recover(storage, retained=20):
    return recover_completed_checkpoint_store(
        JOB, storage, CheckpointCoordinatorConfiguration(max_retained_checkpoints=retained, **NO_PERIODIC)
    )


def test_a_fresh_job_without_a_list_or_checkpoints_recovers_an_empty_store(tmp_path):
    assert recover(files_storage(tmp_path)).recovered_ids == ()


def test_checkpoints_older_than_the_list_or_never_completed_do_not_disagree_with_it(tmp_path):
    """Subsumed checkpoints whose discard failed (older than every listed one) stay beside the list, and a newer
    ``chk-<n>`` without ``_metadata`` (its write never finished: the atomic write leaves no ``_metadata``) never
    completed: neither is a disagreement."""
    storage = files_storage(tmp_path, written=(1, 2, 3, 4), listed=[3, 4])
    (tmp_path / JOB / "chk-5").mkdir()
    (tmp_path / JOB / "chk-5" / "some-state-file").write_bytes(b"state")
    assert recover(storage).recovered_ids == (3, 4)


def test_a_missing_list_beside_completed_checkpoints_fails_the_recovery_naming_both(tmp_path):
    from barriersim.runtime.coordinator.checkpoint_recovery import CompletedCheckpointStoreMismatchError

    storage = files_storage(tmp_path, written=(1, 2))
    with pytest.raises(CompletedCheckpointStoreMismatchError) as e:
        recover(storage)
    message = str(e.value)
    assert f"{tmp_path / JOB / '_completed_checkpoints'} is missing" in message, message
    assert (
        f"checkpoint(s) 1, 2 ({tmp_path / JOB / 'chk-2' / '_metadata'}, {tmp_path / JOB / 'chk-1' / '_metadata'})"
        in message
    )
    assert [loc.checkpoint_id for loc in e.value.newer] == [2, 1]


def test_a_list_older_than_the_newest_completed_checkpoint_fails_the_recovery_naming_both(tmp_path):
    """A rolled-back list, and (the same files on disk) a JobManager that died between writing checkpoint 3's
    ``_metadata`` and listing it: barriersim cannot tell them apart and refuses to guess (Flink would restore 2)."""
    from barriersim.runtime.coordinator.checkpoint_recovery import CompletedCheckpointStoreMismatchError

    storage = files_storage(tmp_path, written=(1, 2, 3), listed=[1, 2])
    with pytest.raises(
        CompletedCheckpointStoreMismatchError,
        match=r"_completed_checkpoints \(newest: checkpoint 2\) is older than the storage's completed "
        r"checkpoint\(s\) 3 \(.*chk-3/_metadata\)",
    ):
        recover(storage)
