"""Fault injection: damage a completed checkpoint (or the completed-checkpoint list) in its storage, as disks,
operators and bugs do, through the storage's ``CheckpointFiles``; the storage's readers must then detect it.
``damage_checkpoint`` returns a line saying what it did, or raises ``DamageNotApplicable``. No Flink class does
this; docs/architecture.md, "Checkpoint storage", lists the damages and what each backend takes."""

from __future__ import annotations

import dataclasses
import enum
import os
import shutil
import zlib
from collections.abc import Callable
from pathlib import Path

from barriersim.runtime.storage import metadata_serializer as ms
from barriersim.runtime.storage.checkpoint_storage import CheckpointStorage
from barriersim.runtime.storage.errors import CheckpointStorageError
from barriersim.runtime.storage.fs_storage import FileSystemCheckpointStorage
from barriersim.runtime.storage.layout import METADATA_FILE_NAME
from barriersim.runtime.storage.memory_storage import JobManagerCheckpointStorage
from barriersim.runtime.storage.object_storage import ObjectStoreCheckpointStorage

DamageableStorage = FileSystemCheckpointStorage | JobManagerCheckpointStorage | ObjectStoreCheckpointStorage


class CheckpointDamage(enum.Enum):
    TRUNCATE = "truncate"
    FLIP_BYTE = "flip_byte"
    APPEND_JUNK = "append_junk"
    PICKLE_PAYLOAD = "pickle_payload"
    DELETE = "delete"
    UNREADABLE = "unreadable"
    FOREIGN_METADATA = "foreign_metadata"
    MALFORMED_STATE = "malformed_state"
    ROLL_BACK = "roll_back"


class DamageTarget(enum.Enum):
    METADATA = "metadata"
    STATE_FILE = "state_file"
    DIRECTORY = "directory"
    COMPLETED_LIST = "completed_list"


class DamageNotApplicable(CheckpointStorageError):
    """The damage cannot strike this checkpoint (the message says why)."""


# what pickle.dumps({"checkpoint_id": 12, "operator_states": []}, protocol=4) writes: a file some tool pickled
PICKLE_PAYLOAD = (
    b"\x80\x04\x95+\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\rcheckpoint_id\x94K\x0c\x8c\x0foperator_states\x94]\x94u."
)
JUNK = b"\x00junk\xff" * 4
NOT_MSGPACK = b"\xc1"  # the one byte msgpack never uses: no msgpack value starts with it


def damaged_bytes(data: bytes, damage: CheckpointDamage) -> bytes:
    """``data`` after one of the byte-level damages."""
    if damage is CheckpointDamage.TRUNCATE:
        return data[: len(data) // 2]
    if damage is CheckpointDamage.FLIP_BYTE:
        if not data:
            raise DamageNotApplicable("an empty file has no byte to flip")
        middle = len(data) // 2
        return data[:middle] + bytes([data[middle] ^ 0x10]) + data[middle + 1 :]
    if damage is CheckpointDamage.APPEND_JUNK:
        return data + JUNK
    if damage is CheckpointDamage.PICKLE_PAYLOAD:
        return PICKLE_PAYLOAD
    raise ValueError(f"{damage.value} is not a byte-level damage")


_BYTE_DAMAGES = frozenset(
    {
        CheckpointDamage.TRUNCATE,
        CheckpointDamage.FLIP_BYTE,
        CheckpointDamage.APPEND_JUNK,
        CheckpointDamage.PICKLE_PAYLOAD,
    }
)
LIST_DAMAGES = _BYTE_DAMAGES | {CheckpointDamage.DELETE, CheckpointDamage.ROLL_BACK}  # those of the completed list


def _malform_first_keyed_blob(plain: object) -> bool:
    """Replace the first keyed-state blob found in ``plain`` (decoded with lists) by non-msgpack bytes."""
    if isinstance(plain, dict):
        groups = plain.get("key_groups")
        if isinstance(groups, list):
            for entry in groups:
                if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], bytes):
                    entry[1] = NOT_MSGPACK
                    return True
        return any(_malform_first_keyed_blob(v) for v in plain.values())
    if isinstance(plain, list):
        return any(_malform_first_keyed_blob(v) for v in plain)
    return False


