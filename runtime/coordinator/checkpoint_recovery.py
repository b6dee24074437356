"""What a new JobManager recovers after the old one died: the completed checkpoint store and the id counter.

``recover_completed_checkpoint_store`` reads the checkpoint storage's completed-checkpoint list (Flink's HA store of
completed checkpoints), checks it against the ``chk-<n>/_metadata`` files the storage holds (a missing list beside
completed checkpoints, or one older than the newest of them, is a ``CompletedCheckpointStoreMismatchError`` naming
both, never a silent restart from the sources) and retrieves every checkpoint it names, oldest first (any one that
cannot be read fails the recovery, as Flink's ``DefaultCompletedCheckpointStoreUtils.retrieveCompletedCheckpoints``
does). ``retire_coordinator`` closes the dead coordinator's statistics and ``next_attempt_number`` numbers the new
deployment's attempts. docs/recovery-store.md says how, what Flink does and where barriersim goes further.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from barriersim.runtime.coordinator.checkpoint_coordinator import CheckpointCoordinator
from barriersim.runtime.coordinator.completed_store import DefaultCompletedCheckpointStore
from barriersim.runtime.coordinator.configuration import CheckpointCoordinatorConfiguration
from barriersim.runtime.coordinator.pending_checkpoint import CompletedCheckpoint
from barriersim.runtime.coordinator.properties import CheckpointProperties
from barriersim.runtime.coordinator.stats_tracker import CheckpointStatsTracker
from barriersim.runtime.failure_reason import CheckpointFailureReason
from barriersim.runtime.storage.checkpoint_storage import (
    CheckpointStorage,
    CompletedCheckpointPointer,
    CompletedCheckpointStorageLocation,
)
from barriersim.runtime.storage.errors import CheckpointStorageError


class CheckpointRecoveryError(Exception):
    """A listed checkpoint (or the list itself) could not be read while recovering the store; the one-line
    message names the checkpoint, the file and the problem."""


class CompletedCheckpointStoreMismatchError(CheckpointRecoveryError):
    """The completed-checkpoint list is missing, or older than completed checkpoints the storage holds (``newer``:
    their locations, newest first); the message names the list and those checkpoints' ``_metadata``."""

    def __init__(self, message: str, newer: tuple[CompletedCheckpointStorageLocation, ...]):
        super().__init__(message)
        self.newer = newer


@dataclass(frozen=True)
class RecoveredStore:
    store: DefaultCompletedCheckpointStore
    recovered_ids: tuple[int, ...]  # oldest first


def recover_completed_checkpoint_store(
    job_id: str,
    storage: CheckpointStorage,
    config: CheckpointCoordinatorConfiguration,
    on_error: Callable[[str], None] | None = None,
) -> RecoveredStore:
    """Rebuild the completed checkpoint store of ``job_id`` from ``storage``'s completed-checkpoint list
    (a ``CheckpointStorage``); ``on_error`` goes to the new store. Raises ``CheckpointRecoveryError``."""
    storage.forget_completed_checkpoints()
    try:
        listed = storage.completed_checkpoint_pointers()
    except CheckpointStorageError as e:
        raise CheckpointRecoveryError(f"job {job_id}: could not read the completed-checkpoint list: {e}") from e
    check_list_against_storage(job_id, storage, listed)
    pointers = listed or ()
    props = CheckpointProperties.for_checkpoint(config.retention_policy)
    loaded: list[CompletedCheckpoint] = []
    for pointer in pointers:  # oldest first, as Flink sorts the handles by name
        try:
            metadata = storage.load_checkpoint(pointer).metadata
        except CheckpointStorageError as e:
            problem = str(e)
            if problem.startswith(pointer.metadata_pointer + ": "):  # the file is named once
                problem = problem[len(pointer.metadata_pointer) + 2 :]
            raise CheckpointRecoveryError(
                f"job {job_id}: could not retrieve checkpoint {pointer.checkpoint_id} from {pointer.metadata_pointer}, "
                f"which the completed-checkpoint list names: {problem}"
            ) from e
        kind = CheckpointProperties.for_unclaimed_snapshot() if pointer.is_savepoint else props
        loaded.append(CompletedCheckpoint.from_metadata(job_id, metadata, kind, pointer.external_pointer))
    store = DefaultCompletedCheckpointStore(config.max_retained_checkpoints, storage, loaded, on_error)
    return RecoveredStore(store, tuple(c.checkpoint_id for c in loaded))


def check_list_against_storage(
    job_id: str, storage: CheckpointStorage, listed: tuple[CompletedCheckpointPointer, ...] | None
) -> None:
    """The completed-checkpoint list (``listed``; None: there is none) is not the only witness of what completed:
    every completed checkpoint of the job's directory (its ``_metadata`` written) must be no newer than the newest
    checkpoint the list names. Older ones may stay (a discard that failed); one with no ``_metadata`` never
    completed. Raises ``CompletedCheckpointStoreMismatchError`` naming the list and the newer checkpoints."""
    try:
        present = storage.list_retained_checkpoints()  # newest first
    except CheckpointStorageError as e:
        raise CheckpointRecoveryError(
            f"job {job_id}: could not list its checkpoints to check the completed-checkpoint list against them: {e}"
        ) from e
    newest_listed = max((p.checkpoint_id for p in listed or ()), default=None)
    newer = tuple(loc for loc in present if newest_listed is None or loc.listed_checkpoint_id > newest_listed)
    if not newer:
        return
    name = storage.completed_checkpoints_list_name
    files = ", ".join(loc.metadata_pointer for loc in newer[:3]) + (
        f" and {len(newer) - 3} more" if len(newer) > 3 else ""
    )
    ids = ", ".join(str(loc.checkpoint_id) for loc in reversed(newer))
    if listed is None:
        state = "is missing, but the storage holds"
    elif newest_listed is None:
        state = "names no checkpoint, but the storage holds"
    else:
        state = f"(newest: checkpoint {newest_listed}) is older than the storage's"
    raise CompletedCheckpointStoreMismatchError(
        f"job {job_id}: the completed-checkpoint list {name} {state} completed checkpoint(s) {ids} ({files}), which "
        "it does not name: it lost their completion (rolled back or deleted), or the JobManager died between "
        "writing a checkpoint's metadata and listing it; not recovering from the list alone",
        newer,
    )


def retire_coordinator(coordinator: CheckpointCoordinator, now_ms: int) -> CheckpointStatsTracker:
    """The statistics of a coordinator whose JobManager died, closed: its pending checkpoints are lost."""
    stats = coordinator.checkpoint_stats()
    for cid in sorted(coordinator.pending_checkpoints()):
        stats.report_failed_checkpoint(
            cid,
            now_ms,
            CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN,
            "the JobManager failed; its pending checkpoints are lost",
        )
    return stats


def next_attempt_number(coordinator: CheckpointCoordinator) -> int:
    """The first attempt number of a recovered JobManager's deployment: above every attempt the old one made."""
    return 1 + max(e.attempt_id.attempt_number for e in coordinator.executions().values())
