"""The incremental keyed state backend (RocksDB-like sorted runs, flushes, leveled compaction): what a snapshot
uploads and refers to, and that a restore reads back exactly the state a snapshot took, after any flushes and
compactions, with or without rescaling (Hypothesis, derandomized in CI)."""

from __future__ import annotations

import dataclasses
import os
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from barriersim.runtime.checkpoint_cost import SnapshotWork
from barriersim.runtime.events import CheckpointType
from barriersim.runtime.state.backend import StateBackendConfig, StateBackendKind, rows_from_state
from barriersim.runtime.state.heap_backend import HeapKeyedStateBackend
from barriersim.runtime.state.incremental import IncrementalKeyedStateBackend, rows_of_incremental_handles
from barriersim.runtime.state.snapshot import (
    HandleAndLocalPath,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorSubtaskState,
    PlaceholderStateHandle,
    SharedStateHandle,
)

ALL = KeyGroupRange(0, 127)
RANDOM = os.environ.get("BARRIERSIM_PROPERTY_RANDOM") == "1"
EXAMPLES = int(os.environ.get("BARRIERSIM_PROPERTY_EXAMPLES", "300" if RANDOM else "40"))


class Table:
    """A keyed operator's state as a dict ``key -> value`` (rows ``(key, value)``), in key group ``key % 128``."""

    ROW_KEY_WIDTH = 1

    def __init__(self):
        self.values: dict[int, int] = {}

    def keyed_rows(self):
        return ((k % 128, (k, v)) for k, v in self.values.items())

    def entry_count(self):
        return len(self.values)

    def snapshot_state(self):
        from barriersim.runtime.state.backend import state_from_rows

        return state_from_rows(self.keyed_rows(), ALL)

    def restore_state(self, state):
        self.values = {row[0]: row[1] for kg, row in rows_from_state(state)}


SMALL = StateBackendConfig(
    StateBackendKind.INCREMENTAL,
    entry_bytes=100,
    write_buffer_bytes=1_000,
    target_file_bytes=1_500,
    level0_compaction_trigger=2,
    max_bytes_for_level_base=3_000,
    level_multiplier=2,
    num_levels=4,
)


def backend(table, config=SMALL, seed=0, rng_name="t"):
    return IncrementalKeyedStateBackend(table, ALL, config, 1_000, random.Random(seed), rng_name)


def handle_of(state):
    (h,) = state.managed_keyed_state
    return h


def test_the_first_snapshot_uploads_everything_and_a_later_one_only_the_new_runs():
    table = Table()
    table.values = {k: k for k in range(5)}
    b = backend(table, StateBackendConfig(StateBackendKind.INCREMENTAL, entry_bytes=100))
    first = handle_of(b.snapshot(1))
    assert [type(e.handle) for e in first.shared_state] == [SharedStateHandle]
    assert first.checkpointed_size == 500 + len(first.meta_state) and first.state_size == first.checkpointed_size
    assert b.last_work.copied_bytes == 500 and b.last_work.uploaded_bytes == first.checkpointed_size
    b.notify_checkpoint_complete(1)
    table.values[7] = 7  # one new entry
    second = handle_of(b.snapshot(2))
    kinds = sorted(type(e.handle).__name__ for e in second.shared_state)
    assert kinds == ["PlaceholderStateHandle", "SharedStateHandle"]
    assert second.checkpointed_size == 100 + len(second.meta_state)  # only what changed
    assert second.state_size == 600 + len(second.meta_state)  # all it refers to


def test_without_a_completion_notice_the_runs_are_uploaded_again():
    table = Table()
    table.values = {1: 1}
    b = backend(table)
    first = handle_of(b.snapshot(1))
    second = handle_of(b.snapshot(2))  # checkpoint 1 not confirmed: its upload cannot be referred to
    assert all(isinstance(e.handle, SharedStateHandle) for e in second.shared_state)
    assert {e.handle.key for e in second.shared_state}.isdisjoint({e.handle.key for e in first.shared_state})
    b.notify_checkpoint_aborted(2)
    b.notify_checkpoint_complete(1)
    third = handle_of(b.snapshot(3))
    assert all(isinstance(e.handle, PlaceholderStateHandle) for e in third.shared_state)
    assert {e.handle.key for e in third.shared_state} == {e.handle.key for e in first.shared_state}


