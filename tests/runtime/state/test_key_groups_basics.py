"""Key-group assignment basics the hash partitioner relies on (Flink's KeyGroupRangeAssignment)."""

from barriersim.runtime.state.key_groups import (
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
    java_hash_code,
)


def test_java_hash_codes_match_java():
    assert java_hash_code("hello") == 99162322  # "hello".hashCode()
    assert java_hash_code(7) == 7
    assert java_hash_code(1 << 40) == 256  # Long.hashCode(1L << 40)


def test_every_key_group_belongs_to_the_subtask_whose_range_holds_it():
    for parallelism in (1, 2, 3, 7, 128):
        ranges = [compute_key_group_range_for_operator_index(128, parallelism, i) for i in range(parallelism)]
        assert sum(r.number_of_key_groups for r in ranges) == 128
        for kg in range(128):
            index = compute_operator_index_for_key_group(128, parallelism, kg)
            assert kg in ranges[index]


def test_assignment_is_stable_and_in_range():
    groups = [assign_to_key_group(k, 128) for k in range(1000)]
    assert groups == [assign_to_key_group(k, 128) for k in range(1000)]
    assert min(groups) >= 0 and max(groups) < 128 and len(set(groups)) > 100
