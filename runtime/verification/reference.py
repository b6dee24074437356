"""The reference result of a job over its workload, and the one result type (``Verification``) and verdict rule
(``verdict_of``) of every verification, on columns with no per-record Python step. See docs/verification.md, "The
reference result and the verdict".
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from barriersim.runtime.jobgraph import JobGraph, OperatorKind
from barriersim.runtime.operators.records import EVENT_TIME, KEY, VALUE
from barriersim.runtime.operators.window import window_sums
from barriersim.runtime.operators.window_join import reference_window_join
from barriersim.runtime.record_batch import RecordBatch, RecordsLike


@dataclass(frozen=True)
class Expected:
    rows: np.ndarray  # the expected identities, one column per identity row (a multiset: repeated rows count)
    keyed_sum: bool  # identities are (record_id, key, value) of keyed-sum outputs
    final_sums: dict[int, int]  # key -> final running sum (keyed sum only)
    aggregated: bool = False  # the sink's input derives from a window or a window join
    # a run that ended with a snapshot (runtime.verification.snapshot): window groups left out, and the rows an
    # at-least-once sink may have written past the snapshot
    ignored_groups: frozenset[Any] = frozenset()
    tolerated: np.ndarray | None = None  # identity rows as ``rows`` (columns), or None

    @property
    def identities(self) -> Counter[Any]:
        """identity -> count (a per-row view, for small cases and tests)."""
        return Counter(zip(*self.rows.tolist())) if self.rows.shape[1] else Counter()

    @property
    def records(self) -> int:
        return int(self.rows.shape[1])


class Verdict(enum.Enum):
    """What a run's committed output shows; ``.value`` is what ``summary.json`` holds."""

    EXACTLY_ONCE = "exactly-once"
    AT_LEAST_ONCE = "at-least-once"
    VIOLATED = "violated"


@dataclass(frozen=True)
class Verification:
    reference: str  # who computed the expected output: "python" (this module) or "spark" (Spark SQL)
    expected_records: int
    output_records: int
    lost: int
    duplicated: int
    wrong: int
    final_sum_mismatched_keys: int
    verdict: Verdict
    final_sum_short_keys: int = 0  # of the mismatched keys, those whose final sum is below the expected one

    def as_dict(self) -> dict[str, Any]:
        """The ``verification`` block of ``summary.json``: the counts, then the verdict as its string."""
        block = asdict(self)
        del block["verdict"]
        return {**block, "verdict": self.verdict.value}


def verdict_of(
    lost: int,
    duplicated: int,
    wrong: int,
    final_sum_mismatched_keys: int,
    *,
    exactly_once: bool,
    final_sum_short_keys: int = 0,
) -> Verdict:
    """The verdict on a run's output from its counts; ``exactly_once``: the run's mode promises exactly-once
    (``CheckpointingMode.exactly_once``), so any duplicate or loss violates it. In at-least-once mode a final sum
    may run above the expected one (a replayed record counted twice in the state), never below it."""
    if lost == duplicated == wrong == final_sum_mismatched_keys == 0:
        return Verdict.EXACTLY_ONCE
    if lost == 0 and wrong == 0 and final_sum_short_keys == 0 and not exactly_once:
        return Verdict.AT_LEAST_ONCE
    return Verdict.VIOLATED