def test_a_savepoint_is_a_full_canonical_snapshot_and_the_next_checkpoint_stays_incremental():
    """Flink writes a canonical savepoint of its RocksDB backend in full (``RocksDBKeyedStateBackend.savepoint``), and
    its completion notice must not move the incremental history (FLINK-23949: ``notifyCheckpointComplete`` ignores an
    id it uploaded nothing for, or the next checkpoint would upload everything again)."""
    table = Table()
    table.values = {k: k for k in range(5)}
    b = backend(table, StateBackendConfig(StateBackendKind.INCREMENTAL, entry_bytes=100))
    first = handle_of(b.snapshot(1))
    b.notify_checkpoint_complete(1)
    table.values[7] = 7
    savepoint = b.snapshot(2, CheckpointType.SAVEPOINT)
    (full,) = savepoint.managed_keyed_state
    assert isinstance(full, KeyGroupsStateHandle)  # self-contained: no placeholder, no checkpoint's file
    assert sorted(row for kg, row in rows_from_state(savepoint)) == [(k, k) for k in (0, 1, 2, 3, 4, 7)]
    assert full.state_size == 600
    assert b.last_work == SnapshotWork(copied_bytes=0, uploaded_bytes=600, files=0)  # no flush, every entry written
    b.notify_checkpoint_complete(2)
    assert b.last_completed_checkpoint_id == 1
    third = handle_of(b.snapshot(3))
    refers = {e.handle.key for e in third.shared_state if isinstance(e.handle, PlaceholderStateHandle)}
    assert refers == {e.handle.key for e in first.shared_state}  # checkpoint 1's run, not uploaded again
    assert third.checkpointed_size == 100 + len(third.meta_state)  # only the entry added since checkpoint 1


def test_a_full_checkpoint_uploads_every_run_again_and_later_checkpoints_build_on_it():
    """Flink's ``RocksIncrementalSnapshotStrategy`` for ``FULL_CHECKPOINT`` (``SharingFilesStrategy.FORWARD``): no
    file of an earlier checkpoint is referred to, and the uploads are recorded for the checkpoints after it."""
    table = Table()
    table.values = {k: k for k in range(5)}
    b = backend(table, StateBackendConfig(StateBackendKind.INCREMENTAL, entry_bytes=100))
    first = handle_of(b.snapshot(1))
    b.notify_checkpoint_complete(1)
    full = handle_of(b.snapshot(2, CheckpointType.FULL_CHECKPOINT))
    assert all(isinstance(e.handle, SharedStateHandle) for e in full.shared_state)
    assert {e.handle.key for e in full.shared_state}.isdisjoint({e.handle.key for e in first.shared_state})
    assert full.checkpointed_size == full.state_size == 500 + len(full.meta_state)
    b.notify_checkpoint_complete(2)
    table.values[7] = 7
    third = handle_of(b.snapshot(3))
    assert {e.handle.key for e in third.shared_state if isinstance(e.handle, PlaceholderStateHandle)} == {
        e.handle.key for e in full.shared_state
    }
    assert third.checkpointed_size == 100 + len(third.meta_state)


def test_level_zero_runs_compact_into_level_one_and_deleted_entries_go():
    table = Table()
    b = backend(table)
    registry = {}
    for cid in range(1, 6):
        table.values.update({cid * 10 + i: cid for i in range(4)})
        if cid == 4:
            del table.values[10]
        handle = _resolve(handle_of(b.snapshot(cid)), registry)
        registry.update({e.handle.key: e.handle for e in handle.shared_state})
        b.notify_checkpoint_complete(cid)
    assert b.compactions >= 1 and len(b.levels[0]) < SMALL.level0_compaction_trigger
    assert any(b.levels[n] for n in range(1, SMALL.num_levels))
    assert {row[0]: row[1] for _, row in rows_of_incremental_handles([handle], ALL)} == table.values
    assert not any(v is None for run in b.levels[-1] for _, v in run.entries)  # no tombstone at the bottom


def test_the_heap_backend_snapshots_everything_with_modelled_sizes():
    table = Table()
    table.values = {k: k for k in range(10)}
    heap = HeapKeyedStateBackend(table, ALL, StateBackendConfig(entry_bytes=1_000), 5_000)
    state = heap.snapshot(1)
    assert state.state_size == state.checkpointed_size == 10_000
    assert (heap.last_work.copied_bytes, heap.last_work.uploaded_bytes, heap.last_work.files) == (10_000, 10_000, 1)
    restored = Table()
    HeapKeyedStateBackend(restored, ALL, StateBackendConfig(), 5_000).restore(state)
    assert restored.values == table.values


