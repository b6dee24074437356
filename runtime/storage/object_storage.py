"""Checkpoint storage on an object store (``s3://``), and the choice of storage by URI, as Flink's
``state.checkpoints.dir``: ``file://`` or a plain path for ``FileSystemCheckpointStorage``, ``s3://`` for
``ObjectStoreCheckpointStorage``. The layout is the filesystem storage's (``chk-<n>/_metadata`` written last, in one
PUT, after every state object, ``shared/`` and the completed-checkpoint list beside them), read through a
``pyarrow.fs.FileSystem``; every file of a checkpoint is read relative to its own location. Pointers are URIs whose
query holds the S3 client's options; ``checkpoint_storage_for`` / ``restore_storage_for`` pick the storage of a
URI or pointer. Every ``OSError`` becomes a typed storage error naming the object. Mirrors Flink's
``FsCheckpointStorageAccess`` over its S3 ``FileSystem``; docs/recovery-store.md has the details.
"""

from __future__ import annotations

import os
import random
import uuid
import zlib
from urllib.parse import urlsplit

from barriersim.runtime.storage import metadata_serializer
from barriersim.runtime.storage.atomic_file import AtomicFileWriter, WriteFault
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
from barriersim.runtime.storage.fs_storage import RANDOM_FILE_NAME_LENGTH, FileSystemCheckpointStorage, local_path
from barriersim.runtime.storage.metadata_serializer import DEFAULT_MEMORY_THRESHOLD, SHARED_FILE_PREFIX, StateFileHandle

# pyarrow.fs is imported in the functions that use it, for s3:// only: a subtask's process, which imports this
# module, never loads pyarrow (about 50 MB and 50 ms a process)
OBJECT_STORE_SCHEMES = ("s3",)


def is_object_store_uri(uri: str) -> bool:
    return isinstance(uri, str) and urlsplit(uri).scheme in OBJECT_STORE_SCHEMES


def _checkpoint_id_of(name: str) -> int | None:
    if name.startswith(CHECKPOINT_DIR_PREFIX) and name[len(CHECKPOINT_DIR_PREFIX):].isdigit():
        return int(name[len(CHECKPOINT_DIR_PREFIX):])
    return None


def _basename(path: str) -> str:
    return path.rstrip("/").rpartition("/")[2]


def _parent(path: str) -> str:
    return path.rstrip("/").rpartition("/")[0]


def object_store_filesystem(uri: str):
    """The pyarrow filesystem of an ``s3://`` URI and the path (``bucket/prefix``) it names; the URI's query
    holds the client's options. Raises ``InvalidCheckpointPointerError`` naming the URI."""
    from pyarrow import fs as pafs

    parts = urlsplit(uri)
    if parts.scheme not in OBJECT_STORE_SCHEMES or not parts.netloc:
        raise InvalidCheckpointPointerError(f"{uri!r}: not an object store URI (s3://bucket/path)")
    try:
        filesystem, path = pafs.FileSystem.from_uri(uri)
    except (OSError, ValueError, TypeError) as e:
        raise InvalidCheckpointPointerError(f"{uri!r}: cannot open the object store: {e}") from None
    return filesystem, path.rstrip("/")


