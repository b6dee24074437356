"""The byte form of records: a source subtask's split, a network buffer's content on the wire, a sink's committed
output, and the record batches inside persisted channel state; msgpack extension types, no per-record step. See
docs/data-plane.md, "The byte form of records".
"""

from __future__ import annotations

import struct
from typing import Any

import msgpack

from barriersim.runtime.events import StreamElements, Watermark
from barriersim.runtime.record_batch import (
    MalformedRecords,
    RecordBatch,
    RecordsLike,
    batch_from_bytes,
    batch_to_bytes,
)

WATERMARK_EXT = 1  # a Watermark: its timestamp as 8 signed bytes (big-endian)
RECORD_BATCH_EXT = 2  # a RecordBatch: header (fields, records), then the int64 columns (little-endian)
STREAM_ELEMENTS_EXT = 3  # StreamElements: the msgpack array of its parts

_TIMESTAMP = struct.Struct(">q")


def ext_default(value: Any) -> msgpack.ExtType:
    """msgpack's ``default`` hook for record batches, buffer content with watermarks, and watermarks."""
    kind = type(value)
    if kind is RecordBatch:
        return msgpack.ExtType(RECORD_BATCH_EXT, batch_to_bytes(value))
    if kind is Watermark:
        return msgpack.ExtType(WATERMARK_EXT, _TIMESTAMP.pack(value.timestamp))
    if kind is StreamElements:
        return msgpack.ExtType(STREAM_ELEMENTS_EXT, pack(list(value.parts)))
    raise TypeError(f"can not serialize {kind.__name__!r} object")


def ext_hook(code: int, data: bytes) -> Any:
    """msgpack's ``ext_hook`` for what ``ext_default`` writes."""
    if code == RECORD_BATCH_EXT:
        return batch_from_bytes(data)
    if code == WATERMARK_EXT and len(data) == _TIMESTAMP.size:
        return Watermark(_TIMESTAMP.unpack(data)[0])
    if code == STREAM_ELEMENTS_EXT:
        parts = unpack(data)
        if not isinstance(parts, (list, tuple)) or any(type(p) not in (RecordBatch, Watermark) for p in parts):
            raise MalformedRecords("stream elements: not an array of record batches and watermarks")
        return StreamElements(parts)
    raise MalformedRecords(f"unknown msgpack extension type {code} ({len(data)} bytes)")


SPLIT_COLUMNS = ("record_id", "key", "value", "event_time")  # a source's records, in this order


def pack(value: Any) -> bytes:
    packed: bytes = msgpack.packb(value, use_bin_type=True, default=ext_default)
    return packed


def unpack(data: bytes | bytearray | memoryview) -> Any:
    return msgpack.unpackb(data, raw=False, ext_hook=ext_hook)


def encode_records(records: RecordsLike) -> bytes:
    """A split or an output as bytes: one record batch (record tuples are converted to one first)."""
    return pack(RecordBatch.of(records))


def decode_records(data: bytes | bytearray | memoryview) -> RecordBatch | list[tuple[Any, ...]]:
    """What ``encode_records`` wrote, as a ``RecordBatch``; an older encoding (an array of record arrays) as a
    list of tuples."""
    value = unpack(data)
    if type(value) is RecordBatch:
        return value
    return [tuple(r) for r in value]


def decode_split(data: Any) -> RecordBatch | list[tuple[Any, ...]]:  # bytes, or a pyarrow Table (untyped)
    """A source's split as a ``RecordBatch`` of ``(record_id, key, value, event_time)``, from its encoding (bytes)
    or from an Arrow table with the columns ``SPLIT_COLUMNS`` (column by column, no record as a Python object)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return decode_records(data)
    return RecordBatch.of(data.select(list(SPLIT_COLUMNS)))
