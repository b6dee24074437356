"""Every completed checkpoint is a consistent cut: checked record by record after a simulated run. It mirrors no
single Flink class (Flink checks it only end to end). See docs/simulator.md, "Every checkpoint is a consistent
cut".
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from barriersim.runtime.events import Buffer, CheckpointType, Watermark
from barriersim.runtime.jobgraph import JobEdge, JobGraph, Partitioner
from barriersim.runtime.record_batch import RecordBatch
from barriersim.runtime.state.snapshot import CheckpointMetadata, OperatorSubtaskState

SubtaskKey = tuple[str, int]
_INT64 = np.dtype("=i8")


class _RecordLog:
    """Records in the order an operator saw them, kept as the batches it got (values never changed afterwards) and
    turned into record keys (``record_key``) once they are first read: a run logs a batch, not each of its records."""

    __slots__ = ("_keys", "_parts", "count")

    def __init__(self, records: Iterable[Any] = ()) -> None:
        self._keys: list[Any] = [record_key(r) for r in records]
        self._parts: list[Any] = []  # batches logged since the keys were last read
        self.count = len(self._keys)  # records logged

    def add(self, batch: Any) -> None:
        if type(batch) is not RecordBatch:
            batch = list(batch)  # (records of any other kind, as they are now)
        n = len(batch)
        if n:
            self._parts.append(batch)
            self.count += n

    def keys(self) -> list[Any]:
        if self._parts:
            keys = self._keys
            run: list[np.ndarray] = []  # consecutive batches of one layout, turned into keys at once
            for part in self._parts:
                if run and (type(part) is not RecordBatch or not _same_layout(part.columns, run[0])):
                    keys.extend(_column_keys(run))
                    run = []
                if type(part) is RecordBatch:
                    run.append(part.columns)
                else:
                    keys.extend(map(record_key, part))
            if run:
                keys.extend(_column_keys(run))
            self._parts.clear()
        return self._keys


def record_key(record: Any) -> Any:
    """What the check counts for a record: a record of int64 fields as its fields' bytes (``_column_keys``' form:
    hashed and compared in C, and never traced by the cycle collector), anything else as it is."""
    if type(record) is tuple:
        try:
            return struct.pack(f"={len(record)}q", *record)
        except struct.error:  # not int64 fields
            return record
    return record


def record_of(key: Any) -> Any:
    """The record a key (``record_key``) stands for."""
    if type(key) is bytes:
        return struct.unpack(f"={len(key) // 8}q", key)
    return key


def _same_layout(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape[0] == b.shape[0] and a.dtype == b.dtype


def _column_keys(columns: list[np.ndarray]) -> list[Any]:
    """The keys of batches' columns (of one layout), in order, as ``record_key`` makes them of ``RecordBatch``'s
    record tuples."""
    joined = columns[0] if len(columns) == 1 else np.concatenate(columns, axis=1)
    fields, n = joined.shape
    if not n:
        return []
    if joined.dtype != _INT64:
        return [record_key(r) for r in zip(*joined.tolist())]
    rows = np.ascontiguousarray(joined.T)
    return rows.view(np.dtype((np.void, 8 * fields))).ravel().tolist() if fields else [b""] * n


class CutRecorder:
    """The records one task attempt's operator consumed and emitted, with the log positions of its snapshots."""

    __slots__ = ("_inputs", "_outputs", "marks")

    def __init__(self) -> None:
        self._inputs = _RecordLog()
        self._outputs = _RecordLog()
        self.marks: dict[int, tuple[int, int]] = {}

    @property
    def inputs(self) -> list[Any]:
        """What the operator consumed, record by record."""
        return [record_of(k) for k in self._inputs.keys()]

    @inputs.setter
    def inputs(self, records: Iterable[Any]) -> None:
        self._inputs = _RecordLog(records)

    @property
    def outputs(self) -> list[Any]:
        """What the operator emitted, record by record."""
        return [record_of(k) for k in self._outputs.keys()]

    @outputs.setter
    def outputs(self, records: Iterable[Any]) -> None:
        self._outputs = _RecordLog(records)

    def input_keys(self) -> list[Any]:
        """``inputs`` as record keys (``record_key``), the form the check counts."""
        return self._inputs.keys()

    def output_keys(self) -> list[Any]:
        """``outputs`` as record keys (``record_key``)."""
        return self._outputs.keys()

    @staticmethod
    def attach(operator: Any) -> CutRecorder:
        """Wrap ``operator`` (a ``SubtaskOperator``) so that what it does is logged; returns the log. (``Any``:
        its methods are replaced in place.)"""
        rec = CutRecorder()
        if operator.is_source:
            reader = operator.reader
            poll = reader.poll

            def logged_poll(max_records: int, accepted: Any = None) -> Any:
                out = poll(max_records, accepted)
                rec._outputs.add(out)
                return out

            reader.poll = logged_poll
        else:
            process, process_watermark, end_of_input = (
                operator.process,
                operator.process_watermark,
                operator.end_of_input,
            )

            def logged_process(records: RecordBatch, input_index: int = 0) -> RecordBatch:
                rec._inputs.add(records)
                out: RecordBatch = process(records, input_index)
                rec._outputs.add(out)
                return out

            def logged_watermark(watermark: Watermark) -> RecordBatch:
                out: RecordBatch = process_watermark(watermark)
                rec._outputs.add(out)
                return out

            def logged_end(final_checkpoint: bool = False) -> RecordBatch:
                out: RecordBatch = end_of_input(final_checkpoint)
                rec._outputs.add(out)
                return out

            operator.process, operator.process_watermark, operator.end_of_input = (
                logged_process,
                logged_watermark,
                logged_end,
            )
        snapshot = operator.snapshot

        def logged_snapshot(
            checkpoint_id: int, checkpoint_type: CheckpointType = CheckpointType.CHECKPOINT
        ) -> OperatorSubtaskState:
            rec.marks.setdefault(checkpoint_id, (rec._inputs.count, rec._outputs.count))
            state: OperatorSubtaskState = snapshot(checkpoint_id, checkpoint_type)
            return state

        operator.snapshot = logged_snapshot
        return rec


