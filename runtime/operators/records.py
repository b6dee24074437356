"""The record layout of barriersim's jobs and the msgpack codec for state payloads.

How this works: a workload record is a tuple ``(record_id, key, value, event_time_ms)`` of integers; the
keyed running sum emits ``(record_id, key, value, running_sum)``. Keeping records as plain tuples of ints
makes buffers cheap to encode with msgpack (never pickle) and lets Spark compare results by ``record_id``.
"""

from __future__ import annotations

from typing import Any

import msgpack

WORKLOAD_COLUMNS = ("record_id", "key", "value", "event_time")
SUM_OUTPUT_COLUMNS = ("record_id", "key", "value", "running_sum")

RECORD_ID, KEY, VALUE, EVENT_TIME = 0, 1, 2, 3


def pack(value: Any) -> bytes:
    packed: bytes = msgpack.packb(value, use_bin_type=True)
    return packed


def unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, strict_map_key=False)
