"""Records as columns: the one form in which records move through a job, from the source's split to the sink. No Flink
class corresponds: Flink moves serialized bytes; this is their columnar stand-in. See docs/data-plane.md, "Records
as columns".
"""

from __future__ import annotations

import builtins
import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeAlias, final, overload

import numpy as np
import numpy.typing as npt

# What ``RecordBatch.of`` takes: a RecordBatch, record tuples, or an Arrow table or record batch (pyarrow has no
# type information, so this is Any).
RecordsLike: TypeAlias = Any

RECORD_FIELDS = 4  # every record layout of barriersim's jobs: four int64 fields
_INT64 = np.dtype(np.int64)
_LE_INT64 = np.dtype("<i8")
_BATCH_HEADER = struct.Struct(">HQ")  # fields, records


@final  # never subclassed: the data path tests type(x) is RecordBatch
class RecordBatch:
    """A run of records as columns: ``columns`` is an ``int64`` array of shape ``(fields, records)``."""

    __slots__ = ("columns",)

    def __init__(self, columns: np.ndarray) -> None:
        self.columns = columns

    # -- making batches ------------------------------------------------------------------------------

    @staticmethod
    def empty(fields: int = RECORD_FIELDS) -> RecordBatch:
        return RecordBatch(np.empty((fields, 0), dtype=_INT64))

    @staticmethod
    def from_columns(*columns: npt.ArrayLike) -> RecordBatch:
        """One batch from one array (or sequence of ints) per field, all of the same length."""
        return RecordBatch(np.stack([np.asarray(c, dtype=_INT64) for c in columns]))

    @staticmethod
    def from_rows(rows: Iterable[Sequence[int]], fields: int | None = None) -> RecordBatch:
        """One batch from record tuples of ints (the per-record form of tests and of older callers)."""
        rows = rows if isinstance(rows, (list, tuple)) else list(rows)
        if not rows:
            return RecordBatch.empty(RECORD_FIELDS if fields is None else fields)
        try:
            array = np.array(rows, dtype=_INT64)
        except (TypeError, ValueError, OverflowError) as err:
            raise TypeError(f"records must be tuples of integers of one length, got e.g. {rows[0]!r}: {err}") from None
        if array.ndim != 2:
            raise TypeError(f"records must be tuples of integers of one length, got e.g. {rows[0]!r}")
        return RecordBatch(np.ascontiguousarray(array.T))

    @staticmethod
    def of(records: RecordsLike) -> RecordBatch:
        """``records`` as a batch: a batch as it is, anything else (record tuples, or an Arrow table or batch with
        four integer columns in the record's field order) converted once."""
        if type(records) is RecordBatch:
            return records
        if hasattr(records, "num_columns") and hasattr(records, "column"):  # a pyarrow Table or RecordBatch
            return RecordBatch.from_columns(*(records.column(i).to_numpy() for i in range(records.num_columns)))
        return RecordBatch.from_rows(records)

    @staticmethod
    def concat(batches: Sequence[RecordBatch]) -> RecordBatch:
        if len(batches) == 1:
            return batches[0]
        if not batches:
            return RecordBatch.empty()
        return RecordBatch(np.concatenate([b.columns for b in batches], axis=1))

    # -- fields --------------------------------------------------------------------------------------

    @property
    def fields(self) -> int:
        return int(self.columns.shape[0])

    def column(self, field: int) -> np.ndarray:
        column: np.ndarray = self.columns[field]
        return column

    # -- the columnar operations of the data path ----------------------------------------------------

    def slice(self, start: int, stop: int) -> RecordBatch:
        return RecordBatch(self.columns[:, start:stop])

    def take(self, indices: np.ndarray) -> RecordBatch:
        """The records at ``indices`` (an index array or a boolean mask), in that order (a copy)."""
        return RecordBatch(self.columns[:, indices])

    def every(self, start: int, step: int) -> RecordBatch:
        """Records ``start, start + step, ...`` (a round-robin channel's share of the batch)."""
        return RecordBatch(self.columns[:, start::step])

    # -- the per-record view (slow; tests, traces, checks) ---------------------------------------------

    def __len__(self) -> int:
        return int(self.columns.shape[1])

    def __bool__(self) -> bool:
        return bool(self.columns.shape[1] > 0)

    def __iter__(self) -> Iterator[tuple[int, ...]]:
        return iter(zip(*self.columns.tolist())) if self.columns.shape[1] else iter(())

    def to_rows(self) -> list[tuple[int, ...]]:
        return list(self)

    @overload
    def __getitem__(self, index: int) -> tuple[int, ...]: ...

    @overload
    def __getitem__(self, index: builtins.slice) -> RecordBatch: ...

    def __getitem__(self, index: int | builtins.slice) -> RecordBatch | tuple[int, ...]:
        if isinstance(index, builtins.slice):
            return RecordBatch(self.columns[:, index])
        return tuple(self.columns[:, index].tolist())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RecordBatch):
            return self.columns.shape == other.columns.shape and bool(np.array_equal(self.columns, other.columns))
        if isinstance(other, (list, tuple)):
            return len(self) == len(other) and self.to_rows() == [tuple(r) for r in other]
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.columns.shape, np.ascontiguousarray(self.columns).tobytes()))

    def __repr__(self) -> str:
        n = len(self)
        head = ", ".join(map(repr, self[: min(n, 3)]))
        return f"RecordBatch({n} records{': ' + head if n else ''}{', ...' if n > 3 else ''})"


class MalformedRecords(ValueError):
    """Bytes that do not hold a record batch (names the problem)."""


def batch_to_bytes(batch: RecordBatch) -> bytes:
    """A batch's column buffers as bytes: a header (fields, records), then the int64 columns, little-endian,
    field after field."""
    fields, records = batch.columns.shape
    return _BATCH_HEADER.pack(fields, records) + np.ascontiguousarray(batch.columns, dtype=_LE_INT64).tobytes()


def batch_from_bytes(data: bytes | bytearray | memoryview) -> RecordBatch:
    """What ``batch_to_bytes`` wrote, as a read-only view of ``data`` (no copy on a little-endian machine)."""
    if len(data) < _BATCH_HEADER.size:
        raise MalformedRecords(f"record batch: {len(data)} bytes is shorter than its {_BATCH_HEADER.size}-byte header")
    fields, records = _BATCH_HEADER.unpack_from(data, 0)
    expected = _BATCH_HEADER.size + 8 * fields * records
    if len(data) != expected:
        raise MalformedRecords(f"record batch of {fields} x {records} values: {len(data)} bytes, expected {expected}")
    columns = np.frombuffer(data, dtype=_LE_INT64, offset=_BATCH_HEADER.size).reshape(fields, records)
    return RecordBatch(columns if columns.dtype.isnative else columns.astype(np.int64))


__all__ = ["RECORD_FIELDS", "MalformedRecords", "RecordBatch", "batch_from_bytes", "batch_to_bytes"]
