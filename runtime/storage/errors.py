"""Typed errors of checkpoint storage: every message names the file (or pointer) and the problem.

How this works: storage never returns partial state. Reading a ``_metadata`` file either yields a complete
``CheckpointMetadata`` or raises one of these errors; resolving a pointer either yields a completed location
or raises. Mirrors the ``IOException``/``FileNotFoundException`` cases of Flink's ``Checkpoints`` and
``AbstractFsCheckpointStorageAccess.resolveCheckpointPointer``.
"""

from __future__ import annotations


class CheckpointStorageError(Exception):
    """Base class of checkpoint storage errors."""


class CorruptMetadataError(CheckpointStorageError):
    """A ``_metadata`` file (or byte string) is truncated, bit-flipped, of an unknown version or malformed.

    ``source`` names the file (``"<bytes>"`` when decoding bytes not read from a file) and ``problem`` says
    what is wrong; the message is ``"<source>: <problem>"``."""

    def __init__(self, source: str, problem: str):
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem


class CheckpointNotFoundError(CheckpointStorageError):
    """A checkpoint/savepoint pointer names nothing, or a directory without ``_metadata``
    (Flink's ``FileNotFoundException`` from ``resolveCheckpointPointer``)."""


class InvalidCheckpointPointerError(CheckpointStorageError):
    """A pointer that is empty or cannot be a path at all (Flink's ``IllegalArgumentException``/``IOException``)."""


class CheckpointAlreadyExistsError(CheckpointStorageError):
    """A second ``_metadata`` for a checkpoint that already has one (Flink's ``writeToAlreadyExistingCheckpointFails``)."""


class CheckpointStorageWriteError(CheckpointStorageError):
    """A write failed (really, or injected through a fault-injection hook); nothing was made visible."""


class NoSavepointLocationError(CheckpointStorageError):
    """A savepoint without a target directory and no default savepoint directory configured."""


class MetadataEncodingError(CheckpointStorageError, TypeError):
    """A ``CheckpointMetadata`` holds a value msgpack cannot encode (e.g. an arbitrary object as a record)."""