def test_a_heap_backend_restores_an_incremental_snapshot_and_back():
    table = Table()
    table.values = {k: -k for k in range(30)}
    inc = backend(table)
    state = inc.snapshot(1)
    heap_table = Table()
    heap = HeapKeyedStateBackend(heap_table, ALL, StateBackendConfig(), 5_000)
    heap.restore(state)
    assert heap_table.values == table.values
    again = Table()
    backend(again).restore(heap.snapshot(2))
    assert again.values == table.values


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 60), st.integers(-5, 5)),
        st.tuples(st.just("delete"), st.integers(0, 60), st.just(0)),
        st.tuples(st.just("checkpoint"), st.booleans(), st.booleans()),  # completed?, restore from it afterwards?
    ),
    max_size=80,
)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=not RANDOM, database=None)
@given(ops=OPS, seed=st.integers(0, 3), rescale=st.booleans())
def test_a_restore_reads_exactly_the_state_its_snapshot_took(ops, seed, rescale):
    table = Table()
    b = backend(table, seed=seed)
    registry: dict[str, SharedStateHandle] = {}  # what the coordinator's registry holds: the real uploads
    cid = 0
    for op, a, c in ops:
        if op == "put":
            table.values[a] = c
        elif op == "delete":
            table.values.pop(a, None)
            continue
        if op != "checkpoint":
            continue
        cid += 1
        expected = dict(table.values)
        handle = _resolve(handle_of(b.snapshot(cid)), registry)
        registry.update({e.handle.key: e.handle for e in handle.shared_state})
        if a:
            b.notify_checkpoint_complete(cid)
        else:
            b.notify_checkpoint_aborted(cid)
        if not c:
            continue
        if rescale:  # two subtasks of half the key groups each, from the one handle
            values = {}
            for half in (KeyGroupRange(0, 63), KeyGroupRange(64, 127)):
                part = Table()
                IncrementalKeyedStateBackend(part, half, SMALL, 1_000, random.Random(1), "r").restore(
                    OperatorSubtaskState(managed_keyed_state=(handle,))
                )
                values.update(part.values)
            assert values == expected
        else:
            restored = Table()
            restored_backend = backend(restored, seed=seed + 1, rng_name="restored")
            restored_backend.restore(OperatorSubtaskState(managed_keyed_state=(handle,)))
            assert restored.values == expected
            # the restored backend goes on from the restored runs: its next snapshot holds the state plus the change
            restored.values[999] = 1
            nxt = _resolve(handle_of(restored_backend.snapshot(cid + 1000)), registry)
            assert {row[0]: row[1] for _, row in rows_of_incremental_handles([nxt], ALL)} == {**expected, 999: 1}


def _resolve(handle, registry):
    """``handle`` with its placeholders replaced by the registered handles (what the registry does)."""
    return dataclasses.replace(
        handle,
        shared_state=tuple(
            HandleAndLocalPath(e.local_path, registry[e.handle.key] if e.is_placeholder else e.handle)
            for e in handle.shared_state
        ),
    )


def test_an_acknowledgement_with_placeholders_travels_through_the_metadata_format():
    """Ray sends an acknowledgement's snapshot in the _metadata format: new uploads and placeholders come back as
    they went (the registry replaces the placeholders at the coordinator)."""
    from barriersim.runtime.state.snapshot import CheckpointMetadata, OperatorState
    from barriersim.runtime.storage import metadata_serializer

    table = Table()
    table.values = {k: k for k in range(20)}
    b = backend(table)
    b.snapshot(1)
    b.notify_checkpoint_complete(1)
    table.values[99] = 1
    state = b.snapshot(2)
    assert {type(e.handle) for e in handle_of(state).shared_state} == {SharedStateHandle, PlaceholderStateHandle}
    metadata = CheckpointMetadata(2, (OperatorState("op", 1, 128, {0: state}),))
    back = metadata_serializer.deserialize(metadata_serializer.serialize(metadata))
    assert back.operator_states[0].subtask_states[0] == state
