"""The completed checkpoint store: retains the N latest completed checkpoints for recovery.

How it works: docs/module-notes.md, section ``runtime/coordinator/completed_store.py``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from barriersim.runtime.coordinator.pending_checkpoint import CompletedCheckpoint
from barriersim.runtime.coordinator.properties import JobStatus
from barriersim.runtime.faults.mutations import PlantedBug, is_planted
from barriersim.runtime.storage.checkpoint_storage import CheckpointStorage
from barriersim.runtime.storage.errors import CheckpointStorageError

INVALID_CHECKPOINT_ID = -1
DEFAULT_MAX_RETAINED_CHECKPOINTS = 1


class CompletedCheckpointStoreError(Exception):
    """A misuse of the store (naming the call and the store's state)."""


@dataclass(frozen=True)
class SubsumeResult:
    """What adding a checkpoint did: the newest subsumed checkpoint (if any) and those to discard."""

    last_subsumed: CompletedCheckpoint | None
    to_discard: tuple[CompletedCheckpoint, ...]

    @property
    def last_subsumed_checkpoint_id(self) -> int:
        """Flink's ``extractIdIfDiscardedOnSubsumed``."""
        if self.last_subsumed is not None and self.last_subsumed.discard_on_subsume():
            return self.last_subsumed.checkpoint_id
        return INVALID_CHECKPOINT_ID


class StandaloneCompletedCheckpointStore:
    def __init__(self, max_number_of_checkpoints_to_retain: int = DEFAULT_MAX_RETAINED_CHECKPOINTS):
        if max_number_of_checkpoints_to_retain < 1:
            raise CompletedCheckpointStoreError(
                f"max_number_of_checkpoints_to_retain={max_number_of_checkpoints_to_retain}: must retain at least one"
            )
        self.max_number_of_retained_checkpoints = max_number_of_checkpoints_to_retain
        self._checkpoints: deque[CompletedCheckpoint] = deque()
        self._shut_down = False

    def add_checkpoint_and_subsume_oldest_one(self, checkpoint: CompletedCheckpoint) -> SubsumeResult:
        self._check_can_add(checkpoint)
        self._checkpoints.append(checkpoint)
        return self._subsume()

    def _check_can_add(self, checkpoint: CompletedCheckpoint) -> None:
        if self._shut_down:
            raise CompletedCheckpointStoreError(f"add checkpoint {checkpoint.checkpoint_id}: the store is shut down")
        if self._checkpoints and checkpoint.checkpoint_id <= self._checkpoints[-1].checkpoint_id:
            raise CompletedCheckpointStoreError(
                f"add checkpoint {checkpoint.checkpoint_id}: not newer than the latest retained checkpoint "
                f"{self._checkpoints[-1].checkpoint_id}"
            )

    def _subsume(self) -> SubsumeResult:
        if len(self._checkpoints) <= self.max_number_of_retained_checkpoints:
            return SubsumeResult(None, ())
        latest = self._checkpoints[-1]
        latest_not_savepoint = next((c for c in reversed(self._checkpoints) if not c.props.is_savepoint), None)
        last_subsumed: CompletedCheckpoint | None = None
        to_discard: list[CompletedCheckpoint] = []
        for candidate in list(self._checkpoints):
            if len(self._checkpoints) <= self.max_number_of_retained_checkpoints:
                break
            if candidate is latest:
                continue
            if (
                not candidate.props.is_savepoint
                and not latest.props.is_synchronous
                and (latest_not_savepoint is None or latest_not_savepoint is candidate)
            ):
                continue  # keep the newest checkpoint unless the job stopped with a savepoint
            # by identity: equality of checkpoints would compare all their state
            del self._checkpoints[next(i for i, c in enumerate(self._checkpoints) if c is candidate)]
            if last_subsumed is None or candidate.checkpoint_id > last_subsumed.checkpoint_id:
                last_subsumed = candidate
            if candidate.discard_on_subsume():
                to_discard.append(candidate)
        return SubsumeResult(last_subsumed, tuple(to_discard))

    def get_latest_checkpoint(self, prefer_checkpoint_for_recovery: bool = False) -> CompletedCheckpoint | None:
        if not self._checkpoints:
            return None
        if is_planted(PlantedBug.RESTORE_FROM_OLDER_RETAINED_CHECKPOINT) and len(self._checkpoints) > 1:
            # FLINK-14145: the backwards search for a checkpoint starts one before the newest one
            for c in list(self._checkpoints)[-2::-1]:
                if not c.props.is_savepoint:
                    return c
        if prefer_checkpoint_for_recovery:
            for c in reversed(self._checkpoints):
                if not c.props.is_savepoint:
                    return c
        return self._checkpoints[-1]

    def get_latest_checkpoint_id(self) -> int:
        latest = self.get_latest_checkpoint()
        return latest.checkpoint_id if latest is not None else 0

    def get_all_checkpoints(self) -> list[CompletedCheckpoint]:
        return list(self._checkpoints)

    @property
    def number_of_retained_checkpoints(self) -> int:
        return len(self._checkpoints)

    def shutdown(self, job_status: JobStatus) -> list[CompletedCheckpoint]:
        """Empty the store; return the checkpoints to discard for ``job_status``."""
        discarded = [c for c in self._checkpoints if c.should_be_discarded_on_shutdown(job_status)]
        self._checkpoints.clear()
        self._shut_down = True
        return discarded


_GLOBALLY_TERMINAL = frozenset({JobStatus.FINISHED, JobStatus.CANCELED, JobStatus.FAILED})


class DefaultCompletedCheckpointStore(StandaloneCompletedCheckpointStore):
    """The store whose contents are persisted in ``storage``'s completed-checkpoint list (see the module's
    docstring); ``recovered`` are the checkpoints a new JobManager read from that list, oldest first;
    ``on_error`` hears what could not be written when nothing can be failed any more (a pointer removal)."""

    def __init__(
        self,
        max_number_of_checkpoints_to_retain: int,
        storage: CheckpointStorage,
        recovered: Iterable[CompletedCheckpoint] = (),
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(max_number_of_checkpoints_to_retain)
        self.storage = storage
        self._checkpoints.extend(recovered)
        self._on_error = on_error or (lambda message: None)

    def add_checkpoint_and_subsume_oldest_one(self, checkpoint: CompletedCheckpoint) -> SubsumeResult:
        self._check_can_add(checkpoint)
        # first the pointer: if it cannot be written, nothing of the store changes (Flink: addAndLock)
        self.storage.update_completed_checkpoints(
            [c.checkpoint_id for c in self._checkpoints] + [checkpoint.checkpoint_id]
        )
        before = len(self._checkpoints) + 1
        result = super().add_checkpoint_and_subsume_oldest_one(checkpoint)
        if len(self._checkpoints) == before:
            return result
        try:  # the subsumed checkpoints' pointers go before their files may
            self.storage.update_completed_checkpoints([c.checkpoint_id for c in self._checkpoints])
        except CheckpointStorageError as err:
            self._on_error(f"the completed-checkpoint list still names subsumed checkpoints, which are kept: {err}")
            return SubsumeResult(result.last_subsumed, ())
        return result

    def shutdown(self, job_status: JobStatus) -> list[CompletedCheckpoint]:
        discarded = super().shutdown(job_status)
        if job_status in _GLOBALLY_TERMINAL:
            try:
                self.storage.update_completed_checkpoints([])
            except CheckpointStorageError as err:
                self._on_error(f"the completed-checkpoint list could not be cleared: {err}")
        return discarded
