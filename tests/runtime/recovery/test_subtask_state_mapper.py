"""The partitioners' subtask state mappers and their mappings: ports of Flink's SubtaskStateMapperTest and of the
parts of RescaleMappingsTest that fit, and the mappers of barriersim's partitioners."""

import pytest

from barriersim.runtime.jobgraph import Partitioner
from barriersim.runtime.recovery.subtask_state_mapper import (
    SubtaskStateMapper as M,
)
from barriersim.runtime.recovery.subtask_state_mapper import (
    UnsupportedRescalingError,
    downstream_mapper,
    upstream_mapper,
)
from barriersim.runtime.state.rescale_mappings import RescaleMappings


def mapping(m: M, old: int, new: int) -> list[list[int]]:
    rm = m.new_to_old_subtasks_mapping(old, new)
    return [list(rm.get_mapped_indexes(i)) for i in range(new)]


@pytest.mark.parametrize(
    "m, old, new, expected",
    [
        (M.FIRST, 3, 2, [[0, 1, 2], []]),
        (M.FIRST, 3, 3, [[0, 1, 2], [], []]),  # the optimization is done on call-site, as in Flink
        (M.FIRST, 3, 4, [[0, 1, 2], [], [], []]),
        (M.FULL, 3, 2, [[0, 1, 2], [0, 1, 2]]),
        (M.FULL, 3, 3, [[0, 1, 2]] * 3),
        (M.FULL, 3, 4, [[0, 1, 2]] * 4),
        (M.RANGE, 3, 2, [[0, 1], [1, 2]]),  # [0; 43) [43; 87) [87; 128) -> [0; 64) [64; 128)
        (M.RANGE, 10, 2, [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]),
        (M.RANGE, 10, 1, [list(range(10))]),
        (M.RANGE, 3, 3, [[0], [1], [2]]),
        (M.RANGE, 3, 4, [[0], [0, 1], [1, 2], [2]]),
        (M.RANGE, 3, 7, [[0], [0], [0, 1], [1], [1, 2], [2], [2]]),
        (M.ROUND_ROBIN, 10, 4, [[0, 4, 8], [1, 5, 9], [2, 6], [3, 7]]),
        (M.ROUND_ROBIN, 5, 4, [[0, 4], [1], [2], [3]]),
        (M.ROUND_ROBIN, 5, 2, [[0, 2, 4], [1, 3]]),
        (M.ROUND_ROBIN, 5, 1, [[0, 1, 2, 3, 4]]),
        (M.ROUND_ROBIN, 10, 10, [[i] for i in range(10)]),
        (M.ROUND_ROBIN, 1, 1, [[0]]),
        (M.ROUND_ROBIN, 4, 10, [[0], [1], [2], [3]] + [[]] * 6),
        (M.ROUND_ROBIN, 2, 5, [[0], [1], [], [], []]),
        (M.ROUND_ROBIN, 1, 5, [[0], [], [], [], []]),
        (M.ARBITRARY, 5, 2, [[0, 2, 4], [1, 3]]),
    ],
)
def test_new_to_old_subtasks_mapping(m, old, new, expected):
    """Port of Flink SubtaskStateMapperTest (every case), and ARBITRARY, which is round robin."""
    assert mapping(m, old, new) == expected


def test_only_range_and_full_are_ambiguous_and_unsupported_refuses():
    assert {m for m in M if m.is_ambiguous} == {M.RANGE, M.FULL}
    with pytest.raises(UnsupportedRescalingError, match="explicit shuffle"):
        M.UNSUPPORTED.new_to_old_subtasks_mapping(2, 3)


def test_mappers_of_the_partitioners():
    """As Flink's partitioners: hash is range-mapped downstream, rebalance round robin; forward and broadcast
    cannot rescale in-flight data on either side; every other upstream side is arbitrary."""
    assert [downstream_mapper(p) for p in Partitioner] == [M.UNSUPPORTED, M.ROUND_ROBIN, M.RANGE, M.UNSUPPORTED]
    assert [upstream_mapper(p) for p in Partitioner] == [M.UNSUPPORTED, M.ARBITRARY, M.ARBITRARY, M.UNSUPPORTED]


def test_rescale_mappings_identity_invert_and_ambiguous_targets():
    """Adapted from Flink RescaleMappingsTest: a mapping that maps each index to itself (trailing sources without
    targets allowed) is the identity, all identities are equal; inverting maps targets back to sorted sources;
    targets that several sources take are ambiguous."""
    assert RescaleMappings.of([(0,), (1,), ()], 2).is_identity
    assert RescaleMappings.of([(0,), (1,), ()], 2) == RescaleMappings.identity(5, 7)
    assert not RescaleMappings.of([(0,), (0, 1), (1,)], 2).is_identity
    rm = RescaleMappings.of([(0, 2), (1,)], 3)
    assert rm.invert().get_mapped_indexes(2) == (0,) and rm.invert().get_mapped_indexes(1) == (1,)
    assert rm.invert().invert() == rm
    assert RescaleMappings.of([(0, 1), (1, 2)], 3).ambiguous_targets() == frozenset({1})
    assert RescaleMappings.of([(0,), (), ()], 1).get_mapped_indexes(7) == ()
    assert RescaleMappings.of([(1,), (), ()], 2).mappings == ((1,),)  # trailing empty targets omitted
