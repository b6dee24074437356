"""Encoding of what crosses between actors: channel elements and checkpoint metrics as msgpack bytes.

How this works: Ray would pickle arbitrary Python objects; barriersim sends plain msgpack bytes instead
(``runtime.events.to_wire``), so what travels is the same on every backend and never unpickled from data.
"""

from __future__ import annotations

from dataclasses import asdict

import msgpack

from barriersim.runtime.events import ChannelElement, from_wire, to_wire
from barriersim.runtime.skeleton.task import SubtaskCheckpointMetrics


def encode_element(element: ChannelElement) -> bytes:
    return msgpack.packb(to_wire(element), use_bin_type=True)


def decode_element(data: bytes) -> ChannelElement:
    return from_wire(msgpack.unpackb(data, raw=False))


def encode_metrics(metrics: SubtaskCheckpointMetrics) -> bytes:
    return msgpack.packb(asdict(metrics), use_bin_type=True)


def decode_metrics(data: bytes) -> SubtaskCheckpointMetrics:
    return SubtaskCheckpointMetrics(**msgpack.unpackb(data, raw=False))
