"""What a checkpoint holds: the state of every subtask, grouped by operator, plus the master states; plain bytes and
msgpack, never pickle.

Mirrors Flink's ``KeyGroupRange``, ``KeyGroupsStateHandle``, ``IncrementalRemoteKeyedStateHandle``,
``OperatorStateHandle``, ``InputChannelStateHandle``, ``ResultSubpartitionStateHandle``, ``OperatorSubtaskState``,
``TaskStateSnapshot``, ``OperatorState``, ``MasterState`` and ``CheckpointMetadata``. See
docs/state-and-rescaling.md, "What a checkpoint holds".
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeAlias

from barriersim.runtime.events import Buffer, InputChannelInfo, ResultSubpartitionInfo
from barriersim.runtime.ids import OperatorID
from barriersim.runtime.state.inflight_data_rescaling import NO_RESCALE, InflightDataRescalingDescriptor


@dataclass(frozen=True, order=True)
class KeyGroupRange:
    """An inclusive range of key groups ``[start_key_group, end_key_group]``; empty when end < start."""

    start_key_group: int
    end_key_group: int

    @staticmethod
    def empty() -> KeyGroupRange:
        return KeyGroupRange(0, -1)

    @staticmethod
    def of(start_key_group: int, end_key_group: int) -> KeyGroupRange:
        """Flink's ``KeyGroupRange.of``: validates (no negative bounds) and maps any empty range to ``empty()``."""
        if start_key_group < 0 or end_key_group < 0:
            raise ValueError(f"key group range [{start_key_group}, {end_key_group}] has a negative bound")
        if end_key_group < start_key_group:
            return KeyGroupRange.empty()
        return KeyGroupRange(start_key_group, end_key_group)

    @property
    def number_of_key_groups(self) -> int:
        return max(0, self.end_key_group - self.start_key_group + 1)

    def __contains__(self, key_group: int) -> bool:
        return self.start_key_group <= key_group <= self.end_key_group

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start_key_group, self.end_key_group + 1))

    def intersection(self, other: KeyGroupRange) -> KeyGroupRange:
        start = max(self.start_key_group, other.start_key_group)
        end = min(self.end_key_group, other.end_key_group)
        return KeyGroupRange(start, end) if start <= end else KeyGroupRange.empty()


@dataclass(frozen=True)
class KeyGroupsStateHandle:
    """Keyed state of a range of key groups: ``key_groups`` maps a key group to its encoded state.
    ``modelled_size``, when set, is the size the model gives this state (its entries' modelled bytes, as
    ``record_size`` models a record's), reported instead of the encoded bytes."""

    key_group_range: KeyGroupRange
    key_groups: Mapping[int, bytes] = field(default_factory=dict)
    modelled_size: int | None = None

    @cached_property  # a frozen value's size: computed once
    def state_size(self) -> int:
        if self.modelled_size is not None:
            return self.modelled_size
        return sum(len(v) for v in self.key_groups.values())

    @property
    def checkpointed_size(self) -> int:
        """A full snapshot uploads all of it (Flink's ``KeyGroupsStateHandle.getCheckpointedSize``)."""
        return self.state_size


@dataclass(frozen=True)
class SharedStateHandle:
    """A file of shared state (an incremental backend's sorted run) in the checkpoint storage's ``shared/``
    directory, or inline (``data``) where the storage keeps state in memory or below the memory threshold.
    ``key`` is its registration key in the ``SharedStateRegistry`` (Flink's ``SharedStateRegistryKey``: the
    physical file's id), unique per upload; ``size`` the real encoded bytes and ``crc32`` their checksum;
    ``state_size`` its modelled bytes. Mirrors Flink's ``FileStateHandle`` / ``ByteStreamStateHandle`` in
    ``CheckpointedStateScope.SHARED``."""

    key: str
    size: int
    crc32: int
    state_size: int
    data: bytes | None = None


@dataclass(frozen=True)
class PlaceholderStateHandle:
    """A reference to shared state an earlier completed checkpoint uploaded (Flink's
    ``PlaceholderStreamStateHandle``): the registry replaces it with the registered handle."""

    key: str
    state_size: int


@dataclass(frozen=True)
class HandleAndLocalPath:
    """One sorted run of an incremental snapshot: its local file name (``L<level>-<sequence>.sst``: where it sits in
    the backend's levels) and the handle of its upload or a placeholder (Flink's ``HandleAndLocalPath``)."""

    local_path: str
    handle: SharedStateHandle | PlaceholderStateHandle

    @property
    def is_placeholder(self) -> bool:
        return isinstance(self.handle, PlaceholderStateHandle)


