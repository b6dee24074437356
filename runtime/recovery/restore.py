"""Restore helpers: load a checkpoint from storage and assign its state to the job's subtasks.

How this works: ``restore_latest_checkpoint`` asks the storage for the newest loadable checkpoint (corrupt
newer ones are skipped and reported) and runs state assignment on it; ``restore_from_pointer`` does the same
for an explicit checkpoint/savepoint pointer. ``checkpoint_loader`` turns a storage into the plain
``Callable[[str], CheckpointMetadata]`` the coordinator accepts for restoring from a savepoint path.
Mirrors the restore path of Flink's ``CheckpointCoordinator.restoreLatestCheckpointedState`` /
``restoreSavepoint`` down to ``StateAssignmentOperation``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from barriersim.runtime.recovery.state_assignment_operation import (
    ExecutionJobVertexInfo,
    StateAssignment,
    assign_states,
)
from barriersim.runtime.state.snapshot import CheckpointMetadata
from barriersim.runtime.storage.checkpoint_storage import CheckpointStorage, LoadedCheckpoint


@dataclass(frozen=True)
class RestoredState:
    checkpoint: LoadedCheckpoint
    assignment: StateAssignment


def checkpoint_loader(storage: CheckpointStorage) -> Callable[[str], CheckpointMetadata]:
    """The loader the coordinator injects: pointer -> ``CheckpointMetadata`` (raises typed storage errors)."""
    return storage.load_checkpoint_metadata


def restore_latest_checkpoint(
    storage: CheckpointStorage, vertices: Iterable[ExecutionJobVertexInfo], *, allow_non_restored_state: bool = False
) -> RestoredState | None:
    """None when the storage retains no checkpoint (start fresh)."""
    loaded = storage.load_latest_checkpoint()
    if loaded is None:
        return None
    return RestoredState(
        loaded, assign_states(loaded.metadata, vertices, allow_non_restored_state=allow_non_restored_state)
    )


def restore_from_pointer(
    storage: CheckpointStorage,
    pointer: str,
    vertices: Iterable[ExecutionJobVertexInfo],
    *,
    allow_non_restored_state: bool = False,
) -> RestoredState:
    loaded = storage.load_checkpoint(pointer)
    return RestoredState(
        loaded, assign_states(loaded.metadata, vertices, allow_non_restored_state=allow_non_restored_state)
    )