@dataclass(frozen=True)
class CutViolation:
    checkpoint_id: int
    vertex: str  # the consuming vertex whose input channels the cut crosses
    problem: str  # "missing", "unexpected", "in-flight data in an aligned checkpoint" or "... on a forced-aligned
    # edge" (its examples: the edges), "no snapshot"
    count: int
    examples: tuple[Any, ...] = ()

    def __str__(self) -> str:
        return (
            f"checkpoint {self.checkpoint_id}, inputs of {self.vertex!r}: {self.problem}: {self.count} "
            f"record(s), e.g. {list(self.examples)[:3]}"
        )


@dataclass
class DeploymentLog:
    """One deployment (epoch): the checkpoint it was restored from and each subtask's recorder."""

    restored_from: CheckpointMetadata | None
    recorders: dict[SubtaskKey, CutRecorder] = field(default_factory=dict)


def _record_keys(buffers: Iterable[Buffer]) -> Iterable[Any]:
    """The keys (``record_key``) of the records in ``buffers``, in order."""
    for buffer in buffers:
        if type(buffer.records) is RecordBatch:
            yield from _column_keys([buffer.records.columns])
        else:
            yield from (record_key(r) for r in buffer.records if isinstance(r, tuple))


def _channel_records(
    metadata: CheckpointMetadata | None, graph: JobGraph
) -> tuple[dict[str, Counter[Any]], dict[str, Counter[Any]]]:
    """Per consuming vertex: the records (``record_key``) in input channel state, and in upstream output
    subpartition state; a vertex without any has no entry. The keys are gathered per vertex and counted at once."""
    inputs: dict[str, list[Any]] = {}
    outputs: dict[str, list[Any]] = {}
    if metadata is not None:
        for state in metadata.operator_states:
            for subtask in state.subtask_states.values():
                for h in subtask.input_channel_state:
                    _extend_keys(inputs, state.operator_id, h.buffers)
                for out in subtask.result_subpartition_state:
                    target = graph.outputs_of(state.operator_id)[out.info.partition_idx].target
                    _extend_keys(outputs, target, out.buffers)
    return (
        {vertex: Counter(keys) for vertex, keys in inputs.items() if keys},
        {vertex: Counter(keys) for vertex, keys in outputs.items() if keys},
    )


def _extend_keys(keys: dict[str, list[Any]], vertex: str, buffers: Iterable[Buffer]) -> None:
    """The keys of ``buffers``' records (``_record_keys``) added to ``vertex``'s."""
    of_vertex = keys.get(vertex)
    if of_vertex is None:
        of_vertex = keys[vertex] = []
    for buffer in buffers:
        records = buffer.records
        if type(records) is RecordBatch:
            of_vertex.extend(_column_keys([records.columns]))
        else:
            of_vertex.extend([record_key(r) for r in records if isinstance(r, tuple)])


