"""The ``_metadata`` format: a completed checkpoint's ``CheckpointMetadata`` as checksummed msgpack.

How this works: a file is a 20-byte header followed by a msgpack payload. The header holds Flink's magic
number (``Checkpoints.HEADER_MAGIC_NUMBER``), the format version, the payload length (8 bytes) and a CRC32
over the first 16 header bytes plus the payload. Decoding checks, in order: length of the header, magic,
version, declared length against the actual length (catches truncation and trailing garbage), CRC32
(catches every single-bit flip and every burst of up to 32 bits anywhere), then the payload's structure.
Any failure raises ``CorruptMetadataError("<file>: <problem>")``; nothing partial is ever returned. The
payload is plain msgpack maps/arrays (never pickle); state payloads stay opaque bytes; buffer records are
msgpack values and come back with arrays as tuples; a ``Watermark`` travelling in a persisted buffer is a
msgpack extension value (type 1, its timestamp as 8 signed bytes). An incremental keyed handle keeps its shared
runs as handles (key, size, CRC32, modelled size, and their bytes when the state travelled inline). Mirrors Flink's ``Checkpoints.storeCheckpointMetadata``/
``loadCheckpointMetadata`` and ``MetadataV3Serializer`` (``MetadataV2V3SerializerBase``).
"""

from __future__ import annotations

import struct
import zlib
from typing import Any, Callable

import msgpack

from barriersim.runtime.events import Buffer, InputChannelInfo, ResultSubpartitionInfo, Watermark
from barriersim.runtime.state.snapshot import (
    CheckpointMetadata,
    HandleAndLocalPath,
    IncrementalKeyedStateHandle,
    InputChannelStateHandle,
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
from barriersim.runtime.storage.errors import CorruptMetadataError, MetadataEncodingError

# Flink's Checkpoints.HEADER_MAGIC_NUMBER
HEADER_MAGIC_NUMBER = 0x4960672D
METADATA_FORMAT_VERSION = 1
SUPPORTED_VERSIONS = frozenset({METADATA_FORMAT_VERSION})

_HEAD = struct.Struct(">IIQ")  # magic, version, payload length
_CRC = struct.Struct(">I")
HEADER_SIZE = _HEAD.size + _CRC.size  # 20 bytes


# -- encoding -------------------------------------------------------------------------------------


def serialize(metadata: CheckpointMetadata) -> bytes:
    """Encode ``metadata`` as a complete ``_metadata`` file image (header + checksummed payload)."""
    try:
        payload = msgpack.packb(_metadata_to_plain(metadata), use_bin_type=True, default=_encode_ext)
    except (TypeError, ValueError, OverflowError) as e:
        raise MetadataEncodingError(
            f"checkpoint {metadata.checkpoint_id}: cannot encode metadata with msgpack: {e}"
        ) from e
    head = _HEAD.pack(HEADER_MAGIC_NUMBER, METADATA_FORMAT_VERSION, len(payload))
    crc = zlib.crc32(payload, zlib.crc32(head))
    return head + _CRC.pack(crc) + payload


_WATERMARK_EXT = 1  # msgpack extension type of a Watermark inside persisted buffers (timestamp: signed 8 bytes)
_TIMESTAMP = struct.Struct(">q")


def _encode_ext(value: Any) -> msgpack.ExtType:
    if isinstance(value, Watermark):
        return msgpack.ExtType(_WATERMARK_EXT, _TIMESTAMP.pack(value.timestamp))
    raise TypeError(f"can not serialize {type(value).__name__!r} object")


def _decode_ext(code: int, data: bytes) -> Any:
    if code == _WATERMARK_EXT and len(data) == _TIMESTAMP.size:
        return Watermark(_TIMESTAMP.unpack(data)[0])
    raise _Malformed(f"unknown msgpack extension type {code} ({len(data)} bytes)")


def _metadata_to_plain(m: CheckpointMetadata) -> dict:
    return {
        "checkpoint_id": m.checkpoint_id,
        "operator_states": [_operator_state_to_plain(s) for s in m.operator_states],
        "master_states": [[s.name, s.version, bytes(s.data)] for s in m.master_states],
    }


def _operator_state_to_plain(s: OperatorState) -> dict:
    return {
        "operator_id": s.operator_id,
        "parallelism": s.parallelism,
        "max_parallelism": s.max_parallelism,
        "subtask_states": [[i, _subtask_to_plain(st)] for i, st in sorted(s.subtask_states.items())],
        "coordinator_state": None if s.coordinator_state is None else bytes(s.coordinator_state),
        "fully_finished": s.fully_finished,
    }


def _subtask_to_plain(s: OperatorSubtaskState) -> dict:
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


def _keyed_handle_to_plain(h) -> dict:
    if isinstance(h, IncrementalKeyedStateHandle):
        return {
            "incremental": h.backend_id,
            "range": [h.key_group_range.start_key_group, h.key_group_range.end_key_group],
            "checkpoint_id": h.checkpoint_id,
            "shared": [[e.local_path, _shared_handle_to_plain(e.handle)] for e in h.shared_state],
            "meta": bytes(h.meta_state),
            "checkpointed_size": h.checkpointed_size,
        }
    plain = {
        "range": [h.key_group_range.start_key_group, h.key_group_range.end_key_group],
        "key_groups": [[kg, bytes(v)] for kg, v in sorted(h.key_groups.items())],
    }
    if h.modelled_size is not None:
        plain["modelled_size"] = h.modelled_size
    return plain


def _shared_handle_to_plain(h) -> dict:
    """A shared file's handle; a placeholder never reaches a completed checkpoint (the registry replaced it)."""
    if isinstance(h, PlaceholderStateHandle):
        raise TypeError(f"shared state {h.key} is still a placeholder in a completed checkpoint")
    plain = {"key": h.key, "size": h.size, "crc32": h.crc32, "state_size": h.state_size}
    if h.data is not None:
        plain["data"] = bytes(h.data)
    return plain


def _buffer_to_plain(b: Buffer) -> list:
    return [list(b.records), b.size, b.sequence_number]


# -- decoding -------------------------------------------------------------------------------------


class _Malformed(Exception):
    pass


def deserialize(data: bytes, source: str = "<bytes>") -> CheckpointMetadata:
    """Decode a ``_metadata`` file image; ``source`` (the file's path) names it in every error."""
    data = bytes(data)
    if len(data) < HEADER_SIZE:
        raise CorruptMetadataError(source, f"truncated: {len(data)} bytes is shorter than the {HEADER_SIZE}-byte header")
    magic, version, length = _HEAD.unpack_from(data, 0)
    if magic != HEADER_MAGIC_NUMBER:
        raise CorruptMetadataError(
            source,
            f"unexpected magic number 0x{magic:08x} (expected 0x{HEADER_MAGIC_NUMBER:08x}): "
            "not a checkpoint/savepoint metadata file, or the file has been corrupted",
        )
    if version not in SUPPORTED_VERSIONS:
        raise CorruptMetadataError(source, f"unsupported metadata format version {version} (supported: {sorted(SUPPORTED_VERSIONS)})")
    actual = len(data) - HEADER_SIZE
    if actual < length:
        raise CorruptMetadataError(source, f"truncated: payload has {actual} of {length} bytes")
    if actual > length:
        raise CorruptMetadataError(source, f"{actual - length} unexpected trailing bytes after the {length}-byte payload")
    (expected_crc,) = _CRC.unpack_from(data, _HEAD.size)
    payload = data[HEADER_SIZE:]
    crc = zlib.crc32(payload, zlib.crc32(data[: _HEAD.size]))
    if crc != expected_crc:
        raise CorruptMetadataError(source, f"checksum mismatch (stored crc32 0x{expected_crc:08x}, computed 0x{crc:08x})")
    try:
        plain = msgpack.unpackb(payload, raw=False, use_list=False, strict_map_key=False, ext_hook=_decode_ext)
        return _metadata_from_plain(plain)
    except _Malformed as e:
        raise CorruptMetadataError(source, f"malformed payload: {e}") from None
    except (msgpack.UnpackException, ValueError, TypeError) as e:
        raise CorruptMetadataError(source, f"undecodable payload: {e}") from None


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


def _seq(value: Any, what: str, item: Callable[[Any, str], Any]) -> tuple:
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
        operator_states=_seq(_field(p, "operator_states", tuple, w), f"{w}.operator_states", _operator_state_from_plain),
        master_states=_seq(_field(p, "master_states", tuple, w), f"{w}.master_states", _master_state_from_plain),
    )


