"""The ``_metadata`` format: a completed checkpoint's ``CheckpointMetadata`` as checksummed msgpack (never pickle)
behind a 20-byte header (Flink's magic number, version, length, CRC32), every problem a ``CorruptMetadataError``
naming the file. ``serialize`` writes state streams at or above the memory threshold through the storage's writers
and keeps handles to them; ``decode`` reads them back and checks each. Mirrors Flink's ``Checkpoints`` and
``MetadataV3Serializer``; docs/architecture.md, "Checkpoint storage", describes the format.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import msgpack

from barriersim.runtime import records_codec
from barriersim.runtime.events import Buffer, InputChannelInfo, ResultSubpartitionInfo, StreamElements, Watermark
from barriersim.runtime.record_batch import MalformedRecords, RecordBatch
from barriersim.runtime.state.snapshot import (
    CheckpointMetadata,
    HandleAndLocalPath,
    IncrementalKeyedStateHandle,
    InputChannelStateHandle,
    KeyedStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    MasterState,
    OperatorState,
    OperatorStateDistributionMode,
    OperatorStateHandle,
    OperatorSubtaskState,
    PlaceholderStateHandle,
    ResultSubpartitionStateHandle,
    SharedStateHandle,
)
from barriersim.runtime.storage.errors import CorruptMetadataError, CorruptStateFileError, MetadataEncodingError

_H = TypeVar("_H", InputChannelStateHandle, ResultSubpartitionStateHandle)

# Flink's Checkpoints.HEADER_MAGIC_NUMBER
HEADER_MAGIC_NUMBER = 0x4960672D
METADATA_FORMAT_VERSION = 1
SUPPORTED_VERSIONS = frozenset({METADATA_FORMAT_VERSION})

_HEAD = struct.Struct(">IIQ")  # magic, version, payload length
_CRC = struct.Struct(">I")
HEADER_SIZE = _HEAD.size + _CRC.size  # 20 bytes


# Flink's state.storage.fs.memory-threshold: a state stream at or above it goes to a file of its own
DEFAULT_MEMORY_THRESHOLD = 20 * 1024
MAX_MEMORY_THRESHOLD = 1024 * 1024  # Flink's FsStateBackend.MAX_FILE_STATE_THRESHOLD


@dataclass(frozen=True)
class StateFileHandle:
    """A state stream written to a file of its own: its name in the checkpoint's directory, size and CRC32."""

    file: str
    size: int
    crc32: int


StateFileWriter = Callable[[bytes], StateFileHandle]
SharedFileWriter = Callable[[str, bytes], StateFileHandle]  # (registration key, bytes) -> the shared file's handle
SHARED_FILE_PREFIX = "shared/"  # a shared file's name in a handle: in the job's shared state directory
StateFileReader = Callable[[StateFileHandle], tuple[str, bytes]]  # -> (the file's path, its bytes)


# -- framing (shared by the _metadata file and the pointer list) ---------------------------------


def frame(payload: bytes, magic: int = HEADER_MAGIC_NUMBER, version: int = METADATA_FORMAT_VERSION) -> bytes:
    """The 20-byte header (magic, version, length, CRC32 over header and payload) followed by ``payload``."""
    head = _HEAD.pack(magic, version, len(payload))
    crc = zlib.crc32(payload, zlib.crc32(head))
    return head + _CRC.pack(crc) + payload


