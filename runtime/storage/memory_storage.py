"""In-memory checkpoint storage (Flink's ``JobManagerCheckpointStorage`` / ``MemoryBackendCheckpointStorageAccess``
without a checkpoint directory): each checkpoint's metadata encoded exactly as on disk, every state stream inline,
kept as bytes in ``MemoryCheckpointFiles``, so the same checks apply when it is loaded. Nothing survives the
process: fast, deterministic tests and simulations. ``external_path`` is what the checkpoint statistics show."""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterable

from barriersim.runtime.state.snapshot import CheckpointMetadata
from barriersim.runtime.storage import metadata_serializer
from barriersim.runtime.storage.atomic_file import AtomicFileWriter, WriteFault
from barriersim.runtime.storage.checkpoint_reader import CheckpointReader
from barriersim.runtime.storage.checkpoint_storage import (
    CheckpointPointer,
    CheckpointStorage,
    CompletedCheckpointPointer,
    CompletedCheckpointStorageLocation,
    LoadedCheckpoint,
    checked_job_id,
)
from barriersim.runtime.storage.completed_checkpoint_list import CompletedCheckpointList
from barriersim.runtime.storage.errors import CheckpointAlreadyExistsError, CheckpointStorageWriteError
from barriersim.runtime.storage.layout import METADATA_FILE_NAME, savepoint_directory_name
from barriersim.runtime.storage.memory_files import SCHEME, MemoryCheckpointFiles
from barriersim.runtime.storage.retention import RetentionDecision, discard_on_termination, retain_or_discard

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

    files: MemoryCheckpointFiles

    def __init__(
        self, job_id: str, *, rng: random.Random | None = None, writer: AtomicFileWriter | None = None
    ) -> None:
        self.job_id = checked_job_id(job_id)
        self.writer = writer or AtomicFileWriter()  # only its fault-injection switch: there is no disk
        self._rng = rng or random.Random(0)
        self.files = MemoryCheckpointFiles(job_id)
        self.completed = CompletedCheckpointList(job_id, self.files)
        self._reader = CheckpointReader(job_id, self.files, self.completed)

    def initialize_base_locations(self) -> None:
        """Nothing to create: there is no checkpoint directory."""

    # -- writing ----------------------------------------------------------------------------------------------

    def fail_next_write(self, fault: WriteFault = WriteFault.FAIL_BEFORE_WRITE) -> None:
        self.writer.fail_next_write(fault)

    def persist_checkpoint(
        self, metadata: CheckpointMetadata, *, is_savepoint: bool = False, target_location: str | None = None
    ) -> CompletedCheckpointStorageLocation:
        """A failing or crashing write (fault injection) stores nothing: there is no disk it could leave
        something on."""
        checkpoint_id = metadata.checkpoint_id
        fault = self.writer.take_fault()
        if fault is not None:
            raise CheckpointStorageWriteError(
                f"{SCHEME}{self.job_id}: injected write failure ({fault.value}) for checkpoint {checkpoint_id}; "
                "nothing was stored"
            )
        if is_savepoint:
            base = (target_location or f"{SCHEME}savepoints").rstrip("/")
            while True:
                pointer = f"{base}/{savepoint_directory_name(self.job_id, self._rng)}"
                if not self.files.holds(pointer):
                    break
        else:
            pointer = self.files.checkpoint_pointer(checkpoint_id)
            if self.files.holds(pointer):
                raise CheckpointAlreadyExistsError(
                    f"{pointer}/{METADATA_FILE_NAME}: checkpoint {checkpoint_id} already has metadata"
                )
        data = metadata_serializer.serialize(metadata)
        location = CompletedCheckpointStorageLocation(
            checkpoint_id=checkpoint_id,
            external_pointer=pointer,
            metadata_pointer=f"{pointer}/{METADATA_FILE_NAME}",
            is_savepoint=is_savepoint,
            metadata_size=len(data),
            metadata_crc32=zlib.crc32(data),
        )
        self.files.put(location, data)
        self.completed.remember_written(location)
        return location

    # -- reading ----------------------------------------------------------------------------------------------

    def resolve_checkpoint(self, pointer: str) -> CompletedCheckpointStorageLocation:
        return self.files.resolve(pointer)

    def load_checkpoint(self, pointer: CheckpointPointer) -> LoadedCheckpoint:
        return self._reader.load(pointer)

    def load_checkpoint_metadata(self, pointer: str) -> CheckpointMetadata:
        return self._reader.load(pointer).metadata

    def adopt_restored(self, location: CompletedCheckpointStorageLocation, source: CheckpointStorage) -> None:
        """The restored checkpoint's bytes are copied here, so that the completed-checkpoint list can lead to it."""
        if self.completed.adopt(location) and source is not self and not self.files.holds(location.external_pointer):
            self.files.put(location, source.files.read_metadata(location))

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
        """Shared state stays inline in the metadata here: nothing to delete."""
        return 0

    def shared_state_files(self) -> set[str]:
        return set()

    def apply_retention_policy(self, retention_policy: object, job_status: object) -> dict[int, RetentionDecision]:
        discard = discard_on_termination(retention_policy, job_status)
        decisions = retain_or_discard(self.list_retained_checkpoints(), discard, self.discard_checkpoint)
        self.completed.remove()
        return decisions