def expected_sink_input(
    graph: JobGraph, splits: Mapping[str, Sequence[Any]], injected: Mapping[tuple[str, int], Any] | None = None
) -> Expected:
    """What the sink should receive, evaluated over ``splits`` (per source vertex, its subtasks' splits: record
    batches, or record tuples); ``injected`` adds records (a batch or record tuples) entering a vertex's logical
    input (``(vertex, input)``) besides its upstream's (e.g. in-flight data a snapshot holds)."""
    injected = injected or {}
    sinks = graph.sinks
    if len(sinks) != 1:
        raise ValueError(f"verification needs exactly one sink, the job has {len(sinks)}")
    streams: dict[str, RecordBatch] = {}
    keyed = {}
    aggregated: set[str] = set()  # vertices whose output derives from an aggregate
    for name in graph.topological_order():
        v = graph.vertex(name)
        inputs = RecordBatch.concat(
            [streams[e.source] for e in graph.inputs_of(name)] + _injected_batches(injected, name, 0)
        )
        kind = v.operator
        if kind.uses_event_time or any(e.source in aggregated for e in graph.inputs_of(name)):
            aggregated.add(name)
        if kind is OperatorKind.SOURCE:
            out = RecordBatch.concat([RecordBatch.of(split) for split in splits.get(name, ())])
        elif kind is OperatorKind.MAP:
            columns = inputs.columns.copy()
            columns[VALUE] *= v.params.get("factor", 2)
            out = RecordBatch(columns)
        elif kind is OperatorKind.FILTER:
            out = inputs.take(inputs.columns[VALUE] % v.params.get("modulus", 3) != 0)
        elif kind is OperatorKind.UNION:
            out = inputs
        elif kind is OperatorKind.KEYED_SUM:
            out = inputs  # compared by (record_id, key, value): the running sum depends on arrival order
            keys, sums = _sums_by_key(inputs.columns[KEY], inputs.columns[VALUE])
            keyed[name] = dict(zip(keys.tolist(), sums.tolist()))
        elif kind is OperatorKind.TUMBLING_WINDOW:
            size = v.params.get("window_ms", 1000)
            times = inputs.columns[EVENT_TIME]
            out = RecordBatch.from_columns(
                *window_sums(times - times % size, inputs.columns[KEY], inputs.columns[VALUE])
            )
        elif kind is OperatorKind.JOIN:
            sides = [
                RecordBatch.concat(
                    [streams[e.source] for e in graph.inputs_of(name) if e.target_input == side]
                    + _injected_batches(injected, name, side)
                )
                for side in (0, 1)
            ]
            out = reference_window_join(sides[0], sides[1], v.params.get("window_ms", 1000))
        elif kind.is_sink:
            out = inputs
        else:
            raise ValueError(f"no reference semantics for operator {kind.value} (vertex {name!r})")
        streams[name] = out
    sink = sinks[0].name
    feeding = [e.source for e in graph.inputs_of(sink)]
    is_keyed = len(feeding) == 1 and graph.vertex(feeding[0]).operator is OperatorKind.KEYED_SUM
    rows = streams[sink].columns
    return Expected(
        rows[:3] if is_keyed else rows, is_keyed, keyed.get(feeding[0], {}) if is_keyed else {}, sink in aggregated
    )


def _injected_batches(injected: Mapping[tuple[str, int], Any], name: str, side: int) -> list[RecordBatch]:
    records = injected.get((name, side))
    return [RecordBatch.of(records)] if records is not None and len(records) else []


