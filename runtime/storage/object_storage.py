"""Checkpoint storage on an object store (``s3://``, Flink's ``FsCheckpointStorageAccess`` over its S3
``FileSystem``) in the filesystem storage's layout, and the choice of storage by URI, as Flink's
``state.checkpoints.dir``: ``file://`` or a plain path for ``FileSystemCheckpointStorage``, ``s3://`` for
``ObjectStoreCheckpointStorage``. Pointers are URIs whose query holds the S3 client's options;
docs/recovery-store.md has the details."""

from __future__ import annotations

import os
import random
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

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
from barriersim.runtime.storage.errors import (
    CheckpointStorageIOError,
    CheckpointStorageWriteError,
    InvalidCheckpointPointerError,
    NoSavepointLocationError,
)
from barriersim.runtime.storage.fs_storage import FileSystemCheckpointStorage, local_path
from barriersim.runtime.storage.layout import savepoint_directory_name
from barriersim.runtime.storage.metadata_serializer import DEFAULT_MEMORY_THRESHOLD
from barriersim.runtime.storage.object_files import ObjectStoreCheckpointFiles
from barriersim.runtime.storage.object_location import ObjectStoreCheckpointStorageLocation
from barriersim.runtime.storage.object_store import (
    OBJECT_STORE_SCHEMES,
    ObjectStore,
    is_object_store_uri,
    object_store_filesystem,
    parent,
)
from barriersim.runtime.storage.retention import RetentionDecision, discard_on_termination, retain_or_discard

__all__ = [
    "ObjectStoreCheckpointStorage",
    "is_object_store_uri",
    "object_store_filesystem",
    "check_storage_uri",
    "probe_storage",
    "uri_for_messages",
    "object_store_path",
    "child_uri",
    "savepoint_directory_for",
    "checkpoint_storage_for",
    "restore_storage_for",
]

_SAVEPOINT_DIR_ATTEMPTS = 10


class ObjectStoreCheckpointStorage(CheckpointStorage):
    """Flink's ``FsCheckpointStorageAccess`` for one job on an object store: ``filesystem`` a
    ``pyarrow.fs.FileSystem``, ``base_path`` the ``bucket/prefix`` the job's directory goes under, ``scheme`` the
    pointers' (``s3``)."""

    files: ObjectStoreCheckpointFiles

    def __init__(
        self,
        filesystem: Any,  # a pyarrow.fs.FileSystem (pyarrow is untyped)
        base_path: str,
        job_id: str,
        *,
        scheme: str = "s3",
        default_savepoint_directory: str | None = None,
        rng: random.Random | None = None,
        writer: AtomicFileWriter | None = None,
        memory_threshold: int = DEFAULT_MEMORY_THRESHOLD,
    ) -> None:
        self.job_id = checked_job_id(job_id)
        self.memory_threshold = checked_memory_threshold(memory_threshold)
        self.writer = writer or AtomicFileWriter()  # only its fault-injection switch: a PUT is atomic
        self._rng = rng or random.Random(0)
        self.filesystem = filesystem
        self.scheme = scheme
        self.base_path = base_path.strip("/")
        self.default_savepoint_directory = default_savepoint_directory
        self.objects = ObjectStore(filesystem, scheme)
        self.files = ObjectStoreCheckpointFiles(self.objects, f"{self.base_path}/{job_id}")
        self.checkpoints_directory = self.files.checkpoints_directory
        self.completed = CompletedCheckpointList(job_id, self.files)
        self._reader = CheckpointReader(job_id, self.files, self.completed)

    # -- locations --------------------------------------------------------------------------------------------

    def initialize_base_locations(self) -> None:
        """Create the job's directory (and the bucket's, where the store allows)."""
        try:
            self.objects.create_dir(self.checkpoints_directory)
        except OSError as e:
            raise CheckpointStorageWriteError(
                f"{self.objects.uri(self.checkpoints_directory)}: cannot create the job's checkpoint directory: {e}"
            ) from None

    def checkpoint_directory(self, checkpoint_id: int) -> str:
        return self.files.checkpoint_directory(checkpoint_id)

    def initialize_location_for_savepoint(self, checkpoint_id: int, target_location: str | None = None) -> str:
        """A fresh ``savepoint-<jobid6>-<random>`` directory under ``target_location`` or the default."""
        base = target_location if target_location is not None else self.default_savepoint_directory
        if base is None:
            raise NoSavepointLocationError(
                f"savepoint {checkpoint_id} of job {self.job_id}: no savepoint location given and no default location "
                "configured"
            )
        base = self.objects.path_of(base)
        for _ in range(_SAVEPOINT_DIR_ATTEMPTS):
            name = savepoint_directory_name(self.job_id, self._rng)
            if not self.objects.exists(f"{base}/{name}"):
                return f"{base}/{name}"
        raise CheckpointStorageWriteError(f"{self.objects.uri(base)}: failed to find a fresh savepoint directory name")

    # -- writing ----------------------------------------------------------------------------------------------

    def fail_next_write(self, fault: WriteFault = WriteFault.FAIL_BEFORE_WRITE) -> None:
        self.writer.fail_next_write(fault)

    def persist_checkpoint(
        self, metadata: CheckpointMetadata, *, is_savepoint: bool = False, target_location: str | None = None
    ) -> CompletedCheckpointStorageLocation:
        checkpoint_id = metadata.checkpoint_id
        directory = (
            self.initialize_location_for_savepoint(checkpoint_id, target_location)
            if is_savepoint
            else self.checkpoint_directory(checkpoint_id)
        )
        location = ObjectStoreCheckpointStorageLocation(
            self.objects,
            checkpoint_id,
            directory,
            self.files.shared_state_directory,
            is_savepoint=is_savepoint,
            rng=self._rng,
            metadata_writer=self.writer,
            memory_threshold=self.memory_threshold,
        )
        completed = location.persist(metadata)
        self.completed.remember_written(completed)
        return completed

    # -- reading ----------------------------------------------------------------------------------------------

    def resolve_checkpoint(self, pointer: str) -> CompletedCheckpointStorageLocation:
        return self.files.resolve(pointer)

    def load_checkpoint(self, pointer: CheckpointPointer) -> LoadedCheckpoint:
        return self._reader.load(pointer)

    def load_checkpoint_metadata(self, pointer: str) -> CheckpointMetadata:
        return self._reader.load(pointer).metadata

    def adopt_restored(self, location: CompletedCheckpointStorageLocation, source: CheckpointStorage) -> None:
        self.completed.adopt(location)  # read by its URI, wherever it lies

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
            self.files.remove_job_directory()
        return decisions


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


