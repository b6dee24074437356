"""Checkpoint storage: the ``_metadata`` format, in-memory and filesystem storage, pointer resolution.

The main entry points, re-exported here: ``FileSystemCheckpointStorage`` / ``JobManagerCheckpointStorage``
(both ``CheckpointStorage``), ``resolve_checkpoint_pointer``, ``serialize``/``deserialize`` of the
metadata format, ``WriteFault`` for fault injection, the completed-checkpoint list's pointers and the typed errors.
"""

from barriersim.runtime.storage.atomic_file import AtomicFileWriter, WriteFault
from barriersim.runtime.storage.checkpoint_storage import (
    CheckpointStorage,
    CompletedCheckpointPointer,
    CompletedCheckpointStorageLocation,
    LoadedCheckpoint,
    NoValidCheckpointError,
    RetentionDecision,
    discard_on_termination,
)
from barriersim.runtime.storage.errors import (
    CheckpointAlreadyExistsError,
    CheckpointDiscardError,
    CheckpointNotFoundError,
    CheckpointStorageAccessError,
    CheckpointStorageError,
    CheckpointStorageIOError,
    CheckpointStorageWriteError,
    CorruptMetadataError,
    CorruptPointerListError,
    CorruptStateFileError,
    InvalidCheckpointPointerError,
    MetadataEncodingError,
    NoSavepointLocationError,
)
from barriersim.runtime.storage.fs_storage import FileSystemCheckpointStorage, resolve_checkpoint_pointer
from barriersim.runtime.storage.memory_storage import JobManagerCheckpointStorage
from barriersim.runtime.storage.metadata_serializer import deserialize, serialize

__all__ = [
    "AtomicFileWriter", "WriteFault", "CheckpointStorage", "CompletedCheckpointPointer",
    "CompletedCheckpointStorageLocation", "LoadedCheckpoint", "NoValidCheckpointError", "RetentionDecision",
    "discard_on_termination", "CheckpointAlreadyExistsError", "CheckpointDiscardError", "CheckpointNotFoundError",
    "CheckpointStorageAccessError", "CheckpointStorageError", "CheckpointStorageIOError", "CheckpointStorageWriteError",
    "CorruptMetadataError", "CorruptPointerListError", "CorruptStateFileError",
    "InvalidCheckpointPointerError", "MetadataEncodingError", "NoSavepointLocationError",
    "FileSystemCheckpointStorage", "resolve_checkpoint_pointer", "JobManagerCheckpointStorage", "serialize",
    "deserialize",
]
