"""The ``CheckpointStorage`` interface (Flink's ``CheckpointStorageAccess``), the ``CheckpointFiles`` a storage reads
its completed checkpoints through, and the values both pass around: completed locations, the completed-checkpoint
list's pointers, loaded checkpoints. No state and no logic: docs/architecture.md, "Checkpoint storage", says which
collaborators implement what."""

from __future__ import annotations

import abc
import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from barriersim.runtime.state.snapshot import CheckpointMetadata
from barriersim.runtime.storage.atomic_file import WriteFault
from barriersim.runtime.storage.errors import CheckpointStorageError
from barriersim.runtime.storage.metadata_serializer import MAX_MEMORY_THRESHOLD, StateFileHandle, StateFileReader


@dataclass(frozen=True)
class CompletedCheckpointStorageLocation:
    """Where a completed checkpoint/savepoint lives (Flink's ``CompletedCheckpointStorageLocation``):
    ``external_pointer`` is what a user passes back to restore (the checkpoint directory), and
    ``metadata_pointer`` the ``_metadata`` file (or in-memory key) itself; once written or read, also the
    metadata file's CRC32 and the handles of its state files."""

    checkpoint_id: int | None
    external_pointer: str
    metadata_pointer: str
    is_savepoint: bool = False
    metadata_size: int = 0
    metadata_crc32: int | None = None
    state_files: tuple[StateFileHandle, ...] = ()

    @property
    def listed_checkpoint_id(self) -> int:
        """The id of a checkpoint the storage lists by its ``chk-<id>`` directory (``checkpoint_locations``), always
        known; a ``ValueError`` for a location resolved from a path whose id only its ``_metadata`` says."""
        if self.checkpoint_id is None:
            raise ValueError(f"{self.external_pointer}: no checkpoint id until its metadata is read")
        return self.checkpoint_id


@dataclass(frozen=True)
class CompletedCheckpointPointer:
    """One entry of the completed-checkpoint list: which checkpoint, where, and the ``_metadata`` file's size and
    CRC32 when it completed (Flink's ``RetrievableStateHandle<CompletedCheckpoint>`` under its HA key)."""

    checkpoint_id: int
    external_pointer: str
    metadata_pointer: str
    metadata_size: int
    metadata_crc32: int
    is_savepoint: bool = False  # a restored savepoint the store holds (never discarded by the job)


@dataclass(frozen=True)
class LoadedCheckpoint:
    """A decoded checkpoint and where it came from; ``skipped`` holds the damaged newer checkpoints that
    ``load_latest_checkpoint`` passed over (each error names its file and problem)."""

    location: CompletedCheckpointStorageLocation
    metadata: CheckpointMetadata
    skipped: tuple[CheckpointStorageError, ...] = ()


CheckpointPointer = str | CompletedCheckpointStorageLocation | CompletedCheckpointPointer


class CheckpointFiles(Protocol):
    """A storage's completed checkpoints and completed-checkpoint list as it holds them (files, objects or bytes):
    the one part of a storage that reads and changes them. Every error is a typed storage error naming the file."""

    @property
    def pointer_list_name(self) -> str:
        """Where the completed-checkpoint list is (its path or URI), whether it exists or not."""

    def read_pointer_list(self) -> tuple[str, bytes] | None:
        """The completed-checkpoint list's name and bytes, or None when there is none."""

    def write_pointer_list(self, data: bytes | None) -> None:
        """Replace the completed-checkpoint list atomically (None: remove it)."""

    def resolve(self, pointer: str) -> CompletedCheckpointStorageLocation:
        """An external pointer (checkpoint/savepoint directory or ``_metadata`` file) -> its completed location."""

    def read_metadata(self, location: CompletedCheckpointStorageLocation) -> bytes:
        """The ``_metadata`` bytes of ``location``."""

    def overwrite_metadata(self, location: CompletedCheckpointStorageLocation, data: bytes) -> None:
        """Replace the ``_metadata`` bytes of ``location`` in place (fault injection only)."""

    def state_file_reader(self, location: CompletedCheckpointStorageLocation) -> StateFileReader | None:
        """How the state files of ``location`` are read (None: this storage writes none)."""

    def directory_name(self, location: CompletedCheckpointStorageLocation) -> str:
        """The name of the checkpoint's directory, as ``metadata_serializer.serialize`` records it."""

    def checkpoint_locations(self) -> list[CompletedCheckpointStorageLocation]:
        """The complete checkpoints (not savepoints) of this job, in any order."""

    def discard(self, checkpoint_id: int) -> bool:
        """Remove checkpoint ``checkpoint_id`` (complete or not), its ``_metadata`` first; False if there was
        nothing, ``CheckpointDiscardError`` if something stays."""


