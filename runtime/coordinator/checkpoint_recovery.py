"""What a new JobManager recovers after the old one died: the completed checkpoints and the checkpoint id counter.

How this works: a JobManager failover loses everything the coordinator held in memory (pending checkpoints,
statistics, failure counts), but not what high availability persisted: the list of completed checkpoints (the
``DefaultCompletedCheckpointStore``'s pointers, in the checkpoint storage) and the checkpoint id counter.
``recover_completed_checkpoint_store`` reads that list and retrieves every checkpoint it names, oldest first,
through ``CheckpointStorage.load_checkpoint`` (its ``_metadata`` must be the very file the list points to, hold
that checkpoint, have been written to that directory, and every state file must match its handle), and
rebuilds a ``DefaultCompletedCheckpointStore`` holding them, each a ``CompletedCheckpoint`` with the job's
checkpoint properties (a restored savepoint keeps its own), so the recovered coordinator subsumes and discards
them as the old one would have. Nothing of the old JobManager's memory is used: the storage forgets what it
knew first.

What Flink does when a listed checkpoint cannot be read, and what this does: Flink's
``DefaultCompletedCheckpointStoreUtils.retrieveCompletedCheckpoints`` retrieves every checkpoint of the HA
store and, for any one that cannot be retrieved (an ``IOException``: the handle's file is missing, unreadable
or broken), throws ``FlinkException("Could not retrieve checkpoint <id> from state handle under <name>. This
indicates that the retrieved state handle is broken. Try cleaning the state handle store.")``. No checkpoint is
skipped: Flink stopped tolerating retrieval failures in 1.14, because running on with an incomplete set of
checkpoints can violate consistency (older versions skipped unreadable ones with a warning and failed only when
none could be read).
The exception fails the creation of the JobMaster, and the job ends ``FAILED`` (a
``JobInitializationException``). Here the same failure is a ``CheckpointRecoveryError`` naming the checkpoint,
the file and the problem, which the JobMaster turns into the run's ``FAILED`` outcome with that reason. A
damaged older checkpoint fails the recovery as a damaged newest one does; a checkpoint missing from the list
was never completed (or was subsumed), so no run goes on as if a completed checkpoint had never existed.

The id counter is not rebuilt: the caller hands the new coordinator the same (persisted) counter, so ids keep
increasing above every id the old coordinator used, pending ones included. ``retire_coordinator`` closes the
dead coordinator's statistics (its pending checkpoints failed as ``CHECKPOINT_COORDINATOR_SHUTDOWN``, for the
run's record only: nobody is told) and ``next_attempt_number`` gives the new deployment attempt numbers no
earlier attempt used. Mirrors Flink's ``PerJobCheckpointRecoveryFactory``
(``createRecoveredCompletedCheckpointStore``, ``getCheckpointIdCounter``) and
``DefaultCompletedCheckpointStoreUtils.retrieveCompletedCheckpoints``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from barriersim.runtime.coordinator.completed_store import DefaultCompletedCheckpointStore
from barriersim.runtime.coordinator.configuration import CheckpointCoordinatorConfiguration
from barriersim.runtime.coordinator.pending_checkpoint import CompletedCheckpoint
from barriersim.runtime.coordinator.properties import CheckpointProperties
from barriersim.runtime.coordinator.stats_tracker import CheckpointStatsTracker
from barriersim.runtime.failure_reason import CheckpointFailureReason
from barriersim.runtime.storage.errors import CheckpointStorageError


class CheckpointRecoveryError(Exception):
    """A listed checkpoint (or the list itself) could not be read while recovering the store; the one-line
    message names the checkpoint, the file and the problem."""


@dataclass(frozen=True)
class RecoveredStore:
    store: DefaultCompletedCheckpointStore
    recovered_ids: tuple[int, ...]  # oldest first


def recover_completed_checkpoint_store(job_id: str, storage, config: CheckpointCoordinatorConfiguration,
                                       on_error: Callable[[str], None] | None = None) -> RecoveredStore:
    """Rebuild the completed checkpoint store of ``job_id`` from ``storage``'s completed-checkpoint list
    (a ``CheckpointStorage``); ``on_error`` goes to the new store. Raises ``CheckpointRecoveryError``."""
    storage.forget_completed_checkpoints()
    try:
        pointers = storage.completed_checkpoint_pointers() or ()
    except CheckpointStorageError as e:
        raise CheckpointRecoveryError(f"job {job_id}: could not read the completed-checkpoint list: {e}") from e
    props = CheckpointProperties.for_checkpoint(config.retention_policy)
    loaded: list[CompletedCheckpoint] = []
    for pointer in pointers:  # oldest first, as Flink sorts the handles by name
        try:
            metadata = storage.load_checkpoint(pointer).metadata
        except CheckpointStorageError as e:
            problem = str(e)
            if problem.startswith(pointer.metadata_pointer + ": "):  # the file is named once
                problem = problem[len(pointer.metadata_pointer) + 2:]
            raise CheckpointRecoveryError(
                f"job {job_id}: could not retrieve checkpoint {pointer.checkpoint_id} from {pointer.metadata_pointer}, "
                f"which the completed-checkpoint list names: {problem}"
            ) from e
        kind = CheckpointProperties.for_unclaimed_snapshot() if pointer.is_savepoint else props
        loaded.append(CompletedCheckpoint.from_metadata(job_id, metadata, kind, pointer.external_pointer))
    store = DefaultCompletedCheckpointStore(config.max_retained_checkpoints, storage, loaded, on_error)
    return RecoveredStore(store, tuple(c.checkpoint_id for c in loaded))


def retire_coordinator(coordinator, now_ms: int) -> CheckpointStatsTracker:
    """The statistics of a coordinator whose JobManager died, closed: its pending checkpoints are lost."""
    for cid in sorted(coordinator.pending_checkpoints):
        coordinator.stats.report_failed_checkpoint(cid, now_ms, CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN,
                                                   "the JobManager failed; its pending checkpoints are lost")
    return coordinator.stats


def next_attempt_number(coordinator) -> int:
    """The first attempt number of a recovered JobManager's deployment: above every attempt the old one made."""
    return 1 + max(e.attempt_id.attempt_number for e in coordinator.executions.values())
