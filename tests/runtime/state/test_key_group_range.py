"""Key groups: ports of Flink's KeyGroupRangeTest and ExecutionJobVertexTest.testMaxParallelismDefaulting,
golden assignments, and Hypothesis properties of KeyGroupRangeAssignment for any parallelism."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barriersim.runtime.state.key_groups import (
    UPPER_BOUND_MAX_PARALLELISM,
    assign_key_to_parallel_operator,
    assign_to_key_group,
    compute_default_max_parallelism,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
)
from barriersim.runtime.state.snapshot import KeyGroupRange


def test_key_group_intersection():
    """Port of Flink KeyGroupRangeTest.testKeyGroupIntersection."""
    r1, r2 = KeyGroupRange.of(0, 10), KeyGroupRange.of(3, 7)
    inter = r1.intersection(r2)
    assert (inter.start_key_group, inter.end_key_group) == (3, 7)
    assert r2.intersection(r1) == inter
    assert r1.intersection(r1) == r1

    r1, r2 = KeyGroupRange.of(0, 5), KeyGroupRange.of(6, 10)
    inter = r1.intersection(r2)
    assert inter == KeyGroupRange.empty()
    assert inter == r2.intersection(r1)

    r1, r2 = KeyGroupRange.of(0, 10), KeyGroupRange.of(5, 20)
    inter = r1.intersection(r2)
    assert (inter.start_key_group, inter.end_key_group) == (5, 10)
    assert r2.intersection(r1) == inter

    r1, r2 = KeyGroupRange.of(3, 12), KeyGroupRange.of(0, 10)
    inter = r1.intersection(r2)
    assert (inter.start_key_group, inter.end_key_group) == (3, 10)
    assert r2.intersection(r1) == inter


def _basics(start: int, end: int) -> None:
    r = KeyGroupRange.of(start, end)
    assert r.number_of_key_groups == max(0, end - start + 1)
    if r.number_of_key_groups > 0:
        assert (r.start_key_group, r.end_key_group) == (start, end)
        c = start
        for i in r:
            assert i == c and i in r
            c += 1
        assert c == end + 1
        assert start - 1 not in r and end + 1 not in r
    else:
        assert r == KeyGroupRange.empty()


def test_key_group_range_basics():
    """Port of Flink KeyGroupRangeTest.testKeyGroupRangeBasics."""
    for start, end in ((0, 0), (0, 1), (1, 2), (42, 42), (3, 7), (0, 32767), (32766, 32767), (5, 4)):
        _basics(start, end)
    with pytest.raises(ValueError, match="negative bound"):
        _basics(-3, 2)


def test_max_parallelism_defaulting():
    """Port of Flink ExecutionJobVertexTest.testMaxParallelismDefaulting.

    Adapted to ``compute_default_max_parallelism`` (the rule the vertex applies): the out-of-bounds case
    is refused where a parallelism above the max parallelism is used, as in Flink."""
    assert compute_default_max_parallelism(1) == 128  # default minimum
    assert compute_default_max_parallelism(171) == 256  # round up part 1
    assert compute_default_max_parallelism(172) == 512  # round up part 2
    assert compute_default_max_parallelism(1 << 15) == 1 << 15  # round up limit
    too_many = 1 + (1 << 15)
    with pytest.raises(ValueError):
        compute_key_group_range_for_operator_index(compute_default_max_parallelism(too_many), too_many, 0)
    with pytest.raises(ValueError):  # parallelism must not exceed the max parallelism
        compute_key_group_range_for_operator_index(8, 9, 0)


def test_assignments_match_flinks_for_string_keys():
    # Values of Flink's KeyGroupRangeAssignment for String keys ("A".hashCode() == 65, "B" == 66).
    assert assign_to_key_group("A", 128) == 104
    assert assign_to_key_group("B", 128) == 17
    assert assign_key_to_parallel_operator("A", 128, 2) == 1
    assert assign_key_to_parallel_operator("B", 128, 2) == 0
    assert assign_key_to_parallel_operator("A", 128, 8) == 6
    assert assign_key_to_parallel_operator("B", 128, 8) == 1


def test_java_hash_codes_of_doubles_and_tuples():
    from barriersim.runtime.state.key_groups import java_hash_code

    assert java_hash_code(1.0) == 1072693248  # Double.hashCode(1.0)
    assert java_hash_code(-0.0) == -2147483648
    assert java_hash_code(float("nan")) == 2146959360  # canonical NaN
    assert java_hash_code(("a", 1)) == 31 * 97 + 1  # Tuple2.of("a", 1).hashCode()
    assert java_hash_code((1, 2, 3)) == (31 * 1 + 2) * 31 + 3


def test_unhashable_key_types_are_refused_rather_than_hashed_unstably():
    with pytest.raises(TypeError, match="no stable hash"):
        assign_to_key_group(object(), 128)
    with pytest.raises(TypeError):
        assign_to_key_group(None, 128)
    with pytest.raises(TypeError):
        assign_to_key_group((), 128)


@st.composite
def _parallelisms(draw):
    max_p = draw(st.one_of(st.integers(1, 512), st.sampled_from([1024, 4096, UPPER_BOUND_MAX_PARALLELISM])))
    return max_p, draw(st.integers(1, min(max_p, 600)))


@settings(max_examples=200, deadline=None)
@given(_parallelisms())
def test_property_every_key_group_is_assigned_to_exactly_one_subtask(case):
    max_p, p = case
    ranges = [compute_key_group_range_for_operator_index(max_p, p, i) for i in range(p)]
    # contiguous, non-empty, in order, covering [0, max_p) without overlap
    assert ranges[0].start_key_group == 0 and ranges[-1].end_key_group == max_p - 1
    for a, b in zip(ranges, ranges[1:]):
        assert b.start_key_group == a.end_key_group + 1
    assert all(r.number_of_key_groups >= 1 for r in ranges)
    assert max(r.number_of_key_groups for r in ranges) - min(r.number_of_key_groups for r in ranges) <= 1
    for i, r in enumerate(ranges):
        for kg in (r.start_key_group, r.end_key_group, (r.start_key_group + r.end_key_group) // 2):
            assert compute_operator_index_for_key_group(max_p, p, kg) == i


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=12), st.booleans()), _parallelisms())
def test_property_key_assignment_is_stable_and_consistent(key, case):
    max_p, p = case
    kg = assign_to_key_group(key, max_p)
    assert 0 <= kg < max_p and assign_to_key_group(key, max_p) == kg
    index = assign_key_to_parallel_operator(key, max_p, p)
    assert kg in compute_key_group_range_for_operator_index(max_p, p, index)
