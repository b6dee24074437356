"""The byte form of a list of records: a source subtask's split, a sink's committed output.

How this works: records are tuples of plain values (``(record_id, key, value, event_time)`` for a source's
records, ``(record_id, key, value, running_sum)`` for a sink's output); ``encode_records`` writes them as one
msgpack array of arrays and ``decode_records`` turns the arrays back into tuples. ``pack`` and ``unpack`` are
the msgpack settings every barriersim encoding uses (bytes stay bytes, strings stay strings). Both drivers and
the Spark workload hand-off share this encoding, so a split cut from a Spark DataFrame decodes to exactly what
the simulator draws locally. A source's split may also come as an Arrow table (the Spark workload's hand-off)
with the columns ``SPLIT_COLUMNS``; ``decode_split`` takes either form.
"""

from __future__ import annotations

import msgpack

SPLIT_COLUMNS = ("record_id", "key", "value", "event_time")  # a source's records, in this order


def pack(value) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def unpack(data: bytes):
    return msgpack.unpackb(data, raw=False)


def encode_records(records) -> bytes:
    return pack([list(r) for r in records])


def decode_records(data: bytes) -> list[tuple]:
    return [tuple(r) for r in unpack(data)]


def decode_split(data) -> list[tuple]:
    """A source's split as ``(record_id, key, value, event_time)`` tuples, from its msgpack bytes or from an Arrow
    table with the columns ``SPLIT_COLUMNS`` (converted column by column)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return decode_records(data)
    return list(zip(*(data.column(name).to_pylist() for name in SPLIT_COLUMNS)))
