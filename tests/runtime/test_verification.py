"""The reference and the verdict (``runtime.verification.reference``): exact comparison by identity, and in
at-least-once mode over aggregates (windows, window joins) the comparison by group with the expected value as
a lower bound, since a replayed record inflates an aggregate instead of repeating a row; one verdict rule, and
the ``summary.json`` block it gives."""

import json

from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobVertex
from barriersim.runtime.jobgraph import OperatorKind as K
from barriersim.runtime.jobgraph import Partitioner as P
from barriersim.runtime.verification.reference import Verdict, expected_sink_input, verdict_of, verify

WINDOWED = JobGraph(
    (
        JobVertex("source", K.SOURCE, 1),
        JobVertex("window", K.TUMBLING_WINDOW, 1, params={"window_ms": 10}),
        JobVertex("sink", K.AT_LEAST_ONCE_SINK, 1),
    ),
    (JobEdge("source", "window", P.HASH), JobEdge("window", "sink", P.REBALANCE)),
).validate()
PLAIN = JobGraph(
    (JobVertex("source", K.SOURCE, 1), JobVertex("map", K.MAP, 1), JobVertex("sink", K.AT_LEAST_ONCE_SINK, 1)),
    (JobEdge("source", "map", P.REBALANCE), JobEdge("map", "sink", P.REBALANCE)),
).validate()
SPLITS = {"source": [[(1, 5, 2, 1), (2, 5, 3, 4), (3, 6, 7, 12)]]}
# the windows: [0, 10) key 5: sum 5 of 2 records; [10, 20) key 6: sum 7 of 1 record
EXACT = [(0, 5, 5, 2), (10, 6, 7, 1)]


def test_the_windowed_reference_is_marked_as_an_aggregate_and_the_plain_one_is_not():
    assert expected_sink_input(WINDOWED, SPLITS).aggregated
    assert not expected_sink_input(PLAIN, SPLITS).aggregated


def test_an_exact_windowed_output_is_exactly_once_in_both_readings():
    expected = expected_sink_input(WINDOWED, SPLITS)
    assert verify(expected, EXACT).verdict is Verdict.EXACTLY_ONCE
    assert verify(expected, EXACT, at_least_once=True).verdict is Verdict.EXACTLY_ONCE


def test_an_inflated_aggregate_is_at_least_once_not_a_loss():
    expected = expected_sink_input(WINDOWED, SPLITS)
    inflated = [(0, 5, 8, 3), (10, 6, 7, 1)]  # record 2 replayed into the first window
    strict = verify(expected, inflated)
    assert strict.verdict is Verdict.VIOLATED and strict.lost == 1 and strict.wrong == 1
    v = verify(expected, inflated, at_least_once=True)
    assert (v.lost, v.duplicated, v.wrong, v.verdict) == (0, 1, 0, Verdict.AT_LEAST_ONCE)
    again = verify(expected, EXACT + [(0, 5, 5, 2)], at_least_once=True)  # a window fired twice
    assert (again.lost, again.duplicated, again.wrong, again.verdict) == (0, 1, 0, Verdict.AT_LEAST_ONCE)


def test_a_deflated_missing_or_unknown_group_is_violated_even_at_least_once():
    expected = expected_sink_input(WINDOWED, SPLITS)
    deflated = verify(expected, [(0, 5, 2, 1), (10, 6, 7, 1)], at_least_once=True)  # record 2 never counted
    assert (deflated.lost, deflated.wrong, deflated.verdict) == (1, 1, Verdict.VIOLATED)
    missing = verify(expected, [(0, 5, 5, 2)], at_least_once=True)
    assert (missing.lost, missing.verdict) == (1, Verdict.VIOLATED)
    unknown = verify(expected, EXACT + [(20, 9, 1, 1)], at_least_once=True)
    assert (unknown.wrong, unknown.verdict) == (1, Verdict.VIOLATED)


def test_without_an_aggregate_at_least_once_compares_identities_as_before():
    expected = expected_sink_input(PLAIN, SPLITS)
    rows = [(1, 5, 4, 1), (2, 5, 6, 4), (3, 6, 14, 12)]
    assert verify(expected, rows + rows[:1], at_least_once=True).verdict is Verdict.AT_LEAST_ONCE
    assert verify(expected, rows[1:], at_least_once=True).verdict is Verdict.VIOLATED


def test_one_verdict_rule_from_the_counts_and_the_mode():
    for exactly_once in (True, False):
        assert verdict_of(0, 0, 0, 0, exactly_once=exactly_once) is Verdict.EXACTLY_ONCE
        assert verdict_of(1, 0, 0, 0, exactly_once=exactly_once) is Verdict.VIOLATED
        assert verdict_of(0, 3, 1, 0, exactly_once=exactly_once) is Verdict.VIOLATED
    # at-least-once mode allows duplicates (and sums that count them); an exactly-once mode does not
    assert verdict_of(0, 2, 0, 0, exactly_once=False) is Verdict.AT_LEAST_ONCE
    assert verdict_of(0, 0, 0, 1, exactly_once=False) is Verdict.AT_LEAST_ONCE
    assert verdict_of(0, 2, 0, 0, exactly_once=True) is Verdict.VIOLATED
    assert verdict_of(0, 0, 0, 1, exactly_once=True) is Verdict.VIOLATED
    # a final sum short of the expected one violates at-least-once too
    assert verdict_of(0, 2, 0, 1, exactly_once=False, final_sum_short_keys=1) is Verdict.VIOLATED


