"""The rule of a partitioner for the in-flight data of an unaligned checkpoint when a vertex is rescaled: which old
subtasks a new subtask takes over.

Mirrors Flink's ``SubtaskStateMapper`` and the partitioners' ``getUpstreamSubtaskStateMapper`` /
``getDownstreamSubtaskStateMapper``. See docs/state-and-rescaling.md, "Subtask state mappers".
"""

from __future__ import annotations

import enum

from barriersim.runtime.jobgraph import Partitioner
from barriersim.runtime.state.key_groups import (
    UPPER_BOUND_MAX_PARALLELISM,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
)
from barriersim.runtime.state.rescale_mappings import RescaleMappings

_EMPTY: tuple[int, ...] = ()


class UnsupportedRescalingError(ValueError):
    """In-flight data of a channel whose partitioner cannot be rescaled (Flink's ``UNSUPPORTED`` mapper)."""


class SubtaskStateMapper(enum.Enum):
    """Flink's ``SubtaskStateMapper``: the old subtasks a new subtask reads in-flight data of on rescale."""

    ARBITRARY = "ARBITRARY"
    FIRST = "FIRST"
    FULL = "FULL"
    RANGE = "RANGE"
    ROUND_ROBIN = "ROUND_ROBIN"
    UNSUPPORTED = "UNSUPPORTED"

    @property
    def is_ambiguous(self) -> bool:
        """Whether several new subtasks may take the same old subtask (the data must then be filtered)."""
        return self in (SubtaskStateMapper.FULL, SubtaskStateMapper.RANGE)

    def old_subtasks(
        self, new_subtask_index: int, old_number_of_subtasks: int, new_number_of_subtasks: int
    ) -> tuple[int, ...]:
        if self in (SubtaskStateMapper.ARBITRARY, SubtaskStateMapper.ROUND_ROBIN):
            return tuple(range(new_subtask_index, old_number_of_subtasks, new_number_of_subtasks))
        if self is SubtaskStateMapper.FIRST:
            return tuple(range(old_number_of_subtasks)) if new_subtask_index == 0 else _EMPTY
        if self is SubtaskStateMapper.FULL:
            return tuple(range(old_number_of_subtasks))
        if self is SubtaskStateMapper.RANGE:
            # the actual max parallelism cancels out
            max_p = UPPER_BOUND_MAX_PARALLELISM
            new_range = compute_key_group_range_for_operator_index(max_p, new_number_of_subtasks, new_subtask_index)
            start = compute_operator_index_for_key_group(max_p, old_number_of_subtasks, new_range.start_key_group)
            end = compute_operator_index_for_key_group(max_p, old_number_of_subtasks, new_range.end_key_group)
            return tuple(range(start, end + 1))
        raise UnsupportedRescalingError(
            "Cannot rescale the given pointwise partitioner. Did you change the partitioner to forward or rescale? "
            "It may also help to add an explicit shuffle()."
        )

    def new_to_old_subtasks_mapping(self, old_parallelism: int, new_parallelism: int) -> RescaleMappings:
        """Flink's ``getNewToOldSubtasksMapping``: new subtask index -> old subtask indexes."""
        return RescaleMappings.of(
            (self.old_subtasks(i, old_parallelism, new_parallelism) for i in range(new_parallelism)), old_parallelism
        )


def upstream_mapper(partitioner: Partitioner) -> SubtaskStateMapper:
    """The mapper of the producing side of an edge (``StreamPartitioner.getUpstreamSubtaskStateMapper``)."""
    if partitioner in (Partitioner.FORWARD, Partitioner.BROADCAST):
        return SubtaskStateMapper.UNSUPPORTED
    return SubtaskStateMapper.ARBITRARY


def downstream_mapper(partitioner: Partitioner) -> SubtaskStateMapper:
    """The mapper of the consuming side of an edge (``StreamPartitioner.getDownstreamSubtaskStateMapper``)."""
    if partitioner is Partitioner.HASH:
        return SubtaskStateMapper.RANGE
    if partitioner is Partitioner.REBALANCE:
        return SubtaskStateMapper.ROUND_ROBIN
    return SubtaskStateMapper.UNSUPPORTED
