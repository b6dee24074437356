"""Filesystem checkpoint storage (Flink's ``FsCheckpointStorageAccess``): ``<root>/<job-id>/chk-<n>/_metadata``
with its state files, ``shared/``, ``taskowned/`` and the completed-checkpoint list beside them; savepoints in
``savepoint-<jobid6>-<random>`` directories. Writes go through ``FsCheckpointStorageLocation``, reads through
``FsCheckpointFiles``; docs/recovery-store.md says how and where barriersim goes further than Flink."""

from __future__ import annotations

import os
import random
from collections.abc import Iterable
from pathlib import Path

from barriersim.runtime.state.snapshot import CheckpointMetadata
from barriersim.runtime.storage.atomic_file import AtomicFileWriter, WriteFault
from barriersim.runtime.storage.checkpoint_reader import CheckpointReader
from barriersim.runtime.storage.checkpoint_storage import (
    CheckpointPointer,
    CheckpointStorage,
    CompletedCheckpointPointer,
    CompletedCheckpointStorageLocation,
    LoadedCheckpoint,
    checked_job_id,
    checked_memory_threshold,
)
from barriersim.runtime.storage.completed_checkpoint_list import CompletedCheckpointList
from barriersim.runtime.storage.errors import CheckpointStorageWriteError, NoSavepointLocationError
from barriersim.runtime.storage.fs_files import FsCheckpointFiles, local_path, resolve_checkpoint_pointer
from barriersim.runtime.storage.fs_location import FsCheckpointStorageLocation
from barriersim.runtime.storage.layout import (
    CHECKPOINT_SHARED_STATE_DIR,
    CHECKPOINT_TASK_OWNED_STATE_DIR,
    COMPLETED_CHECKPOINTS_FILE_NAME,
    savepoint_directory_name,
)
from barriersim.runtime.storage.metadata_serializer import DEFAULT_MEMORY_THRESHOLD
from barriersim.runtime.storage.retention import RetentionDecision, discard_on_termination, retain_or_discard

__all__ = ["FileSystemCheckpointStorage", "local_path", "resolve_checkpoint_pointer"]

_SAVEPOINT_DIR_ATTEMPTS = 10