def _forced_aligned_edges(graph: JobGraph) -> frozenset[JobEdge]:
    """The edges whose barriers are forced aligned: a pointwise or broadcast edge, or any input edge of a vertex
    with one (``JobGraph.supports_unaligned_checkpoints``)."""
    return frozenset(e for e in graph.edges if not graph.supports_unaligned_checkpoints(e))


def _forced_aligned_data(
    metadata: CheckpointMetadata, graph: JobGraph, forced: frozenset[JobEdge]
) -> dict[str, tuple[int, set[str]]]:
    """Per vertex: the in-flight records persisted on the ``forced`` edges (``_forced_aligned_edges``), and those
    edges; none in Flink since 1.13 (FLINK-21945)."""
    found: dict[str, tuple[int, set[str]]] = {}

    def add(vertex: str, edge: Any, buffers: Iterable[Buffer]) -> None:
        count, edges = found.get(vertex, (0, set()))
        found[vertex] = (count + sum(1 for _ in _record_keys(buffers)), edges | {f"{edge.source}->{edge.target}"})

    for state in metadata.operator_states:
        vertex = state.operator_id
        gates, outputs = graph.gates_of(vertex), graph.outputs_of(vertex)
        for subtask in state.subtask_states.values():
            for h in subtask.input_channel_state:
                if h.buffers and gates[h.info.gate_idx] in forced:
                    add(vertex, gates[h.info.gate_idx], h.buffers)
            for out in subtask.result_subpartition_state:
                edge = outputs[out.info.partition_idx]
                if out.buffers and edge in forced:
                    add(edge.target, edge, out.buffers)
    return found


def _finished_subtasks(metadata: CheckpointMetadata) -> set[SubtaskKey]:
    done = set()
    for state in metadata.operator_states:
        for index, subtask in state.subtask_states.items():
            if state.fully_finished or subtask.is_finished:
                done.add((state.operator_id, index))
        if state.fully_finished:
            done.update((state.operator_id, i) for i in range(state.parallelism))
    return done


class _Prefixes:
    """The counts of the records of some logs' leading parts, kept from one checkpoint to the next: as the parts
    grow, only their new records are counted (all again when the logs change or a part shrinks)."""

    def __init__(self) -> None:
        self._counts: Counter[Any] = Counter()
        self._parts: list[tuple[list[Any], int]] = []  # (log, copies) of each part counted
        self._ends: list[int] = []  # how far each was counted

    def of(self, parts: list[tuple[list[Any], int, int]]) -> Counter[Any]:
        """The counts of ``records[:end]``, ``copies`` times, of every ``(records, end, copies)`` (read-only)."""
        kept = self._parts
        if len(parts) != len(kept) or any(
            records is not log or copies != times or end < counted
            for (records, end, copies), (log, times), counted in zip(parts, kept, self._ends)
        ):
            self._counts = Counter()
            self._parts = [(records, copies) for records, _, copies in parts]
            self._ends = [0] * len(parts)
        counts, ends = self._counts, self._ends
        for k, (records, end, copies) in enumerate(parts):
            if end > ends[k]:
                new = records[ends[k] : end]
                for _ in range(copies):
                    counts.update(new)
                ends[k] = end
        return counts


def _examples(counts: Counter[Any]) -> tuple[Any, ...]:
    """Five of the records ``counts`` counts by key, in the order of their ``repr``."""
    return tuple(sorted(map(record_of, counts), key=repr)[:5])


def _plus(counts: Counter[Any], vertex: str, *channel_state: dict[str, Counter[Any]]) -> Counter[Any]:
    """``counts`` (read-only: ``_Prefixes``' own) with ``vertex``'s records of each ``channel_state``
    (``_channel_records``) added, in a copy when there are any."""
    extra = [c for per_target in channel_state if (c := per_target.get(vertex))]
    if not extra:
        return counts
    total = counts.copy()
    for c in extra:
        total.update(c)
    return total