class ObjectStoreCheckpointStorage(CheckpointStorage):
    """Flink's ``FsCheckpointStorageAccess`` for one job on an object store: ``filesystem`` a
    ``pyarrow.fs.FileSystem``, ``base_path`` the ``bucket/prefix`` the job's directory goes under, ``scheme`` the
    pointers' (``s3``)."""

    def __init__(
        self,
        filesystem,
        base_path: str,
        job_id: str,
        *,
        scheme: str = "s3",
        default_savepoint_directory: str | None = None,
        rng: random.Random | None = None,
        writer: AtomicFileWriter | None = None,
        memory_threshold: int = DEFAULT_MEMORY_THRESHOLD,
    ):
        super().__init__(job_id, writer, memory_threshold)
        self.filesystem = filesystem
        self.scheme = scheme
        self.base_path = base_path.strip("/")
        self.checkpoints_directory = f"{self.base_path}/{job_id}"
        self.shared_state_directory = f"{self.checkpoints_directory}/{CHECKPOINT_SHARED_STATE_DIR}"
        self.task_owned_state_directory = f"{self.checkpoints_directory}/{CHECKPOINT_TASK_OWNED_STATE_DIR}"
        self.completed_checkpoints_file = f"{self.checkpoints_directory}/{COMPLETED_CHECKPOINTS_FILE_NAME}"
        self.default_savepoint_directory = default_savepoint_directory
        self._rng = rng or random.Random(0)

    # -- objects ----------------------------------------------------------------------------------

    def uri(self, path: str) -> str:
        return f"{self.scheme}://{path}"

    def _path_of(self, pointer: str) -> str:
        """The filesystem path of a URI or path of this store (its query, if any, dropped)."""
        parts = urlsplit(pointer)
        if parts.scheme == self.scheme:
            return f"{parts.netloc}{parts.path}".rstrip("/")
        if parts.scheme:
            raise InvalidCheckpointPointerError(f"{pointer!r}: not a {self.scheme}:// pointer of this storage")
        return pointer.strip("/")

    def _kind(self, path: str):
        try:
            return self.filesystem.get_file_info(path).type
        except OSError as e:
            raise storage_error_of(e, self.uri(path), "looking up the object") from None

    def _exists(self, path: str) -> bool:
        from pyarrow.fs import FileType

        return self._kind(path) is not FileType.NotFound

    def _is_file(self, path: str) -> bool:
        from pyarrow.fs import FileType

        return self._kind(path) is FileType.File

    def _put(self, path: str, data: bytes, fault: WriteFault | None = None) -> None:
        """One PUT: the object is visible whole once it returns, and not at all if it fails or an injected fault
        stops it (an unfinished upload leaves no object)."""
        if fault is not None:
            raise CheckpointStorageWriteError(f"{self.uri(path)}: injected write failure ({fault.value}); "
                                              "the upload did not complete, nothing is visible")
        with self.filesystem.open_output_stream(path) as out:
            out.write(data)

    def _get(self, path: str, doing: str) -> bytes:
        try:
            with self.filesystem.open_input_stream(path) as stream:
                return stream.readall()
        except OSError as e:
            raise storage_error_of(e, self.uri(path), doing) from None

    # -- locations --------------------------------------------------------------------------------

    def initialize_base_locations(self) -> None:
        """Create the job's directory (and the bucket's, where the store allows)."""
        try:
            self.filesystem.create_dir(self.checkpoints_directory, recursive=True)
        except OSError as e:
            raise CheckpointStorageWriteError(f"{self.uri(self.checkpoints_directory)}: cannot create the job's "
                                              f"checkpoint directory: {e}") from None

    def checkpoint_directory(self, checkpoint_id: int) -> str:
        return f"{self.checkpoints_directory}/{CHECKPOINT_DIR_PREFIX}{checkpoint_id}"

    def initialize_location_for_savepoint(self, checkpoint_id: int, target_location: str | None = None) -> str:
        """A fresh ``savepoint-<jobid6>-<random>`` directory under ``target_location`` or the default."""
        base = target_location if target_location is not None else self.default_savepoint_directory
        if base is None:
            raise NoSavepointLocationError(
                f"savepoint {checkpoint_id} of job {self.job_id}: no savepoint location given and no default location configured")
        base = self._path_of(base)
        prefix = f"{SAVEPOINT_DIR_PREFIX}{self.job_id[:6]}-"
        for _ in range(10):
            name = prefix + "".join(self._rng.choice("0123456789abcdef") for _ in range(RANDOM_FILE_NAME_LENGTH))
            if not self._exists(f"{base}/{name}"):
                return f"{base}/{name}"
        raise CheckpointStorageWriteError(f"{self.uri(base)}: failed to find a fresh savepoint directory name")

    # -- primitives -------------------------------------------------------------------------------

    def _store(self, metadata, is_savepoint, target_location):
        checkpoint_id = metadata.checkpoint_id
        directory = (self.initialize_location_for_savepoint(checkpoint_id, target_location) if is_savepoint
                     else self.checkpoint_directory(checkpoint_id))
        path = f"{directory}/{METADATA_FILE_NAME}"
        if self._exists(path):
            raise CheckpointAlreadyExistsError(f"{self.uri(path)}: checkpoint {checkpoint_id} already has metadata")
        written: list[StateFileHandle] = []

        def write_state_file(data: bytes) -> StateFileHandle:
            name = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
            try:
                self._put(f"{directory}/{name}", data)
            except OSError as e:
                raise CheckpointStorageWriteError(f"{self.uri(directory)}/{name}: writing a state file of checkpoint "
                                                  f"{checkpoint_id} failed: {e}") from None
            written.append(StateFileHandle(name, len(data), zlib.crc32(data)))
            return written[-1]

        def write_shared_file(key: str, data: bytes) -> StateFileHandle:
            path = f"{self.shared_state_directory}/{key}"
            if "/" in key or key in ("", ".", ".."):
                raise CheckpointStorageWriteError(f"{self.uri(path)}: {key!r} is not a shared state file name")
            if not self._exists(path):  # written by the first checkpoint that uploaded it; later ones refer to it
                try:
                    self._put(path, data)
                except OSError as e:
                    raise CheckpointStorageWriteError(f"{self.uri(path)}: writing a shared state file of checkpoint "
                                                      f"{checkpoint_id} failed: {e}") from None
            written.append(StateFileHandle(SHARED_FILE_PREFIX + key, len(data), zlib.crc32(data)))
            return written[-1]

        data = metadata_serializer.serialize(metadata, directory=_basename(directory),
                                             write_state_file=write_state_file, memory_threshold=self.memory_threshold,
                                             write_shared_file=None if is_savepoint else write_shared_file)
        try:
            self._put(path, data, self.writer.take_fault())
        except OSError as e:
            raise CheckpointStorageWriteError(f"{self.uri(path)}: writing checkpoint {checkpoint_id} metadata "
                                              f"failed: {e}") from None
        return CompletedCheckpointStorageLocation(
            checkpoint_id=checkpoint_id,
            external_pointer=self.uri(directory),
            metadata_pointer=self.uri(path),
            is_savepoint=is_savepoint,
            metadata_size=len(data),
            metadata_crc32=zlib.crc32(data),
            state_files=tuple(written),
        )

    def _read(self, location):
        return self._get(self._path_of(location.metadata_pointer),
                         f"reading the metadata of checkpoint {location.checkpoint_id}")

    def _state_file_reader(self, location):
        directory = self._path_of(location.external_pointer)
        shared = f"{_parent(directory)}/{CHECKPOINT_SHARED_STATE_DIR}"  # beside the checkpoint, as on a filesystem

        def read(handle: StateFileHandle) -> tuple[str, bytes]:
            if handle.file.startswith(SHARED_FILE_PREFIX):
                path = f"{shared}/{handle.file.removeprefix(SHARED_FILE_PREFIX)}"
            else:
                path = f"{directory}/{handle.file}"
            return self.uri(path), self._get(path, "reading a state file")

        return read

    def _directory_name(self, location):
        return _basename(self._path_of(location.external_pointer))

    def _overwrite(self, location, data):
        path = self._path_of(location.metadata_pointer)
        try:
            self._put(path, data)
        except OSError as e:
            raise storage_error_of(e, self.uri(path), "overwriting the metadata") from None

    def _discard(self, checkpoint_id):
        directory = self.checkpoint_directory(checkpoint_id)
        try:
            if not self._exists(directory):
                return False
            metadata = f"{directory}/{METADATA_FILE_NAME}"
            if self._exists(metadata):
                self.filesystem.delete_file(metadata)  # first: the checkpoint is no longer addressable
            self.filesystem.delete_dir(directory)
        except OSError as e:
            raise CheckpointDiscardError(self.uri(directory), f"cannot discard checkpoint {checkpoint_id}: {e}") from None
        if self._exists(directory):
            raise CheckpointDiscardError(self.uri(directory), f"checkpoint {checkpoint_id} was not fully discarded")
        return True

    def discard_shared_state(self, keys) -> int:
        """Delete the shared state objects of these registration keys (missing ones are not an error); how many
        were deleted. ``CheckpointDiscardError`` names the first object that could not be deleted."""
        deleted = 0
        for key in keys:
            path = f"{self.shared_state_directory}/{key}"
            try:
                if self._exists(path):
                    self.filesystem.delete_file(path)
                    deleted += 1
            except OSError as e:
                raise CheckpointDiscardError(self.uri(path), f"cannot discard shared state: {e}") from None
        return deleted

    def shared_state_files(self) -> set[str]:
        """The names of the objects in the shared state directory."""
        from pyarrow.fs import FileSelector

        try:
            infos = self.filesystem.get_file_info(FileSelector(self.shared_state_directory, allow_not_found=True))
        except OSError as e:
            raise storage_error_of(e, self.uri(self.shared_state_directory), "listing the shared state") from None
        return {info.base_name for info in infos}

    def _checkpoint_locations(self):
        from pyarrow.fs import FileSelector, FileType

        try:
            entries = self.filesystem.get_file_info(FileSelector(self.checkpoints_directory, allow_not_found=True))
        except OSError as e:
            raise storage_error_of(e, self.uri(self.checkpoints_directory), "listing the checkpoints") from None
        locations = []
        for entry in sorted(entries, key=lambda e: e.path):
            checkpoint_id = _checkpoint_id_of(entry.base_name)
            if entry.type is not FileType.Directory or checkpoint_id is None:
                continue
            metadata = f"{entry.path.rstrip('/')}/{METADATA_FILE_NAME}"
            try:
                info = self.filesystem.get_file_info(metadata)
            except OSError:
                info = None  # unreadable: listed, and reading it will say why
            if info is not None and info.type is not FileType.File:
                continue  # an incomplete checkpoint
            locations.append(CompletedCheckpointStorageLocation(
                checkpoint_id=checkpoint_id, external_pointer=self.uri(entry.path.rstrip("/")),
                metadata_pointer=self.uri(metadata), is_savepoint=False,
                metadata_size=info.size if info is not None else 0))
        return locations

    @property
    def completed_checkpoints_list_name(self) -> str:
        return self.uri(self.completed_checkpoints_file)

    def _read_pointer_list(self):
        path = self.completed_checkpoints_file
        if not self._exists(path):
            return None
        return self.uri(path), self._get(path, "reading the completed-checkpoint list")

    def _write_pointer_list(self, data):
        path = self.completed_checkpoints_file
        try:
            if data is None:
                if self._exists(path):
                    self.filesystem.delete_file(path)
                return
            self._put(path, data)
        except OSError as e:
            raise CheckpointStorageWriteError(f"{self.uri(path)}: writing the completed-checkpoint list failed: "
                                              f"{e}") from None

    def _after_discard_all(self):
        from pyarrow.fs import FileSelector

        try:
            if not self.filesystem.get_file_info(FileSelector(self.checkpoints_directory, recursive=True,
                                                              allow_not_found=True)):
                self.filesystem.delete_dir(self.checkpoints_directory)  # only if empty
        except OSError:
            pass

    def resolve_checkpoint(self, pointer: str) -> CompletedCheckpointStorageLocation:
        """A ``s3://`` checkpoint/savepoint directory or its ``_metadata`` object -> its completed location."""
        if not isinstance(pointer, str) or not pointer:
            raise InvalidCheckpointPointerError(f"checkpoint pointer must be a non-empty URI, got {pointer!r}")
        path = self._path_of(pointer)
        from pyarrow.fs import FileType

        kind = self._kind(path)
        if kind is FileType.NotFound:
            raise CheckpointNotFoundError(f"Cannot find checkpoint or savepoint object/directory '{pointer}'")
        if kind is FileType.Directory:
            directory, metadata = path, f"{path}/{METADATA_FILE_NAME}"
            if not self._is_file(metadata):
                raise CheckpointNotFoundError(
                    f"Cannot find meta data file '{METADATA_FILE_NAME}' in directory '{pointer}': it is not a "
                    "completed checkpoint/savepoint (an incomplete checkpoint, or not a checkpoint at all)")
        else:
            directory, metadata = _parent(path), path
        size = self.filesystem.get_file_info(metadata).size
        name = _basename(directory)
        return CompletedCheckpointStorageLocation(
            checkpoint_id=_checkpoint_id_of(name), external_pointer=self.uri(directory),
            metadata_pointer=self.uri(metadata), is_savepoint=name.startswith(SAVEPOINT_DIR_PREFIX),
            metadata_size=size)