def unframe(
    data: bytes,
    source: str,
    magic: int = HEADER_MAGIC_NUMBER,
    what: str = "checkpoint/savepoint metadata",
    error: type[CorruptMetadataError] = CorruptMetadataError,
) -> bytes:
    """The payload of a framed file image, after checking its header, length and checksum."""
    if len(data) < HEADER_SIZE:
        raise error(source, f"truncated: {len(data)} bytes is shorter than the {HEADER_SIZE}-byte header")
    found, version, length = _HEAD.unpack_from(data, 0)
    if found != magic:
        raise error(
            source,
            f"unexpected magic number 0x{found:08x} (expected 0x{magic:08x}): "
            f"not a {what} file, or the file has been corrupted",
        )
    if version not in SUPPORTED_VERSIONS:
        kind = "metadata" if magic == HEADER_MAGIC_NUMBER else what
        raise error(source, f"unsupported {kind} format version {version} (supported: {sorted(SUPPORTED_VERSIONS)})")
    actual = len(data) - HEADER_SIZE
    if actual < length:
        raise error(source, f"truncated: payload has {actual} of {length} bytes")
    if actual > length:
        raise error(source, f"{actual - length} unexpected trailing bytes after the {length}-byte payload")
    (expected_crc,) = _CRC.unpack_from(data, _HEAD.size)
    payload = data[HEADER_SIZE:]
    crc = zlib.crc32(payload, zlib.crc32(data[: _HEAD.size]))
    if crc != expected_crc:
        raise error(source, f"checksum mismatch (stored crc32 0x{expected_crc:08x}, computed 0x{crc:08x})")
    return payload


# -- encoding -------------------------------------------------------------------------------------


def serialize(
    metadata: CheckpointMetadata,
    *,
    directory: str | None = None,
    write_state_file: StateFileWriter | None = None,
    memory_threshold: int = DEFAULT_MEMORY_THRESHOLD,
    write_shared_file: SharedFileWriter | None = None,
) -> bytes:
    """Encode ``metadata`` as a complete ``_metadata`` file image (header + checksummed payload); with
    ``write_state_file``, state streams of ``memory_threshold`` bytes or more are written through it and
    referenced by handle; with ``write_shared_file``, so are an incremental handle's shared runs of that size
    (by their registration key, once: a later checkpoint refers to the same file); ``directory`` is recorded in
    the payload."""
    try:
        plain = _metadata_to_plain(metadata)
        if write_shared_file is not None:
            for operator in plain["operator_states"]:
                for _, subtask in operator["subtask_states"]:
                    _externalize_shared(subtask, write_shared_file, memory_threshold)
        if write_state_file is not None:
            for operator in plain["operator_states"]:
                for _, subtask in operator["subtask_states"]:
                    _externalize(subtask, write_state_file, memory_threshold)
        if directory is not None:
            plain["directory"] = directory
        payload = msgpack.packb(plain, use_bin_type=True, default=_encode_ext)
    except (TypeError, ValueError, OverflowError) as e:
        raise MetadataEncodingError(
            f"checkpoint {metadata.checkpoint_id}: cannot encode metadata with msgpack: {e}"
        ) from e
    return frame(payload)


def _externalize_shared(subtask: dict[str, Any], write: SharedFileWriter, threshold: int) -> None:
    """Move each shared run of ``subtask``'s incremental keyed handles of ``threshold`` bytes or more to its file in
    the shared state directory (the metadata keeps ``file``: ``shared/<key>``)."""
    for keyed in subtask["managed_keyed_state"]:
        for _, shared in keyed.get("shared", ()):
            data = shared.get("data")
            if data is not None and len(data) >= threshold:
                handle = write(shared["key"], data)
                del shared["data"]
                shared["file"] = handle.file


def _externalize(subtask: dict[str, Any], write: StateFileWriter, threshold: int) -> None:
    """Move each of ``subtask``'s state streams of ``threshold`` bytes or more to a file of its own."""
    streams = {
        "managed_keyed_state": subtask["managed_keyed_state"],
        "managed_operator_state": subtask["managed_operator_state"],
        "channel_state": [subtask["input_channel_state"], subtask["result_subpartition_state"]],
    }
    for key, value in streams.items():
        if key != "channel_state" and not value or key == "channel_state" and not (value[0] or value[1]):
            continue
        data = msgpack.packb(value, use_bin_type=True, default=_encode_ext)
        if len(data) < threshold:
            continue
        handle = write(data)
        subtask[key] = {"file": handle.file, "size": handle.size, "crc32": handle.crc32}
        if key == "channel_state":
            del subtask["input_channel_state"], subtask["result_subpartition_state"]


