"""A job's checkpoint files on a filesystem (``CheckpointFiles``): reading, listing, discarding completed checkpoints
and the completed-checkpoint list under ``<root>/<job-id>/``, and pointer resolution (Flink's
``AbstractFsCheckpointStorageAccess.resolveCheckpointPointer``). Every file of a checkpoint is read relative to the
checkpoint's own directory; every ``OSError`` becomes a typed storage error naming the path."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path

from barriersim.runtime.storage.atomic_file import AtomicFileWriter
from barriersim.runtime.storage.checkpoint_storage import CompletedCheckpointStorageLocation
from barriersim.runtime.storage.errors import (
    CheckpointDiscardError,
    CheckpointNotFoundError,
    CheckpointStorageIOError,
    CheckpointStorageWriteError,
    InvalidCheckpointPointerError,
    storage_error_of,
)
from barriersim.runtime.storage.layout import (
    CHECKPOINT_SHARED_STATE_DIR,
    METADATA_FILE_NAME,
    SAVEPOINT_DIR_PREFIX,
    checkpoint_directory_name,
    checkpoint_id_of,
)
from barriersim.runtime.storage.metadata_serializer import SHARED_FILE_PREFIX, StateFileHandle, StateFileReader


def local_path(uri: str) -> str:
    """The filesystem path a plain path or ``file://`` URI names."""
    return uri[len("file://") :] if uri.startswith("file://") else uri


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
        checkpoint_id=checkpoint_id_of(directory.name),
        external_pointer=str(directory),
        metadata_pointer=str(directory / metadata_file.name),
        is_savepoint=directory.name.startswith(SAVEPOINT_DIR_PREFIX),
        metadata_size=size,
    )


class FsCheckpointFiles:
    """The files of one job's checkpoints: ``checkpoints_directory`` (``<root>/<job-id>``) holds its ``chk-<n>``
    directories and ``pointer_list_file``; its shared and task-owned state are in the two directories given."""

    def __init__(
        self,
        checkpoints_directory: Path,
        shared_state_directory: Path,
        task_owned_state_directory: Path,
        pointer_list_file: Path,
        writer: AtomicFileWriter,
    ) -> None:
        self.checkpoints_directory = checkpoints_directory
        self.shared_state_directory = shared_state_directory
        self.task_owned_state_directory = task_owned_state_directory
        self.pointer_list_file = pointer_list_file
        self._writer = writer  # the completed-checkpoint list's (not the fault-injection switch of _metadata)

    def checkpoint_directory(self, checkpoint_id: int) -> Path:
        return self.checkpoints_directory / checkpoint_directory_name(checkpoint_id)

    # -- the completed-checkpoint list ----------------------------------------------------------------------

    @property
    def pointer_list_name(self) -> str:
        return str(self.pointer_list_file)

    def read_pointer_list(self) -> tuple[str, bytes] | None:
        path = self.pointer_list_file
        try:
            return str(path), path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise storage_error_of(e, path, "reading the completed-checkpoint list") from None

    def write_pointer_list(self, data: bytes | None) -> None:
        path = self.pointer_list_file
        try:
            if data is None:
                if os.path.lexists(path):
                    path.unlink()
                return
            self._writer.write(path, data)
        except OSError as e:
            raise CheckpointStorageWriteError(
                f"{path}: writing the completed-checkpoint list failed: {e.strerror or e}"
            ) from e

    # -- completed checkpoints ------------------------------------------------------------------------------

    def resolve(self, pointer: str) -> CompletedCheckpointStorageLocation:
        return resolve_checkpoint_pointer(pointer)

    def read_metadata(self, location: CompletedCheckpointStorageLocation) -> bytes:
        path = Path(location.metadata_pointer)
        try:
            return path.read_bytes()
        except OSError as e:
            raise storage_error_of(e, path, f"reading the metadata of checkpoint {location.checkpoint_id}") from None

    def overwrite_metadata(self, location: CompletedCheckpointStorageLocation, data: bytes) -> None:
        try:
            Path(location.metadata_pointer).write_bytes(data)
        except OSError as e:
            raise storage_error_of(e, location.metadata_pointer, "overwriting the metadata") from None

    def state_file_reader(self, location: CompletedCheckpointStorageLocation) -> StateFileReader:
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

    def directory_name(self, location: CompletedCheckpointStorageLocation) -> str:
        return Path(location.external_pointer).name

    def checkpoint_locations(self) -> list[CompletedCheckpointStorageLocation]:
        try:
            if not self.checkpoints_directory.is_dir():
                return []
            entries = sorted(self.checkpoints_directory.iterdir())
        except OSError as e:
            raise storage_error_of(e, self.checkpoints_directory, "listing the checkpoints") from None
        locations = []
        for directory in entries:
            checkpoint_id = checkpoint_id_of(directory.name)
            if checkpoint_id is None:
                continue
            metadata = directory / METADATA_FILE_NAME
            try:
                if not metadata.is_file():
                    continue  # an incomplete checkpoint
                size = metadata.stat().st_size
            except OSError:
                size = 0  # unreadable: listed, and reading it will say why
            locations.append(
                CompletedCheckpointStorageLocation(
                    checkpoint_id=checkpoint_id,
                    external_pointer=str(directory.resolve()),
                    metadata_pointer=str(directory.resolve() / METADATA_FILE_NAME),
                    is_savepoint=False,
                    metadata_size=size,
                )
            )
        return locations

    # -- discarding -----------------------------------------------------------------------------------------

    def discard(self, checkpoint_id: int) -> bool:
        directory = self.checkpoint_directory(checkpoint_id)
        failures: list[str] = []
        try:
            if not os.path.lexists(directory):
                return False
            if not stat.S_ISDIR(os.stat(directory).st_mode):
                raise CheckpointDiscardError(
                    str(directory), f"cannot discard checkpoint {checkpoint_id}: not a directory"
                )
            metadata = directory / METADATA_FILE_NAME
            if os.path.lexists(metadata):
                metadata.unlink()
            shutil.rmtree(directory, onerror=lambda _f, p, info: failures.append(f"{p}: {info[1]}"))
        except OSError as e:
            raise CheckpointDiscardError(
                str(directory), f"cannot discard checkpoint {checkpoint_id}: {e.strerror or type(e).__name__}"
            ) from None
        if failures or os.path.lexists(directory):
            raise CheckpointDiscardError(
                str(directory),
                f"checkpoint {checkpoint_id} was not fully discarded: "
                + (failures[0] if failures else "the directory stays"),
            )
        return True

    def discard_shared_state(self, keys: Iterable[str]) -> int:
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
                raise CheckpointDiscardError(
                    str(path), f"cannot discard shared state: {e.strerror or type(e).__name__}"
                ) from None
        return deleted

    def shared_state_files(self) -> set[str]:
        """The names of the files in the shared state directory."""
        try:
            return (
                {p.name for p in self.shared_state_directory.iterdir()}
                if self.shared_state_directory.is_dir()
                else set()
            )
        except OSError as e:
            raise storage_error_of(e, self.shared_state_directory, "listing the shared state") from None

    def remove_job_directories(self) -> None:
        """Remove the job's shared, task-owned and checkpoint directories, each only if it is empty."""
        for d in (self.shared_state_directory, self.task_owned_state_directory, self.checkpoints_directory):
            try:
                d.rmdir()  # only if empty
            except OSError:
                pass
