"""A network buffer's content as a task writes and reads it: record batches with the watermarks between them.

How this works: a buffer builder collects parts in the order they are written: runs of records (``RecordBatch``
slices) and watermarks. ``content_of`` makes the finished buffer's content: one ``RecordBatch`` when it holds
records only (the common case), else ``StreamElements`` (the parts, adjacent runs of records joined).
``segments`` is the reverse for the task that reads the buffer: the parts to process in order, so a batch is split
exactly where a watermark fell inside it, as Flink's deserializer hands records and watermarks to the operator one
element at a time in the order they were written. Buffers of single values (the network layer's own tests, and
record tuples from older callers) are taken as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

from barriersim.runtime.events import StreamElements, Watermark
from barriersim.runtime.record_batch import RecordBatch

Part = RecordBatch | Watermark


def segments(records: RecordBatch | StreamElements | Iterable[Any]) -> list[Part]:
    """A buffer's content as the parts a task processes in order: record batches and watermarks. Takes a
    ``RecordBatch``, ``StreamElements``, or a sequence of record tuples and watermarks (runs of tuples become
    batches)."""
    kind = type(records)
    if kind is RecordBatch:
        return [cast(RecordBatch, records)]
    if kind is StreamElements:
        return list(cast(StreamElements, records).parts)
    parts: list[Part] = []
    run: list[Any] = []
    for item in cast(Iterable[Any], records):
        if isinstance(item, Watermark):
            if run:
                parts.append(RecordBatch.from_rows(run))
                run = []
            parts.append(item)
        elif type(item) is RecordBatch:
            if run:
                parts.append(RecordBatch.from_rows(run))
                run = []
            parts.append(item)
        else:
            run.append(item)
    if run:
        parts.append(RecordBatch.from_rows(run))
    return parts


def content_of(parts: Sequence[Any]) -> RecordBatch | StreamElements | tuple[Any, ...]:
    """A buffer's content from the parts its builder collected: one ``RecordBatch`` when they are record batches
    only; ``StreamElements`` when watermarks are among them (adjacent runs of records joined); an empty tuple when
    there are none (a buffer filled by the first bytes of a spanning record); and, for records that are not
    batches (opaque values of the network layer's own tests), the tuple of the parts as they came."""
    if not parts:
        return ()
    batches = watermarks = 0
    for p in parts:
        kind = type(p)
        if kind is RecordBatch:
            batches += 1
        elif kind is Watermark:
            watermarks += 1
    if batches == len(parts):
        return RecordBatch.concat(parts)
    if batches + watermarks < len(parts):
        return tuple(parts)
    joined: list[Part] = []
    run: list[RecordBatch] = []
    for p in parts:
        if type(p) is RecordBatch:
            run.append(p)
        else:
            if run:
                joined.append(RecordBatch.concat(run))
                run = []
            joined.append(p)
    if run:
        joined.append(RecordBatch.concat(run))
    return StreamElements(joined)
