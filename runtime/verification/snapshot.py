"""The reference of a run whose last job was stopped or cancelled and not restored: what the snapshot it ended with
accounts for. See docs/verification.md, "A run that ended with a snapshot".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from barriersim.runtime.buffer_content import segments
from barriersim.runtime.events import Buffer
from barriersim.runtime.jobgraph import JobGraph, OperatorKind
from barriersim.runtime.operators.records import unpack
from barriersim.runtime.operators.sinks import PENDING_TRANSACTIONS_STATE
from barriersim.runtime.operators.source import split_offsets
from barriersim.runtime.operators.window import restore_windows
from barriersim.runtime.record_batch import RecordBatch, RecordsLike
from barriersim.runtime.state.incremental import as_full_snapshot
from barriersim.runtime.state.snapshot import CheckpointMetadata, KeyGroupRange
from barriersim.runtime.verification.reference import Expected, Verification, expected_sink_input, verify

_ALL_KEY_GROUPS = KeyGroupRange(0, 2**15)


def snapshot_prefix(
    graph: JobGraph, splits: Mapping[str, Sequence[Any]], metadata: CheckpointMetadata | None
) -> dict[str, list[RecordBatch]]:
    """Per source vertex, the records of each split (a ``RecordBatch``, or record tuples) its sources had read
    when ``metadata`` was taken (none without a snapshot), as slices of the splits."""
    states = {s.operator_id: s for s in metadata.operator_states} if metadata is not None else {}
    out: dict[str, list[RecordBatch]] = {}
    for source in graph.sources:
        parts = [RecordBatch.of(part) for part in splits.get(source.name, ())]
        state = states.get(source.name)
        offsets: dict[int, int] = {}
        finished = False
        if state is not None:
            finished = state.fully_finished or any(st.is_finished for st in state.subtask_states.values())
            for st in state.subtask_states.values():
                offsets.update(split_offsets(st))
        out[source.name] = [
            part.slice(0, offsets[sid]) if sid in offsets else (part if finished else part.slice(0, 0))
            for sid, part in enumerate(parts)
        ]
    return out


def _records_of(buffers: Iterable[Buffer]) -> list[RecordBatch]:
    return [part for b in buffers for part in segments(b.records) if type(part) is RecordBatch and len(part)]


def _held_records(graph: JobGraph, metadata: CheckpointMetadata) -> dict[tuple[str, int], RecordBatch]:
    """The in-flight records of the snapshot, by the logical input of the vertex they wait to enter."""
    held: dict[tuple[str, int], list[RecordBatch]] = {}
    states = {s.operator_id: s for s in metadata.operator_states}
    for vertex in graph.vertices:
        state = states.get(vertex.name)
        if state is None:
            continue
        gates = graph.gates_of(vertex.name)
        outputs = graph.outputs_of(vertex.name)
        for st in state.subtask_states.values():
            for h in st.input_channel_state:
                if h.info.gate_idx < len(gates):
                    key = (vertex.name, gates[h.info.gate_idx].target_input)
                    held.setdefault(key, []).extend(_records_of(h.buffers))
            for out in st.result_subpartition_state:
                if out.info.partition_idx < len(outputs):
                    edge = outputs[out.info.partition_idx]
                    key = (edge.target, edge.target_input)
                    held.setdefault(key, []).extend(_records_of(out.buffers))
    return {key: RecordBatch.concat(batches) for key, batches in held.items() if batches}


def _open_window_groups(graph: JobGraph, metadata: CheckpointMetadata) -> set[tuple[int, int]]:
    groups: set[tuple[int, int]] = set()
    states = {s.operator_id: s for s in metadata.operator_states}
    for vertex in graph.vertices:
        if vertex.operator not in (OperatorKind.TUMBLING_WINDOW, OperatorKind.JOIN) or vertex.name not in states:
            continue
        for st in states[vertex.name].subtask_states.values():  # an incremental backend's handles merged first
            groups.update(restore_windows(as_full_snapshot(st, _ALL_KEY_GROUPS), _ALL_KEY_GROUPS))
    return groups


def _row_ids(*row_sets: np.ndarray) -> list[np.ndarray]:
    """One integer id per distinct row (column of the ``(fields, n)`` arrays), the same across ``row_sets``."""
    sizes = [r.shape[1] for r in row_sets]
    if not sum(sizes):
        return [np.empty(0, dtype=np.int64) for _ in row_sets]
    _, inverse = np.unique(np.concatenate(row_sets, axis=1), axis=1, return_inverse=True)
    inverse = inverse.reshape(-1)
    return np.split(inverse, np.cumsum(sizes)[:-1])


def _multiset_minus(rows: np.ndarray, taken: np.ndarray) -> np.ndarray:
    """The multiset of ``rows`` less one occurrence of each row of ``taken`` (columns)."""
    if not taken.shape[1] or not rows.shape[1]:
        return rows
    a, b = _row_ids(rows, taken)
    counts = np.bincount(a, minlength=int(max(a.max(), b.max())) + 1)
    counts = counts - np.bincount(b, minlength=len(counts))
    order = np.argsort(a, kind="stable")
    ids, starts = np.unique(a[order], return_index=True)
    first = order[starts]  # a column of rows for each id present in rows
    keep = np.maximum(counts[ids], 0)
    return rows[:, np.repeat(first, keep)]


def _in_groups(rows: np.ndarray, groups: set[Any]) -> np.ndarray:
    """Whether each row's ``(rows[0], rows[1])`` is one of ``groups``."""
    if not groups or not rows.shape[1]:
        return np.zeros(rows.shape[1], dtype=bool)
    pairs = np.array(sorted(groups), dtype=np.int64).T
    ids, group_ids = _row_ids(rows[:2], pairs)
    return np.isin(ids, group_ids)