@dataclass(frozen=True)
class IncrementalKeyedStateHandle:
    """An incremental snapshot of a keyed state backend (Flink's ``IncrementalRemoteKeyedStateHandle``): the
    backend's identity, its key groups, the checkpoint, its sorted runs as shared state (new uploads and
    placeholders), its private meta state (uploaded every time) and ``checkpointed_size``, what this checkpoint
    uploaded (Flink's ``persistedSizeOfThisCheckpoint``), against ``state_size``, all of it."""

    backend_id: str
    key_group_range: KeyGroupRange
    checkpoint_id: int
    shared_state: tuple[HandleAndLocalPath, ...] = ()
    meta_state: bytes = b""
    checkpointed_size: int = 0

    @property
    def state_size(self) -> int:
        return len(self.meta_state) + sum(entry.handle.state_size for entry in self.shared_state)

    @property
    def shared_handles(self) -> tuple[SharedStateHandle | PlaceholderStateHandle, ...]:
        return tuple(entry.handle for entry in self.shared_state)


# Flink's KeyedStateHandle: a full snapshot of key groups or an incremental one
KeyedStateHandle: TypeAlias = KeyGroupsStateHandle | IncrementalKeyedStateHandle


class OperatorStateDistributionMode(enum.Enum):
    """Flink's ``OperatorStateHandle.Mode``: how a named operator state is redistributed on restore."""

    SPLIT_DISTRIBUTE = "SPLIT_DISTRIBUTE"  # list state: partitions are split round-robin
    UNION = "UNION"  # union list state: every subtask gets all partitions
    BROADCAST = "BROADCAST"  # broadcast state: every subtask gets one (identical) copy


@dataclass(frozen=True)
class OperatorStateHandle:
    """Non-keyed (operator) list state: each named state is a list of encoded partitions that can be
    redistributed round-robin on rescale (Flink's ``OperatorStateHandle`` in SPLIT_DISTRIBUTE mode).

    ``distribution_modes`` names the mode of a state when it is not SPLIT_DISTRIBUTE (see ``mode_of``)."""

    states: Mapping[str, tuple[bytes, ...]] = field(default_factory=dict)
    distribution_modes: Mapping[str, OperatorStateDistributionMode] = field(default_factory=dict)

    def mode_of(self, name: str) -> OperatorStateDistributionMode:
        return self.distribution_modes.get(name, OperatorStateDistributionMode.SPLIT_DISTRIBUTE)

    @cached_property  # a frozen value's size: computed once
    def state_size(self) -> int:
        return sum(len(p) for parts in self.states.values() for p in parts)


# Flink's ChannelStateSerializerImpl.writeData writes each persisted buffer as an int length and its bytes, and
# ChannelStateCheckpointWriter.write sizes a channel's handle by what it wrote, lengths included
CHANNEL_STATE_LENGTH_BYTES = 4


def channel_state_size(buffers: tuple[Buffer, ...]) -> int:
    """The bytes a channel's persisted buffers take in the channel-state file: each its length and its data (an
    empty buffer, 4 bytes), which is what Flink's ``persisted_data`` and state sizes count for a handle written to a
    file of its own. A handle Flink keeps in memory (the JobManager's checkpoint storage, or a stream under the
    inline threshold) it rebuilds as an 8-byte header and the channel's data (``ChannelStatePendingResult.
    createHandle``, ``ChannelStateSerializerImpl.extractAndMerge``); barriersim counts every handle as a file's
    (docs/flink-2.3-divergences.md, item 5)."""
    return sum(CHANNEL_STATE_LENGTH_BYTES + b.size for b in buffers)


@dataclass(frozen=True)
class InputChannelStateHandle:
    """In-flight data of one input channel captured by an unaligned checkpoint."""

    subtask_index: int
    info: InputChannelInfo
    buffers: tuple[Buffer, ...] = ()

    @property
    def state_size(self) -> int:
        return channel_state_size(self.buffers)


@dataclass(frozen=True)
class ResultSubpartitionStateHandle:
    """In-flight data of one result subpartition (what an unaligned barrier overtook)."""

    subtask_index: int
    info: ResultSubpartitionInfo
    buffers: tuple[Buffer, ...] = ()

    @property
    def state_size(self) -> int:
        return channel_state_size(self.buffers)