def check_consistent_cuts(
    graph: JobGraph,
    completed: Mapping[int, tuple[int, CheckpointMetadata]],
    deployments: Mapping[int, DeploymentLog],
    exactly_once: bool,
    aligned_only: bool,
) -> list[CutViolation]:
    """The violations of every completed checkpoint (``checkpoint id -> (epoch, metadata)``); empty if all are
    consistent cuts. ``aligned_only``: the mode never takes unaligned checkpoints (no in-flight data allowed).
    What each side of a cut holds before a snapshot is counted once, not again for every checkpoint
    (``_Prefixes``)."""
    violations: list[CutViolation] = []
    forced = _forced_aligned_edges(graph)  # most jobs have none: nothing to look for then
    emitted_before: dict[str, _Prefixes] = {v.name: _Prefixes() for v in graph.vertices}  # per consuming vertex
    consumed_before: dict[str, _Prefixes] = {v.name: _Prefixes() for v in graph.vertices}
    restored: dict[int, tuple[dict[str, Counter[Any]], dict[str, Counter[Any]]]] = {}  # per epoch
    for checkpoint_id, (epoch, metadata) in sorted(completed.items()):
        log = deployments[epoch]
        finished = _finished_subtasks(metadata)

        def before(key: SubtaskKey, outputs: bool) -> tuple[list[Any], int] | None:
            """The log of ``key``'s operator (its outputs or its inputs) and how much of it came before the
            checkpoint's snapshot (all of it for a finished subtask); None without a snapshot."""
            rec = log.recorders.get(key)  # noqa: B023 - called in this iteration only
            if rec is None:
                return None
            if key in finished:  # noqa: B023 - called in this iteration only
                records = rec.output_keys() if outputs else rec.input_keys()
                return records, len(records)
            mark = rec.marks.get(checkpoint_id)  # noqa: B023 - called in this iteration only
            if mark is None:
                return None
            return (rec.output_keys(), mark[1]) if outputs else (rec.input_keys(), mark[0])

        if epoch not in restored:
            restored[epoch] = _channel_records(log.restored_from, graph)
        restored_in_of, restored_out_of = restored[epoch]
        persisted_in_of, persisted_out_of = _channel_records(metadata, graph)
        if aligned_only and (persisted_in_of or persisted_out_of):
            violations.append(
                CutViolation(
                    checkpoint_id,
                    "*",
                    "in-flight data in an aligned checkpoint",
                    sum(c.total() for per_target in (persisted_in_of, persisted_out_of) for c in per_target.values()),
                )
            )
        found = _forced_aligned_data(metadata, graph, forced) if forced else {}
        for target, (count, forced_edges) in sorted(found.items()):
            problem = "in-flight data on a forced-aligned edge"
            violations.append(CutViolation(checkpoint_id, target, problem, count, tuple(sorted(forced_edges))))
        for vertex in graph.vertices:
            edges = graph.inputs_of(vertex.name)
            if not edges:
                continue
            absent = []
            emitted: list[tuple[list[Any], int, int]] = []  # (log, end, copies) of each upstream subtask
            for edge in edges:  # operator logs hold records only (watermarks never reach an operator's process)
                copies = vertex.parallelism if edge.partitioner is Partitioner.BROADCAST else 1
                for i in range(graph.vertex(edge.source).parallelism):
                    part = before((edge.source, i), outputs=True)
                    if part is None:
                        absent.append(f"{edge.source}#{i}")
                        continue
                    emitted.append((*part, copies))
            consumed: list[tuple[list[Any], int, int]] = []
            for i in range(vertex.parallelism):
                part = before((vertex.name, i), outputs=False)
                if part is None:
                    absent.append(f"{vertex.name}#{i}")
                    continue
                consumed.append((*part, 1))
            if absent:
                violations.append(CutViolation(checkpoint_id, vertex.name, "no snapshot", len(absent), tuple(absent)))
                continue
            # what went into the cut (restored channel state, what upstream emitted before it) and what it holds
            # (persisted channel state, what the vertex consumed before it)
            left = _plus(emitted_before[vertex.name].of(emitted), vertex.name, restored_in_of, restored_out_of)
            right = _plus(consumed_before[vertex.name].of(consumed), vertex.name, persisted_in_of, persisted_out_of)
            if dict.__eq__(left, right):  # the common case, compared in C (both hold positive counts only)
                continue
            missing = left - right
            if missing:
                violations.append(
                    CutViolation(
                        checkpoint_id,
                        vertex.name,
                        "missing",
                        sum(missing.values()),
                        _examples(missing),
                    )
                )
            unexpected = right - left
            if unexpected and exactly_once:
                violations.append(
                    CutViolation(
                        checkpoint_id,
                        vertex.name,
                        "unexpected",
                        sum(unexpected.values()),
                        _examples(unexpected),
                    )
                )
    return violations