def malformed_state_metadata(data: bytes, source: str) -> bytes:
    """A ``_metadata`` image whose first inline keyed-state blob is not msgpack, with a valid CRC32."""
    plain = ms.unpack(ms.unframe(data, source), use_list=True)
    if not _malform_first_keyed_blob(plain.get("operator_states")):
        raise DamageNotApplicable(f"{source}: holds no keyed state inline")
    return ms.frame(ms.pack(plain))


def damage_checkpoint(
    storage: CheckpointStorage,
    checkpoint_id: int,
    damage: CheckpointDamage,
    target: DamageTarget = DamageTarget.METADATA,
) -> str:
    """Damage completed checkpoint ``checkpoint_id`` of ``storage`` (or its completed-checkpoint list); returns what
    was done (one line)."""
    if not isinstance(storage, DamageableStorage):
        raise DamageNotApplicable(f"{type(storage).__name__}: cannot be damaged")
    if target is DamageTarget.COMPLETED_LIST:
        return _damage_list(storage, checkpoint_id, damage)
    if damage is CheckpointDamage.ROLL_BACK:
        raise DamageNotApplicable("roll_back rolls the completed-checkpoint list back (target completed_list)")
    if isinstance(storage, FileSystemCheckpointStorage):
        return _damage_files(storage, checkpoint_id, damage, target)
    if isinstance(storage, JobManagerCheckpointStorage):
        return _damage_memory(storage, checkpoint_id, damage, target)
    return _damage_objects(storage, checkpoint_id, damage, target)


def corrupt_checkpoint(storage: CheckpointStorage, checkpoint_id: int, transform: Callable[[bytes], bytes]) -> None:
    """Replace completed checkpoint ``checkpoint_id``'s ``_metadata`` bytes by ``transform(bytes)``."""
    files = storage.files
    for location in files.checkpoint_locations():
        if location.checkpoint_id == checkpoint_id:
            files.overwrite_metadata(location, transform(files.read_metadata(location)))
            return
    raise KeyError(f"job {storage.job_id}: no complete checkpoint {checkpoint_id} to corrupt")


def _other_metadata(storage: CheckpointStorage, checkpoint_id: int) -> tuple[int, bytes]:
    """The ``_metadata`` bytes of the completed checkpoint nearest to ``checkpoint_id`` (older ones first)."""
    others = sorted(
        (loc for loc in storage.list_retained_checkpoints() if loc.checkpoint_id != checkpoint_id),
        key=lambda loc: (loc.listed_checkpoint_id > checkpoint_id, abs(loc.listed_checkpoint_id - checkpoint_id)),
    )
    if not others:
        raise DamageNotApplicable(f"checkpoint {checkpoint_id}: no other completed checkpoint to copy metadata from")
    return others[0].listed_checkpoint_id, storage.files.read_metadata(others[0])


# -- the completed-checkpoint list ------------------------------------------------------------------------


def _damage_list(storage: DamageableStorage, checkpoint_id: int, damage: CheckpointDamage) -> str:
    """The byte damages, ``delete`` and ``roll_back`` (the list as it was before checkpoint ``checkpoint_id``
    completed: its entry and every newer one gone, the older ones intact) of the completed-checkpoint list, on
    every storage (the bytes through its ``CheckpointFiles``, the pointers through its completed-checkpoint list)."""
    files = storage.files
    found = files.read_pointer_list()
    if found is None:
        raise DamageNotApplicable(f"job {storage.job_id}: there is no completed-checkpoint list to damage")
    source, data = found
    if damage in _BYTE_DAMAGES:
        files.write_pointer_list(damaged_bytes(data, damage))
        return f"{damage.value} {source}"
    if damage is CheckpointDamage.DELETE:
        files.write_pointer_list(None)
        return f"deleted {source}"
    if damage is not CheckpointDamage.ROLL_BACK:
        raise DamageNotApplicable(f"{damage.value} of the completed-checkpoint list")
    pointers = storage.completed.decode(source, data)
    kept = [p for p in pointers if p.checkpoint_id < checkpoint_id]
    if len(kept) == len(pointers):
        raise DamageNotApplicable(f"{source}: names no checkpoint from {checkpoint_id} on to roll back")
    storage.completed.write(kept)  # none: before the first completion there was no list at all
    return f"rolled {source} back to before checkpoint {checkpoint_id}: it names {[p.checkpoint_id for p in kept]}"


# -- files ----------------------------------------------------------------------------------------------


