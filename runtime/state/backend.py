"""Keyed state backends' common ground: their configuration, the rows a keyed operator's state is made of, and a
full snapshot of them.

How this works: a keyed operator exposes its state as rows (``KeyedRows``: ``keyed_rows()`` yields
``(key_group, row)`` where the first ``ROW_KEY_WIDTH`` fields of ``row`` are the entry's key and the rest its
value; ``restore_state`` takes the rows back, per key group, as a ``KeyGroupsStateHandle``). The backends
(``heap_backend``, ``incremental``, chosen by ``backend_loader``) take the snapshots and restores; entries have a
modelled size (``StateBackendConfig.entry_bytes``; 0: the real encoded size). ``full_snapshot_work`` is the work of
a full snapshot for the cost model; ``state_from_rows`` / ``rows_from_state`` convert rows and a full snapshot.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol, cast

import msgpack

from barriersim.runtime.checkpoint_cost import SnapshotWork
from barriersim.runtime.settings import Between, setting
from barriersim.runtime.state.snapshot import (
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorSubtaskState,
)

MIB = 1024 * 1024


class StateBackendKind(enum.Enum):
    HEAP = "heap"  # Flink's HashMapStateBackend: full snapshots
    INCREMENTAL = "incremental"  # Flink's EmbeddedRocksDBStateBackend with incremental checkpoints


class StateBackendError(ValueError):
    """Settings a state backend cannot work with; ``str()`` names the scenario key."""


@dataclass(frozen=True)
class StateBackendConfig:
    """A scenario's ``[state]``: the backend and its figures. The incremental backend's defaults are RocksDB's as
    Flink configures it (``write_buffer_size`` 64 MiB, ``target_file_size_base`` 64 MiB,
    ``level0_file_num_compaction_trigger`` 4, ``max_bytes_for_level_base`` 256 MiB, level multiplier 10, 7
    levels)."""

    backend: StateBackendKind = setting(
        StateBackendKind.HEAP,
        "heap (full snapshots, Flink's "
        "HashMapStateBackend) or incremental (RocksDB-like "
        "sorted runs with incremental checkpoints)",
    )
    entry_bytes: int = setting(0, "modelled bytes of one state entry; 0: its real encoded size", Between(0, 1 << 30))
    write_buffer_bytes: int = setting(
        64 * MIB,
        "incremental: a memtable is flushed to a sorted run when it holds this much (RocksDB's write_buffer_size)",
        Between(1, 1 << 40),
    )
    target_file_bytes: int = setting(
        64 * MIB,
        "incremental: compaction cuts its output into files of this size (target_file_size_base)",
        Between(1, 1 << 40),
    )
    level0_compaction_trigger: int = setting(
        4,
        "incremental: level-0 runs that start a compaction into level 1 (level0_file_num_compaction_trigger)",
        Between(1, 1000),
    )
    max_bytes_for_level_base: int = setting(
        256 * MIB, "incremental: level 1's target size; level n's is this * level_multiplier^(n-1)", Between(1, 1 << 50)
    )
    level_multiplier: int = setting(
        10,
        "incremental: each level's target size over the previous one's (max_bytes_for_level_multiplier)",
        Between(1, 1000),
    )
    num_levels: int = setting(7, "incremental: the levels of the LSM tree", Between(2, 20))

    def __post_init__(self) -> None:
        object.__setattr__(self, "backend", _backend_kind(self.backend))
        for name in ("entry_bytes",):
            if getattr(self, name) < 0:
                raise StateBackendError(f"state.{name}: must be >= 0, got {getattr(self, name)}")
        for name in (
            "write_buffer_bytes",
            "target_file_bytes",
            "level0_compaction_trigger",
            "max_bytes_for_level_base",
            "level_multiplier",
        ):
            if getattr(self, name) < 1:
                raise StateBackendError(f"state.{name}: must be >= 1, got {getattr(self, name)}")
        if self.num_levels < 2:
            raise StateBackendError(f"state.num_levels: must be >= 2, got {self.num_levels}")


def _backend_kind(value: object) -> StateBackendKind:
    if isinstance(value, StateBackendKind):
        return value
    try:
        return StateBackendKind(value)
    except ValueError:
        raise StateBackendError(
            f"state.backend: must be one of {', '.join(k.value for k in StateBackendKind)}, got {value!r}"
        ) from None


class KeyedRows(Protocol):
    """What a keyed operator gives its backend."""

    ROW_KEY_WIDTH: int

    def keyed_rows(self) -> Iterable[tuple[int, tuple[Any, ...]]]: ...

    def entry_count(self) -> int: ...

    def snapshot_state(self) -> OperatorSubtaskState: ...

    def restore_state(self, state: OperatorSubtaskState) -> None: ...


def full_snapshot_work(state: OperatorSubtaskState, memory_threshold: int) -> SnapshotWork:
    """The work of writing every state stream of ``state`` (channel state aside: its writer charges it)."""
    sizes = [h.state_size for h in state.managed_keyed_state] + [h.state_size for h in state.managed_operator_state]
    total = sum(sizes)
    return SnapshotWork(
        copied_bytes=total,
        uploaded_bytes=total,
        files=sum(1 for size in sizes if size > 0 and size >= memory_threshold),
    )


def full_keyed_snapshot(operator: KeyedRows, entry_bytes: int) -> OperatorSubtaskState:
    """Every entry of ``operator``, per key group (``KeyGroupsStateHandle``: the canonical format of a full snapshot
    and of a savepoint), with the modelled size ``entry_bytes`` per entry when that is set."""
    state = operator.snapshot_state()
    if entry_bytes:
        state = OperatorSubtaskState(
            managed_keyed_state=tuple(
                KeyGroupsStateHandle(
                    h.key_group_range, cast(KeyGroupsStateHandle, h).key_groups, operator.entry_count() * entry_bytes
                )
                for h in state.managed_keyed_state
            )
        )
    return state


def entry_size(row: tuple[Any, ...], entry_bytes: int) -> int:
    """An entry's modelled bytes: ``entry_bytes``, or its real msgpack size when that is 0."""
    return entry_bytes if entry_bytes else len(msgpack.packb(list(row), use_bin_type=True))


def state_from_rows(
    rows: Iterable[tuple[int, tuple[Any, ...]]], key_group_range: KeyGroupRange, modelled_size: int | None = None
) -> OperatorSubtaskState:
    """Rows as a full snapshot: per key group, the sorted rows packed with msgpack (the keyed operators' own
    encoding), only the key groups in ``key_group_range``."""
    by_group: dict[int, list[list[Any]]] = defaultdict(list)
    for kg, row in rows:
        if kg in key_group_range:
            by_group[kg].append(list(row))
    handle = KeyGroupsStateHandle(
        key_group_range,
        {kg: msgpack.packb(sorted(entries), use_bin_type=True) for kg, entries in sorted(by_group.items())},
        modelled_size,
    )
    return OperatorSubtaskState(managed_keyed_state=(handle,))


def rows_from_state(state: OperatorSubtaskState | None) -> list[tuple[int, tuple[Any, ...]]]:
    """The rows of a full snapshot's key groups."""
    rows: list[tuple[int, tuple[Any, ...]]] = []
    if state is None:
        return rows
    for handle in state.managed_keyed_state:
        if isinstance(handle, KeyGroupsStateHandle):
            for kg, data in handle.key_groups.items():
                rows.extend((kg, tuple(row)) for row in msgpack.unpackb(data, raw=False, strict_map_key=False))
    return rows
