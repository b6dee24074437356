"""A job's checkpoint objects on an object store (``CheckpointFiles``): reading, listing, discarding completed
checkpoints and the completed-checkpoint list under ``<bucket/prefix>/<job-id>/``, in the filesystem storage's
layout, and pointer resolution of ``s3://`` URIs. Every object of a checkpoint is read relative to its own
location."""

from __future__ import annotations

from collections.abc import Iterable

from barriersim.runtime.storage.checkpoint_storage import CompletedCheckpointStorageLocation
from barriersim.runtime.storage.errors import (
    CheckpointDiscardError,
    CheckpointNotFoundError,
    CheckpointStorageWriteError,
    InvalidCheckpointPointerError,
    storage_error_of,
)
from barriersim.runtime.storage.layout import (
    CHECKPOINT_SHARED_STATE_DIR,
    COMPLETED_CHECKPOINTS_FILE_NAME,
    METADATA_FILE_NAME,
    SAVEPOINT_DIR_PREFIX,
    checkpoint_directory_name,
    checkpoint_id_of,
)
from barriersim.runtime.storage.metadata_serializer import SHARED_FILE_PREFIX, StateFileHandle, StateFileReader
from barriersim.runtime.storage.object_store import ObjectKind, ObjectStore, basename, parent


class ObjectStoreCheckpointFiles:
    """The objects of one job's checkpoints in ``store``: ``checkpoints_directory`` (``bucket/prefix/<job-id>``)
    holds its ``chk-<n>`` directories, ``shared/`` and the completed-checkpoint list."""

    def __init__(self, store: ObjectStore, checkpoints_directory: str) -> None:
        self.store = store
        self.checkpoints_directory = checkpoints_directory
        self.shared_state_directory = f"{checkpoints_directory}/{CHECKPOINT_SHARED_STATE_DIR}"
        self.pointer_list_file = f"{checkpoints_directory}/{COMPLETED_CHECKPOINTS_FILE_NAME}"

    def checkpoint_directory(self, checkpoint_id: int) -> str:
        return f"{self.checkpoints_directory}/{checkpoint_directory_name(checkpoint_id)}"

    # -- the completed-checkpoint list ----------------------------------------------------------------------

    @property
    def pointer_list_name(self) -> str:
        return self.store.uri(self.pointer_list_file)

    def read_pointer_list(self) -> tuple[str, bytes] | None:
        path = self.pointer_list_file
        if not self.store.exists(path):
            return None
        return self.store.uri(path), self.store.get(path, "reading the completed-checkpoint list")

    def write_pointer_list(self, data: bytes | None) -> None:
        path = self.pointer_list_file
        try:
            if data is None:
                if self.store.exists(path):
                    self.store.delete_file(path)
                return
            self.store.put(path, data)
        except OSError as e:
            raise CheckpointStorageWriteError(
                f"{self.store.uri(path)}: writing the completed-checkpoint list failed: {e}"
            ) from None

    # -- completed checkpoints ------------------------------------------------------------------------------

    def resolve(self, pointer: str) -> CompletedCheckpointStorageLocation:
        """A ``s3://`` checkpoint/savepoint directory or its ``_metadata`` object -> its completed location."""
        if not isinstance(pointer, str) or not pointer:
            raise InvalidCheckpointPointerError(f"checkpoint pointer must be a non-empty URI, got {pointer!r}")
        path = self.store.path_of(pointer)
        kind = self.store.kind(path)
        if kind is ObjectKind.NOT_FOUND:
            raise CheckpointNotFoundError(f"Cannot find checkpoint or savepoint object/directory '{pointer}'")
        if kind is ObjectKind.DIRECTORY:
            directory, metadata = path, f"{path}/{METADATA_FILE_NAME}"
            if not self.store.is_file(metadata):
                raise CheckpointNotFoundError(
                    f"Cannot find meta data file '{METADATA_FILE_NAME}' in directory '{pointer}': it is not a "
                    "completed checkpoint/savepoint (an incomplete checkpoint, or not a checkpoint at all)"
                )
        else:
            directory, metadata = parent(path), path
        # pyarrow gives no size for an object of unknown kind; 0, as for an unreadable one: reading it says why
        size = self.store.info(metadata).size or 0
        name = basename(directory)
        return CompletedCheckpointStorageLocation(
            checkpoint_id=checkpoint_id_of(name),
            external_pointer=self.store.uri(directory),
            metadata_pointer=self.store.uri(metadata),
            is_savepoint=name.startswith(SAVEPOINT_DIR_PREFIX),
            metadata_size=size,
        )

    def read_metadata(self, location: CompletedCheckpointStorageLocation) -> bytes:
        return self.store.get(
            self.store.path_of(location.metadata_pointer),
            f"reading the metadata of checkpoint {location.checkpoint_id}",
        )

    def overwrite_metadata(self, location: CompletedCheckpointStorageLocation, data: bytes) -> None:
        path = self.store.path_of(location.metadata_pointer)
        try:
            self.store.put(path, data)
        except OSError as e:
            raise storage_error_of(e, self.store.uri(path), "overwriting the metadata") from None

    def state_file_reader(self, location: CompletedCheckpointStorageLocation) -> StateFileReader:
        directory = self.store.path_of(location.external_pointer)
        shared = f"{parent(directory)}/{CHECKPOINT_SHARED_STATE_DIR}"  # beside the checkpoint, as on a filesystem

        def read(handle: StateFileHandle) -> tuple[str, bytes]:
            if handle.file.startswith(SHARED_FILE_PREFIX):
                path = f"{shared}/{handle.file.removeprefix(SHARED_FILE_PREFIX)}"
            else:
                path = f"{directory}/{handle.file}"
            return self.store.uri(path), self.store.get(path, "reading a state file")

        return read

    def directory_name(self, location: CompletedCheckpointStorageLocation) -> str:
        return basename(self.store.path_of(location.external_pointer))

    def checkpoint_locations(self) -> list[CompletedCheckpointStorageLocation]:
        try:
            entries = self.store.list(self.checkpoints_directory)
        except OSError as e:
            raise storage_error_of(e, self.store.uri(self.checkpoints_directory), "listing the checkpoints") from None
        locations = []
        for entry in sorted(entries, key=lambda e: e.path):
            checkpoint_id = checkpoint_id_of(entry.base_name)
            if entry.kind is not ObjectKind.DIRECTORY or checkpoint_id is None:
                continue
            metadata = f"{entry.path.rstrip('/')}/{METADATA_FILE_NAME}"
            try:
                info = self.store.info(metadata)
            except OSError:
                info = None  # unreadable: listed, and reading it will say why
            if info is not None and info.kind is not ObjectKind.FILE:
                continue  # an incomplete checkpoint
            locations.append(
                CompletedCheckpointStorageLocation(
                    checkpoint_id=checkpoint_id,
                    external_pointer=self.store.uri(entry.path.rstrip("/")),
                    metadata_pointer=self.store.uri(metadata),
                    is_savepoint=False,
                    metadata_size=(info.size or 0) if info is not None else 0,
                )
            )
        return locations

    def state_objects(self, checkpoint_id: int) -> list[str]:
        """The paths of the state objects of checkpoint ``checkpoint_id`` (not its ``_metadata``), sorted."""
        infos = self.store.list(self.checkpoint_directory(checkpoint_id))
        return sorted(i.path for i in infos if i.kind is ObjectKind.FILE and i.base_name != METADATA_FILE_NAME)

    # -- discarding -----------------------------------------------------------------------------------------

    def discard(self, checkpoint_id: int) -> bool:
        directory = self.checkpoint_directory(checkpoint_id)
        try:
            if not self.store.exists(directory):
                return False
            metadata = f"{directory}/{METADATA_FILE_NAME}"
            if self.store.exists(metadata):
                self.store.delete_file(metadata)  # first: the checkpoint is no longer addressable
            self.store.delete_dir(directory)
        except OSError as e:
            raise CheckpointDiscardError(
                self.store.uri(directory), f"cannot discard checkpoint {checkpoint_id}: {e}"
            ) from None
        if self.store.exists(directory):
            raise CheckpointDiscardError(
                self.store.uri(directory), f"checkpoint {checkpoint_id} was not fully discarded"
            )
        return True

    def discard_shared_state(self, keys: Iterable[str]) -> int:
        """Delete the shared state objects of these registration keys (missing ones are not an error); how many
        were deleted. ``CheckpointDiscardError`` names the first object that could not be deleted."""
        deleted = 0
        for key in keys:
            path = f"{self.shared_state_directory}/{key}"
            try:
                if self.store.exists(path):
                    self.store.delete_file(path)
                    deleted += 1
            except OSError as e:
                raise CheckpointDiscardError(self.store.uri(path), f"cannot discard shared state: {e}") from None
        return deleted

    def shared_state_files(self) -> set[str]:
        """The names of the objects in the shared state directory."""
        try:
            infos = self.store.list(self.shared_state_directory)
        except OSError as e:
            raise storage_error_of(e, self.store.uri(self.shared_state_directory), "listing the shared state") from None
        return {info.base_name for info in infos}

    def remove_job_directory(self) -> None:
        """Remove the job's directory if nothing is left in it."""
        try:
            if not self.store.list(self.checkpoints_directory, recursive=True):
                self.store.delete_dir(self.checkpoints_directory)  # only if empty
        except OSError:
            pass