def _sums_by_key(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys (ascending) and the sum of their values."""
    if not len(keys):
        return keys[:0], values[:0]
    low, high = int(keys.min()), int(keys.max())
    if high - low <= 4 * len(keys) + 1024:
        sums = np.zeros(high - low + 1, dtype=np.int64)
        np.add.at(sums, keys - low, values)
        present = np.bincount(keys - low, minlength=high - low + 1) > 0
        return np.flatnonzero(present) + low, sums[present]
    unique, inverse = np.unique(keys, return_inverse=True)
    sums = np.zeros(len(unique), dtype=np.int64)
    np.add.at(sums, inverse, values)
    return unique, sums


def _max_by_key(keys: np.ndarray, values: np.ndarray) -> dict[int, int]:
    """key -> the largest value of the key."""
    if not len(keys):
        return {}
    low, high = int(keys.min()), int(keys.max())
    if high - low <= 4 * len(keys) + 1024:
        most = np.full(high - low + 1, np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(most, keys - low, values)
        present = np.flatnonzero(np.bincount(keys - low, minlength=high - low + 1))
        return dict(zip((present + low).tolist(), most[present].tolist()))
    unique, inverse = np.unique(keys, return_inverse=True)
    most = np.full(len(unique), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(most, inverse, values)
    return dict(zip(unique.tolist(), most.tolist()))


def _multiset_difference(expected: np.ndarray, actual: np.ndarray) -> tuple[int, int, int]:
    """``(lost, duplicated, wrong)`` of the identity rows ``actual`` against ``expected`` (both ``(fields, n)``):
    lost = copies expected but missing, duplicated = copies beyond the expected count of an expected identity,
    wrong = copies of identities never expected."""
    n_expected, n_actual = expected.shape[1], actual.shape[1]
    if not n_expected:
        return 0, 0, n_actual
    ids = expected[0]
    low, high = int(ids.min()), int(ids.max())
    if high - low <= 4 * n_expected + 1024 and n_expected < 2**31:
        where = np.full(high - low + 1, -1, dtype=np.int32)  # record id -> its expected row, if distinct
        where[ids - low] = np.arange(n_expected, dtype=np.int32)
        if np.count_nonzero(where >= 0) == n_expected:  # every expected record id is distinct: address directly
            copies = np.zeros(n_expected, dtype=np.int64)
            matched = 0
            for start in range(0, n_actual, _CHUNK):  # in chunks, to bound the temporary arrays
                part = actual[:, start : start + _CHUNK]
                got = part[0]
                at = np.full(len(got), -1, dtype=np.int32)
                inside = (got >= low) & (got <= high)
                at[inside] = where[got[inside] - low]
                match = at >= 0
                match[match] = (part[1:, match] == expected[1:, at[match]]).all(axis=0)
                copies += np.bincount(at[match], minlength=n_expected)  # as np.add.at(copies, at, 1), faster
                matched += int(np.count_nonzero(match))
            lost = int(np.count_nonzero(copies == 0))
            duplicated = int(np.maximum(copies - 1, 0).sum(dtype=np.int64))
            return lost, duplicated, n_actual - matched
    return _sorted_difference(expected, actual)


_CHUNK = 1 << 22  # output rows compared at a time


def _sorted_difference(expected: np.ndarray, actual: np.ndarray) -> tuple[int, int, int]:
    """``_multiset_difference`` by sorting both multisets together (any identities)."""
    rows = np.concatenate([expected, actual], axis=1)
    side = np.concatenate([np.ones(expected.shape[1], dtype=np.int64), np.zeros(actual.shape[1], dtype=np.int64)])
    order = np.lexsort(rows[::-1])
    rows, side = rows[:, order], side[order]
    n = rows.shape[1]
    first = np.ones(n, dtype=bool)
    first[1:] = (rows[:, 1:] != rows[:, :-1]).any(axis=0)
    starts = np.flatnonzero(first)
    e = np.add.reduceat(side, starts)
    a = np.diff(np.append(starts, n)) - e
    lost = int(np.maximum(e - a, 0).sum())
    duplicated = int(np.maximum(a - e, 0)[e > 0].sum())
    wrong = int(a[e == 0].sum())
    return lost, duplicated, wrong


def verify(expected: Expected, committed: RecordsLike, at_least_once: bool = False) -> Verification:
    """The verdict on ``committed`` (a ``RecordBatch``, or record tuples); ``at_least_once``: the run was in
    at-least-once mode (duplicates are allowed and aggregates may be inflated by replayed records, see the module's
    docstring), else in an exactly-once mode."""
    committed = RecordBatch.of(committed) if len(committed) else RecordBatch.empty(max(expected.rows.shape[0], 1))
    if at_least_once and expected.aggregated:
        return _verify_inflatable(expected, committed)
    columns = committed.columns
    lost, duplicated, wrong = _multiset_difference(expected.rows, columns[: expected.rows.shape[0]])
    mismatched = short = 0
    if expected.keyed_sum:
        final = _max_by_key(columns[KEY], columns[3]) if len(committed) else {}
        mismatched = sum(1 for k, s in expected.final_sums.items() if final.get(k) != s)
        short = sum(1 for k, s in expected.final_sums.items() if final.get(k) is None or final[k] < s)
    return Verification(
        "python",
        expected.records,
        len(committed),
        lost,
        duplicated,
        wrong,
        mismatched,
        verdict_of(lost, duplicated, wrong, mismatched, exactly_once=not at_least_once, final_sum_short_keys=short),
        short,
    )


def _verify_inflatable(expected: Expected, committed: RecordBatch) -> Verification:
    """At-least-once over aggregates: per group ``(r[0], r[1])``, match each expected value with a distinct
    committed value at or above it (smallest first)."""
    want: dict[tuple[int, int], list[int]] = {}
    for identity, n in expected.identities.items():
        want.setdefault((identity[0], identity[1]), []).extend([identity[2]] * n)
    got: dict[tuple[int, int], list[int]] = {}
    for r in committed:  # aggregates: one row per window and key, few
        got.setdefault((r[0], r[1]), []).append(r[2])
    lost = duplicated = wrong = 0
    for group, values in got.items():
        expected_values = sorted(want.get(group, ()))
        if not expected_values:
            wrong += len(values)
            continue
        unmatched = list(expected_values)
        below = 0  # rows below anything this group can be
        for value in sorted(values):
            if unmatched and value >= unmatched[0]:
                if value != unmatched[0]:
                    duplicated += 1  # an aggregate that counted a replayed record again
                unmatched.pop(0)
            elif value < expected_values[0]:
                below += 1
            else:
                duplicated += 1  # the group delivered again (a replayed window firing)
        if unmatched:
            wrong += below  # input is missing from the group
        else:
            # every expected row of the group was delivered: a smaller row is a window that fired again after a
            # restore with only replayed records (it had fired before the checkpoint's snapshot, which therefore
            # holds none of its records, while records after the checkpoint's offsets had reached it: without
            # alignment they pass the barriers of the channels that are ahead)
            duplicated += below
        lost += len(unmatched)
    lost += sum(len(v) for g, v in want.items() if g not in got)
    return Verification(
        "python",
        expected.records,
        len(committed),
        lost,
        duplicated,
        wrong,
        0,
        verdict_of(lost, duplicated, wrong, 0, exactly_once=False),
    )
