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