@dataclass(frozen=True)
class OperatorSubtaskState:
    """The state of one operator in one subtask for one checkpoint."""

    managed_operator_state: tuple[OperatorStateHandle, ...] = ()
    managed_keyed_state: tuple[KeyedStateHandle, ...] = ()
    input_channel_state: tuple[InputChannelStateHandle, ...] = ()
    result_subpartition_state: tuple[ResultSubpartitionStateHandle, ...] = ()
    # Flink's FinishedOperatorSubtaskState: the subtask had finished when the checkpoint was taken (FLIP-147).
    is_finished: bool = False
    # Set on restore only (never checkpointed): how in-flight data taken at another parallelism maps onto this
    # subtask's channels (Flink's input/output rescaling descriptors), and the input gates and result partitions
    # whose recovered data ends with an EndOfChannelStateEvent (the edges whose in-flight data is rescaled).
    input_rescaling_descriptor: InflightDataRescalingDescriptor = NO_RESCALE
    output_rescaling_descriptor: InflightDataRescalingDescriptor = NO_RESCALE
    end_of_channel_state_gates: tuple[int, ...] = ()
    end_of_channel_state_partitions: tuple[int, ...] = ()

    @cached_property  # a frozen value's size: computed once
    def state_size(self) -> int:
        return (
            sum(h.state_size for h in self.managed_operator_state)
            + sum(h.state_size for h in self.managed_keyed_state)
            + self.in_flight_data_size
        )

    @cached_property  # a frozen value's size: computed once
    def checkpointed_size(self) -> int:
        """What this checkpoint wrote of it (Flink's ``OperatorSubtaskState.getCheckpointedSize``): an incremental
        snapshot's new uploads; everything of a full one, and all channel state."""
        return (
            sum(h.state_size for h in self.managed_operator_state)
            + sum(h.checkpointed_size for h in self.managed_keyed_state)
            + self.in_flight_data_size
        )

    @cached_property  # a frozen value's size: computed once
    def in_flight_data_size(self) -> int:
        return sum(h.state_size for h in self.input_channel_state) + sum(
            h.state_size for h in self.result_subpartition_state
        )

    @property
    def has_state(self) -> bool:
        return bool(
            self.managed_operator_state
            or self.managed_keyed_state
            or self.input_channel_state
            or self.result_subpartition_state
        )


FINISHED_OPERATOR_SUBTASK_STATE = OperatorSubtaskState(is_finished=True)


@dataclass(frozen=True)
class TaskStateSnapshot:
    """A task's acknowledgement payload: the subtask state of each operator it runs.

    ``is_task_finished`` / ``is_task_deployed_as_finished`` follow FLIP-147: a finished task reports it so
    the coordinator can mark its operators fully finished."""

    subtask_states_by_operator: Mapping[OperatorID, OperatorSubtaskState] = field(default_factory=dict)
    is_task_finished: bool = False
    is_task_deployed_as_finished: bool = False

    @property
    def state_size(self) -> int:
        return sum(s.state_size for s in self.subtask_states_by_operator.values())

    @property
    def checkpointed_size(self) -> int:
        return sum(s.checkpointed_size for s in self.subtask_states_by_operator.values())


@dataclass(frozen=True)
class OperatorState:
    """All subtask states of one operator in one checkpoint (Flink's ``OperatorState``)."""

    operator_id: OperatorID
    parallelism: int
    max_parallelism: int
    subtask_states: Mapping[int, OperatorSubtaskState] = field(default_factory=dict)
    coordinator_state: bytes | None = None
    fully_finished: bool = False

    @property
    def state_size(self) -> int:
        return sum(s.state_size for s in self.subtask_states.values()) + len(self.coordinator_state or b"")


@dataclass(frozen=True)
class MasterState:
    """State of a master hook (Flink's ``MasterState``): name, version and encoded bytes."""

    name: str
    version: int
    data: bytes


@dataclass(frozen=True)
class CheckpointMetadata:
    """What a completed checkpoint's ``_metadata`` file holds (Flink's ``CheckpointMetadata``)."""

    checkpoint_id: int
    operator_states: tuple[OperatorState, ...] = ()
    master_states: tuple[MasterState, ...] = ()

    @property
    def state_size(self) -> int:
        return sum(s.state_size for s in self.operator_states)


HANDLE_BYTES = 64  # what a reference to a state file takes in the _metadata (name, size, checksum)
MEMORY_THRESHOLD = 20 * 1024  # Flink's state.storage.fs.memory-threshold default


def metadata_bytes_estimate(states: Iterable[OperatorSubtaskState], memory_threshold: int) -> int:
    """About how many bytes the ``_metadata`` of a checkpoint of these ``OperatorSubtaskState``s takes: each
    subtask's keyed, operator and channel state inline below ``memory_threshold``, a file reference above; an
    incremental handle's shared runs inline if they travelled inline, else a reference each. For the cost model."""
    total = 0
    for state in states:
        keyed = 0
        for h in state.managed_keyed_state:
            if isinstance(h, IncrementalKeyedStateHandle):
                keyed += len(h.meta_state) + sum(
                    len(e.handle.data)
                    if isinstance(e.handle, SharedStateHandle) and e.handle.data is not None
                    else HANDLE_BYTES
                    for e in h.shared_state
                )
            else:
                keyed += sum(len(v) for v in h.key_groups.values())
        parts = (
            keyed,
            sum(len(p) for h in state.managed_operator_state for parts in h.states.values() for p in parts),
            state.in_flight_data_size,
        )
        total += HANDLE_BYTES + sum(part if part < memory_threshold else HANDLE_BYTES for part in parts)
    return total
