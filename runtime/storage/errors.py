"""Typed errors of checkpoint storage: every message names the file (or pointer) and the problem; no ``OSError``
escapes storage (``storage_error_of`` turns one met at a path into the error of its kind). Mirrors the
``IOException``/``FileNotFoundException`` cases of Flink's ``Checkpoints`` and ``FileStateHandle``.
"""

from __future__ import annotations

import errno


class CheckpointStorageError(Exception):
    """Base class of checkpoint storage errors."""


class CorruptMetadataError(CheckpointStorageError):
    """A ``_metadata`` file (or byte string) is truncated, bit-flipped, of an unknown version, malformed, or
    holds another checkpoint's metadata.

    ``source`` names the file (``"<bytes>"`` when decoding bytes not read from a file) and ``problem`` says
    what is wrong; the message is ``"<source>: <problem>"``."""

    def __init__(self, source: str, problem: str) -> None:
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem


class CorruptStateFileError(CorruptMetadataError):
    """A state file a ``_metadata`` references (state above the memory threshold, written on its own) does not
    match its handle (size or checksum) or does not decode; ``source`` is the state file."""


class CorruptPointerListError(CorruptMetadataError):
    """The persisted list of completed checkpoints (the high-availability store's pointers) is damaged."""


class CheckpointNotFoundError(CheckpointStorageError):
    """A checkpoint/savepoint pointer names nothing, a directory without ``_metadata``, or a file that a
    listed checkpoint needs is missing (Flink's ``FileNotFoundException``)."""


class CheckpointStorageIOError(CheckpointStorageError):
    """An I/O fault at a path of the checkpoint storage (not a missing file): ``path`` and ``problem``."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class CheckpointStorageAccessError(CheckpointStorageIOError):
    """A path of the checkpoint storage cannot be read or changed: permission denied."""


class CheckpointDiscardError(CheckpointStorageIOError):
    """Discarding a checkpoint's files failed; what is left is named (Flink's ``CheckpointsCleaner`` logs
    this and the job goes on)."""


class InvalidCheckpointPointerError(CheckpointStorageError):
    """A pointer that is empty or cannot be a path at all (Flink's ``IllegalArgumentException``/``IOException``)."""


class CheckpointAlreadyExistsError(CheckpointStorageError):
    """A second ``_metadata`` for a checkpoint that already has one (Flink's
    ``writeToAlreadyExistingCheckpointFails``)."""


class CheckpointStorageWriteError(CheckpointStorageError):
    """A write failed (really, or injected through a fault-injection hook); nothing was made visible."""


class NoSavepointLocationError(CheckpointStorageError):
    """A savepoint without a target directory and no default savepoint directory configured."""


class MetadataEncodingError(CheckpointStorageError, TypeError):
    """A ``CheckpointMetadata`` holds a value msgpack cannot encode (e.g. an arbitrary object as a record)."""


def storage_error_of(err: OSError, path: object, doing: str) -> CheckpointStorageError:
    """The typed error for ``err``, met while ``doing`` (e.g. ``"reading"``) at ``path``."""
    where = str(path)
    reason = err.strerror or type(err).__name__
    if isinstance(err, FileNotFoundError):
        return CheckpointNotFoundError(f"{where}: missing ({doing}: {reason})")
    if isinstance(err, PermissionError) or err.errno in (errno.EACCES, errno.EPERM):
        return CheckpointStorageAccessError(where, f"{doing}: permission denied")
    return CheckpointStorageIOError(where, f"{doing}: {reason}")


class NoValidCheckpointError(CheckpointStorageError):
    """Checkpoints are retained but none of them loads; ``errors`` lists why."""

    def __init__(self, job_id: str, errors: tuple[CheckpointStorageError, ...]) -> None:
        super().__init__(
            f"job {job_id}: none of the {len(errors)} retained checkpoints is loadable: "
            + "; ".join(str(e) for e in errors)
        )
        self.errors = errors
