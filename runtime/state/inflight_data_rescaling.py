"""How a restored subtask maps the in-flight data of an unaligned checkpoint taken at another parallelism.

Mirrors Flink's ``InflightDataRescalingDescriptor`` with its ``InflightDataGateOrPartitionRescalingDescriptor`` and
``MappingType``. See docs/state-and-rescaling.md, "In-flight data rescaling descriptors".
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from barriersim.runtime.state.rescale_mappings import RescaleMappings

SYMMETRIC_IDENTITY = RescaleMappings.identity(2**31 - 1, 2**31 - 1)


class MappingType(enum.Enum):
    IDENTITY = "IDENTITY"
    RESCALING = "RESCALING"


@dataclass(frozen=True)
class InflightDataGateOrPartitionRescalingDescriptor:
    old_subtask_indexes: tuple[int, ...]
    rescale_mappings: RescaleMappings
    ambiguous_subtask_indexes: frozenset[int] = frozenset()
    mapping_type: MappingType = MappingType.RESCALING

    @property
    def is_identity(self) -> bool:
        return self.mapping_type is MappingType.IDENTITY


NO_STATE = InflightDataGateOrPartitionRescalingDescriptor((), SYMMETRIC_IDENTITY, frozenset(), MappingType.IDENTITY)


@dataclass(frozen=True)
class InflightDataRescalingDescriptor:
    """Per gate (input side) or per result partition (output side) of one subtask."""

    gate_or_partition_descriptors: tuple[InflightDataGateOrPartitionRescalingDescriptor, ...] = field(default=())

    @property
    def is_no_rescale(self) -> bool:
        return not self.gate_or_partition_descriptors

    def descriptor(self, gate_or_partition_index: int) -> InflightDataGateOrPartitionRescalingDescriptor:
        if self.is_no_rescale:
            return NO_STATE
        return self.gate_or_partition_descriptors[gate_or_partition_index]

    def old_subtask_indexes(self, gate_or_partition_index: int) -> tuple[int, ...]:
        return self.descriptor(gate_or_partition_index).old_subtask_indexes

    def channel_mapping(self, gate_or_partition_index: int) -> RescaleMappings:
        return self.descriptor(gate_or_partition_index).rescale_mappings

    def is_ambiguous(self, gate_or_partition_index: int, old_subtask_index: int) -> bool:
        return old_subtask_index in self.descriptor(gate_or_partition_index).ambiguous_subtask_indexes


NO_RESCALE = InflightDataRescalingDescriptor()