def check_storage_uri(uri: str) -> None:
    """Raise ``InvalidCheckpointPointerError`` (one line, naming the URI) for a checkpoint storage URI that
    names no storage: an unknown scheme, an ``s3://`` URI without a bucket or with options pyarrow does not know."""
    scheme = urlsplit(uri).scheme
    if scheme in OBJECT_STORE_SCHEMES:
        object_store_filesystem(uri)
    elif scheme and scheme != "file":
        raise InvalidCheckpointPointerError(f"checkpoint storage {uri!r}: unknown scheme {scheme!r} (file:// or s3://)")
    elif not uri:
        raise InvalidCheckpointPointerError("checkpoint storage: empty URI")


def probe_storage(uri: str) -> None:
    """Raise ``CheckpointStorageIOError`` (one line, naming the URI) when the object store of an ``s3://`` URI
    cannot be reached or refuses this client (its endpoint, its credentials); a path or ``file://`` URI is created
    by the run itself."""
    if not is_object_store_uri(uri):
        return
    filesystem, path = object_store_filesystem(uri)
    try:
        filesystem.get_file_info(path)
    except OSError as e:
        reason = " ".join(str(e).split())
        raise CheckpointStorageIOError(uri_for_messages(uri), f"cannot reach the object store: {reason}") from None