class CheckpointStorage(abc.ABC):
    """A job's checkpoint storage: ``JobManagerCheckpointStorage`` (in memory), ``FileSystemCheckpointStorage``,
    ``ObjectStoreCheckpointStorage``. Errors are typed (``runtime.storage.errors``) and name the file."""

    job_id: str
    files: CheckpointFiles  # the storage's completed checkpoints as it holds them

    @abc.abstractmethod
    def initialize_base_locations(self) -> None:
        """Create the job's directories (Flink's ``initializeBaseLocationsForCheckpoint``)."""

    @abc.abstractmethod
    def fail_next_write(self, fault: WriteFault = WriteFault.FAIL_BEFORE_WRITE) -> None:
        """Fault injection: the next metadata write fails as ``fault`` says."""

    @abc.abstractmethod
    def persist_checkpoint(
        self, metadata: CheckpointMetadata, *, is_savepoint: bool = False, target_location: str | None = None
    ) -> CompletedCheckpointStorageLocation:
        """Encode and commit ``metadata`` (state files first, ``_metadata`` last, atomically); afterwards it is
        listed and loadable. ``CheckpointStorageWriteError`` (nothing visible) when the write fails,
        ``CheckpointAlreadyExistsError`` when checkpoint N already has metadata."""

    @abc.abstractmethod
    def resolve_checkpoint(self, pointer: str) -> CompletedCheckpointStorageLocation:
        """Resolve an external pointer (checkpoint/savepoint directory or ``_metadata`` file)."""

    @abc.abstractmethod
    def load_checkpoint(self, pointer: CheckpointPointer) -> LoadedCheckpoint:
        """Read and check one checkpoint or savepoint: a pointer string, a location, or an entry of the
        completed-checkpoint list (then the file must also be the one it points to)."""

    @abc.abstractmethod
    def load_checkpoint_metadata(self, pointer: str) -> CheckpointMetadata:
        """The restore loader: ``pointer`` (checkpoint/savepoint dir or ``_metadata`` file) -> metadata."""

    @abc.abstractmethod
    def adopt_restored(self, location: CompletedCheckpointStorageLocation, source: CheckpointStorage) -> None:
        """A savepoint or retained checkpoint that ``source`` read is restored by this storage's job: its
        completed-checkpoint list may point to it from now on."""

    @abc.abstractmethod
    def check_state_files(self, checkpoint_id: int) -> None:
        """Read the state files of completed checkpoint ``checkpoint_id`` again, each against its handle."""

    @abc.abstractmethod
    def list_retained_checkpoints(self) -> tuple[CompletedCheckpointStorageLocation, ...]:
        """The complete checkpoints of this job, newest (highest id) first."""

    @abc.abstractmethod
    def load_latest_checkpoint(self) -> LoadedCheckpoint | None:
        """The newest checkpoint that loads (damaged newer ones in ``skipped``), None when none is retained,
        ``NoValidCheckpointError`` when none loads."""

    @property
    @abc.abstractmethod
    def completed_checkpoints_list_name(self) -> str:
        """Where the completed-checkpoint list is (its path or URI), whether it exists or not."""

    @abc.abstractmethod
    def update_completed_checkpoints(self, checkpoint_ids: Iterable[int]) -> None:
        """Make the completed-checkpoint list hold exactly ``checkpoint_ids`` (oldest first), atomically."""

    @abc.abstractmethod
    def completed_checkpoint_pointers(self) -> tuple[CompletedCheckpointPointer, ...] | None:
        """The completed-checkpoint list, oldest first; None if there is none (typed errors if damaged)."""

    @abc.abstractmethod
    def forget_completed_checkpoints(self) -> None:
        """What a dead JobManager knew about completed checkpoints is gone (a new one reads the list)."""

    @abc.abstractmethod
    def discard_checkpoint(self, checkpoint_id: int) -> bool:
        """Discard checkpoint ``checkpoint_id`` (complete or not); False if there was nothing to discard,
        ``CheckpointDiscardError`` (naming what stays) if it could not be removed."""

    @abc.abstractmethod
    def discard_shared_state(self, keys: Iterable[str]) -> int:
        """Delete the shared state of these registration keys (the ``SharedStateRegistry`` released them)."""

    @abc.abstractmethod
    def shared_state_files(self) -> set[str]:
        """The names of the files in the shared state directory."""

    @abc.abstractmethod
    def apply_retention_policy(self, retention_policy: object, job_status: object) -> Mapping[int, enum.Enum]:
        """Called when the job ends: discard or retain every retained checkpoint (never savepoints) as Flink's
        ``CheckpointRetentionPolicy`` says (a ``retention.RetentionDecision`` per checkpoint); the completed-checkpoint
        list goes either way."""


def checked_job_id(job_id: str) -> str:
    if not job_id:
        raise ValueError("a checkpoint storage needs a non-empty job id")
    return job_id


def checked_memory_threshold(memory_threshold: int) -> int:
    if not 0 <= memory_threshold <= MAX_MEMORY_THRESHOLD:
        raise ValueError(f"memory threshold {memory_threshold}: must be between 0 and {MAX_MEMORY_THRESHOLD} bytes")
    return memory_threshold