def test_at_least_once_allows_a_final_sum_above_the_expected_one_but_not_below():
    """A replayed record counted twice in keyed state raises the key's later sums (allowed in at-least-once mode);
    a record whose effect on the state was lost leaves them short although every record's row was written: an
    at-least-once violation the rows alone cannot show."""
    keyed = JobGraph(
        (
            JobVertex("source", K.SOURCE, 1),
            JobVertex("sum", K.KEYED_SUM, 1),
            JobVertex("sink", K.AT_LEAST_ONCE_SINK, 1),
        ),
        (JobEdge("source", "sum", P.HASH), JobEdge("sum", "sink", P.REBALANCE)),
    ).validate()
    expected = expected_sink_input(keyed, SPLITS)
    assert expected.keyed_sum and expected.final_sums == {5: 5, 6: 7}
    rows = [(1, 5, 2, 2), (2, 5, 3, 5), (3, 6, 7, 7)]  # (record_id, key, value, running sum)
    assert verify(expected, rows, at_least_once=True).verdict is Verdict.EXACTLY_ONCE
    high = rows[:2] + [(3, 6, 7, 12)]  # key 6's state counted a record twice
    v = verify(expected, high, at_least_once=True)
    assert (v.final_sum_mismatched_keys, v.final_sum_short_keys, v.verdict) == (1, 0, Verdict.AT_LEAST_ONCE)
    assert verify(expected, high).verdict is Verdict.VIOLATED  # exactly-once: the sum must match
    short = rows[:2] + [(3, 6, 7, 6)]  # key 6's state lost a record's effect
    v = verify(expected, short, at_least_once=True)
    assert (v.lost, v.wrong, v.final_sum_short_keys, v.verdict) == (0, 0, 1, Verdict.VIOLATED)
    assert verify(expected, rows[:2], at_least_once=True).final_sum_short_keys == 1  # key 6 never written


def test_a_duplicate_in_an_exactly_once_run_is_a_violation():
    expected = expected_sink_input(PLAIN, SPLITS)
    rows = [(1, 5, 4, 1), (2, 5, 6, 4), (3, 6, 14, 12)]
    assert verify(expected, rows + rows[:1]).verdict is Verdict.VIOLATED
    assert verify(expected, rows + rows[:1], at_least_once=True).verdict is Verdict.AT_LEAST_ONCE


def test_the_summary_block_keeps_its_fields_and_the_verdict_as_its_string():
    output = [(1, 5, 4, 1), (2, 5, 6, 4), (3, 6, 14, 12)]  # the map doubles the values
    block = verify(expected_sink_input(PLAIN, SPLITS), output).as_dict()
    assert block == {
        "reference": "python",
        "expected_records": 3,
        "output_records": 3,
        "lost": 0,
        "duplicated": 0,
        "wrong": 0,
        "final_sum_mismatched_keys": 0,
        "final_sum_short_keys": 0,
        "verdict": "exactly-once",
    }
    assert list(block) == [
        "reference",
        "expected_records",
        "output_records",
        "lost",
        "duplicated",
        "wrong",
        "final_sum_mismatched_keys",
        "final_sum_short_keys",
        "verdict",
    ]
    assert json.loads(json.dumps(block)) == block


def test_a_window_fired_again_with_only_replayed_records_is_a_duplicate_at_least_once():
    """At-least-once: a window fired in full before a checkpoint's snapshot (so the snapshot holds none of its
    records) while records after the checkpoint's source offsets had reached it; after a restore they are replayed
    and the window fires again with only them. The smaller row sits beside the full one: a duplicate, not a loss
    (found by the whole-job property, at-least-once, a union into 5 ms tumbling windows and a failover)."""
    expected = expected_sink_input(WINDOWED, SPLITS)
    refired = verify(expected, EXACT + [(0, 5, 3, 1)], at_least_once=True)  # record 2 alone, fired again
    assert (refired.lost, refired.duplicated, refired.wrong, refired.verdict) == (0, 1, 0, Verdict.AT_LEAST_ONCE)
    # without the full row the smaller one is still input missing from the group
    alone = verify(expected, [(0, 5, 3, 1), (10, 6, 7, 1)], at_least_once=True)
    assert (alone.lost, alone.wrong, alone.verdict) == (1, 1, Verdict.VIOLATED)
    # an exactly-once run allows neither
    assert verify(expected, EXACT + [(0, 5, 3, 1)]).verdict is Verdict.VIOLATED
