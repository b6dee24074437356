"""The completed-checkpoint list: the persisted pointers a new JobManager recovers its completed checkpoints from
(Flink's ``StateHandleStore`` under ``DefaultCompletedCheckpointStore``), and the locations it may point to (those
this JobManager wrote or read). Framed msgpack (``metadata_serializer.frame``, its own magic) in the storage's
``CheckpointFiles``; docs/recovery-store.md says how recovery checks it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgpack

from barriersim.runtime.storage import metadata_serializer
from barriersim.runtime.storage.checkpoint_storage import (
    CheckpointFiles,
    CompletedCheckpointPointer,
    CompletedCheckpointStorageLocation,
)
from barriersim.runtime.storage.errors import CheckpointStorageError, CorruptPointerListError

POINTER_LIST_MAGIC = 0x4960672E  # the metadata magic + 1: a different kind of file


class CompletedCheckpointList:
    """The completed-checkpoint list of job ``job_id`` in ``files``, and the completed checkpoints known here."""

    def __init__(self, job_id: str, files: CheckpointFiles) -> None:
        self.job_id = job_id
        self._files = files
        # the completed checkpoints this JobManager wrote or read: what the completed-checkpoint list points to
        # a location read through a bare pointer may have no id
        self._known: dict[int | None, CompletedCheckpointStorageLocation] = {}

    @property
    def name(self) -> str:
        return self._files.pointer_list_name

    # -- the locations known here -------------------------------------------------------------------------

    def remember_written(self, location: CompletedCheckpointStorageLocation) -> None:
        """A checkpoint this storage wrote (a savepoint the job takes is never in the store: it may hold a
        checkpoint's id)."""
        if not location.is_savepoint:
            self._known[location.checkpoint_id] = location

    def remember_read(self, location: CompletedCheckpointStorageLocation) -> None:
        """A checkpoint or savepoint this storage read (a restored savepoint may join the store)."""
        if not location.is_savepoint or location.checkpoint_id not in self._known:
            self._known[location.checkpoint_id] = location

    def adopt(self, location: CompletedCheckpointStorageLocation) -> bool:
        """A checkpoint another storage read, restored by this job; False if it was known already."""
        if location.checkpoint_id is None or location.checkpoint_id in self._known:
            return False
        self._known[location.checkpoint_id] = location
        return True

    def location_of(self, checkpoint_id: int) -> CompletedCheckpointStorageLocation | None:
        return self._known.get(checkpoint_id)

    def forget(self, checkpoint_id: int) -> None:
        self._known.pop(checkpoint_id, None)

    def forget_all(self) -> None:
        """What a dead JobManager knew about completed checkpoints is gone (a new one reads the list)."""
        self._known.clear()

    # -- the persisted list ---------------------------------------------------------------------------------

    def update(self, checkpoint_ids: Iterable[int]) -> None:
        """Make the list hold exactly ``checkpoint_ids`` (oldest first), in one atomic write; each must be a
        checkpoint known here. An empty list removes the file."""
        pointers = []
        for cid in checkpoint_ids:
            location = self._known.get(cid)
            if location is None or location.metadata_crc32 is None:
                raise CheckpointStorageError(
                    f"job {self.job_id}: checkpoint {cid} was neither written nor read here; "
                    "the completed-checkpoint list cannot point to it"
                )
            pointers.append(
                CompletedCheckpointPointer(
                    cid,
                    location.external_pointer,
                    location.metadata_pointer,
                    location.metadata_size,
                    location.metadata_crc32,
                    location.is_savepoint,
                )
            )
        self.write(pointers)

    def write(self, pointers: Sequence[CompletedCheckpointPointer]) -> None:
        """Replace the list by ``pointers`` (in this order), in one atomic write; an empty list removes the file."""
        if not pointers:
            self.remove()
            return
        entries = [
            [p.checkpoint_id, p.external_pointer, p.metadata_pointer, p.metadata_size, p.metadata_crc32, p.is_savepoint]
            for p in pointers
        ]
        payload = msgpack.packb({"job_id": self.job_id, "checkpoints": entries}, use_bin_type=True)
        self._files.write_pointer_list(metadata_serializer.frame(payload, POINTER_LIST_MAGIC))

    def remove(self) -> None:
        self._files.write_pointer_list(None)

    def read(self) -> tuple[CompletedCheckpointPointer, ...] | None:
        """The list, oldest first; None if there is none (``CorruptPointerListError`` naming it if damaged)."""
        found = self._files.read_pointer_list()
        return None if found is None else self.decode(*found)

    def decode(self, source: str, data: bytes) -> tuple[CompletedCheckpointPointer, ...]:
        """The pointers of the list image ``data`` read from ``source``, oldest first (typed errors if damaged)."""
        payload = metadata_serializer.unframe(
            data, source, POINTER_LIST_MAGIC, "completed-checkpoint list", CorruptPointerListError
        )
        try:
            plain = msgpack.unpackb(payload, raw=False, use_list=False)
            if not isinstance(plain, dict) or plain.get("job_id") != self.job_id:
                raise ValueError(
                    f"not the list of job {self.job_id} (job "
                    f"{plain.get('job_id') if isinstance(plain, dict) else None!r})"
                )
            pointers = tuple(CompletedCheckpointPointer(*_pointer_fields(entry)) for entry in plain["checkpoints"])
        except (msgpack.UnpackException, ValueError, TypeError, KeyError) as e:
            raise CorruptPointerListError(source, f"malformed list: {e or type(e).__name__}") from None
        ids = [p.checkpoint_id for p in pointers]
        if len(ids) != len(set(ids)):
            raise CorruptPointerListError(source, f"malformed list: checkpoint ids {ids} repeat")
        return tuple(sorted(pointers, key=lambda p: p.checkpoint_id))  # chronologically, as Flink sorts by name


def _pointer_fields(entry: object) -> tuple[int, str, str, int, int, bool]:
    shape = "[id, directory, metadata file, size, crc32, is savepoint]"
    if not isinstance(entry, tuple) or len(entry) != 6:
        raise ValueError(f"entry {entry!r} is not {shape}")
    cid, external, metadata, size, crc, is_savepoint = entry
    if not (
        isinstance(cid, int)
        and isinstance(external, str)
        and isinstance(metadata, str)
        and isinstance(size, int)
        and isinstance(crc, int)
        and isinstance(is_savepoint, bool)
    ) or isinstance(cid, bool):
        raise ValueError(f"entry {entry!r} is not {shape}")
    return cid, external, metadata, size, crc, is_savepoint
