"""Filesystem checkpoint storage: ``<root>/<job-id>/chk-<n>/_metadata`` with its state files, ``shared/``,
``taskowned/``, the completed-checkpoint list ``<root>/<job-id>/_completed_checkpoints`` and savepoint directories
``savepoint-<jobid6>-<random>``; plus pointer resolution (``resolve_checkpoint_pointer``). A ``chk-<n>`` is a
completed checkpoint exactly when its ``_metadata`` exists (written last, atomically); discarding deletes it first.
Every file of a checkpoint is read relative to the checkpoint's own directory (its shared files in ``shared/``
beside it), so any storage reads any checkpoint, wherever it lies. Every ``OSError`` becomes a typed storage
error naming the path. Mirrors Flink's ``FsCheckpointStorageAccess``, ``AbstractFsCheckpointStorageAccess``,
``FsCheckpointStorageLocation`` and ``FsCheckpointStreamFactory``; docs/recovery-store.md says how and where
barriersim goes further.
"""

from __future__ import annotations

import os
import random
import shutil
import stat
import uuid
import zlib
from pathlib import Path

from barriersim.runtime.storage import metadata_serializer
from barriersim.runtime.storage.atomic_file import AtomicFileWriter
from barriersim.runtime.storage.checkpoint_storage import (
    CHECKPOINT_DIR_PREFIX,
    CHECKPOINT_SHARED_STATE_DIR,
    CHECKPOINT_TASK_OWNED_STATE_DIR,
    COMPLETED_CHECKPOINTS_FILE_NAME,
    METADATA_FILE_NAME,
    SAVEPOINT_DIR_PREFIX,
    CheckpointStorage,
    CompletedCheckpointStorageLocation,
)
from barriersim.runtime.storage.errors import (
    CheckpointAlreadyExistsError,
    CheckpointDiscardError,
    CheckpointNotFoundError,
    CheckpointStorageIOError,
    CheckpointStorageWriteError,
    InvalidCheckpointPointerError,
    NoSavepointLocationError,
    storage_error_of,
)
from barriersim.runtime.storage.metadata_serializer import DEFAULT_MEMORY_THRESHOLD, SHARED_FILE_PREFIX, StateFileHandle

RANDOM_FILE_NAME_LENGTH = 12
_SAVEPOINT_DIR_ATTEMPTS = 10


def _checkpoint_id_of(directory: Path) -> int | None:
    name = directory.name
    if name.startswith(CHECKPOINT_DIR_PREFIX) and name[len(CHECKPOINT_DIR_PREFIX):].isdigit():
        return int(name[len(CHECKPOINT_DIR_PREFIX):])
    return None


def local_path(uri: str) -> str:
    """The filesystem path a plain path or ``file://`` URI names."""
    return uri[len("file://"):] if uri.startswith("file://") else uri


