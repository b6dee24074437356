"""A job's checkpoints held in memory (``CheckpointFiles``): each ``_metadata`` as bytes under a pointer
``jobmanager://<job-id>/chk-<n>`` (savepoints under their savepoint directory's pointer), and the
completed-checkpoint list as bytes. Fault injection can damage the bytes or deny reading them."""

from __future__ import annotations

from barriersim.runtime.storage.checkpoint_storage import CompletedCheckpointStorageLocation
from barriersim.runtime.storage.errors import (
    CheckpointNotFoundError,
    CheckpointStorageAccessError,
    InvalidCheckpointPointerError,
)
from barriersim.runtime.storage.layout import (
    COMPLETED_CHECKPOINTS_FILE_NAME,
    METADATA_FILE_NAME,
    checkpoint_directory_name,
)

SCHEME = "jobmanager://"


class MemoryCheckpointFiles:
    """The ``_metadata`` bytes of job ``job_id``'s checkpoints and savepoints, by pointer."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self._blobs: dict[str, tuple[CompletedCheckpointStorageLocation, bytes]] = {}
        self._pointer_list: bytes | None = None
        self._unreadable: set[str] = set()  # damaged (fault injection): reading them is denied

    def checkpoint_pointer(self, checkpoint_id: int) -> str:
        return f"{SCHEME}{self.job_id}/{checkpoint_directory_name(checkpoint_id)}"

    def holds(self, pointer: str) -> bool:
        return pointer in self._blobs

    def put(self, location: CompletedCheckpointStorageLocation, data: bytes) -> None:
        """Keep ``data`` as the ``_metadata`` of ``location`` (under its external pointer)."""
        self._blobs[location.external_pointer] = (location, bytes(data))

    def entry(self, pointer: str) -> tuple[CompletedCheckpointStorageLocation, bytes] | None:
        return self._blobs.get(pointer)

    def remove(self, pointer: str) -> None:
        del self._blobs[pointer]

    def deny_reads(self, pointer: str) -> None:
        """Fault injection: reading ``pointer`` fails from now on, as a denied permission would."""
        self._unreadable.add(pointer)

    # -- the completed-checkpoint list ----------------------------------------------------------------------

    @property
    def pointer_list_name(self) -> str:
        return f"{SCHEME}{self.job_id}/{COMPLETED_CHECKPOINTS_FILE_NAME}"

    def read_pointer_list(self) -> tuple[str, bytes] | None:
        if self._pointer_list is None:
            return None
        return self.pointer_list_name, self._pointer_list

    def write_pointer_list(self, data: bytes | None) -> None:
        self._pointer_list = None if data is None else bytes(data)

    # -- completed checkpoints ------------------------------------------------------------------------------

    def resolve(self, pointer: str) -> CompletedCheckpointStorageLocation:
        if not isinstance(pointer, str):
            raise InvalidCheckpointPointerError(f"checkpoint pointer must be a string, got {pointer!r}")
        if not pointer:
            raise InvalidCheckpointPointerError("empty checkpoint pointer")
        key = pointer.rstrip("/")
        if key.endswith("/" + METADATA_FILE_NAME):
            key = key[: -len(METADATA_FILE_NAME) - 1]
        if key not in self._blobs:
            raise CheckpointNotFoundError(
                f"Cannot find checkpoint or savepoint '{pointer}' in the job manager's memory"
            )
        return self._blobs[key][0]

    def read_metadata(self, location: CompletedCheckpointStorageLocation) -> bytes:
        if location.external_pointer in self._unreadable:
            raise CheckpointStorageAccessError(location.metadata_pointer, "reading the metadata: permission denied")
        try:
            return self._blobs[location.external_pointer][1]
        except KeyError:
            raise CheckpointNotFoundError(f"{location.metadata_pointer}: no such checkpoint in memory") from None

    def overwrite_metadata(self, location: CompletedCheckpointStorageLocation, data: bytes) -> None:
        self._blobs[location.external_pointer] = (self._blobs[location.external_pointer][0], bytes(data))

    def state_file_reader(self, location: CompletedCheckpointStorageLocation) -> None:
        return None  # every state stream is inline: there are no files

    def directory_name(self, location: CompletedCheckpointStorageLocation) -> str:
        return location.external_pointer.rsplit("/", 1)[-1]

    def checkpoint_locations(self) -> list[CompletedCheckpointStorageLocation]:
        return [loc for loc, _ in self._blobs.values() if not loc.is_savepoint]

    def discard(self, checkpoint_id: int) -> bool:
        self._unreadable.discard(self.checkpoint_pointer(checkpoint_id))
        return self._blobs.pop(self.checkpoint_pointer(checkpoint_id), None) is not None
