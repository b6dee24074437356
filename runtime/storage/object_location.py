"""Writing one checkpoint or savepoint to its directory on an object store (Flink's ``FsCheckpointStorageLocation``
over its S3 ``FileSystem``): every state object first, an incremental checkpoint's new shared objects to
``shared/``, then the ``_metadata`` in one PUT, so that the checkpoint is complete exactly when it exists."""

from __future__ import annotations

import random
import uuid
import zlib

from barriersim.runtime.state.snapshot import CheckpointMetadata
from barriersim.runtime.storage import metadata_serializer
from barriersim.runtime.storage.atomic_file import AtomicFileWriter
from barriersim.runtime.storage.checkpoint_storage import CompletedCheckpointStorageLocation
from barriersim.runtime.storage.errors import CheckpointAlreadyExistsError, CheckpointStorageWriteError
from barriersim.runtime.storage.layout import METADATA_FILE_NAME, is_file_name
from barriersim.runtime.storage.metadata_serializer import SHARED_FILE_PREFIX, StateFileHandle
from barriersim.runtime.storage.object_store import ObjectStore, basename


class ObjectStoreCheckpointStorageLocation:
    """Checkpoint ``checkpoint_id``'s (or a savepoint's) ``directory`` in ``store``, being written: state objects
    named from ``rng``, shared objects to ``shared_state_directory`` (a savepoint writes none), the ``_metadata``
    last, unless ``metadata_writer`` (the fault-injection switch) has a fault armed."""

    def __init__(
        self,
        store: ObjectStore,
        checkpoint_id: int,
        directory: str,
        shared_state_directory: str,
        *,
        is_savepoint: bool,
        rng: random.Random,
        metadata_writer: AtomicFileWriter,
        memory_threshold: int,
    ) -> None:
        self.store = store
        self.checkpoint_id = checkpoint_id
        self.directory = directory
        self.shared_state_directory = shared_state_directory
        self.is_savepoint = is_savepoint
        self.metadata_file = f"{directory}/{METADATA_FILE_NAME}"
        self._rng = rng
        self._metadata_writer = metadata_writer
        self._memory_threshold = memory_threshold
        self._written: list[StateFileHandle] = []

    def write_state_file(self, data: bytes) -> StateFileHandle:
        """A state stream as an object of its own in the checkpoint's directory, named by a random UUID."""
        name = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
        try:
            self.store.put(f"{self.directory}/{name}", data)
        except OSError as e:
            raise CheckpointStorageWriteError(
                f"{self.store.uri(self.directory)}/{name}: writing a state file of "
                f"checkpoint {self.checkpoint_id} failed: {e}"
            ) from None
        self._written.append(StateFileHandle(name, len(data), zlib.crc32(data)))
        return self._written[-1]

    def write_shared_file(self, key: str, data: bytes) -> StateFileHandle:
        """A shared run under its registration key, written by the first checkpoint that uploads it."""
        path = f"{self.shared_state_directory}/{key}"
        if not is_file_name(key):
            raise CheckpointStorageWriteError(f"{self.store.uri(path)}: {key!r} is not a shared state file name")
        if not self.store.exists(path):  # written by the first checkpoint that uploaded it; later ones refer to it
            try:
                self.store.put(path, data)
            except OSError as e:
                raise CheckpointStorageWriteError(
                    f"{self.store.uri(path)}: writing a shared state file of checkpoint "
                    f"{self.checkpoint_id} failed: {e}"
                ) from None
        self._written.append(StateFileHandle(SHARED_FILE_PREFIX + key, len(data), zlib.crc32(data)))
        return self._written[-1]

    def persist(self, metadata: CheckpointMetadata) -> CompletedCheckpointStorageLocation:
        """Write ``metadata``'s state objects and then its ``_metadata``; the completed location."""
        path = self.metadata_file
        if self.store.exists(path):
            raise CheckpointAlreadyExistsError(
                f"{self.store.uri(path)}: checkpoint {self.checkpoint_id} already has metadata"
            )
        data = metadata_serializer.serialize(
            metadata,
            directory=basename(self.directory),
            write_state_file=self.write_state_file,
            memory_threshold=self._memory_threshold,
            write_shared_file=None if self.is_savepoint else self.write_shared_file,
        )
        try:
            self.store.put(path, data, self._metadata_writer.take_fault())
        except OSError as e:
            raise CheckpointStorageWriteError(
                f"{self.store.uri(path)}: writing checkpoint {self.checkpoint_id} metadata failed: {e}"
            ) from None
        return CompletedCheckpointStorageLocation(
            checkpoint_id=self.checkpoint_id,
            external_pointer=self.store.uri(self.directory),
            metadata_pointer=self.store.uri(path),
            is_savepoint=self.is_savepoint,
            metadata_size=len(data),
            metadata_crc32=zlib.crc32(data),
            state_files=tuple(self._written),
        )