def savepoint_directory_for(checkpoint_storage: str | None, run_directory: str | os.PathLike[str]) -> str:
    """Where a run writes its savepoints (Flink's ``state.savepoints.dir``), as its storage writes paths: with a
    checkpoint storage (the run's directory on it, ``<storage>/<run>[/<mode>]``), beside the checkpoints in its
    ``savepoints/`` (an object store's ``bucket/prefix/savepoints``, or a filesystem path, ``file://`` taken off),
    where a restore on another machine finds them and the run published beside them; without one, the run
    directory's ``savepoints/``. Both backends place savepoints by this one rule."""
    if checkpoint_storage is None:
        return os.path.abspath(os.path.join(os.fspath(run_directory), "savepoints"))
    uri = child_uri(checkpoint_storage, "savepoints")
    return object_store_path(uri) if is_object_store_uri(uri) else os.path.abspath(local_path(uri))


def checkpoint_storage_for(
    uri: str | os.PathLike[str],
    job_id: str,
    *,
    rng: random.Random | None = None,
    memory_threshold: int = DEFAULT_MEMORY_THRESHOLD,
    default_savepoint_directory: str | None = None,
) -> CheckpointStorage:
    """The storage of Flink's ``state.checkpoints.dir``: ``s3://bucket/prefix[?options]`` an
    ``ObjectStoreCheckpointStorage``; ``file:///path`` or a plain path a ``FileSystemCheckpointStorage``."""
    text = os.fspath(uri)
    if is_object_store_uri(text):
        filesystem, path = object_store_filesystem(text)
        return ObjectStoreCheckpointStorage(
            filesystem,
            path,
            job_id,
            scheme=urlsplit(text).scheme,
            rng=rng,
            memory_threshold=memory_threshold,
            default_savepoint_directory=default_savepoint_directory,
        )
    scheme = urlsplit(text).scheme
    if scheme and scheme != "file":
        raise InvalidCheckpointPointerError(
            f"checkpoint storage {text!r}: unknown scheme {scheme!r} (file:// or s3://)"
        )
    return FileSystemCheckpointStorage(
        local_path(text),
        job_id,
        rng=rng,
        memory_threshold=memory_threshold,
        default_savepoint_directory=default_savepoint_directory,
    )


def restore_storage_for(
    pointer: str | os.PathLike[str] | None, working_directory: str | os.PathLike[str] = "."
) -> CheckpointStorage:
    """The storage that reads a savepoint or retained checkpoint a run starts from, chosen by the pointer's own
    scheme, whatever the job's checkpoint storage is (Flink's ``AbstractFsCheckpointStorageAccess
    .resolveCheckpointPointer`` opens the ``FileSystem`` of the pointer's URI): an ``s3://`` pointer (the S3
    client's options in its query, as a storage URI's) is read from its object store, a path or ``file://`` from
    the filesystem, relative to ``working_directory``."""
    text = os.fspath(pointer) if pointer is not None else ""
    if is_object_store_uri(text):
        filesystem, path = object_store_filesystem(text)
        return ObjectStoreCheckpointStorage(filesystem, parent(path), "restore", scheme=urlsplit(text).scheme)
    return FileSystemCheckpointStorage(working_directory, "restore")
