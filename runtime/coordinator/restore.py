"""Restoring a checkpoint or savepoint into this job. ``check_state_mapping`` decides whether a snapshot's operator
states fit the job's vertices (Flink's ``Checkpoints.loadAndValidateCheckpoint`` and
``StateAssignmentOperation.checkStateMappingCompleteness``; assigning them to subtasks is ``runtime/recovery``'s);
``CheckpointRestore``, a collaborator of ``CheckpointCoordinator``, restores the latest completed checkpoint or a
savepoint (Flink's ``restoreLatestCheckpointedStateInternal`` / ``restoreSavepoint``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.completed_store import StandaloneCompletedCheckpointStore
from barriersim.runtime.coordinator.completion import CheckpointCompletion
from barriersim.runtime.coordinator.id_counter import StandaloneCheckpointIDCounter
from barriersim.runtime.coordinator.master_hooks import MasterTriggerRestoreHook, reset_hooks, restore_master_hooks
from barriersim.runtime.coordinator.pending_checkpoint import CompletedCheckpoint
from barriersim.runtime.coordinator.plan import JobVertexInfo
from barriersim.runtime.coordinator.properties import CheckpointProperties
from barriersim.runtime.coordinator.shared_state_registry import RecoveryClaimMode, SharedStateRegistry
from barriersim.runtime.coordinator.stats_tracker import CheckpointStatsTracker
from barriersim.runtime.faults.mutations import PlantedBug, is_planted
from barriersim.runtime.state.snapshot import CheckpointMetadata
from barriersim.runtime.storage.memory_storage import external_path


class StateRestoreError(Exception):
    """The snapshot cannot be restored into this job (naming the snapshot and the operator)."""


def check_state_mapping(
    metadata: CheckpointMetadata, vertices: Sequence[JobVertexInfo], allow_non_restored_state: bool, source: str = ""
) -> list[str]:
    """Return the skipped (non-restored) operator ids; raise ``StateRestoreError`` if restoring is not allowed."""
    where = f" ({source})" if source else ""
    vertex_of_operator = {op: v for v in vertices for op in v.operators}
    skipped: list[str] = []
    for state in metadata.operator_states:
        vertex = vertex_of_operator.get(state.operator_id)
        if vertex is None:
            has_state = state.state_size > 0 or any(s.has_state for s in state.subtask_states.values())
            if allow_non_restored_state or not has_state:
                skipped.append(state.operator_id)
                continue
            raise StateRestoreError(
                f"restore checkpoint {metadata.checkpoint_id}{where}: cannot map the state of operator "
                f"{state.operator_id!r} to the new program, because the operator is not available in the new "
                f"program; set allow_non_restored_state to skip it"
            )
        if not state.fully_finished and state.max_parallelism != vertex.max_parallelism and state.subtask_states:
            raise StateRestoreError(
                f"restore checkpoint {metadata.checkpoint_id}{where}: the max parallelism of operator "
                f"{state.operator_id!r} changed from {state.max_parallelism} to {vertex.max_parallelism}"
            )
    return skipped


def _with_sources_of_previous(
    metadata: CheckpointMetadata, retained: Sequence[CompletedCheckpoint], vertices: Sequence[JobVertexInfo]
) -> CheckpointMetadata:
    """The planted bug ``SOURCE_POSITIONS_FROM_PREVIOUS_CHECKPOINT``: ``metadata`` with its source operators' states
    (their read positions) taken from the retained checkpoint before it."""
    previous = [c for c in retained if c.checkpoint_id < metadata.checkpoint_id and not c.props.is_savepoint]
    if not previous:
        return metadata
    older = previous[-1].operator_states
    sources = {op for v in vertices if v.is_source for op in v.operators}
    states = tuple(older.get(s.operator_id, s) if s.operator_id in sources else s for s in metadata.operator_states)
    return dataclasses.replace(metadata, operator_states=states)


class CheckpointRestore:
    """The coordinator's restores: the latest completed checkpoint (after a failover or a JobManager's recovery; none:
    start fresh) or a savepoint. The id counter moves past the restored id; a restored snapshot the job does not own
    makes the checkpoints full until one completes (the completion's ``force_full_snapshot``)."""

    def __init__(
        self,
        job_id: str,
        vertices: Sequence[JobVertexInfo],
        *,
        store: StandaloneCompletedCheckpointStore,
        id_counter: StandaloneCheckpointIDCounter,
        shared_state_registry: SharedStateRegistry,
        master_hooks: Mapping[str, MasterTriggerRestoreHook],
        stats: CheckpointStatsTracker,
        completion: CheckpointCompletion,
        clock: Callable[[], int],
        emit: Callable[[Any], None],
        is_shutdown: Callable[[], bool],
    ) -> None:
        self.job_id = job_id
        self._vertices = tuple(vertices)
        self._store = store
        self._id_counter = id_counter
        self._registry = shared_state_registry
        self._master_hooks = master_hooks
        self._stats = stats
        self._completion = completion
        self._clock = clock
        self._emit = emit
        self._is_shutdown = is_shutdown

    def restore_latest_checkpointed_state(self, allow_non_restored_state: bool = False) -> CompletedCheckpoint | None:
        """The latest completed checkpoint (``RestoreFrom`` it), or ``None``: start fresh (``RestoreFrom(None)``).
        The id counter moves past the restored id (it never goes back)."""
        if self._is_shutdown():
            raise StateRestoreError(f"restore: coordinator of job {self.job_id} is shut down")
        # raises MasterHookError for unmatched master states unless allow_non_restored_state
        latest = self._store.get_latest_checkpoint()
        if latest is None:
            reset_hooks(self._master_hooks)
            self._emit(m.RestoreFrom(None, None, False, allow_non_restored_state))
            return None
        metadata = latest.metadata
        if is_planted(PlantedBug.SOURCE_POSITIONS_FROM_PREVIOUS_CHECKPOINT):
            metadata = _with_sources_of_previous(metadata, self._store.get_all_checkpoints(), self._vertices)
        check_state_mapping(metadata, self._vertices, allow_non_restored_state, f"checkpoint {latest.checkpoint_id}")
        if self._id_counter.get() <= latest.checkpoint_id:
            self._id_counter.set_count(latest.checkpoint_id + 1)
        # restored from a snapshot the job does not own: checkpoints are full until one completes (NO_CLAIM)
        self._completion.force_full_snapshot = latest.props.is_unclaimed
        restore_master_hooks(self._master_hooks, latest.master_states, latest.checkpoint_id, allow_non_restored_state)
        self._stats.report_restored_checkpoint(
            latest.checkpoint_id,
            self._clock(),
            external_path(latest.external_pointer, latest.props.is_savepoint),
            latest.props.is_savepoint,
        )
        self._emit(m.RestoreFrom(latest.checkpoint_id, metadata, latest.props.is_savepoint, allow_non_restored_state))
        return latest

    def restore_savepoint(
        self, path: str, loader: Callable[[str], CheckpointMetadata], allow_non_restored_state: bool = False
    ) -> CompletedCheckpoint:
        """Flink's ``restoreSavepoint``: load ``_metadata`` through the injected loader (storage's), check it
        fits the job, register its shared state (``registerSharedStatesAfterRestored`` in ``NO_CLAIM`` mode), add
        it to the store (as an unclaimed snapshot: never discarded by us), set the id
        counter to ``savepoint_id + 1`` and restore it (``RestoreFrom``)."""
        metadata = loader(path)
        check_state_mapping(metadata, self._vertices, allow_non_restored_state, f"savepoint {path}")
        savepoint = CompletedCheckpoint.from_metadata(
            self.job_id, metadata, CheckpointProperties.for_unclaimed_snapshot(), path
        )
        # its shared files are registered before it enters the store (whose subsumption counts on them), as
        # not claimed: this job refers to them but never discards them
        self._registry.register_all_after_restored(
            savepoint.checkpoint_id, savepoint.operator_states.values(), RecoveryClaimMode.NO_CLAIM
        )
        if is_planted(PlantedBug.SAVEPOINT_NOT_RESTORED_ON_RESTART):
            # FLINK-3390: the tasks start from the savepoint, but recovery never sees it: a restart before the
            # job's first checkpoint restores no state
            self._id_counter.set_count(metadata.checkpoint_id + 1)
            self._emit(m.RestoreFrom(savepoint.checkpoint_id, metadata, True, allow_non_restored_state))
            return savepoint
        result = self._store.add_checkpoint_and_subsume_oldest_one(savepoint)
        for subsumed in result.to_discard:
            self._completion.discard_completed(subsumed.checkpoint_id, m.DiscardReason.SUBSUMED)
        self._id_counter.set_count(metadata.checkpoint_id + 1)
        self.restore_latest_checkpointed_state(allow_non_restored_state)
        return savepoint