def expected_at_snapshot(
    graph: JobGraph, splits: Mapping[str, Sequence[Any]], metadata: CheckpointMetadata | None
) -> Expected:
    """The reference of a run that ended with ``metadata`` (None: before any snapshot: nothing is expected)."""
    prefix = expected_sink_input(graph, snapshot_prefix(graph, splits, metadata))
    full = expected_sink_input(graph, splits)
    ignored: set[tuple[Any, ...]] = set()
    rows = prefix.rows
    final_sums = dict(prefix.final_sums)
    if metadata is not None:
        held = _held_records(graph, metadata)
        if held:
            from_held = expected_sink_input(graph, {}, held)
            rows = _multiset_minus(rows, from_held.rows)
            for key in np.unique(from_held.rows[1]).tolist():
                final_sums.pop(key, None)
            if prefix.aggregated:
                ignored.update(zip(from_held.rows[0].tolist(), from_held.rows[1].tolist()))
        open_groups = _open_window_groups(graph, metadata)
        for _, key in open_groups:  # what a restore would still emit for them changes the keys' sums downstream
            final_sums.pop(key, None)
        ignored |= open_groups
    if prefix.aggregated and ignored:
        rows = rows[:, ~_in_groups(rows, ignored)]
    tolerated = None
    if any(s.operator is OperatorKind.AT_LEAST_ONCE_SINK for s in graph.sinks):
        tolerated = full.rows
    return Expected(rows, prefix.keyed_sum, final_sums, prefix.aggregated, frozenset(ignored), tolerated)


def pending_transactions(metadata: CheckpointMetadata | None) -> list[str]:
    """The transactions the snapshot's sinks had pre-committed (a restore commits them)."""
    tids: list[str] = []
    if metadata is None:
        return tids
    for state in metadata.operator_states:
        for st in state.subtask_states.values():
            for handle in st.managed_operator_state:
                for part in handle.states.get(PENDING_TRANSACTIONS_STATE, ()):
                    tids.append(unpack(part)[1])
    return tids


