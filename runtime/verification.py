"""The reference result of a job over its workload, and the one result type and verdict rule of every verification.

How this works: ``expected_sink_input`` evaluates the job graph over multisets, in topological order, with the
same operator semantics as the stream tasks (map, filter, union, keyed running sum, tumbling event-time
window, window join), ignoring every effect of timing. Outputs whose content depends on arrival order (the running sum of
a keyed sum) are compared by their order-free identity ``(record_id, key, value)``, plus the final sum per
key, which does not depend on order. ``verify`` counts ``lost`` (expected but missing), ``duplicated`` (seen
more often than expected) and ``wrong`` (never expected) and gives the verdict. In
at-least-once mode, replayed records may also be counted twice in keyed state, so only ``lost`` and
``wrong`` decide there; and where the sink's input derives from an aggregate (a window or a window join), a
replayed record inflates the aggregate instead of repeating a row, so ``verify(..., at_least_once=True)``
compares such rows by their group ``(window_start or record_id, key)`` and their value as a lower bound: a
row at or above its expected value is delivered (above it: a duplicate contribution, counted as
``duplicated``), a group without such a row is ``lost``, and a row below every expected value of its group,
or of a group never expected, is ``wrong``. (A filter after an aggregate may drop an inflated row; in
at-least-once mode the reference cannot tell that from a loss.)

Every driver reports its result as a ``Verification``: this module's reference (``reference="python"``: the
simulator, and the Ray backend for graphs other than the quickstart's) and Spark SQL's over the workload
(``barriersim.spark.reference``, ``reference="spark"``). ``verdict_of`` is the one rule from the counts to the
``Verdict``, given the run's mode: ``exactly-once`` when nothing is lost, duplicated or wrong and every final sum
matches; in an exactly-once mode anything else is ``violated`` (a duplicate breaks its guarantee as a loss
does); in at-least-once mode ``at-least-once`` when nothing is lost or wrong, ``violated`` otherwise. ``Verification.as_dict()`` is the
``verification`` block of ``summary.json``, the verdict as its string.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Sequence

from barriersim.runtime.jobgraph import JobGraph, OperatorKind
from barriersim.runtime.operators.records import EVENT_TIME, KEY, RECORD_ID, VALUE
from barriersim.runtime.operators.window_join import reference_window_join


@dataclass(frozen=True)
class Expected:
    identities: Counter  # identity -> count
    keyed_sum: bool  # identities are (record_id, key, value) of keyed-sum outputs
    final_sums: dict  # key -> final running sum (keyed sum only)
    aggregated: bool = False  # the sink's input derives from a window or a window join


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

    def as_dict(self) -> dict:
        return {**asdict(self), "verdict": self.verdict.value}


def verdict_of(lost: int, duplicated: int, wrong: int, final_sum_mismatched_keys: int, *,
               exactly_once: bool) -> Verdict:
    """The verdict on a run's output from its counts; ``exactly_once``: the run's mode promises exactly-once
    (``CheckpointingMode.exactly_once``), so any duplicate or loss violates it."""
    if lost == duplicated == wrong == final_sum_mismatched_keys == 0:
        return Verdict.EXACTLY_ONCE
    if lost == 0 and wrong == 0 and not exactly_once:
        return Verdict.AT_LEAST_ONCE
    return Verdict.VIOLATED


def expected_sink_input(graph: JobGraph, splits: dict[str, Sequence[Sequence[tuple]]]) -> Expected:
    sinks = graph.sinks
    if len(sinks) != 1:
        raise ValueError(f"verification needs exactly one sink, the job has {len(sinks)}")
    streams: dict[str, list[tuple]] = {}
    keyed = {}
    aggregated: set[str] = set()  # vertices whose output derives from an aggregate
    for name in graph.topological_order():
        v = graph.vertex(name)
        inputs = [r for e in graph.inputs_of(name) for r in streams[e.source]]
        kind = v.operator
        if kind.uses_event_time or any(e.source in aggregated for e in graph.inputs_of(name)):
            aggregated.add(name)
        if kind is OperatorKind.SOURCE:
            out = [r for split in splits.get(name, ()) for r in split]
        elif kind is OperatorKind.MAP:
            f = v.params.get("factor", 2)
            out = [(r[0], r[1], r[VALUE] * f, r[3]) for r in inputs]
        elif kind is OperatorKind.FILTER:
            mod = v.params.get("modulus", 3)
            out = [r for r in inputs if r[VALUE] % mod != 0]
        elif kind is OperatorKind.UNION:
            out = inputs
        elif kind is OperatorKind.KEYED_SUM:
            out = [(r[RECORD_ID], r[KEY], r[VALUE], None) for r in inputs]
            sums: Counter = Counter()
            for r in inputs:
                sums[r[KEY]] += r[VALUE]
            keyed[name] = dict(sums)
        elif kind is OperatorKind.TUMBLING_WINDOW:
            size = v.params.get("window_ms", 1000)
            acc: dict = {}
            for r in inputs:
                k = (r[EVENT_TIME] - r[EVENT_TIME] % size, r[KEY])
                s, c = acc.get(k, (0, 0))
                acc[k] = (s + r[VALUE], c + 1)
            out = [(start, key, s, c) for (start, key), (s, c) in sorted(acc.items())]
        elif kind is OperatorKind.JOIN:
            sides = [[r for e in graph.inputs_of(name) if e.target_input == side for r in streams[e.source]]
                     for side in (0, 1)]
            out = reference_window_join(sides[0], sides[1], v.params.get("window_ms", 1000))
        elif kind.is_sink:
            out = inputs
        else:
            raise ValueError(f"no reference semantics for operator {kind.value} (vertex {name!r})")
        streams[name] = out
    sink = sinks[0].name
    feeding = [e.source for e in graph.inputs_of(sink)]
    is_keyed = len(feeding) == 1 and graph.vertex(feeding[0]).operator is OperatorKind.KEYED_SUM
    identities = Counter((r[0], r[1], r[2]) if is_keyed else tuple(r) for r in streams[sink])
    return Expected(identities, is_keyed, keyed.get(feeding[0], {}) if is_keyed else {}, sink in aggregated)


def verify(expected: Expected, committed: Sequence[tuple], at_least_once: bool = False) -> Verification:
    """The verdict on ``committed``; ``at_least_once``: the run was in at-least-once mode (duplicates are allowed
    and aggregates may be inflated by replayed records, see the module's docstring), else in an exactly-once
    mode."""
    if at_least_once and expected.aggregated:
        return _verify_inflatable(expected, committed)
    actual = Counter((r[0], r[1], r[2]) if expected.keyed_sum else tuple(r) for r in committed)
    lost = sum(max(0, n - actual.get(k, 0)) for k, n in expected.identities.items())
    duplicated = sum(max(0, n - expected.identities[k]) for k, n in actual.items() if k in expected.identities)
    wrong = sum(n for k, n in actual.items() if k not in expected.identities)
    mismatched = 0
    if expected.keyed_sum:
        final: dict = {}
        for r in committed:
            final[r[1]] = max(final.get(r[1], r[3]), r[3])
        mismatched = sum(1 for k, s in expected.final_sums.items() if final.get(k) != s)
    return Verification("python", sum(expected.identities.values()), len(committed), lost, duplicated, wrong,
                        mismatched, verdict_of(lost, duplicated, wrong, mismatched, exactly_once=not at_least_once))


def _verify_inflatable(expected: Expected, committed: Sequence[tuple]) -> Verification:
    """At-least-once over aggregates: per group ``(r[0], r[1])``, match each expected value with a distinct
    committed value at or above it (smallest first)."""
    want: dict = {}
    for identity, n in expected.identities.items():
        want.setdefault((identity[0], identity[1]), []).extend([identity[2]] * n)
    got: dict = {}
    for r in committed:
        got.setdefault((r[0], r[1]), []).append(r[2])
    lost = duplicated = wrong = 0
    for group, values in got.items():
        expected_values = sorted(want.get(group, ()))
        if not expected_values:
            wrong += len(values)
            continue
        unmatched = list(expected_values)
        for value in sorted(values):
            if unmatched and value >= unmatched[0]:
                if value != unmatched[0]:
                    duplicated += 1  # an aggregate that counted a replayed record again
                unmatched.pop(0)
            elif value < expected_values[0]:
                wrong += 1  # below anything this group can be: input is missing from it
            else:
                duplicated += 1  # the group delivered again (a replayed window firing)
        lost += len(unmatched)
    lost += sum(len(v) for g, v in want.items() if g not in got)
    return Verification("python", sum(expected.identities.values()), len(committed), lost, duplicated, wrong, 0,
                        verdict_of(lost, duplicated, wrong, 0, exactly_once=False))