def _master_state_from_plain(v: Any, w: str) -> MasterState:
    _expect(v, tuple, w)
    if len(v) != 3:
        raise _Malformed(f"{w} has {len(v)} items, expected 3")
    return MasterState(_expect(v[0], str, f"{w}.name"), _expect(v[1], int, f"{w}.version"), _expect(v[2], bytes, f"{w}.data"))


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
        managed_operator_state=_seq(_field(p, "managed_operator_state", tuple, w), f"{w}.managed_operator_state", _operator_handle_from_plain),
        managed_keyed_state=_seq(_field(p, "managed_keyed_state", tuple, w), f"{w}.managed_keyed_state", _keyed_handle_from_plain),
        input_channel_state=_seq(
            _field(p, "input_channel_state", tuple, w), f"{w}.input_channel_state",
            lambda v, ww: _channel_handle_from_plain(v, ww, InputChannelStateHandle, InputChannelInfo),
        ),
        result_subpartition_state=_seq(
            _field(p, "result_subpartition_state", tuple, w), f"{w}.result_subpartition_state",
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
    data = h.get("data") if isinstance(h, dict) else None
    if data is not None:
        _expect(data, bytes, f"{w}[1].data")
    return HandleAndLocalPath(path, SharedStateHandle(
        _field(h, "key", str, f"{w}[1]"), _field(h, "size", int, f"{w}[1]"), _field(h, "crc32", int, f"{w}[1]"),
        _field(h, "state_size", int, f"{w}[1]"), data))


def _channel_handle_from_plain(p: Any, w: str, handle_type: type, info_type: type):
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
    return Buffer(_expect(p[0], tuple, f"{w}.records"), _expect(p[1], int, f"{w}.size"), _expect(p[2], int, f"{w}.sequence_number"))
