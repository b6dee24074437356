"""Checkpoint storage: the ``CheckpointStorage`` interface and its backends (in memory, filesystem, object store),
the ``_metadata`` format, the completed-checkpoint list, pointer resolution, retention, fault injection and the
typed errors. docs/architecture.md, "Checkpoint storage", says which class does what."""

from barriersim.runtime.storage.atomic_file import AtomicFileWriter, WriteFault
from barriersim.runtime.storage.checkpoint_storage import (
    CheckpointFiles,
    CheckpointStorage,
    CompletedCheckpointPointer,
    CompletedCheckpointStorageLocation,
    LoadedCheckpoint,
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
    NoValidCheckpointError,
)
from barriersim.runtime.storage.fs_storage import FileSystemCheckpointStorage, resolve_checkpoint_pointer
from barriersim.runtime.storage.memory_storage import JobManagerCheckpointStorage
from barriersim.runtime.storage.metadata_serializer import deserialize, serialize
from barriersim.runtime.storage.retention import RetentionDecision, discard_on_termination

__all__ = [
    "AtomicFileWriter",
    "WriteFault",
    "CheckpointFiles",
    "CheckpointStorage",
    "CompletedCheckpointPointer",
    "CompletedCheckpointStorageLocation",
    "LoadedCheckpoint",
    "NoValidCheckpointError",
    "RetentionDecision",
    "discard_on_termination",
    "CheckpointAlreadyExistsError",
    "CheckpointDiscardError",
    "CheckpointNotFoundError",
    "CheckpointStorageAccessError",
    "CheckpointStorageError",
    "CheckpointStorageIOError",
    "CheckpointStorageWriteError",
    "CorruptMetadataError",
    "CorruptPointerListError",
    "CorruptStateFileError",
    "InvalidCheckpointPointerError",
    "MetadataEncodingError",
    "NoSavepointLocationError",
    "FileSystemCheckpointStorage",
    "resolve_checkpoint_pointer",
    "JobManagerCheckpointStorage",
    "serialize",
    "deserialize",
]