def _state_files_of(directory: Path) -> list[Path]:
    return sorted(
        p for p in directory.iterdir() if p.name != METADATA_FILE_NAME and not p.name.startswith(".") and p.is_file()
    )


def _damage_files(
    storage: FileSystemCheckpointStorage, checkpoint_id: int, damage: CheckpointDamage, target: DamageTarget
) -> str:
    directory = storage.files.checkpoint_directory(checkpoint_id)
    if not (directory / METADATA_FILE_NAME).is_file():
        raise DamageNotApplicable(f"{directory}: no completed checkpoint {checkpoint_id} there")
    other = None
    if damage is CheckpointDamage.FOREIGN_METADATA:
        other = _other_metadata(storage, checkpoint_id)
    what = damage_directory(directory, damage, target, other, storage.memory_threshold)
    if damage is CheckpointDamage.MALFORMED_STATE:
        _relist(storage, checkpoint_id)
    return what


def damage_directory(
    directory: Path,
    damage: CheckpointDamage,
    target: DamageTarget = DamageTarget.METADATA,
    other: tuple[int, bytes] | None = None,
    memory_threshold: int = 0,
) -> str:
    """Damage the checkpoint or savepoint in ``directory``; ``other`` is ``(checkpoint id, _metadata bytes)`` of the
    checkpoint whose metadata ``foreign_metadata`` copies."""
    metadata = directory / METADATA_FILE_NAME
    if target is DamageTarget.DIRECTORY:
        path = directory
    elif target is DamageTarget.METADATA:
        path = metadata
    else:
        files = _state_files_of(directory)
        if not files:
            raise DamageNotApplicable(
                f"{directory}: has no state file (all its state is below the memory "
                f"threshold of {memory_threshold} bytes)"
            )
        path = files[0]
    if damage in _BYTE_DAMAGES:
        if path.is_dir():
            raise DamageNotApplicable(f"{path}: {damage.value} needs a file")
        path.write_bytes(damaged_bytes(path.read_bytes(), damage))
        return f"{damage.value} {path}"
    if damage is CheckpointDamage.DELETE:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
        return f"deleted {path}"
    if damage is CheckpointDamage.UNREADABLE:
        return _make_unreadable(path)
    if damage is CheckpointDamage.FOREIGN_METADATA:
        if target is not DamageTarget.METADATA or other is None:
            raise DamageNotApplicable(f"{damage.value} replaces a _metadata file by another checkpoint's")
        path.write_bytes(other[1])
        return f"copied the _metadata of checkpoint {other[0]} over {path}"
    if damage is CheckpointDamage.MALFORMED_STATE:
        if target is DamageTarget.METADATA:
            path.write_bytes(malformed_state_metadata(path.read_bytes(), str(path)))
            return f"malformed the first inline keyed-state blob of {path}, checksum recomputed"
        if target is DamageTarget.STATE_FILE:
            return _malform_state_file(metadata)
    raise DamageNotApplicable(f"{damage.value} of the {target.value}")


def _malform_state_file(metadata: Path) -> str:
    """Malform the first keyed-state blob held in a state file; the file's handle in ``_metadata`` and the
    ``_metadata``'s CRC32 are recomputed to match."""
    plain = ms.unpack(ms.unframe(metadata.read_bytes(), str(metadata)), use_list=True)
    for operator in plain.get("operator_states", []):
        for _, subtask in operator.get("subtask_states", []):
            handle = subtask.get("managed_keyed_state")
            if not isinstance(handle, dict):
                continue
            state_file = metadata.parent / handle["file"]
            content = ms.unpack(state_file.read_bytes(), use_list=True)
            if not _malform_first_keyed_blob(content):
                continue
            data = ms.pack(content)
            state_file.write_bytes(data)
            handle["size"], handle["crc32"] = len(data), zlib.crc32(data)
            metadata.write_bytes(ms.frame(ms.pack(plain)))
            return f"malformed the first keyed-state blob of {state_file}, its handle and {metadata} recomputed"
    raise DamageNotApplicable(f"{metadata}: no keyed state in a state file")


