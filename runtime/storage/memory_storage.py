"""In-memory checkpoint storage: the metadata of each checkpoint kept as bytes (Flink's JobManager storage).

How this works: ``persist_checkpoint`` encodes the metadata exactly as the filesystem storage does (every state
stream inline: there are no files) and keeps the bytes under a pointer ``jobmanager://<job-id>/chk-<n>``
(savepoints under ``jobmanager://savepoints/savepoint-<jobid6>-<random>``); the checkpoint statistics show a
checkpoint's as Flink's ``<checkpoint-not-externally-addressable>`` (``external_path``); loading decodes them
again, so the same checksum and checkpoint-id checks apply. The completed-checkpoint list is kept as bytes too,
in the same format. The fault-injection switch is honoured: a failing or crashing write stores nothing (there is no disk
a crash could leave something on). Nothing survives the process, which is the point of this storage: fast,
deterministic tests and simulations. Mirrors Flink's ``JobManagerCheckpointStorage`` /
``MemoryBackendCheckpointStorageAccess`` (without a checkpoint directory).
"""

from __future__ import annotations

import random
import zlib

from barriersim.runtime.storage import metadata_serializer
from barriersim.runtime.storage.atomic_file import AtomicFileWriter
from barriersim.runtime.storage.checkpoint_storage import (
    CHECKPOINT_DIR_PREFIX,
    COMPLETED_CHECKPOINTS_FILE_NAME,
    METADATA_FILE_NAME,
    SAVEPOINT_DIR_PREFIX,
    CheckpointStorage,
    CompletedCheckpointStorageLocation,
)
from barriersim.runtime.storage.errors import (
    CheckpointAlreadyExistsError,
    CheckpointNotFoundError,
    CheckpointStorageAccessError,
    CheckpointStorageWriteError,
    InvalidCheckpointPointerError,
)

SCHEME = "jobmanager://"
# Flink's NonPersistentMetadataCheckpointStorageLocation.EXTERNAL_POINTER: what the checkpoint statistics show as
# the external path of a checkpoint kept in the JobManager's memory
NOT_EXTERNALLY_ADDRESSABLE = "<checkpoint-not-externally-addressable>"


def external_path(pointer: str | None, is_savepoint: bool) -> str | None:
    """The external path Flink's checkpoint statistics show for a completed or restored snapshot at ``pointer``
    (``CompletedCheckpointStats.getExternalPath``): its directory, or ``NOT_EXTERNALLY_ADDRESSABLE`` for a
    checkpoint kept in this storage's memory. A savepoint (and a snapshot a user restores, which the job keeps
    as one) always has its pointer: Flink writes savepoints to a directory, which the simulator stands in for
    with ``jobmanager://savepoints/``."""
    if pointer is not None and pointer.startswith(SCHEME) and not is_savepoint:
        return NOT_EXTERNALLY_ADDRESSABLE
    return pointer


class JobManagerCheckpointStorage(CheckpointStorage):
    """Checkpoint metadata held in memory, one byte string per checkpoint/savepoint."""

    def __init__(self, job_id: str, *, rng: random.Random | None = None, writer: AtomicFileWriter | None = None):
        super().__init__(job_id, writer)
        self._rng = rng or random.Random(0)
        self._blobs: dict[str, tuple[CompletedCheckpointStorageLocation, bytes]] = {}
        self._pointer_list: bytes | None = None
        self._unreadable: set[str] = set()  # damaged (fault injection): reading them is denied

    def _checkpoint_pointer(self, checkpoint_id: int) -> str:
        return f"{SCHEME}{self.job_id}/{CHECKPOINT_DIR_PREFIX}{checkpoint_id}"

    def _store(self, metadata, is_savepoint, target_location):
        checkpoint_id = metadata.checkpoint_id
        fault = self.writer.take_fault()
        if fault is not None:
            raise CheckpointStorageWriteError(
                f"{SCHEME}{self.job_id}: injected write failure ({fault.value}) for checkpoint {checkpoint_id}; nothing was stored"
            )
        if is_savepoint:
            base = (target_location or f"{SCHEME}savepoints").rstrip("/")
            while True:
                name = f"{SAVEPOINT_DIR_PREFIX}{self.job_id[:6]}-" + "".join(self._rng.choice("0123456789abcdef") for _ in range(12))
                pointer = f"{base}/{name}"
                if pointer not in self._blobs:
                    break
        else:
            pointer = self._checkpoint_pointer(checkpoint_id)
            if pointer in self._blobs:
                raise CheckpointAlreadyExistsError(f"{pointer}/{METADATA_FILE_NAME}: checkpoint {checkpoint_id} already has metadata")
        data = metadata_serializer.serialize(metadata)
        location = CompletedCheckpointStorageLocation(
            checkpoint_id=checkpoint_id,
            external_pointer=pointer,
            metadata_pointer=f"{pointer}/{METADATA_FILE_NAME}",
            is_savepoint=is_savepoint,
            metadata_size=len(data),
            metadata_crc32=zlib.crc32(data),
        )
        self._blobs[pointer] = (location, bytes(data))
        return location

    def _read(self, location):
        if location.external_pointer in self._unreadable:
            raise CheckpointStorageAccessError(location.metadata_pointer, "reading the metadata: permission denied")
        try:
            return self._blobs[location.external_pointer][1]
        except KeyError:
            raise CheckpointNotFoundError(f"{location.metadata_pointer}: no such checkpoint in memory") from None

    def _adopt(self, location, source):
        if source is not self and location.external_pointer not in self._blobs:
            self._blobs[location.external_pointer] = (location, bytes(source._read(location)))

    def _state_file_reader(self, location):
        return None

    def _directory_name(self, location):
        return location.external_pointer.rsplit("/", 1)[-1]

    def _overwrite(self, location, data):
        self._blobs[location.external_pointer] = (self._blobs[location.external_pointer][0], bytes(data))

    def _discard(self, checkpoint_id):
        self._unreadable.discard(self._checkpoint_pointer(checkpoint_id))
        return self._blobs.pop(self._checkpoint_pointer(checkpoint_id), None) is not None

    def _checkpoint_locations(self):
        return [loc for loc, _ in self._blobs.values() if not loc.is_savepoint]

    @property
    def completed_checkpoints_list_name(self) -> str:
        return f"{SCHEME}{self.job_id}/{COMPLETED_CHECKPOINTS_FILE_NAME}"

    def _read_pointer_list(self):
        if self._pointer_list is None:
            return None
        return self.completed_checkpoints_list_name, self._pointer_list

    def _write_pointer_list(self, data):
        self._pointer_list = None if data is None else bytes(data)

    def resolve_checkpoint(self, pointer: str) -> CompletedCheckpointStorageLocation:
        if not isinstance(pointer, str):
            raise InvalidCheckpointPointerError(f"checkpoint pointer must be a string, got {pointer!r}")
        if not pointer:
            raise InvalidCheckpointPointerError("empty checkpoint pointer")
        key = pointer.rstrip("/")
        if key.endswith("/" + METADATA_FILE_NAME):
            key = key[: -len(METADATA_FILE_NAME) - 1]
        if key not in self._blobs:
            raise CheckpointNotFoundError(f"Cannot find checkpoint or savepoint '{pointer}' in the job manager's memory")
        return self._blobs[key][0]
