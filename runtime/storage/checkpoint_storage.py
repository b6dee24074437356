"""The ``CheckpointStorage`` interface: persist, resolve, list, load, discard and retain completed checkpoints, and
keep the persisted list of completed checkpoints a new JobManager recovers from.

How this works: the coordinator emits "persist this ``CheckpointMetadata``" and "discard checkpoint N"
actions; a storage carries them out. ``persist_checkpoint`` encodes the metadata (``metadata_serializer``; a
filesystem storage writes state streams at or above its memory threshold to files of their own first) and
commits the ``_metadata`` in one atomic step, so a checkpoint is either complete and loadable or invisible.
Every path that reads a checkpoint goes through ``load_checkpoint``, which checks, besides the file's own
header and checksum: that the metadata holds the checkpoint the directory is named for (``chk-<n>``), that it
was written to this directory (a ``_metadata`` copied from another checkpoint or savepoint is refused), that
it is the very file the completed-checkpoint list points to (size and CRC32, when read through the list), and
that every state file it references has the size and CRC32 its handle says. Failures are typed
(``runtime.storage.errors``), name the file and never let an ``OSError`` through.

The completed-checkpoint list (``update_completed_checkpoints`` / ``completed_checkpoint_pointers``) is
Flink's high-availability store of completed checkpoints (the ZooKeeper nodes or Kubernetes ConfigMap entries
``DefaultCompletedCheckpointStore`` keeps through its ``StateHandleStore``): one pointer per retained
checkpoint (its directory, its ``_metadata`` file, that file's size and CRC32), rewritten atomically whenever
a checkpoint completes or is subsumed, and read by a new JobManager (``checkpoint_recovery``). Here each
pointer leads to the checkpoint's ``_metadata``, which plays the part of Flink's serialized
``CompletedCheckpoint`` in the HA storage directory.

``list_retained_checkpoints`` lists the complete checkpoints newest first; ``load_latest_checkpoint`` walks
the completed-checkpoint list (or, without one, that listing) and returns the newest checkpoint that loads,
reporting every damaged newer one (file named) in ``skipped``. ``check_state_files`` reads a checkpoint's
state files again before it is restored (Flink's tasks read their state from the files at restore).
``apply_retention_policy`` is called once when the job reaches a terminal status and discards or keeps the
retained checkpoints as Flink's ``CheckpointRetentionPolicy`` says (savepoints are never discarded by the
system). ``fail_next_write`` injects a failing/crashing ``_metadata`` write. Mirrors Flink's
``CheckpointStorageAccess`` / ``CheckpointStorageCoordinatorView``, ``CompletedCheckpointStorageLocation``, the
retention behaviour of ``CheckpointProperties.forCheckpoint(CheckpointRetentionPolicy)`` and, for the list,
``StateHandleStore``.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
import zlib
from dataclasses import dataclass
from typing import Callable

import msgpack

from barriersim.runtime.state.snapshot import CheckpointMetadata
from barriersim.runtime.storage import metadata_serializer
from barriersim.runtime.storage.atomic_file import AtomicFileWriter, WriteFault
from barriersim.runtime.storage.errors import (
    CheckpointStorageError,
    CorruptMetadataError,
    CorruptPointerListError,
    CorruptStateFileError,
)
from barriersim.runtime.storage.metadata_serializer import DEFAULT_MEMORY_THRESHOLD, MAX_MEMORY_THRESHOLD, StateFileHandle

METADATA_FILE_NAME = "_metadata"
COMPLETED_CHECKPOINTS_FILE_NAME = "_completed_checkpoints"
CHECKPOINT_DIR_PREFIX = "chk-"
CHECKPOINT_SHARED_STATE_DIR = "shared"
CHECKPOINT_TASK_OWNED_STATE_DIR = "taskowned"
SAVEPOINT_DIR_PREFIX = "savepoint-"
POINTER_LIST_MAGIC = 0x4960672E  # the metadata magic + 1: a different kind of file


@dataclass(frozen=True)
class CompletedCheckpointStorageLocation:
    """Where a completed checkpoint/savepoint lives (Flink's ``CompletedCheckpointStorageLocation``):
    ``external_pointer`` is what a user passes back to restore (the checkpoint directory), and
    ``metadata_pointer`` the ``_metadata`` file (or in-memory key) itself; once written or read, also the
    metadata file's CRC32 and the handles of its state files."""

    checkpoint_id: int | None
    external_pointer: str
    metadata_pointer: str
    is_savepoint: bool = False
    metadata_size: int = 0
    metadata_crc32: int | None = None
    state_files: tuple[StateFileHandle, ...] = ()


@dataclass(frozen=True)
class CompletedCheckpointPointer:
    """One entry of the completed-checkpoint list: which checkpoint, where, and the ``_metadata`` file's size and
    CRC32 when it completed (Flink's ``RetrievableStateHandle<CompletedCheckpoint>`` under its HA key)."""

    checkpoint_id: int
    external_pointer: str
    metadata_pointer: str
    metadata_size: int
    metadata_crc32: int
    is_savepoint: bool = False  # a restored savepoint the store holds (never discarded by the job)


@dataclass(frozen=True)
class LoadedCheckpoint:
    """A decoded checkpoint and where it came from; ``skipped`` holds the damaged newer checkpoints that
    ``load_latest_checkpoint`` passed over (each error names its file and problem)."""

    location: CompletedCheckpointStorageLocation
    metadata: CheckpointMetadata
    skipped: tuple[CheckpointStorageError, ...] = ()


class NoValidCheckpointError(CheckpointStorageError):
    """Checkpoints are retained but none of them loads; ``errors`` lists why."""

    def __init__(self, job_id: str, errors: tuple[CheckpointStorageError, ...]):
        super().__init__(
            f"job {job_id}: none of the {len(errors)} retained checkpoints is loadable: "
            + "; ".join(str(e) for e in errors)
        )
        self.errors = errors


class RetentionDecision(enum.Enum):
    RETAINED = "RETAINED"
    DISCARDED = "DISCARDED"


# Flink's CheckpointProperties.forCheckpoint(policy): the terminal job statuses on which it discards.
_DISCARD_ON = {
    "NEVER_RETAIN_AFTER_TERMINATION": frozenset({"FINISHED", "CANCELED", "FAILED", "SUSPENDED"}),
    "RETAIN_ON_FAILURE": frozenset({"FINISHED", "CANCELED"}),
    "RETAIN_ON_CANCELLATION": frozenset({"FINISHED"}),
}
_TERMINAL_STATUSES = frozenset({"FINISHED", "CANCELED", "FAILED", "SUSPENDED"})


def _name(value: object) -> str:
    return str(getattr(value, "value", value))


def discard_on_termination(retention_policy: object, job_status: object) -> bool:
    """Whether a retained checkpoint is discarded when the job ends in ``job_status`` under
    ``retention_policy``. Both are given by name (a ``str`` or an enum whose value is Flink's name, e.g.
    the coordinator's ``CheckpointRetentionPolicy``/``JobStatus``)."""
    policy, status = _name(retention_policy), _name(job_status)
    if policy not in _DISCARD_ON:
        raise ValueError(f"unknown checkpoint retention policy {policy!r} (expected one of {sorted(_DISCARD_ON)})")
    if status not in _TERMINAL_STATUSES:
        raise ValueError(f"job status {status!r} is not terminal; retention applies on {sorted(_TERMINAL_STATUSES)}")
    return status in _DISCARD_ON[policy]


class CheckpointStorage(abc.ABC):
    """A job's checkpoint storage. Subclasses: ``JobManagerCheckpointStorage`` (in memory) and
    ``FileSystemCheckpointStorage``."""

    def __init__(self, job_id: str, writer: AtomicFileWriter | None = None,
                 memory_threshold: int = DEFAULT_MEMORY_THRESHOLD):
        if not job_id:
            raise ValueError("a checkpoint storage needs a non-empty job id")
        if not 0 <= memory_threshold <= MAX_MEMORY_THRESHOLD:
            raise ValueError(f"memory threshold {memory_threshold}: must be between 0 and {MAX_MEMORY_THRESHOLD} bytes")
        self.job_id = job_id
        self.writer = writer or AtomicFileWriter()
        self.memory_threshold = memory_threshold
        # the completed checkpoints this JobManager wrote or read: what the completed-checkpoint list points to
        self._known: dict[int, CompletedCheckpointStorageLocation] = {}

    # -- primitives ------------------------------------------------------------------------------

    @abc.abstractmethod
    def _store(self, metadata: CheckpointMetadata, is_savepoint: bool,
               target_location: str | None) -> CompletedCheckpointStorageLocation:
        """Commit ``metadata`` (its state files first, if any) as a new checkpoint/savepoint, atomically."""

    @abc.abstractmethod
    def _read(self, location: CompletedCheckpointStorageLocation) -> bytes:
        """The ``_metadata`` bytes (typed errors: missing, unreadable)."""

    @abc.abstractmethod
    def _state_file_reader(self, location: CompletedCheckpointStorageLocation) -> metadata_serializer.StateFileReader | None:
        """How the state files of ``location`` are read (None: this storage writes none)."""

    @abc.abstractmethod
    def _directory_name(self, location: CompletedCheckpointStorageLocation) -> str:
        """The name of the checkpoint's directory, as ``serialize`` records it."""

    @abc.abstractmethod
    def _discard(self, checkpoint_id: int) -> bool:
        """Remove checkpoint ``checkpoint_id`` (complete or not): its ``_metadata`` first (so it is no longer
        addressable), then everything else of it. False if there was nothing; ``CheckpointDiscardError`` if
        something stays."""

    @abc.abstractmethod
    def _checkpoint_locations(self) -> list[CompletedCheckpointStorageLocation]:
        """The complete checkpoints (not savepoints) of this job, in any order."""

    @abc.abstractmethod
    def _overwrite(self, location: CompletedCheckpointStorageLocation, data: bytes) -> None:
        """Replace stored metadata bytes in place (for corruption faults only)."""

    @abc.abstractmethod
    def _read_pointer_list(self) -> tuple[str, bytes] | None:
        """The completed-checkpoint list's name and bytes, or None when there is none."""

    @abc.abstractmethod
    def _write_pointer_list(self, data: bytes | None) -> None:
        """Replace the completed-checkpoint list atomically (None: remove it)."""

    @property
    @abc.abstractmethod
    def completed_checkpoints_list_name(self) -> str:
        """Where the completed-checkpoint list is (its path or URI), whether it exists or not."""

    @abc.abstractmethod
    def resolve_checkpoint(self, pointer: str) -> CompletedCheckpointStorageLocation:
        """Resolve an external pointer (checkpoint/savepoint directory or ``_metadata`` file)."""

    # -- writing ----------------------------------------------------------------------------------

    def fail_next_write(self, fault: WriteFault = WriteFault.FAIL_BEFORE_WRITE) -> None:
        """Fault injection: the next metadata write fails as ``fault`` says."""
        self.writer.fail_next_write(fault)

    def persist_checkpoint(
        self, metadata: CheckpointMetadata, *, is_savepoint: bool = False, target_location: str | None = None
    ) -> CompletedCheckpointStorageLocation:
        """Encode and commit ``metadata``; afterwards it is listed and loadable. Raises
        ``CheckpointStorageWriteError`` (nothing visible) when the write fails, ``CheckpointAlreadyExistsError``
        when checkpoint N already has metadata."""
        location = self._store(metadata, is_savepoint, target_location)
        if not is_savepoint:  # a savepoint the job takes is never in the store (it may hold a checkpoint's id)
            self._known[metadata.checkpoint_id] = location
        return location

    # -- reading ----------------------------------------------------------------------------------

    def load_checkpoint(self, pointer: str | CompletedCheckpointStorageLocation | CompletedCheckpointPointer
                        ) -> LoadedCheckpoint:
        """Read and check one checkpoint or savepoint: a pointer string (directory or ``_metadata``), a location,
        or an entry of the completed-checkpoint list (then the file must also be the one it points to)."""
        listed = pointer if isinstance(pointer, CompletedCheckpointPointer) else None
        if listed is not None:
            location = CompletedCheckpointStorageLocation(listed.checkpoint_id, listed.external_pointer,
                                                          listed.metadata_pointer, listed.is_savepoint,
                                                          listed.metadata_size)
        elif isinstance(pointer, CompletedCheckpointStorageLocation):
            location = pointer
        else:
            location = self.resolve_checkpoint(pointer)
        source = location.metadata_pointer
        data = self._read(location)
        crc = zlib.crc32(data)
        if listed is not None and (len(data) != listed.metadata_size or crc != listed.metadata_crc32):
            raise CorruptMetadataError(
                source, f"is not the file the completed-checkpoint list points to for checkpoint {listed.checkpoint_id} "
                        f"({len(data)} bytes, crc32 0x{crc:08x}; the list says {listed.metadata_size} bytes, "
                        f"crc32 0x{listed.metadata_crc32:08x})")
        def check_identity(checkpoint_id: int, recorded_directory: str | None) -> None:
            if location.checkpoint_id is not None and checkpoint_id != location.checkpoint_id:
                raise CorruptMetadataError(
                    source, f"holds checkpoint {checkpoint_id}, not {location.checkpoint_id}: another checkpoint's metadata")
            _check_directory(source, recorded_directory, self._directory_name(location))

        decoded = metadata_serializer.decode(data, source, read_state_file=self._state_file_reader(location),
                                             before_state_files=check_identity)
        checkpoint_id = decoded.metadata.checkpoint_id
        location = dataclasses.replace(location, checkpoint_id=checkpoint_id, metadata_size=len(data),
                                       metadata_crc32=crc, state_files=decoded.state_files)
        if not location.is_savepoint or checkpoint_id not in self._known:  # a restored savepoint may join the store
            self._known[checkpoint_id] = location
        return LoadedCheckpoint(location, decoded.metadata)

    def adopt_restored(self, location: CompletedCheckpointStorageLocation, source: "CheckpointStorage") -> None:
        """A savepoint or retained checkpoint that ``source`` read (another job's, or the run's ``--from``) is
        restored by this storage's job: its completed-checkpoint list may point to it from now on."""
        if location.checkpoint_id is None or location.checkpoint_id in self._known:
            return
        self._known[location.checkpoint_id] = location
        self._adopt(location, source)

    def _adopt(self, location: CompletedCheckpointStorageLocation, source: "CheckpointStorage") -> None:
        """Make ``location`` readable here (a file storage reads it by its path already)."""

    def load_checkpoint_metadata(self, pointer: str) -> CheckpointMetadata:
        """The restore loader: ``pointer`` (checkpoint/savepoint dir or ``_metadata`` file) -> metadata."""
        return self.load_checkpoint(pointer).metadata

    def check_state_files(self, checkpoint_id: int) -> None:
        """Read the state files of completed checkpoint ``checkpoint_id`` again and check each against its handle
        (before it is restored: Flink's tasks read their state files at restore); typed errors name the file."""
        location = self._known.get(checkpoint_id)
        reader = self._state_file_reader(location) if location is not None else None
        if reader is None:
            return
        for handle in location.state_files:
            path, data = reader(handle)
            crc = zlib.crc32(data)
            if len(data) != handle.size or crc != handle.crc32:
                raise CorruptStateFileError(
                    path, f"state file of checkpoint {checkpoint_id} has {len(data)} bytes, crc32 0x{crc:08x}; its handle "
                          f"says {handle.size} bytes, crc32 0x{handle.crc32:08x}")

    def list_retained_checkpoints(self) -> tuple[CompletedCheckpointStorageLocation, ...]:
        """The complete checkpoints of this job, newest (highest id) first."""
        return tuple(sorted(self._checkpoint_locations(), key=lambda loc: loc.checkpoint_id or 0, reverse=True))

    def load_latest_checkpoint(self) -> LoadedCheckpoint | None:
        """The newest checkpoint that loads, or None when no checkpoint is retained. The candidates are the
        completed-checkpoint list's (a listed checkpoint whose files are gone counts as damaged), or, without a
        list, the complete checkpoint directories. Damaged newer ones are reported in ``skipped``; if all are
        damaged, ``NoValidCheckpointError``."""
        skipped: list[CheckpointStorageError] = []
        pointers = self.completed_checkpoint_pointers()
        candidates = tuple(reversed(pointers)) if pointers is not None else self.list_retained_checkpoints()
        for candidate in candidates:
            try:
                loaded = self.load_checkpoint(candidate)
            except CheckpointStorageError as e:
                skipped.append(e)
                continue
            return LoadedCheckpoint(loaded.location, loaded.metadata, tuple(skipped))
        if skipped:
            raise NoValidCheckpointError(self.job_id, tuple(skipped))
        return None

    # -- the completed-checkpoint list --------------------------------------------------------------

    def update_completed_checkpoints(self, checkpoint_ids) -> None:
        """Make the completed-checkpoint list hold exactly ``checkpoint_ids`` (oldest first), in one atomic
        write; each must be a checkpoint this storage wrote or read. An empty list removes the file."""
        entries = []
        for cid in checkpoint_ids:
            location = self._known.get(cid)
            if location is None or location.metadata_crc32 is None:
                raise CheckpointStorageError(f"job {self.job_id}: checkpoint {cid} was neither written nor read here; "
                                             "the completed-checkpoint list cannot point to it")
            entries.append([cid, location.external_pointer, location.metadata_pointer, location.metadata_size,
                            location.metadata_crc32, location.is_savepoint])
        if not entries:
            self._write_pointer_list(None)
            return
        payload = msgpack.packb({"job_id": self.job_id, "checkpoints": entries}, use_bin_type=True)
        self._write_pointer_list(metadata_serializer.frame(payload, POINTER_LIST_MAGIC))

    def completed_checkpoint_pointers(self) -> tuple[CompletedCheckpointPointer, ...] | None:
        """The completed-checkpoint list, oldest first; None if there is none (typed errors if damaged)."""
        found = self._read_pointer_list()
        if found is None:
            return None
        source, data = found
        payload = metadata_serializer.unframe(data, source, POINTER_LIST_MAGIC, "completed-checkpoint list",
                                              CorruptPointerListError)
        try:
            plain = msgpack.unpackb(payload, raw=False, use_list=False)
            if not isinstance(plain, dict) or plain.get("job_id") != self.job_id:
                raise ValueError(f"not the list of job {self.job_id} (job {plain.get('job_id') if isinstance(plain, dict) else None!r})")
            pointers = tuple(CompletedCheckpointPointer(*_pointer_fields(entry)) for entry in plain["checkpoints"])
        except (msgpack.UnpackException, ValueError, TypeError, KeyError) as e:
            raise CorruptPointerListError(source, f"malformed list: {e or type(e).__name__}") from None
        ids = [p.checkpoint_id for p in pointers]
        if len(ids) != len(set(ids)):
            raise CorruptPointerListError(source, f"malformed list: checkpoint ids {ids} repeat")
        return tuple(sorted(pointers, key=lambda p: p.checkpoint_id))  # chronologically, as Flink sorts by name

    def forget_completed_checkpoints(self) -> None:
        """What a dead JobManager knew about completed checkpoints is gone (a new one reads the list)."""
        self._known.clear()

    # -- discarding and retention -----------------------------------------------------------------

    def discard_checkpoint(self, checkpoint_id: int) -> bool:
        """Discard checkpoint ``checkpoint_id`` (complete or not); False if there was nothing to discard,
        ``CheckpointDiscardError`` (naming what stays) if it could not be removed."""
        self._known.pop(checkpoint_id, None)
        return self._discard(checkpoint_id)

    def discard_shared_state(self, keys) -> int:
        """Delete the shared state of these registration keys (the ``SharedStateRegistry`` released them); this
        storage keeps shared state inline in the metadata: nothing to delete."""
        return 0

    def shared_state_files(self) -> set[str]:
        """The names of the files in the shared state directory (none in a storage without one)."""
        return set()

    def apply_retention_policy(self, retention_policy: object, job_status: object) -> dict[int, RetentionDecision]:
        """Called when the job ends: discard or retain every retained checkpoint (never savepoints); the
        completed-checkpoint list goes either way (Flink clears its HA entries when the job ends)."""
        discard = discard_on_termination(retention_policy, job_status)
        decisions: dict[int, RetentionDecision] = {}
        for location in self.list_retained_checkpoints():
            if discard:
                self.discard_checkpoint(location.checkpoint_id)
                decisions[location.checkpoint_id] = RetentionDecision.DISCARDED
            else:
                decisions[location.checkpoint_id] = RetentionDecision.RETAINED
        self._write_pointer_list(None)
        if discard:
            self._after_discard_all()
        return decisions

    def _after_discard_all(self) -> None:
        pass

    def corrupt_checkpoint(self, checkpoint_id: int, transform: Callable[[bytes], bytes]) -> None:
        """Fault injection: replace checkpoint ``checkpoint_id``'s stored metadata bytes by ``transform(bytes)``."""
        for location in self._checkpoint_locations():
            if location.checkpoint_id == checkpoint_id:
                self._overwrite(location, transform(self._read(location)))
                return
        raise KeyError(f"job {self.job_id}: no complete checkpoint {checkpoint_id} to corrupt")


def _check_directory(source: str, recorded: str | None, directory: str) -> None:
    """A ``_metadata`` read from a ``chk-<n>`` directory must have been written there; one read from a savepoint
    directory must be a savepoint's (savepoints are relocatable, as in Flink: a savepoint's ``_metadata`` in
    another savepoint directory is a moved savepoint). Metadata that records no directory is not checked."""
    if recorded is None:
        return
    if directory.startswith(CHECKPOINT_DIR_PREFIX) and recorded != directory:
        raise CorruptMetadataError(source, f"was written to {recorded!r}, not to {directory!r}: another checkpoint's "
                                           "or savepoint's metadata")
    if directory.startswith(SAVEPOINT_DIR_PREFIX) and not recorded.startswith(SAVEPOINT_DIR_PREFIX):
        raise CorruptMetadataError(source, f"is the metadata of the checkpoint in {recorded!r}, not of a savepoint")


def _pointer_fields(entry) -> tuple:
    shape = "[id, directory, metadata file, size, crc32, is savepoint]"
    if not isinstance(entry, tuple) or len(entry) != 6:
        raise ValueError(f"entry {entry!r} is not {shape}")
    cid, external, metadata, size, crc, is_savepoint = entry
    if not (isinstance(cid, int) and isinstance(external, str) and isinstance(metadata, str) and isinstance(size, int)
            and isinstance(crc, int) and isinstance(is_savepoint, bool)) or isinstance(cid, bool):
        raise ValueError(f"entry {entry!r} is not {shape}")
    return cid, external, metadata, size, crc, is_savepoint