def _make_unreadable(path: Path) -> str:
    """``chmod 000``, or, when that does not keep this process out, a symbolic link to itself in its place."""
    os.chmod(path, 0)
    try:
        if path.is_dir():
            os.listdir(path)
        else:
            with open(path, "rb"):
                pass
    except PermissionError:
        return f"chmod 000 {path}"
    os.chmod(path, 0o755 if path.is_dir() else 0o644)  # the process reads through permissions (root)
    moved = path.with_name(f".{path.name}.unreadable")
    os.rename(path, moved)
    os.symlink(path.name, path)  # a link to itself: opening it fails with ELOOP
    return f"replaced {path} by a symbolic link to itself (chmod 000 does not keep this process out)"


def _relist(storage: DamageableStorage, checkpoint_id: int) -> None:
    """Make the completed-checkpoint list's entry of ``checkpoint_id`` match its (damaged) ``_metadata`` again."""
    pointers = storage.completed.read()
    if pointers is None:
        return
    relisted = []
    for pointer in pointers:
        if pointer.checkpoint_id == checkpoint_id:
            metadata = storage.files.read_metadata(storage.resolve_checkpoint(pointer.external_pointer))
            pointer = dataclasses.replace(pointer, metadata_size=len(metadata), metadata_crc32=zlib.crc32(metadata))
        relisted.append(pointer)
    storage.completed.write(relisted)


# -- objects ----------------------------------------------------------------------------------------------


def _damage_objects(
    storage: ObjectStoreCheckpointStorage, checkpoint_id: int, damage: CheckpointDamage, target: DamageTarget
) -> str:
    """On an object store: the byte damages, a deletion and another checkpoint's ``_metadata``, of the ``_metadata``
    or the first state object (an object store has no permissions to take away and no directories to damage)."""
    files = storage.files
    store = files.store
    directory = files.checkpoint_directory(checkpoint_id)
    metadata = f"{directory}/{METADATA_FILE_NAME}"
    if not store.is_file(metadata):
        raise DamageNotApplicable(f"{store.uri(directory)}: no completed checkpoint {checkpoint_id} there")
    if target is DamageTarget.METADATA:
        path = metadata
    elif target is DamageTarget.STATE_FILE:
        objects = files.state_objects(checkpoint_id)
        if not objects:
            raise DamageNotApplicable(
                f"{store.uri(directory)}: has no state file (all its state is below the "
                f"memory threshold of {storage.memory_threshold} bytes)"
            )
        path = objects[0]
    else:
        raise DamageNotApplicable(f"{damage.value} of the {target.value}: an object store has no directories")
    if damage in _BYTE_DAMAGES:
        store.put(path, damaged_bytes(store.get(path, "damaging"), damage))
        return f"{damage.value} {store.uri(path)}"
    if damage is CheckpointDamage.DELETE:
        store.delete_file(path)
        return f"deleted {store.uri(path)}"
    if damage is CheckpointDamage.FOREIGN_METADATA and target is DamageTarget.METADATA:
        other, foreign = _other_metadata(storage, checkpoint_id)
        store.put(path, foreign)
        return f"copied the _metadata of checkpoint {other} over {store.uri(path)}"
    raise DamageNotApplicable(f"{damage.value} of the {target.value} on an object store")


# -- memory ---------------------------------------------------------------------------------------------


def _damage_memory(
    storage: JobManagerCheckpointStorage, checkpoint_id: int, damage: CheckpointDamage, target: DamageTarget
) -> str:
    files = storage.files
    key = files.checkpoint_pointer(checkpoint_id)
    entry = files.entry(key)
    if entry is None:
        raise DamageNotApplicable(f"{key}: no completed checkpoint {checkpoint_id} in memory")
    if target is not DamageTarget.METADATA and damage not in (CheckpointDamage.DELETE, CheckpointDamage.UNREADABLE):
        raise DamageNotApplicable(f"{key}: the job manager's storage keeps no state files")
    location, data = entry
    if damage in _BYTE_DAMAGES:
        files.put(location, damaged_bytes(data, damage))
    elif damage is CheckpointDamage.DELETE:
        files.remove(key)
    elif damage is CheckpointDamage.UNREADABLE:
        files.deny_reads(key)
    elif damage is CheckpointDamage.FOREIGN_METADATA:
        other, foreign = _other_metadata(storage, checkpoint_id)
        files.put(location, foreign)
        return f"copied the _metadata of checkpoint {other} over {location.metadata_pointer}"
    elif damage is CheckpointDamage.MALFORMED_STATE:
        files.put(location, malformed_state_metadata(data, location.metadata_pointer))
        _relist(storage, checkpoint_id)
    return f"{damage.value} {location.metadata_pointer}"
