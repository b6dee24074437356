"""What a new JobManager recovers after the old one died: the completed checkpoints and the checkpoint id counter.

How this works: a JobManager failover loses everything the coordinator held in memory (pending checkpoints,
statistics, failure counts), but not what high availability persisted: the pointers to the completed
checkpoints and the checkpoint id counter. ``recover_completed_checkpoint_store`` rebuilds the
``StandaloneCompletedCheckpointStore`` from the checkpoint storage's retained checkpoints (oldest first, at most
``max_retained`` of the newest), each as a ``CompletedCheckpoint`` with the job's checkpoint properties, so the
recovered coordinator subsumes and discards them as the old one would have. A retained checkpoint whose
``_metadata`` cannot be read fails the recovery (``CheckpointRecoveryError`` naming it), as Flink's
``retrieveCompletedCheckpoints`` does: a broken handle must be looked at, not silently skipped. The id counter is not rebuilt: the caller hands the new coordinator the same (persisted) counter, so
ids keep increasing above every id the old coordinator used, pending ones included. ``retire_coordinator``
closes the dead coordinator's statistics (its pending checkpoints failed as ``CHECKPOINT_COORDINATOR_SHUTDOWN``,
for the run's record only: nobody is told) and ``next_attempt_number`` gives the new deployment attempt numbers
no earlier attempt used. Mirrors Flink's
``PerJobCheckpointRecoveryFactory`` (``createRecoveredCompletedCheckpointStore``, ``getCheckpointIdCounter``)
and ``DefaultCompletedCheckpointStoreUtils.retrieveCompletedCheckpoints``.
"""

from __future__ import annotations

from dataclasses import dataclass

from barriersim.runtime.coordinator.completed_store import StandaloneCompletedCheckpointStore
from barriersim.runtime.coordinator.configuration import CheckpointCoordinatorConfiguration
from barriersim.runtime.coordinator.pending_checkpoint import CompletedCheckpoint
from barriersim.runtime.coordinator.properties import CheckpointProperties
from barriersim.runtime.coordinator.stats_tracker import CheckpointStatsTracker
from barriersim.runtime.failure_reason import CheckpointFailureReason
from barriersim.runtime.storage.errors import CheckpointStorageError


class CheckpointRecoveryError(Exception):
    """A retained checkpoint could not be read while recovering the store (naming the checkpoint and the file)."""


@dataclass(frozen=True)
class RecoveredStore:
    store: StandaloneCompletedCheckpointStore
    recovered_ids: tuple[int, ...]  # oldest first


def recover_completed_checkpoint_store(job_id: str, storage, config: CheckpointCoordinatorConfiguration) -> RecoveredStore:
    """Rebuild the completed checkpoint store of ``job_id`` from ``storage`` (a ``CheckpointStorage``)."""
    props = CheckpointProperties.for_checkpoint(config.retention_policy)
    loaded: list[CompletedCheckpoint] = []
    for location in storage.list_retained_checkpoints():  # newest first
        if len(loaded) == config.max_retained_checkpoints:
            break
        try:
            metadata = storage.load_checkpoint(location).metadata
        except CheckpointStorageError as e:
            raise CheckpointRecoveryError(
                f"job {job_id}: could not retrieve checkpoint {location.checkpoint_id} from {location.metadata_pointer} "
                f"while recovering the completed checkpoint store: {e}"
            ) from e
        loaded.append(CompletedCheckpoint.from_metadata(job_id, metadata, props, location.external_pointer))
    loaded.reverse()  # oldest first: Flink's retrieveCompletedCheckpoints orders them chronologically
    store = StandaloneCompletedCheckpointStore(config.max_retained_checkpoints)
    for checkpoint in loaded:
        store.add_checkpoint_and_subsume_oldest_one(checkpoint)
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