def uri_for_messages(uri: str) -> str:
    """``uri`` as messages name it: without its query, which holds the object store client's options."""
    return uri.split("?")[0]


def object_store_path(uri: str) -> str:
    """The ``bucket/prefix`` an ``s3://`` URI names (as its filesystem's paths are written), without its query."""
    parts = urlsplit(uri)
    return (parts.netloc + parts.path).rstrip("/")


def child_uri(uri: str, *names: str) -> str:
    """``uri`` with ``names`` appended to its path (its query kept): where one run of several keeps its
    checkpoints under a common storage URI."""
    parts = urlsplit(uri)
    if not parts.scheme or parts.scheme == "file":
        return "/".join([uri.rstrip("/"), *names])
    return parts._replace(path="/".join([parts.path.rstrip("/"), *names])).geturl()


def savepoint_directory_for(checkpoint_storage: str | None, run_directory: str | os.PathLike) -> str:
    """Where a run writes its savepoints (Flink's ``state.savepoints.dir``), as its storage writes paths: with a
    checkpoint storage (the run's directory on it, ``<storage>/<run>[/<mode>]``), beside the checkpoints in its
    ``savepoints/`` (an object store's ``bucket/prefix/savepoints``, or a filesystem path, ``file://`` taken off),
    where a restore on another machine finds them and the run published beside them; without one, the run
    directory's ``savepoints/``. Both backends place savepoints by this one rule."""
    if checkpoint_storage is None:
        return os.path.abspath(os.path.join(os.fspath(run_directory), "savepoints"))
    uri = child_uri(checkpoint_storage, "savepoints")
    return object_store_path(uri) if is_object_store_uri(uri) else os.path.abspath(local_path(uri))


