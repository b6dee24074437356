"""Reading completed checkpoints with every check, for every storage (Flink's ``Checkpoints.loadCheckpointMetadata``
and ``DefaultCompletedCheckpointStoreUtils.retrieveCompletedCheckpoints``): the ``_metadata`` is the file the
completed-checkpoint list points to, holds the checkpoint its directory is named for, was written there, and each
state file has the size and CRC32 its handle says. docs/architecture.md, "Checkpoint storage", has the details."""

from __future__ import annotations

import dataclasses
import zlib
from typing import cast

from barriersim.runtime.storage import metadata_serializer
from barriersim.runtime.storage.checkpoint_storage import (
    CheckpointFiles,
    CheckpointPointer,
    CompletedCheckpointPointer,
    CompletedCheckpointStorageLocation,
    LoadedCheckpoint,
)
from barriersim.runtime.storage.completed_checkpoint_list import CompletedCheckpointList
from barriersim.runtime.storage.errors import (
    CheckpointStorageError,
    CorruptMetadataError,
    CorruptStateFileError,
    NoValidCheckpointError,
)
from barriersim.runtime.storage.layout import CHECKPOINT_DIR_PREFIX, SAVEPOINT_DIR_PREFIX


class CheckpointReader:
    """Loads the checkpoints of ``files``; what it reads joins the locations ``completed`` knows."""

    def __init__(self, job_id: str, files: CheckpointFiles, completed: CompletedCheckpointList) -> None:
        self.job_id = job_id
        self._files = files
        self._completed = completed

    def load(self, pointer: CheckpointPointer) -> LoadedCheckpoint:
        """Read and check one checkpoint or savepoint: a pointer string (directory or ``_metadata``), a location,
        or an entry of the completed-checkpoint list (then the file must also be the one it points to)."""
        listed = pointer if isinstance(pointer, CompletedCheckpointPointer) else None
        if listed is not None:
            location = CompletedCheckpointStorageLocation(
                listed.checkpoint_id,
                listed.external_pointer,
                listed.metadata_pointer,
                listed.is_savepoint,
                listed.metadata_size,
            )
        elif isinstance(pointer, CompletedCheckpointStorageLocation):
            location = pointer
        else:
            location = self._files.resolve(cast(str, pointer))  # the one kind left: a pointer string
        source = location.metadata_pointer
        data = self._files.read_metadata(location)
        crc = zlib.crc32(data)
        if listed is not None and (len(data) != listed.metadata_size or crc != listed.metadata_crc32):
            raise CorruptMetadataError(
                source,
                f"is not the file the completed-checkpoint list points to for checkpoint {listed.checkpoint_id} "
                f"({len(data)} bytes, crc32 0x{crc:08x}; the list says {listed.metadata_size} bytes, "
                f"crc32 0x{listed.metadata_crc32:08x})",
            )

        def check_identity(checkpoint_id: int, recorded_directory: str | None) -> None:
            if location.checkpoint_id is not None and checkpoint_id != location.checkpoint_id:
                raise CorruptMetadataError(
                    source,
                    f"holds checkpoint {checkpoint_id}, not {location.checkpoint_id}: another checkpoint's metadata",
                )
            _check_directory(source, recorded_directory, self._files.directory_name(location))

        decoded = metadata_serializer.decode(
            data, source, read_state_file=self._files.state_file_reader(location), before_state_files=check_identity
        )
        location = dataclasses.replace(
            location,
            checkpoint_id=decoded.metadata.checkpoint_id,
            metadata_size=len(data),
            metadata_crc32=crc,
            state_files=decoded.state_files,
        )
        self._completed.remember_read(location)
        return LoadedCheckpoint(location, decoded.metadata)

    def retained(self) -> tuple[CompletedCheckpointStorageLocation, ...]:
        """The complete checkpoints of this job, newest (highest id) first."""
        return tuple(sorted(self._files.checkpoint_locations(), key=lambda loc: loc.checkpoint_id or 0, reverse=True))

    def load_latest(self) -> LoadedCheckpoint | None:
        """The newest checkpoint that loads, or None when no checkpoint is retained. The candidates are the
        completed-checkpoint list's (a listed checkpoint whose files are gone counts as damaged), or, without a
        list, the complete checkpoint directories. Damaged newer ones are reported in ``skipped``; if all are
        damaged, ``NoValidCheckpointError``."""
        skipped: list[CheckpointStorageError] = []
        pointers = self._completed.read()
        candidates = tuple(reversed(pointers)) if pointers is not None else self.retained()
        for candidate in candidates:
            try:
                loaded = self.load(candidate)
            except CheckpointStorageError as e:
                skipped.append(e)
                continue
            return LoadedCheckpoint(loaded.location, loaded.metadata, tuple(skipped))
        if skipped:
            raise NoValidCheckpointError(self.job_id, tuple(skipped))
        return None

    def check_state_files(self, checkpoint_id: int) -> None:
        """Read the state files of completed checkpoint ``checkpoint_id`` again and check each against its handle
        (before it is restored: Flink's tasks read their state files at restore); typed errors name the file."""
        location = self._completed.location_of(checkpoint_id)
        reader = self._files.state_file_reader(location) if location is not None else None
        if location is None or reader is None:
            return
        for handle in location.state_files:
            path, data = reader(handle)
            crc = zlib.crc32(data)
            if len(data) != handle.size or crc != handle.crc32:
                raise CorruptStateFileError(
                    path,
                    f"state file of checkpoint {checkpoint_id} has {len(data)} bytes, crc32 0x{crc:08x}; its handle "
                    f"says {handle.size} bytes, crc32 0x{handle.crc32:08x}",
                )


def _check_directory(source: str, recorded: str | None, directory: str) -> None:
    """A ``_metadata`` read from a ``chk-<n>`` directory must have been written there; one read from a savepoint
    directory must be a savepoint's (savepoints are relocatable, as in Flink: a savepoint's ``_metadata`` in
    another savepoint directory is a moved savepoint). Metadata that records no directory is not checked."""
    if recorded is None:
        return
    if directory.startswith(CHECKPOINT_DIR_PREFIX) and recorded != directory:
        raise CorruptMetadataError(
            source, f"was written to {recorded!r}, not to {directory!r}: another checkpoint's or savepoint's metadata"
        )
    if directory.startswith(SAVEPOINT_DIR_PREFIX) and not recorded.startswith(SAVEPOINT_DIR_PREFIX):
        raise CorruptMetadataError(source, f"is the metadata of the checkpoint in {recorded!r}, not of a savepoint")