_WATERMARK_EXT = 1  # msgpack extension type of a Watermark inside persisted buffers (timestamp: signed 8 bytes)
_TIMESTAMP = struct.Struct(">q")


def _encode_ext(value: Any) -> msgpack.ExtType:
    if isinstance(value, Watermark):
        return msgpack.ExtType(_WATERMARK_EXT, _TIMESTAMP.pack(value.timestamp))
    if type(value) in (RecordBatch, StreamElements):
        return records_codec.ext_default(value)
    raise TypeError(f"can not serialize {type(value).__name__!r} object")


def _decode_ext(code: int, data: bytes) -> Any:
    if code == _WATERMARK_EXT and len(data) == _TIMESTAMP.size:
        return Watermark(_TIMESTAMP.unpack(data)[0])
    if code in (records_codec.RECORD_BATCH_EXT, records_codec.STREAM_ELEMENTS_EXT):
        try:
            return records_codec.ext_hook(code, data)
        except MalformedRecords as e:
            raise _Malformed(str(e)) from None
    raise _Malformed(f"unknown msgpack extension type {code} ({len(data)} bytes)")


def pack(value: Any) -> bytes:
    """``value`` (plain msgpack values and the format's extension values) as msgpack."""
    packed: bytes = msgpack.packb(value, use_bin_type=True, default=_encode_ext)
    return packed


def unpack(data: bytes, *, use_list: bool = False) -> Any:
    """The value ``pack`` encoded (arrays as lists with ``use_list``, to edit them: fault injection does)."""
    return msgpack.unpackb(data, raw=False, use_list=use_list, strict_map_key=False, ext_hook=_decode_ext)


def _metadata_to_plain(m: CheckpointMetadata) -> dict[str, Any]:
    return {
        "checkpoint_id": m.checkpoint_id,
        "operator_states": [_operator_state_to_plain(s) for s in m.operator_states],
        "master_states": [[s.name, s.version, bytes(s.data)] for s in m.master_states],
    }


def _operator_state_to_plain(s: OperatorState) -> dict[str, Any]:
    return {
        "operator_id": s.operator_id,
        "parallelism": s.parallelism,
        "max_parallelism": s.max_parallelism,
        "subtask_states": [[i, _subtask_to_plain(st)] for i, st in sorted(s.subtask_states.items())],
        "coordinator_state": None if s.coordinator_state is None else bytes(s.coordinator_state),
        "fully_finished": s.fully_finished,
    }


def _subtask_to_plain(s: OperatorSubtaskState) -> dict[str, Any]:
    return {
        "managed_operator_state": [
            {
                "states": {name: [bytes(p) for p in parts] for name, parts in h.states.items()},
                "modes": {name: mode.value for name, mode in h.distribution_modes.items()},
            }
            for h in s.managed_operator_state
        ],
        "managed_keyed_state": [_keyed_handle_to_plain(h) for h in s.managed_keyed_state],
        "input_channel_state": [
            [h.subtask_index, [h.info.gate_idx, h.info.channel_idx], [_buffer_to_plain(b) for b in h.buffers]]
            for h in s.input_channel_state
        ],
        "result_subpartition_state": [
            [h.subtask_index, [h.info.partition_idx, h.info.subpartition_idx], [_buffer_to_plain(b) for b in h.buffers]]
            for h in s.result_subpartition_state
        ],
        "finished": s.is_finished,
    }


def _keyed_handle_to_plain(h: KeyedStateHandle) -> dict[str, Any]:
    if isinstance(h, IncrementalKeyedStateHandle):
        return {
            "incremental": h.backend_id,
            "range": [h.key_group_range.start_key_group, h.key_group_range.end_key_group],
            "checkpoint_id": h.checkpoint_id,
            "shared": [[e.local_path, _shared_handle_to_plain(e.handle)] for e in h.shared_state],
            "meta": bytes(h.meta_state),
            "checkpointed_size": h.checkpointed_size,
        }
    plain: dict[str, Any] = {
        "range": [h.key_group_range.start_key_group, h.key_group_range.end_key_group],
        "key_groups": [[kg, bytes(v)] for kg, v in sorted(h.key_groups.items())],
    }
    if h.modelled_size is not None:
        plain["modelled_size"] = h.modelled_size
    return plain


