"""Writing one checkpoint or savepoint to its directory on a filesystem (Flink's ``FsCheckpointStorageLocation``
with its ``FsCheckpointStreamFactory`` and ``FsCheckpointMetadataOutputStream``): state streams at or above the
memory threshold to files of their own, an incremental checkpoint's new shared files to ``shared/``, then the
``_metadata``, atomically and last, so that the checkpoint is complete exactly when it exists."""

from __future__ import annotations

import os
import random
import uuid
import zlib
from pathlib import Path

from barriersim.runtime.state.snapshot import CheckpointMetadata
from barriersim.runtime.storage import metadata_serializer
from barriersim.runtime.storage.atomic_file import AtomicFileWriter
from barriersim.runtime.storage.checkpoint_storage import CompletedCheckpointStorageLocation
from barriersim.runtime.storage.errors import CheckpointAlreadyExistsError, CheckpointStorageWriteError
from barriersim.runtime.storage.layout import METADATA_FILE_NAME, is_file_name
from barriersim.runtime.storage.metadata_serializer import SHARED_FILE_PREFIX, StateFileHandle


class FsCheckpointStorageLocation:
    """Checkpoint ``checkpoint_id``'s (or a savepoint's) ``directory``, being written: state files through
    ``state_writer`` (names drawn from ``rng``), shared files to ``shared_state_directory`` (a savepoint writes
    none: its state is self-contained), the ``_metadata`` through ``metadata_writer`` (the fault-injection switch)."""

    def __init__(
        self,
        checkpoint_id: int,
        directory: Path,
        shared_state_directory: Path,
        *,
        is_savepoint: bool,
        rng: random.Random,
        state_writer: AtomicFileWriter,
        metadata_writer: AtomicFileWriter,
        memory_threshold: int,
    ) -> None:
        self.checkpoint_id = checkpoint_id
        self.directory = directory
        self.is_savepoint = is_savepoint
        self.shared_state_directory = shared_state_directory
        self.metadata_file = directory / METADATA_FILE_NAME
        self._rng = rng
        self._state_writer = state_writer
        self._metadata_writer = metadata_writer
        self._memory_threshold = memory_threshold
        self._written: list[StateFileHandle] = []

    def write_state_file(self, data: bytes) -> StateFileHandle:
        """A state stream as a file of its own in the checkpoint's directory, named by a random UUID."""
        name = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
        try:
            self._state_writer.write(self.directory / name, data, exclusive=True)
        except OSError as e:
            raise CheckpointStorageWriteError(
                f"{self.directory / name}: writing a state file of checkpoint {self.checkpoint_id} failed: {e}"
            ) from e
        self._written.append(StateFileHandle(name, len(data), zlib.crc32(data)))
        return self._written[-1]

    def write_shared_file(self, key: str, data: bytes) -> StateFileHandle:
        """A shared run under its registration key, written by the first checkpoint that uploads it."""
        path = self.shared_state_directory / key
        handle = StateFileHandle(SHARED_FILE_PREFIX + key, len(data), zlib.crc32(data))
        if not is_file_name(key):
            raise CheckpointStorageWriteError(f"{path}: {key!r} is not a shared state file name")
        if not os.path.lexists(path):  # written by the first checkpoint that uploaded it; later ones refer to it
            try:
                self._state_writer.write(path, data, exclusive=True)
            except OSError as e:
                raise CheckpointStorageWriteError(
                    f"{path}: writing a shared state file of checkpoint {self.checkpoint_id} failed: {e}"
                ) from e
        self._written.append(handle)
        return handle

    def persist(self, metadata: CheckpointMetadata) -> CompletedCheckpointStorageLocation:
        """Write ``metadata``'s state files and then its ``_metadata``; the completed location."""
        path = self.metadata_file
        if os.path.lexists(path):
            raise CheckpointAlreadyExistsError(f"{path}: checkpoint {self.checkpoint_id} already has metadata")
        data = metadata_serializer.serialize(
            metadata,
            directory=self.directory.name,
            write_state_file=self.write_state_file,
            memory_threshold=self._memory_threshold,
            write_shared_file=None if self.is_savepoint else self.write_shared_file,
        )
        try:
            self._metadata_writer.write(path, data, exclusive=True)
        except FileExistsError:
            raise CheckpointAlreadyExistsError(
                f"{path}: checkpoint {self.checkpoint_id} already has metadata"
            ) from None
        except OSError as e:
            raise CheckpointStorageWriteError(
                f"{path}: writing checkpoint {self.checkpoint_id} metadata failed: {e}"
            ) from e
        resolved = self.directory.resolve()
        return CompletedCheckpointStorageLocation(
            checkpoint_id=self.checkpoint_id,
            external_pointer=str(resolved),
            metadata_pointer=str(resolved / METADATA_FILE_NAME),
            is_savepoint=self.is_savepoint,
            metadata_size=len(data),
            metadata_crc32=zlib.crc32(data),
            state_files=tuple(self._written),
        )
