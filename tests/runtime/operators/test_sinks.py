"""Two-phase-commit and at-least-once sinks against an external store that survives failures."""

from barriersim.runtime.operators.sinks import AtLeastOnceSink, ExternalStore, TwoPhaseCommitSink


def test_two_phase_commit_makes_records_visible_only_when_their_checkpoint_completes():
    store = ExternalStore()
    sink = TwoPhaseCommitSink(store, "sink#0")
    sink.invoke_all([(1,), (2,)])
    sink.snapshot_state(1)
    sink.invoke_all([(3,)])
    assert store.output() == []
    sink.notify_checkpoint_complete(1)
    assert store.output() == [(1,), (2,)]
    sink.snapshot_state(2)
    sink.notify_checkpoint_aborted(2)
    sink.invoke_all([(4,)])
    sink.snapshot_state(3)
    sink.notify_checkpoint_complete(3)  # subsumes the aborted checkpoint 2: its transaction commits too
    assert store.output() == [(1,), (2,), (3,), (4,)]


def test_restore_commits_pending_transactions_of_the_restored_checkpoint_once():
    store = ExternalStore()
    sink = TwoPhaseCommitSink(store, "sink#0")
    sink.invoke_all([(1,)])
    state = sink.snapshot_state(1)  # completed on the coordinator, but the notification was lost
    sink.invoke_all([(2,)])  # written after the checkpoint: must not survive the failure
    sink.close_on_failover()
    restored = TwoPhaseCommitSink(store, "sink#0", attempt=1)
    restored.restore_state(state)
    restored.restore_state(state)  # a repeated recovery commits nothing twice
    assert store.output() == [(1,)]
    restored.invoke_all([(2,)])
    restored.snapshot_state(2)
    restored.notify_checkpoint_complete(2)
    assert store.output() == [(1,), (2,)]
    assert store.pending == {}


def test_restore_aborts_transactions_pre_committed_for_checkpoints_that_never_completed():
    store = ExternalStore()
    sink = TwoPhaseCommitSink(store, "sink#0")
    sink.invoke_all([(1,)])
    state = sink.snapshot_state(1)  # checkpoint 1 completed
    sink.invoke_all([(2,)])
    sink.snapshot_state(2)  # pre-committed, but checkpoint 2 never completed
    sink.close_on_failover()
    TwoPhaseCommitSink(store, "sink#0", attempt=1).restore_state(state)
    assert store.output() == [(1,)]
    assert store.pending == {} and store.aborted_transactions == 1


def test_at_least_once_sink_writes_through_and_duplicates_replays():
    store = ExternalStore()
    sink = AtLeastOnceSink(store, "sink#0")
    sink.invoke_all([(1,), (2,)])
    AtLeastOnceSink(store, "sink#0", attempt=1).invoke_all([(2,)])
    assert store.output() == [(1,), (2,), (2,)]


def test_end_of_input_commits_pre_committed_and_open_transactions():
    store = ExternalStore()
    sink = TwoPhaseCommitSink(store, "sink#0")
    sink.invoke_all([(1,)])
    sink.snapshot_state(1)  # pre-committed; its completion notice has not arrived yet
    sink.invoke_all([(2,)])
    sink.finish()
    assert store.output() == [(1,), (2,)]


def test_the_store_continued_from_its_snapshot_holds_the_same_batches():
    """What a later run restored from a savepoint continues: the snapshot, through msgpack as the run directory
    keeps it (each batch as its column buffers), gives back a store whose output and pending transactions are
    batches equal to the original's."""
    store = ExternalStore()
    store.pre_commit("sink#0@0/1", [(1, 2, 3, 4), (5, 6, 7, 8)])
    store.commit("sink#0@0/1")
    store.pre_commit("sink#0@0/2", [(9, 9, 9, 9)])
    store.pre_commit("sink#1@0/1", [])
    store.write([(4, 3, 2, 1)])
    data = store.to_msgpack()
    assert len(data) < 400  # column buffers: 5 records' 160 bytes, the transaction ids and a few headers
    continued = ExternalStore.from_msgpack(data)
    assert continued.output() == store.output() and len(continued.output()) == 3
    assert continued.pending == store.pending and continued.direct_records == 1
    continued.commit("sink#0@0/2")
    assert continued.output().to_rows() == [(1, 2, 3, 4), (5, 6, 7, 8), (9, 9, 9, 9), (4, 3, 2, 1)]