def committed_for_verification(expected: Expected, committed: RecordsLike) -> RecordBatch:
    """``committed`` (a ``RecordBatch``, or record tuples) without the rows of ignored window groups and the
    tolerated rows of an at-least-once sink past the snapshot."""
    batch = RecordBatch.of(committed) if len(committed) else RecordBatch.empty()
    columns = batch.columns
    keep = np.ones(len(batch), dtype=bool)
    if expected.aggregated and expected.ignored_groups:
        keep &= ~_in_groups(columns, set(expected.ignored_groups))
    if expected.tolerated is not None and len(batch):
        fields = expected.rows.shape[0]
        ids, expected_ids, tolerated_ids = _row_ids(columns[:fields], expected.rows, expected.tolerated)
        keep &= ~(~np.isin(ids, expected_ids) & np.isin(ids, tolerated_ids))
    return batch if keep.all() else batch.take(keep)


def failed_drained_stop(operations: Iterable[Mapping[Any, Any]]) -> bool:
    """Whether a stop-with-savepoint with ``--drain`` failed among a run's ``operations`` (the run report's, as
    dicts): its tasks had fired their open windows before the savepoint that failed."""
    return any(
        op["operation"] == "stop_with_savepoint" and op.get("drain") and op["status"] == "FAILED" for op in operations
    )


def without_early_window_results(reference_rows: np.ndarray, committed: RecordsLike) -> RecordBatch:
    """``committed`` (a ``RecordBatch``, or record tuples) without the rows that match no row of
    ``reference_rows`` (the full results, columns) in a window group ``(window_start, key)`` whose full result is
    in ``committed`` too: the early results of windows a failed drained stop fired."""
    batch = RecordBatch.of(committed) if len(committed) else RecordBatch.empty()
    if not len(batch) or not reference_rows.shape[1]:
        return batch
    columns = batch.columns
    ids, reference_ids = _row_ids(columns[: reference_rows.shape[0]], reference_rows)
    full = np.isin(ids, reference_ids)
    complete_groups = set(zip(columns[0][full].tolist(), columns[1][full].tolist()))
    early = ~full & _in_groups(columns, complete_groups)
    return batch.take(~early) if early.any() else batch


def verify_run(
    graph: JobGraph,
    splits: Mapping[str, Sequence[Any]],
    ending: tuple[bool, CheckpointMetadata | None],
    committed: RecordsLike,
    pending_records: Callable[[list[str]], RecordsLike],
    at_least_once: bool = False,
    operations: Iterable[Mapping[Any, Any]] = (),
) -> tuple[Verification, str]:
    """The verification of a run and what it covers (``"workload"`` or ``"snapshot"``): ``ending`` is the last
    job's (``JobMaster.ending_snapshot``); ``pending_records(tids)`` gives the records of pending transactions
    (a ``RecordBatch`` or record tuples); ``operations``: the run report's savepoint, stop and cancel operations
    (a failed drained stop's early window results are tolerated in an at-least-once sink)."""
    early_windows = failed_drained_stop(operations) and any(
        s.operator is OperatorKind.AT_LEAST_ONCE_SINK for s in graph.sinks
    )
    ended_by_snapshot, metadata = ending
    if not ended_by_snapshot:
        expected = expected_sink_input(graph, splits)
        if early_windows and expected.aggregated:
            committed = without_early_window_results(expected.rows, committed)
        return verify(expected, committed, at_least_once), "workload"
    expected = expected_at_snapshot(graph, splits, metadata)
    pending = pending_records(pending_transactions(metadata))
    parts = [RecordBatch.of(b) for b in (committed, pending) if len(b)]
    output = RecordBatch.concat(parts) if parts else RecordBatch.empty()
    if early_windows and expected.aggregated:
        reference = (
            expected.rows if expected.tolerated is None else np.concatenate([expected.rows, expected.tolerated], 1)
        )
        output = without_early_window_results(reference, output)
    return verify(expected, committed_for_verification(expected, output), at_least_once), "snapshot"