def resolve_checkpoint_pointer(pointer: str) -> CompletedCheckpointStorageLocation:
    """Flink's ``AbstractFsCheckpointStorageAccess.resolveCheckpointPointer``: a checkpoint/savepoint
    directory or ``_metadata`` file -> its completed location. The external pointer is the directory."""
    if not isinstance(pointer, str):
        raise InvalidCheckpointPointerError(f"checkpoint pointer must be a path string, got {pointer!r}")
    if not pointer:
        raise InvalidCheckpointPointerError("empty checkpoint pointer")
    raw = local_path(pointer)
    if "\x00" in raw:
        raise InvalidCheckpointPointerError(f"checkpoint/savepoint path {pointer!r} is not a valid file path")
    path = Path(raw)
    try:
        if not path.exists():
            if os.path.lexists(path):
                os.stat(path)  # a link that leads nowhere readable: its OSError says why
            raise CheckpointNotFoundError(f"Cannot find checkpoint or savepoint file/directory '{pointer}'")
        if path.is_dir():
            directory = path
            metadata_file = path / METADATA_FILE_NAME
            if os.path.lexists(metadata_file) and not metadata_file.is_file():
                raise CheckpointStorageIOError(str(metadata_file), "not a regular file")
            if not metadata_file.is_file():
                raise CheckpointNotFoundError(
                    f"Cannot find meta data file '{METADATA_FILE_NAME}' in directory '{pointer}': it is not a "
                    "completed checkpoint/savepoint (an incomplete checkpoint, or not a checkpoint at all)"
                )
        else:
            metadata_file = path
            directory = path.parent
        directory = directory.resolve()
        size = metadata_file.stat().st_size
    except OSError as e:
        raise storage_error_of(e, path, "resolving the checkpoint pointer") from None
    return CompletedCheckpointStorageLocation(
        checkpoint_id=_checkpoint_id_of(directory),
        external_pointer=str(directory),
        metadata_pointer=str(directory / metadata_file.name),
        is_savepoint=directory.name.startswith(SAVEPOINT_DIR_PREFIX),
        metadata_size=size,
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
        memory_threshold: int = DEFAULT_MEMORY_THRESHOLD,
    ):
        super().__init__(job_id, writer, memory_threshold)
        self.checkpoint_base_directory = Path(checkpoint_base_directory)
        self.checkpoints_directory = self.checkpoint_base_directory / job_id
        self.shared_state_directory = self.checkpoints_directory / CHECKPOINT_SHARED_STATE_DIR
        self.task_owned_state_directory = self.checkpoints_directory / CHECKPOINT_TASK_OWNED_STATE_DIR
        self.completed_checkpoints_file = self.checkpoints_directory / COMPLETED_CHECKPOINTS_FILE_NAME
        self.default_savepoint_directory = None if default_savepoint_directory is None else Path(default_savepoint_directory)
        self._rng = rng or random.Random(0)
        self._state_writer = AtomicFileWriter()  # state files: the fault-injection switch is the _metadata's

    # -- locations --------------------------------------------------------------------------------

    def initialize_base_locations(self) -> None:
        """Create the job's checkpoint, shared and task-owned directories (only here, never on resolve)."""
        for d in (self.checkpoints_directory, self.shared_state_directory, self.task_owned_state_directory):
            d.mkdir(parents=True, exist_ok=True)

    def checkpoint_directory(self, checkpoint_id: int) -> Path:
        return self.checkpoints_directory / f"{CHECKPOINT_DIR_PREFIX}{checkpoint_id}"

    def initialize_location_for_checkpoint(self, checkpoint_id: int) -> Path:
        directory = self.checkpoint_directory(checkpoint_id)
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise CheckpointStorageWriteError(f"{directory}: cannot create the directory of checkpoint {checkpoint_id}: "
                                              f"{e.strerror or type(e).__name__}") from None
        return directory

    def initialize_location_for_savepoint(self, checkpoint_id: int, target_location: str | None = None) -> Path:
        """A fresh ``savepoint-<jobid6>-<random>`` directory under ``target_location`` or the default."""
        if target_location is not None:
            base = Path(local_path(target_location))
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
        """Write task-owned state to ``taskowned/<name>`` atomically."""
        path = self.task_owned_state_directory / name
        try:
            self.writer.write(path, data)
        except OSError as e:
            raise CheckpointStorageWriteError(f"{path}: writing task-owned state failed: {e}") from e
        return path

    # -- primitives -------------------------------------------------------------------------------

    def _store(self, metadata, is_savepoint, target_location):
        checkpoint_id = metadata.checkpoint_id
        if is_savepoint:
            directory = self.initialize_location_for_savepoint(checkpoint_id, target_location)
        else:
            directory = self.initialize_location_for_checkpoint(checkpoint_id)
        path = directory / METADATA_FILE_NAME
        if os.path.lexists(path):
            raise CheckpointAlreadyExistsError(f"{path}: checkpoint {checkpoint_id} already has metadata")

        written: list[StateFileHandle] = []

        def write_state_file(data: bytes) -> StateFileHandle:
            name = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
            try:
                self._state_writer.write(directory / name, data, exclusive=True)
            except OSError as e:
                raise CheckpointStorageWriteError(f"{directory / name}: writing a state file of checkpoint "
                                                  f"{checkpoint_id} failed: {e}") from e
            written.append(StateFileHandle(name, len(data), zlib.crc32(data)))
            return written[-1]

        def write_shared_file(key: str, data: bytes) -> StateFileHandle:
            path = self.shared_state_directory / key
            handle = StateFileHandle(SHARED_FILE_PREFIX + key, len(data), zlib.crc32(data))
            if "/" in key or key in ("", ".", ".."):
                raise CheckpointStorageWriteError(f"{path}: {key!r} is not a shared state file name")
            if not os.path.lexists(path):  # written by the first checkpoint that uploaded it; later ones refer to it
                try:
                    self._state_writer.write(path, data, exclusive=True)
                except OSError as e:
                    raise CheckpointStorageWriteError(f"{path}: writing a shared state file of checkpoint "
                                                      f"{checkpoint_id} failed: {e}") from e
            written.append(handle)
            return handle

        data = metadata_serializer.serialize(metadata, directory=directory.name, write_state_file=write_state_file,
                                             memory_threshold=self.memory_threshold,
                                             write_shared_file=None if is_savepoint else write_shared_file)
        try:
            self.writer.write(path, data, exclusive=True)
        except FileExistsError:
            raise CheckpointAlreadyExistsError(f"{path}: checkpoint {checkpoint_id} already has metadata") from None
        except OSError as e:
            raise CheckpointStorageWriteError(f"{path}: writing checkpoint {checkpoint_id} metadata failed: {e}") from e
        resolved = directory.resolve()
        return CompletedCheckpointStorageLocation(
            checkpoint_id=checkpoint_id,
            external_pointer=str(resolved),
            metadata_pointer=str(resolved / METADATA_FILE_NAME),
            is_savepoint=is_savepoint,
            metadata_size=len(data),
            metadata_crc32=zlib.crc32(data),
            state_files=tuple(written),
        )

    def _read(self, location):
        path = Path(location.metadata_pointer)
        try:
            return path.read_bytes()
        except OSError as e:
            raise storage_error_of(e, path, f"reading the metadata of checkpoint {location.checkpoint_id}") from None

    def _state_file_reader(self, location):
        directory = Path(location.external_pointer)
        # every file of a checkpoint is found from its own location: its exclusive files in its directory, its
        # shared ones in the shared directory beside it (<job>/shared), whichever storage reads it (a restore's)
        shared = directory.parent / CHECKPOINT_SHARED_STATE_DIR

        def read(handle: StateFileHandle) -> tuple[str, bytes]:
            if handle.file.startswith(SHARED_FILE_PREFIX):
                path = shared / handle.file.removeprefix(SHARED_FILE_PREFIX)
            else:
                path = directory / handle.file
            try:
                return str(path), path.read_bytes()
            except OSError as e:
                raise storage_error_of(e, path, "reading a state file") from None

        return read

    def _directory_name(self, location):
        return Path(location.external_pointer).name

    def _overwrite(self, location, data):
        try:
            Path(location.metadata_pointer).write_bytes(data)
        except OSError as e:
            raise storage_error_of(e, location.metadata_pointer, "overwriting the metadata") from None

    def _discard(self, checkpoint_id):
        directory = self.checkpoint_directory(checkpoint_id)
        failures: list[str] = []
        try:
            if not os.path.lexists(directory):
                return False
            if not stat.S_ISDIR(os.stat(directory).st_mode):
                raise CheckpointDiscardError(str(directory), f"cannot discard checkpoint {checkpoint_id}: not a directory")
            metadata = directory / METADATA_FILE_NAME
            if os.path.lexists(metadata):
                metadata.unlink()
            shutil.rmtree(directory, onerror=lambda _f, p, info: failures.append(f"{p}: {info[1]}"))
        except OSError as e:
            raise CheckpointDiscardError(str(directory), f"cannot discard checkpoint {checkpoint_id}: "
                                                         f"{e.strerror or type(e).__name__}") from None
        if failures or os.path.lexists(directory):
            raise CheckpointDiscardError(str(directory), f"checkpoint {checkpoint_id} was not fully discarded: "
                                                         + (failures[0] if failures else "the directory stays"))
        return True

    def discard_shared_state(self, keys) -> int:
        """Delete the shared state files of these registration keys (those written as files; missing ones are
        not an error: small runs stay inline in the metadata); how many were deleted. ``CheckpointDiscardError``
        names the first file that could not be deleted."""
        deleted = 0
        for key in keys:
            path = self.shared_state_directory / key
            try:
                if os.path.lexists(path):
                    path.unlink()
                    deleted += 1
            except OSError as e:
                raise CheckpointDiscardError(str(path), f"cannot discard shared state: {e.strerror or type(e).__name__}") from None
        return deleted

    def shared_state_files(self) -> set[str]:
        """The names of the files in the shared state directory."""
        try:
            return {p.name for p in self.shared_state_directory.iterdir()} if self.shared_state_directory.is_dir() else set()
        except OSError as e:
            raise storage_error_of(e, self.shared_state_directory, "listing the shared state") from None

    def _checkpoint_locations(self):
        try:
            if not self.checkpoints_directory.is_dir():
                return []
            entries = sorted(self.checkpoints_directory.iterdir())
        except OSError as e:
            raise storage_error_of(e, self.checkpoints_directory, "listing the checkpoints") from None
        locations = []
        for directory in entries:
            checkpoint_id = _checkpoint_id_of(directory)
            if checkpoint_id is None:
                continue
            metadata = directory / METADATA_FILE_NAME
            try:
                if not metadata.is_file():
                    continue  # an incomplete checkpoint
                size = metadata.stat().st_size
            except OSError:
                size = 0  # unreadable: listed, and reading it will say why
            locations.append(CompletedCheckpointStorageLocation(
                checkpoint_id=checkpoint_id,
                external_pointer=str(directory.resolve()),
                metadata_pointer=str(directory.resolve() / METADATA_FILE_NAME),
                is_savepoint=False,
                metadata_size=size,
            ))
        return locations

    @property
    def completed_checkpoints_list_name(self) -> str:
        return str(self.completed_checkpoints_file)

    def _read_pointer_list(self):
        path = self.completed_checkpoints_file
        try:
            return str(path), path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise storage_error_of(e, path, "reading the completed-checkpoint list") from None

    def _write_pointer_list(self, data):
        path = self.completed_checkpoints_file
        try:
            if data is None:
                if os.path.lexists(path):
                    path.unlink()
                return
            self._state_writer.write(path, data)
        except OSError as e:
            raise CheckpointStorageWriteError(f"{path}: writing the completed-checkpoint list failed: "
                                              f"{e.strerror or e}") from e

    def _after_discard_all(self):
        for d in (self.shared_state_directory, self.task_owned_state_directory, self.checkpoints_directory):
            try:
                d.rmdir()  # only if empty
            except OSError:
                pass

    def resolve_checkpoint(self, pointer: str) -> CompletedCheckpointStorageLocation:
        return resolve_checkpoint_pointer(pointer)