def _shared_handle_to_plain(h: SharedStateHandle | PlaceholderStateHandle) -> dict[str, Any]:
    """A shared file's handle, or a placeholder (in an acknowledgement on its way to the coordinator, whose registry
    replaces it: a completed checkpoint's _metadata never holds one)."""
    if isinstance(h, PlaceholderStateHandle):
        return {"key": h.key, "state_size": h.state_size, "placeholder": True}
    plain = {"key": h.key, "size": h.size, "crc32": h.crc32, "state_size": h.state_size}
    if h.data is not None:
        plain["data"] = bytes(h.data)
    return plain


def _buffer_to_plain(b: Buffer) -> list[Any]:
    records = b.records if type(b.records) in (RecordBatch, StreamElements) else list(b.records)
    return [records, b.size, b.sequence_number]


# -- decoding -------------------------------------------------------------------------------------


class _Malformed(Exception):
    pass


@dataclass(frozen=True)
class DecodedMetadata:
    """A decoded ``_metadata``: the checkpoint's metadata, the directory it was written to (if recorded) and the
    handles of the state files it references (each already read and checked)."""

    metadata: CheckpointMetadata
    directory: str | None
    state_files: tuple[StateFileHandle, ...]


def deserialize(
    data: bytes, source: str = "<bytes>", *, read_state_file: StateFileReader | None = None
) -> CheckpointMetadata:
    """Decode a ``_metadata`` file image; ``source`` (the file's path) names it in every error."""
    return decode(data, source, read_state_file=read_state_file).metadata


def decode(
    data: bytes,
    source: str = "<bytes>",
    *,
    read_state_file: StateFileReader | None = None,
    before_state_files: Callable[[int, str | None], None] | None = None,
) -> DecodedMetadata:
    """Decode a ``_metadata`` file image, reading and checking every state file it references through
    ``read_state_file`` (without one, a referenced state file is an error); ``before_state_files(checkpoint id,
    recorded directory)`` may refuse the metadata before any state file is read."""
    payload = unframe(bytes(data), source)
    try:
        plain = msgpack.unpackb(payload, raw=False, use_list=False, strict_map_key=False, ext_hook=_decode_ext)
    except _Malformed as e:
        raise CorruptMetadataError(source, f"malformed payload: {e}") from None
    except (msgpack.UnpackException, ValueError, TypeError) as e:
        raise CorruptMetadataError(source, f"undecodable payload: {e or type(e).__name__}") from None
    handles: list[StateFileHandle] = []
    try:
        if isinstance(plain, dict):
            directory = _expect(plain.get("directory"), (str, type(None)), "metadata.directory")
            if before_state_files is not None:
                before_state_files(_field(plain, "checkpoint_id", int, "metadata"), directory)
            for i, operator in enumerate(_field(plain, "operator_states", tuple, "metadata")):
                for j, entry in enumerate(_field(operator, "subtask_states", tuple, f"metadata.operator_states[{i}]")):
                    if isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], dict):
                        where = f"metadata.operator_states[{i}].subtask_states[{j}]"
                        _internalize(entry[1], read_state_file, source, handles, where)
                        _internalize_shared(entry[1], read_state_file, source, handles, where)
        else:
            directory = None
        return DecodedMetadata(_metadata_from_plain(plain), directory, tuple(handles))
    except _Malformed as e:
        raise CorruptMetadataError(source, f"malformed payload: {e}") from None