def checkpoint_storage_for(uri: str | os.PathLike, job_id: str, *, rng: random.Random | None = None,
                           memory_threshold: int = DEFAULT_MEMORY_THRESHOLD,
                           default_savepoint_directory: str | None = None) -> CheckpointStorage:
    """The storage of Flink's ``state.checkpoints.dir``: ``s3://bucket/prefix[?options]`` an
    ``ObjectStoreCheckpointStorage``; ``file:///path`` or a plain path a ``FileSystemCheckpointStorage``."""
    text = os.fspath(uri)
    if is_object_store_uri(text):
        filesystem, path = object_store_filesystem(text)
        return ObjectStoreCheckpointStorage(filesystem, path, job_id, scheme=urlsplit(text).scheme, rng=rng,
                                            memory_threshold=memory_threshold,
                                            default_savepoint_directory=default_savepoint_directory)
    scheme = urlsplit(text).scheme
    if scheme and scheme != "file":
        raise InvalidCheckpointPointerError(f"checkpoint storage {text!r}: unknown scheme {scheme!r} (file:// or s3://)")
    return FileSystemCheckpointStorage(local_path(text), job_id, rng=rng, memory_threshold=memory_threshold,
                                       default_savepoint_directory=default_savepoint_directory)


def restore_storage_for(pointer: str | os.PathLike | None,
                        working_directory: str | os.PathLike = ".") -> CheckpointStorage:
    """The storage that reads a savepoint or retained checkpoint a run starts from, chosen by the pointer's own
    scheme, whatever the job's checkpoint storage is (Flink's ``AbstractFsCheckpointStorageAccess
    .resolveCheckpointPointer`` opens the ``FileSystem`` of the pointer's URI): an ``s3://`` pointer (the S3
    client's options in its query, as a storage URI's) is read from its object store, a path or ``file://`` from
    the filesystem, relative to ``working_directory``."""
    text = os.fspath(pointer) if pointer is not None else ""
    if is_object_store_uri(text):
        filesystem, path = object_store_filesystem(text)
        return ObjectStoreCheckpointStorage(filesystem, _parent(path), "restore", scheme=urlsplit(text).scheme)
    return FileSystemCheckpointStorage(working_directory, "restore")