class FileSystemCheckpointStorage(CheckpointStorage):
    """Flink's ``FsCheckpointStorageAccess`` for one job."""

    files: FsCheckpointFiles

    def __init__(
        self,
        checkpoint_base_directory: str | os.PathLike[str],
        job_id: str,
        *,
        default_savepoint_directory: str | os.PathLike[str] | None = None,
        rng: random.Random | None = None,
        writer: AtomicFileWriter | None = None,
        memory_threshold: int = DEFAULT_MEMORY_THRESHOLD,
    ) -> None:
        self.job_id = checked_job_id(job_id)
        self.memory_threshold = checked_memory_threshold(memory_threshold)
        self.writer = writer or AtomicFileWriter()  # the _metadata's: its fault-injection switch
        self._state_writer = AtomicFileWriter()  # state files and the completed-checkpoint list
        self._rng = rng or random.Random(0)
        self.checkpoint_base_directory = Path(checkpoint_base_directory)
        self.checkpoints_directory = self.checkpoint_base_directory / job_id
        self.shared_state_directory = self.checkpoints_directory / CHECKPOINT_SHARED_STATE_DIR
        self.task_owned_state_directory = self.checkpoints_directory / CHECKPOINT_TASK_OWNED_STATE_DIR
        self.default_savepoint_directory = (
            None if default_savepoint_directory is None else Path(default_savepoint_directory)
        )
        self.files = FsCheckpointFiles(
            self.checkpoints_directory,
            self.shared_state_directory,
            self.task_owned_state_directory,
            self.checkpoints_directory / COMPLETED_CHECKPOINTS_FILE_NAME,
            self._state_writer,
        )
        self.completed = CompletedCheckpointList(job_id, self.files)
        self._reader = CheckpointReader(job_id, self.files, self.completed)

    # -- locations --------------------------------------------------------------------------------------------

    def initialize_base_locations(self) -> None:
        """Create the job's checkpoint, shared and task-owned directories (only here, never on resolve)."""
        for d in (self.checkpoints_directory, self.shared_state_directory, self.task_owned_state_directory):
            d.mkdir(parents=True, exist_ok=True)

    def checkpoint_directory(self, checkpoint_id: int) -> Path:
        return self.files.checkpoint_directory(checkpoint_id)

    def initialize_location_for_checkpoint(self, checkpoint_id: int) -> Path:
        directory = self.checkpoint_directory(checkpoint_id)
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise CheckpointStorageWriteError(
                f"{directory}: cannot create the directory of checkpoint {checkpoint_id}: "
                f"{e.strerror or type(e).__name__}"
            ) from None
        return directory

    def initialize_location_for_savepoint(self, checkpoint_id: int, target_location: str | None = None) -> Path:
        """A fresh ``savepoint-<jobid6>-<random>`` directory under ``target_location`` or the default."""
        if target_location is not None:
            base = Path(local_path(target_location))
        elif self.default_savepoint_directory is not None:
            base = self.default_savepoint_directory
        else:
            raise NoSavepointLocationError(
                f"savepoint {checkpoint_id} of job {self.job_id}: no savepoint location given and no default location "
                "configured"
            )
        last_error: OSError | None = None
        for _ in range(_SAVEPOINT_DIR_ATTEMPTS):
            name = savepoint_directory_name(self.job_id, self._rng)
            try:
                base.mkdir(parents=True, exist_ok=True)
                (base / name).mkdir()
                return (base / name).resolve()
            except OSError as e:
                last_error = e
        raise CheckpointStorageWriteError(f"{base}: failed to create a savepoint directory: {last_error}")

    def write_task_owned_state(self, name: str, data: bytes) -> Path:
        """Write task-owned state to ``taskowned/<name>`` atomically."""
        path = self.task_owned_state_directory / name
        try:
            self.writer.write(path, data)
        except OSError as e:
            raise CheckpointStorageWriteError(f"{path}: writing task-owned state failed: {e}") from e
        return path

    # -- writing ----------------------------------------------------------------------------------------------

    def fail_next_write(self, fault: WriteFault = WriteFault.FAIL_BEFORE_WRITE) -> None:
        self.writer.fail_next_write(fault)

    def persist_checkpoint(
        self, metadata: CheckpointMetadata, *, is_savepoint: bool = False, target_location: str | None = None
    ) -> CompletedCheckpointStorageLocation:
        checkpoint_id = metadata.checkpoint_id
        if is_savepoint:
            directory = self.initialize_location_for_savepoint(checkpoint_id, target_location)
        else:
            directory = self.initialize_location_for_checkpoint(checkpoint_id)
        location = FsCheckpointStorageLocation(
            checkpoint_id,
            directory,
            self.shared_state_directory,
            is_savepoint=is_savepoint,
            rng=self._rng,
            state_writer=self._state_writer,
            metadata_writer=self.writer,
            memory_threshold=self.memory_threshold,
        )
        completed = location.persist(metadata)
        self.completed.remember_written(completed)
        return completed

    # -- reading ----------------------------------------------------------------------------------------------

    def resolve_checkpoint(self, pointer: str) -> CompletedCheckpointStorageLocation:
        return resolve_checkpoint_pointer(pointer)

    def load_checkpoint(self, pointer: CheckpointPointer) -> LoadedCheckpoint:
        return self._reader.load(pointer)

    def load_checkpoint_metadata(self, pointer: str) -> CheckpointMetadata:
        return self._reader.load(pointer).metadata

    def adopt_restored(self, location: CompletedCheckpointStorageLocation, source: CheckpointStorage) -> None:
        self.completed.adopt(location)  # read by its path, wherever it lies

    def check_state_files(self, checkpoint_id: int) -> None:
        self._reader.check_state_files(checkpoint_id)

    def list_retained_checkpoints(self) -> tuple[CompletedCheckpointStorageLocation, ...]:
        return self._reader.retained()

    def load_latest_checkpoint(self) -> LoadedCheckpoint | None:
        return self._reader.load_latest()

    # -- the completed-checkpoint list ------------------------------------------------------------------------

    @property
    def completed_checkpoints_list_name(self) -> str:
        return self.completed.name

    def update_completed_checkpoints(self, checkpoint_ids: Iterable[int]) -> None:
        self.completed.update(checkpoint_ids)

    def completed_checkpoint_pointers(self) -> tuple[CompletedCheckpointPointer, ...] | None:
        return self.completed.read()

    def forget_completed_checkpoints(self) -> None:
        self.completed.forget_all()

    # -- discarding and retention -----------------------------------------------------------------------------

    def discard_checkpoint(self, checkpoint_id: int) -> bool:
        self.completed.forget(checkpoint_id)
        return self.files.discard(checkpoint_id)

    def discard_shared_state(self, keys: Iterable[str]) -> int:
        return self.files.discard_shared_state(keys)

    def shared_state_files(self) -> set[str]:
        return self.files.shared_state_files()

    def apply_retention_policy(self, retention_policy: object, job_status: object) -> dict[int, RetentionDecision]:
        discard = discard_on_termination(retention_policy, job_status)
        decisions = retain_or_discard(self.list_retained_checkpoints(), discard, self.discard_checkpoint)
        self.completed.remove()
        if discard:
            self.files.remove_job_directories()
        return decisions