def _internalize_shared(
    subtask: dict[str, Any], read: StateFileReader | None, source: str, handles: list[Any], where: str
) -> None:
    """Read back each shared run of ``subtask``'s incremental keyed handles that lives in a shared file, checking
    its size and CRC32 (``CorruptStateFileError`` naming the file)."""
    keyed = subtask.get("managed_keyed_state")
    if not isinstance(keyed, tuple):
        return
    for k, handle in enumerate(keyed):
        if not isinstance(handle, dict) or "incremental" not in handle:
            continue
        for n, entry in enumerate(_field(handle, "shared", tuple, f"{where}.managed_keyed_state[{k}]")):
            w = f"{where}.managed_keyed_state[{k}].shared[{n}]"
            _expect(entry, tuple, w)
            if len(entry) != 2 or not isinstance(entry[1], dict) or "file" not in entry[1]:
                continue
            shared = entry[1]
            name = _field(shared, "file", str, f"{w}[1]")
            base = name.removeprefix(SHARED_FILE_PREFIX)
            if base == name or "/" in base or base in ("", ".", ".."):
                raise _Malformed(f"{w}[1].file {name!r} is not a file name in the shared state directory")
            if read is None:
                raise _Malformed(f"{w}[1] refers to the shared file {name!r}, which only a filesystem storage can read")
            file = StateFileHandle(
                name, _field(shared, "size", int, f"{w}[1]"), _field(shared, "crc32", int, f"{w}[1]")
            )
            path, data = _read_checked(read, file, "shared state file", source)
            handles.append(file)
            shared["data"] = data
            del shared["file"]


def _read_checked(read: StateFileReader, handle: StateFileHandle, what: str, source: str) -> tuple[str, bytes]:
    """The path and content of ``handle``'s file, checked against the size and CRC32 ``source`` recorded."""
    path, data = read(handle)
    if len(data) != handle.size:
        raise CorruptStateFileError(path, f"{what} of {len(data)} bytes, but {source} says {handle.size}")
    crc = zlib.crc32(data)
    if crc != handle.crc32:
        raise CorruptStateFileError(path, f"checksum mismatch (crc32 0x{crc:08x}, {source} says 0x{handle.crc32:08x})")
    return path, data


def _internalize(
    subtask: dict[str, Any], read: StateFileReader | None, source: str, handles: list[Any], where: str
) -> None:
    """Replace each state-file handle of ``subtask`` (a plain dict, changed in place) by the file's content."""
    for key in ("managed_keyed_state", "managed_operator_state", "channel_state"):
        value = subtask.get(key)
        if not isinstance(value, dict):
            continue
        handle = StateFileHandle(
            _field(value, "file", str, f"{where}.{key}"),
            _field(value, "size", int, f"{where}.{key}"),
            _field(value, "crc32", int, f"{where}.{key}"),
        )
        if "/" in handle.file or handle.file in ("", ".", ".."):
            raise _Malformed(f"{where}.{key}.file {handle.file!r} is not a file name in the checkpoint's directory")
        if read is None:
            raise _Malformed(
                f"{where}.{key} refers to the state file {handle.file!r}, which only a filesystem storage can read"
            )
        path, data = _read_checked(read, handle, "state file", source)
        try:
            content = msgpack.unpackb(data, raw=False, use_list=False, strict_map_key=False, ext_hook=_decode_ext)
        except (_Malformed, msgpack.UnpackException, ValueError, TypeError) as e:
            raise CorruptStateFileError(path, f"undecodable state: {e or type(e).__name__}") from None
        handles.append(handle)
        if key == "channel_state":
            if not isinstance(content, tuple) or len(content) != 2:
                raise CorruptStateFileError(
                    path, "malformed channel state: expected [input channels, output subpartitions]"
                )
            del subtask[key]
            subtask["input_channel_state"], subtask["result_subpartition_state"] = content
        else:
            subtask[key] = content


