"""The ``CheckpointStorage`` interface: persist, resolve, list, load, discard and retain completed checkpoints.

How this works: the coordinator emits "persist this ``CheckpointMetadata``" and "discard checkpoint N"
actions; a storage carries them out. ``persist_checkpoint`` encodes the metadata (``metadata_serializer``)
and commits it in one atomic step, so a checkpoint is either complete and loadable or invisible.
``list_retained_checkpoints`` lists the complete checkpoints newest first; ``load_latest_checkpoint`` walks
that list and returns the newest one whose ``_metadata`` decodes, reporting every corrupt newer one (file
named) in ``skipped``. ``apply_retention_policy`` is called once when the job reaches a terminal status and
discards or keeps the retained checkpoints as Flink's ``CheckpointRetentionPolicy`` says (savepoints are
never discarded by the system). ``fail_next_write`` injects a failing/crashing write. Subclasses provide
five primitives (store, read, remove, enumerate, resolve). Mirrors Flink's ``CheckpointStorageAccess`` /
``CheckpointStorageCoordinatorView``, ``CompletedCheckpointStorageLocation`` and the retention behaviour of
``CheckpointProperties.forCheckpoint(CheckpointRetentionPolicy)``.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
from dataclasses import dataclass
from typing import Callable

from barriersim.runtime.state.snapshot import CheckpointMetadata
from barriersim.runtime.storage import metadata_serializer
from barriersim.runtime.storage.atomic_file import AtomicFileWriter, WriteFault
from barriersim.runtime.storage.errors import CheckpointStorageError, CorruptMetadataError

METADATA_FILE_NAME = "_metadata"
CHECKPOINT_DIR_PREFIX = "chk-"
CHECKPOINT_SHARED_STATE_DIR = "shared"
CHECKPOINT_TASK_OWNED_STATE_DIR = "taskowned"
SAVEPOINT_DIR_PREFIX = "savepoint-"


@dataclass(frozen=True)
class CompletedCheckpointStorageLocation:
    """Where a completed checkpoint/savepoint lives (Flink's ``CompletedCheckpointStorageLocation``):
    ``external_pointer`` is what a user passes back to restore (the checkpoint directory), and
    ``metadata_pointer`` the ``_metadata`` file (or in-memory key) itself."""

    checkpoint_id: int | None
    external_pointer: str
    metadata_pointer: str
    is_savepoint: bool = False
    metadata_size: int = 0


@dataclass(frozen=True)
class LoadedCheckpoint:
    """A decoded checkpoint and where it came from; ``skipped`` holds the corrupt newer checkpoints that
    ``load_latest_checkpoint`` passed over (each error names its file and problem)."""

    location: CompletedCheckpointStorageLocation
    metadata: CheckpointMetadata
    skipped: tuple[CorruptMetadataError, ...] = ()


class NoValidCheckpointError(CheckpointStorageError):
    """Checkpoints are retained but none of their ``_metadata`` files decodes; ``errors`` lists why."""

    def __init__(self, job_id: str, errors: tuple[CorruptMetadataError, ...]):
        super().__init__(
            f"job {job_id}: none of the {len(errors)} retained checkpoints is loadable: "
            + "; ".join(str(e) for e in errors)
        )
        self.errors = errors


class RetentionDecision(enum.Enum):
    RETAINED = "RETAINED"
    DISCARDED = "DISCARDED"


# Flink's CheckpointProperties.forCheckpoint(policy): the terminal job statuses on which it discards.
_DISCARD_ON = {
    "NEVER_RETAIN_AFTER_TERMINATION": frozenset({"FINISHED", "CANCELED", "FAILED", "SUSPENDED"}),
    "RETAIN_ON_FAILURE": frozenset({"FINISHED", "CANCELED"}),
    "RETAIN_ON_CANCELLATION": frozenset({"FINISHED"}),
}
_TERMINAL_STATUSES = frozenset({"FINISHED", "CANCELED", "FAILED", "SUSPENDED"})


def _name(value: object) -> str:
    return str(getattr(value, "value", value))


def discard_on_termination(retention_policy: object, job_status: object) -> bool:
    """Whether a retained checkpoint is discarded when the job ends in ``job_status`` under
    ``retention_policy``. Both are given by name (a ``str`` or an enum whose value is Flink's name, e.g.
    the coordinator's ``CheckpointRetentionPolicy``/``JobStatus``)."""
    policy, status = _name(retention_policy), _name(job_status)
    if policy not in _DISCARD_ON:
        raise ValueError(f"unknown checkpoint retention policy {policy!r} (expected one of {sorted(_DISCARD_ON)})")
    if status not in _TERMINAL_STATUSES:
        raise ValueError(f"job status {status!r} is not terminal; retention applies on {sorted(_TERMINAL_STATUSES)}")
    return status in _DISCARD_ON[policy]


class CheckpointStorage(abc.ABC):
    """A job's checkpoint storage. Subclasses: ``JobManagerCheckpointStorage`` (in memory) and
    ``FileSystemCheckpointStorage``."""

    def __init__(self, job_id: str, writer: AtomicFileWriter | None = None):
        if not job_id:
            raise ValueError("a checkpoint storage needs a non-empty job id")
        self.job_id = job_id
        self.writer = writer or AtomicFileWriter()

    # -- primitives ------------------------------------------------------------------------------

    @abc.abstractmethod
    def _store(self, checkpoint_id: int, data: bytes, is_savepoint: bool, target_location: str | None) -> CompletedCheckpointStorageLocation:
        """Commit ``data`` as the metadata of a new checkpoint/savepoint, atomically."""

    @abc.abstractmethod
    def _read(self, location: CompletedCheckpointStorageLocation) -> bytes: ...

    @abc.abstractmethod
    def _remove(self, location: CompletedCheckpointStorageLocation) -> None:
        """Remove the metadata first (so it is no longer addressable), then everything else of it."""

    @abc.abstractmethod
    def _checkpoint_locations(self) -> list[CompletedCheckpointStorageLocation]:
        """The complete checkpoints (not savepoints) of this job, in any order."""

    @abc.abstractmethod
    def _overwrite(self, location: CompletedCheckpointStorageLocation, data: bytes) -> None:
        """Replace stored metadata bytes in place (for corruption faults only)."""

    @abc.abstractmethod
    def resolve_checkpoint(self, pointer: str) -> CompletedCheckpointStorageLocation:
        """Resolve an external pointer (checkpoint/savepoint directory or ``_metadata`` file)."""

    # -- operations -------------------------------------------------------------------------------

    def fail_next_write(self, fault: WriteFault = WriteFault.FAIL_BEFORE_WRITE) -> None:
        """Fault injection: the next metadata write fails as ``fault`` says."""
        self.writer.fail_next_write(fault)

    def persist_checkpoint(
        self, metadata: CheckpointMetadata, *, is_savepoint: bool = False, target_location: str | None = None
    ) -> CompletedCheckpointStorageLocation:
        """Encode and commit ``metadata``; afterwards it is listed and loadable. Raises
        ``CheckpointStorageWriteError`` (nothing visible) when the write fails, ``CheckpointAlreadyExistsError``
        when checkpoint N already has metadata."""
        data = metadata_serializer.serialize(metadata)
        return self._store(metadata.checkpoint_id, data, is_savepoint, target_location)

    def load_checkpoint(self, pointer: str | CompletedCheckpointStorageLocation) -> LoadedCheckpoint:
        location = pointer if isinstance(pointer, CompletedCheckpointStorageLocation) else self.resolve_checkpoint(pointer)
        metadata = metadata_serializer.deserialize(self._read(location), location.metadata_pointer)
        if location.checkpoint_id is None:  # e.g. a savepoint directory: the id is in the metadata
            location = dataclasses.replace(location, checkpoint_id=metadata.checkpoint_id)
        return LoadedCheckpoint(location, metadata)

    def load_checkpoint_metadata(self, pointer: str) -> CheckpointMetadata:
        """The restore loader: ``pointer`` (checkpoint/savepoint dir or ``_metadata`` file) -> metadata."""
        return self.load_checkpoint(pointer).metadata

    def list_retained_checkpoints(self) -> tuple[CompletedCheckpointStorageLocation, ...]:
        """The complete checkpoints of this job, newest (highest id) first."""
        return tuple(sorted(self._checkpoint_locations(), key=lambda loc: loc.checkpoint_id or 0, reverse=True))

    def load_latest_checkpoint(self) -> LoadedCheckpoint | None:
        """The newest checkpoint whose metadata decodes, or None when no checkpoint is retained. Corrupt
        newer ones are reported in ``skipped``; if all are corrupt, ``NoValidCheckpointError``."""
        skipped: list[CorruptMetadataError] = []
        locations = self.list_retained_checkpoints()
        for location in locations:
            try:
                loaded = self.load_checkpoint(location)
            except CorruptMetadataError as e:
                skipped.append(e)
                continue
            if loaded.metadata.checkpoint_id != location.checkpoint_id:
                skipped.append(CorruptMetadataError(
                    location.metadata_pointer,
                    f"holds checkpoint {loaded.metadata.checkpoint_id}, not {location.checkpoint_id}",
                ))
                continue
            return LoadedCheckpoint(loaded.location, loaded.metadata, tuple(skipped))
        if skipped:
            raise NoValidCheckpointError(self.job_id, tuple(skipped))
        return None

    def discard_checkpoint(self, checkpoint_id: int) -> bool:
        """Discard checkpoint ``checkpoint_id`` (complete or not); False if there was nothing to discard."""
        for location in self._checkpoint_locations():
            if location.checkpoint_id == checkpoint_id:
                self._remove(location)
                return True
        return self._discard_incomplete(checkpoint_id)

    def _discard_incomplete(self, checkpoint_id: int) -> bool:
        return False

    def apply_retention_policy(self, retention_policy: object, job_status: object) -> dict[int, RetentionDecision]:
        """Called when the job ends: discard or retain every retained checkpoint (never savepoints)."""
        discard = discard_on_termination(retention_policy, job_status)
        decisions: dict[int, RetentionDecision] = {}
        for location in self.list_retained_checkpoints():
            if discard:
                self._remove(location)
                decisions[location.checkpoint_id] = RetentionDecision.DISCARDED
            else:
                decisions[location.checkpoint_id] = RetentionDecision.RETAINED
        if discard:
            self._after_discard_all()
        return decisions

    def _after_discard_all(self) -> None:
        pass

    def corrupt_checkpoint(self, checkpoint_id: int, transform: Callable[[bytes], bytes]) -> None:
        """Fault injection: replace checkpoint ``checkpoint_id``'s stored metadata bytes by ``transform(bytes)``."""
        for location in self._checkpoint_locations():
            if location.checkpoint_id == checkpoint_id:
                self._overwrite(location, transform(self._read(location)))
                return
        raise KeyError(f"job {self.job_id}: no complete checkpoint {checkpoint_id} to corrupt")