def test_a_transaction_pre_commits_its_batches_in_order_and_leaves_them_unchanged():
    """The open transaction copies what it is given into one growing array: the pre-committed batch holds every
    record in arrival order across the array's growth, the batches handed in are never written to, and the next
    transaction writes into its own array, not into the pre-committed one."""
    import numpy as np

    from barriersim.runtime.record_batch import RecordBatch

    store = ExternalStore()
    sink = TwoPhaseCommitSink(store, "sink#0")
    given = [
        RecordBatch.from_rows([(i, i % 7, i, 0) for i in range(start, start + size)])
        for start, size in ((0, 1), (1, 3), (4, 50), (54, 1), (55, 200))
    ]
    copies = [b.columns.copy() for b in given]
    for batch in given:
        sink.invoke_all(batch)
    sink.snapshot_state(1)
    sink.invoke_all(RecordBatch.from_rows([(999, 0, 0, 0)] * 300))
    sink.notify_checkpoint_complete(1)
    assert store.output() == [(i, i % 7, i, 0) for i in range(255)]
    assert all(np.array_equal(b.columns, c) for b, c in zip(given, copies))
    sink.finish()
    assert len(store.output()) == 555 and store.output()[255] == (999, 0, 0, 0)


def test_a_store_written_by_an_earlier_version_as_record_arrays_still_reads():
    import msgpack

    legacy = {
        "committed": [["sink#0@0/1", [[1, 2, 3, 4], [5, 6, 7, 8]]]],
        "pending": [["sink#0@0/2", [[9, 9, 9, 9]]]],
        "direct": [[[4, 3, 2, 1]]],
    }
    store = ExternalStore.from_msgpack(msgpack.packb(legacy, use_bin_type=True))
    assert store.output().to_rows() == [(1, 2, 3, 4), (5, 6, 7, 8), (4, 3, 2, 1)]
    assert store.pending["sink#0@0/2"].to_rows() == [(9, 9, 9, 9)]


def test_bytes_that_hold_no_store_raise_a_value_error():
    import msgpack
    import pytest

    for data in (b"\xfc\x00garbage", msgpack.packb([1, 2, 3]), msgpack.packb({"committed": [["t", 7]]})):
        with pytest.raises((ValueError, TypeError)):
            ExternalStore.from_msgpack(data)


def test_pending_records_are_the_listed_transactions_records_in_that_order_as_one_batch():
    store = ExternalStore()
    store.pre_commit("a", [(1, 0, 0, 0), (2, 0, 0, 0)])
    store.pre_commit("b", [(3, 0, 0, 0)])
    store.pre_commit("c", [])
    store.pre_commit("d", [(4, 0, 0, 0)])
    store.commit("d")
    assert store.pending_records(["b", "a", "c", "d", "missing"]).to_rows() == [
        (3, 0, 0, 0),
        (1, 0, 0, 0),
        (2, 0, 0, 0),
    ]
    assert len(store.pending_records([])) == 0


def test_the_transactions_committed_after_a_snapshots_pre_committed_ones_in_commit_order():
    """What a job committed after a snapshot whose sinks had pre-committed ``sink#0@1/3`` and ``sink#1@2/3``: the
    transactions committed after the later of the two, whichever subtask's; none if none of them was committed."""
    store = ExternalStore()
    for tid in ("sink#0@1/2", "sink#1@2/2", "sink#1@2/3", "sink#0@1/3", "sink#0@1/4", "sink#1@2/4"):
        store.pre_commit(tid, [(1, 2, 3, 4)])
        store.commit(tid)
    store.pre_commit("sink#0@1/5", [(1, 2, 3, 4)])  # pending: not committed output
    assert store.committed_after(["sink#0@1/3", "sink#1@2/3"]) == ["sink#0@1/4", "sink#1@2/4"]
    assert store.committed_after(["sink#0@1/4", "sink#1@2/4"]) == []
    assert store.committed_after(["sink#0@1/5"]) == [] and store.committed_after([]) == []


def test_a_rescaled_restore_commits_what_another_subtask_aborted_as_lingering():
    """After a rescale the round-robin repartitioning may give one of sink#0's pending transactions to the new
    sink#1 while the new sink#0, restoring first, aborts sink#0's lingering transactions: sink#1 still commits it,
    as Flink's subtask that recovers a pending transaction commits it."""
    store = ExternalStore()
    sink = TwoPhaseCommitSink(store, "sink#0")
    sink.invoke_all([(1,)])
    sink.snapshot_state(1)
    sink.invoke_all([(2,)])
    state = sink.snapshot_state(2)  # checkpoints 1 and 2 completed, neither notified
    first, second = (
        type(state)(managed_operator_state=(type(h)({k: v[i::2] for k, v in h.states.items()}),))
        for i in (0, 1)
        for h in state.managed_operator_state
    )
    TwoPhaseCommitSink(store, "sink#0", attempt=1).restore_state(first)
    TwoPhaseCommitSink(store, "sink#1", attempt=1).restore_state(second)
    assert sorted(store.output()) == [(1,), (2,)]
    assert store.pending == {} and store.aborted_transactions == 0