def _expect(value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    if isinstance(value, bool) and kind is int:
        raise _Malformed(f"{what} is a bool, expected int")
    if not isinstance(value, kind):
        raise _Malformed(f"{what} is {type(value).__name__}, expected {getattr(kind, '__name__', kind)}")
    return value


def _field(m: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    _expect(m, dict, where)
    if key not in m:
        raise _Malformed(f"{where} lacks {key!r}")
    return _expect(m[key], kind, f"{where}.{key}")


def _seq(value: Any, what: str, item: Callable[[Any, str], Any]) -> tuple[Any, ...]:
    _expect(value, tuple, what)
    return tuple(item(v, f"{what}[{i}]") for i, v in enumerate(value))


def _pair(value: Any, what: str) -> tuple[int, int]:
    _expect(value, tuple, what)
    if len(value) != 2:
        raise _Malformed(f"{what} has {len(value)} items, expected 2")
    return _expect(value[0], int, f"{what}[0]"), _expect(value[1], int, f"{what}[1]")


def _metadata_from_plain(p: Any) -> CheckpointMetadata:
    w = "metadata"
    return CheckpointMetadata(
        checkpoint_id=_field(p, "checkpoint_id", int, w),
        operator_states=_seq(
            _field(p, "operator_states", tuple, w), f"{w}.operator_states", _operator_state_from_plain
        ),
        master_states=_seq(_field(p, "master_states", tuple, w), f"{w}.master_states", _master_state_from_plain),
    )


def _master_state_from_plain(v: Any, w: str) -> MasterState:
    _expect(v, tuple, w)
    if len(v) != 3:
        raise _Malformed(f"{w} has {len(v)} items, expected 3")
    return MasterState(
        _expect(v[0], str, f"{w}.name"), _expect(v[1], int, f"{w}.version"), _expect(v[2], bytes, f"{w}.data")
    )


def _operator_state_from_plain(p: Any, w: str) -> OperatorState:
    subtasks: dict[int, OperatorSubtaskState] = {}
    for i, entry in enumerate(_field(p, "subtask_states", tuple, w)):
        _expect(entry, tuple, f"{w}.subtask_states[{i}]")
        if len(entry) != 2:
            raise _Malformed(f"{w}.subtask_states[{i}] has {len(entry)} items, expected 2")
        index = _expect(entry[0], int, f"{w}.subtask_states[{i}][0]")
        raw = entry[1]
        if index in subtasks:
            raise _Malformed(f"{w}.subtask_states repeats subtask {index}")
        subtasks[index] = _subtask_from_plain(raw, f"{w}.subtask_states[{index}]")
    coordinator_state = _field(p, "coordinator_state", (bytes, type(None)), w)
    return OperatorState(
        operator_id=_field(p, "operator_id", str, w),
        parallelism=_field(p, "parallelism", int, w),
        max_parallelism=_field(p, "max_parallelism", int, w),
        subtask_states=subtasks,
        coordinator_state=coordinator_state,
        fully_finished=_field(p, "fully_finished", bool, w),
    )


def _subtask_from_plain(p: Any, w: str) -> OperatorSubtaskState:
    return OperatorSubtaskState(
        managed_operator_state=_seq(
            _field(p, "managed_operator_state", tuple, w), f"{w}.managed_operator_state", _operator_handle_from_plain
        ),
        managed_keyed_state=_seq(
            _field(p, "managed_keyed_state", tuple, w), f"{w}.managed_keyed_state", _keyed_handle_from_plain
        ),
        input_channel_state=_seq(
            _field(p, "input_channel_state", tuple, w),
            f"{w}.input_channel_state",
            lambda v, ww: _channel_handle_from_plain(v, ww, InputChannelStateHandle, InputChannelInfo),
        ),
        result_subpartition_state=_seq(
            _field(p, "result_subpartition_state", tuple, w),
            f"{w}.result_subpartition_state",
            lambda v, ww: _channel_handle_from_plain(v, ww, ResultSubpartitionStateHandle, ResultSubpartitionInfo),
        ),
        is_finished=bool(p.get("finished", False)) if isinstance(p, dict) else False,
    )


def _operator_handle_from_plain(p: Any, w: str) -> OperatorStateHandle:
    states = {}
    for name, parts in _field(p, "states", dict, w).items():
        _expect(name, str, f"{w}.states key")
        states[name] = _seq(parts, f"{w}.states[{name!r}]", lambda v, ww: _expect(v, bytes, ww))
    modes = {}
    for name, mode in _field(p, "modes", dict, w).items():
        _expect(name, str, f"{w}.modes key")
        try:
            modes[name] = OperatorStateDistributionMode(_expect(mode, str, f"{w}.modes[{name!r}]"))
        except ValueError:
            raise _Malformed(f"{w}.modes[{name!r}] is the unknown mode {mode!r}") from None
    return OperatorStateHandle(states, modes)


def _keyed_handle_from_plain(p: Any, w: str) -> KeyGroupsStateHandle | IncrementalKeyedStateHandle:
    start, end = _pair(_field(p, "range", tuple, w), f"{w}.range")
    if "incremental" in p:
        return IncrementalKeyedStateHandle(
            backend_id=_field(p, "incremental", str, w),
            key_group_range=KeyGroupRange(start, end),
            checkpoint_id=_field(p, "checkpoint_id", int, w),
            shared_state=_seq(_field(p, "shared", tuple, w), f"{w}.shared", _shared_entry_from_plain),
            meta_state=_field(p, "meta", bytes, w),
            checkpointed_size=_field(p, "checkpointed_size", int, w),
        )
    key_groups: dict[int, bytes] = {}
    for i, entry in enumerate(_field(p, "key_groups", tuple, w)):
        _expect(entry, tuple, f"{w}.key_groups[{i}]")
        if len(entry) != 2:
            raise _Malformed(f"{w}.key_groups[{i}] has {len(entry)} items, expected 2")
        kg = _expect(entry[0], int, f"{w}.key_groups[{i}][0]")
        if not start <= kg <= end:
            raise _Malformed(f"{w}.key_groups holds key group {kg} outside its range [{start}, {end}]")
        key_groups[kg] = _expect(entry[1], bytes, f"{w}.key_groups[{i}][1]")
    modelled = p.get("modelled_size")
    if modelled is not None:
        _expect(modelled, int, f"{w}.modelled_size")
    return KeyGroupsStateHandle(KeyGroupRange(start, end), key_groups, modelled)


def _shared_entry_from_plain(p: Any, w: str) -> HandleAndLocalPath:
    _expect(p, tuple, w)
    if len(p) != 2:
        raise _Malformed(f"{w} has {len(p)} items, expected 2")
    path = _expect(p[0], str, f"{w}[0]")
    h = p[1]
    if isinstance(h, dict) and h.get("placeholder"):
        return HandleAndLocalPath(
            path, PlaceholderStateHandle(_field(h, "key", str, f"{w}[1]"), _field(h, "state_size", int, f"{w}[1]"))
        )
    data = h.get("data") if isinstance(h, dict) else None
    if data is not None:
        _expect(data, bytes, f"{w}[1].data")
    return HandleAndLocalPath(
        path,
        SharedStateHandle(
            _field(h, "key", str, f"{w}[1]"),
            _field(h, "size", int, f"{w}[1]"),
            _field(h, "crc32", int, f"{w}[1]"),
            _field(h, "state_size", int, f"{w}[1]"),
            data,
        ),
    )


def _channel_handle_from_plain(
    p: Any, w: str, handle_type: Callable[[int, Any, tuple[Buffer, ...]], _H], info_type: Callable[..., object]
) -> _H:
    _expect(p, tuple, w)
    if len(p) != 3:
        raise _Malformed(f"{w} has {len(p)} items, expected 3")
    subtask_index = _expect(p[0], int, f"{w}.subtask_index")
    info = info_type(*_pair(p[1], f"{w}.info"))
    return handle_type(subtask_index, info, _seq(p[2], f"{w}.buffers", _buffer_from_plain))


def _buffer_from_plain(p: Any, w: str) -> Buffer:
    _expect(p, tuple, w)
    if len(p) != 3:
        raise _Malformed(f"{w} has {len(p)} items, expected 3")
    records = p[0] if type(p[0]) in (RecordBatch, StreamElements) else _expect(p[0], tuple, f"{w}.records")
    return Buffer(records, _expect(p[1], int, f"{w}.size"), _expect(p[2], int, f"{w}.sequence_number"))
