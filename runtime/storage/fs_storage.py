"""Filesystem checkpoint storage: ``<root>/<job-id>/chk-<n>/_metadata``, ``shared/``, ``taskowned/`` and
savepoint directories ``savepoint-<jobid6>-<random>``; plus pointer resolution.

How this works: the job's directory ``<root>/<job-id>`` holds one ``chk-<n>`` directory per checkpoint and
the ``shared``/``taskowned`` state directories. A checkpoint's ``_metadata`` is written through
``AtomicFileWriter`` (temp file, fsync, ``os.replace``), so a ``chk-<n>`` directory is a completed
checkpoint exactly when ``_metadata`` exists; a crash mid-write leaves only a temporary file that listing
and loading ignore. Savepoints go to a fresh ``savepoint-<first 6 chars of the job id>-<12 hex>``
directory under the target (or default) savepoint directory, named from an injected ``random.Random``.
``resolve_checkpoint_pointer`` accepts a ``chk-<n>``/savepoint directory (with or without a trailing slash
or ``file://``) or the ``_metadata`` file itself and fails with a clear error for anything else. Discarding
deletes ``_metadata`` first, so a half-deleted checkpoint is never mistaken for a complete one. Mirrors
Flink's ``FsCheckpointStorageAccess``, ``AbstractFsCheckpointStorageAccess`` (``resolveCheckpointPointer``,
``initializeLocationForSavepoint``) and ``FsCheckpointStorageLocation``.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

from barriersim.runtime.storage.atomic_file import AtomicFileWriter
from barriersim.runtime.storage.checkpoint_storage import (
    CHECKPOINT_DIR_PREFIX,
    CHECKPOINT_SHARED_STATE_DIR,
    CHECKPOINT_TASK_OWNED_STATE_DIR,
    METADATA_FILE_NAME,
    SAVEPOINT_DIR_PREFIX,
    CheckpointStorage,
    CompletedCheckpointStorageLocation,
)
from barriersim.runtime.storage.errors import (
    CheckpointAlreadyExistsError,
    CheckpointNotFoundError,
    CheckpointStorageWriteError,
    InvalidCheckpointPointerError,
    NoSavepointLocationError,
)

RANDOM_FILE_NAME_LENGTH = 12
_SAVEPOINT_DIR_ATTEMPTS = 10


def _checkpoint_id_of(directory: Path) -> int | None:
    name = directory.name
    if name.startswith(CHECKPOINT_DIR_PREFIX) and name[len(CHECKPOINT_DIR_PREFIX):].isdigit():
        return int(name[len(CHECKPOINT_DIR_PREFIX):])
    return None


def resolve_checkpoint_pointer(pointer: str) -> CompletedCheckpointStorageLocation:
    """Flink's ``AbstractFsCheckpointStorageAccess.resolveCheckpointPointer``: a checkpoint/savepoint
    directory or ``_metadata`` file -> its completed location. The external pointer is the directory."""
    if not isinstance(pointer, str):
        raise InvalidCheckpointPointerError(f"checkpoint pointer must be a path string, got {pointer!r}")
    if not pointer:
        raise InvalidCheckpointPointerError("empty checkpoint pointer")
    raw = pointer[len("file://"):] if pointer.startswith("file://") else pointer
    if "\x00" in raw:
        raise InvalidCheckpointPointerError(f"checkpoint/savepoint path {pointer!r} is not a valid file path")
    path = Path(raw)
    if not path.exists():
        raise CheckpointNotFoundError(f"Cannot find checkpoint or savepoint file/directory '{pointer}'")
    if path.is_dir():
        directory = path
        metadata_file = path / METADATA_FILE_NAME
        if not metadata_file.is_file():
            raise CheckpointNotFoundError(
                f"Cannot find meta data file '{METADATA_FILE_NAME}' in directory '{pointer}': it is not a "
                "completed checkpoint/savepoint (an incomplete checkpoint, or not a checkpoint at all)"
            )
    else:
        metadata_file = path
        directory = path.parent
    directory = directory.resolve()
    return CompletedCheckpointStorageLocation(
        checkpoint_id=_checkpoint_id_of(directory),
        external_pointer=str(directory),
        metadata_pointer=str(directory / metadata_file.name),
        is_savepoint=directory.name.startswith(SAVEPOINT_DIR_PREFIX),
        metadata_size=metadata_file.stat().st_size,
    )


class FileSystemCheckpointStorage(CheckpointStorage):
    """Flink's ``FsCheckpointStorageAccess`` for one job."""

    def __init__(
        self,
        checkpoint_base_directory: str | os.PathLike,
        job_id: str,
        *,
        default_savepoint_directory: str | os.PathLike | None = None,
        rng: random.Random | None = None,
        writer: AtomicFileWriter | None = None,
    ):
        super().__init__(job_id, writer)
        self.checkpoint_base_directory = Path(checkpoint_base_directory)
        self.checkpoints_directory = self.checkpoint_base_directory / job_id
        self.shared_state_directory = self.checkpoints_directory / CHECKPOINT_SHARED_STATE_DIR
        self.task_owned_state_directory = self.checkpoints_directory / CHECKPOINT_TASK_OWNED_STATE_DIR
        self.default_savepoint_directory = None if default_savepoint_directory is None else Path(default_savepoint_directory)
        self._rng = rng or random.Random(0)

    # -- locations --------------------------------------------------------------------------------

    def initialize_base_locations(self) -> None:
        """Create the job's checkpoint, shared and task-owned directories (only here, never on resolve)."""
        for d in (self.checkpoints_directory, self.shared_state_directory, self.task_owned_state_directory):
            d.mkdir(parents=True, exist_ok=True)

    def checkpoint_directory(self, checkpoint_id: int) -> Path:
        return self.checkpoints_directory / f"{CHECKPOINT_DIR_PREFIX}{checkpoint_id}"

    def initialize_location_for_checkpoint(self, checkpoint_id: int) -> Path:
        directory = self.checkpoint_directory(checkpoint_id)
        directory.mkdir(parents=True, exist_ok=True)
        return directory

    def initialize_location_for_savepoint(self, checkpoint_id: int, target_location: str | None = None) -> Path:
        """A fresh ``savepoint-<jobid6>-<random>`` directory under ``target_location`` or the default."""
        if target_location is not None:
            base = Path(target_location[len("file://"):] if target_location.startswith("file://") else target_location)
        elif self.default_savepoint_directory is not None:
            base = self.default_savepoint_directory
        else:
            raise NoSavepointLocationError(
                f"savepoint {checkpoint_id} of job {self.job_id}: no savepoint location given and no default location configured"
            )
        prefix = f"{SAVEPOINT_DIR_PREFIX}{self.job_id[:6]}-"
        last_error: OSError | None = None
        for _ in range(_SAVEPOINT_DIR_ATTEMPTS):
            name = prefix + "".join(self._rng.choice("0123456789abcdef") for _ in range(RANDOM_FILE_NAME_LENGTH))
            try:
                base.mkdir(parents=True, exist_ok=True)
                (base / name).mkdir()
                return (base / name).resolve()
            except OSError as e:
                last_error = e
        raise CheckpointStorageWriteError(f"{base}: failed to create a savepoint directory: {last_error}")

    def write_task_owned_state(self, name: str, data: bytes) -> Path:
        """Write task-owned state (e.g. channel state) to ``taskowned/<name>`` atomically."""
        path = self.task_owned_state_directory / name
        self.writer.write(path, data)
        return path

    # -- primitives -------------------------------------------------------------------------------

    def _store(self, checkpoint_id, data, is_savepoint, target_location):
        if is_savepoint:
            directory = self.initialize_location_for_savepoint(checkpoint_id, target_location)
        else:
            directory = self.initialize_location_for_checkpoint(checkpoint_id)
        path = directory / METADATA_FILE_NAME
        if path.exists():
            raise CheckpointAlreadyExistsError(f"{path}: checkpoint {checkpoint_id} already has metadata")
        try:
            self.writer.write(path, data, exclusive=True)
        except FileExistsError:
            raise CheckpointAlreadyExistsError(f"{path}: checkpoint {checkpoint_id} already has metadata") from None
        except OSError as e:
            raise CheckpointStorageWriteError(f"{path}: writing checkpoint {checkpoint_id} metadata failed: {e}") from e
        return CompletedCheckpointStorageLocation(
            checkpoint_id=checkpoint_id,
            external_pointer=str(directory.resolve()),
            metadata_pointer=str(directory.resolve() / METADATA_FILE_NAME),
            is_savepoint=is_savepoint,
            metadata_size=len(data),
        )

    def _read(self, location):
        try:
            return Path(location.metadata_pointer).read_bytes()
        except FileNotFoundError:
            raise CheckpointNotFoundError(f"{location.metadata_pointer}: metadata file disappeared") from None

    def _overwrite(self, location, data):
        Path(location.metadata_pointer).write_bytes(data)

    def _remove(self, location):
        metadata = Path(location.metadata_pointer)
        if metadata.exists():
            metadata.unlink()
        shutil.rmtree(location.external_pointer, ignore_errors=True)

    def _discard_incomplete(self, checkpoint_id):
        directory = self.checkpoint_directory(checkpoint_id)
        if directory.is_dir():
            shutil.rmtree(directory, ignore_errors=True)
            return True
        return False

    def _checkpoint_locations(self):
        if not self.checkpoints_directory.is_dir():
            return []
        locations = []
        for directory in self.checkpoints_directory.iterdir():
            checkpoint_id = _checkpoint_id_of(directory)
            metadata = directory / METADATA_FILE_NAME
            if checkpoint_id is None or not metadata.is_file():
                continue
            locations.append(CompletedCheckpointStorageLocation(
                checkpoint_id=checkpoint_id,
                external_pointer=str(directory.resolve()),
                metadata_pointer=str(directory.resolve() / METADATA_FILE_NAME),
                is_savepoint=False,
                metadata_size=metadata.stat().st_size,
            ))
        return locations

    def _after_discard_all(self):
        for d in (self.shared_state_directory, self.task_owned_state_directory, self.checkpoints_directory):
            try:
                d.rmdir()  # only if empty
            except OSError:
                pass

    def resolve_checkpoint(self, pointer: str) -> CompletedCheckpointStorageLocation:
        return resolve_checkpoint_pointer(pointer)
