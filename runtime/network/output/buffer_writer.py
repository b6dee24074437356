"""The writing side of a ``ResultPartition``: each subpartition's open buffer builder and the writes that fill it.

Records (single ones, or ``RecordBatch``es cut into slices per subpartition) fill a subpartition's open builder,
which is finished (queued in the subpartition) when full; flushes are requested and cut by the network side; a hash
write that fills no buffer is staged and cut with later ones. Mirrors the buffer side of Flink's
``BufferWritingResultPartition`` (``emitRecord``, ``broadcastRecord``, ``flush``, ``finishUnicastBufferBuilders``).
See ``docs/architecture.md``, "The data plane".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from barriersim.runtime.buffer_content import content_of
from barriersim.runtime.events import Buffer
from barriersim.runtime.network.output.subpartition import PipelinedSubpartition
from barriersim.runtime.record_batch import RecordBatch


class PartitionStateError(RuntimeError):
    """An operation the partition's state does not allow (e.g. writing after ``finish``)."""


@dataclass(slots=True)
class _BufferBuilder:
    capacity: int  # the subpartition's buffer size when the builder was opened (Flink's BufferBuilder.trim)
    records: list[Any] = field(default_factory=list)  # record batches (runs of records), watermarks, or single records
    size: int = 0
    batches_only: bool = True  # every part is a RecordBatch (the common case: no watermark, no single record)

    def build(self) -> Buffer:
        parts = self.records
        if self.batches_only:
            return Buffer(RecordBatch.concat(parts) if parts else (), self.size)
        return Buffer(content_of(parts), self.size)


class BufferWriter:
    """The open buffer builders of one result partition's subpartitions, and every write into them."""

    def __init__(
        self, partition_idx: int, subpartitions: Sequence[PipelinedSubpartition], starting_buffer_size: int
    ) -> None:
        """``subpartitions``: where finished buffers are queued; ``starting_buffer_size``: the size of each
        subpartition's buffers until its consumer announces one (``set_buffer_size``)."""
        n = len(subpartitions)
        self._partition_idx = partition_idx
        self._subpartitions = subpartitions
        self.buffer_sizes = [starting_buffer_size] * n  # debloated sizes, announced by the receivers (read-only)
        self.builders = [_BufferBuilder(starting_buffer_size) for _ in range(n)]  # (read-only outside)
        self.flush_requested = [False] * n  # a flush waits for the network side to take the open buffer (read-only)
        # per subpartition: Flink's open BufferBuilder was read to its end by a flush and nothing written since; it
        # stays queued (an empty BufferConsumer) until the next finish, so an unaligned barrier persists it
        self._drained_open = [False] * n
        self._finished = False  # no more writes (they raise)
        self._released = False  # writes are dropped
        self.total_written_bytes = 0
        # hash-partitioned writes not yet cut into the builders (``write_batch``): the batches and their targets, the
        # records staged per subpartition, the bytes each builder had free when staging began, the record size
        self._staged: list[tuple[RecordBatch, np.ndarray]] = []
        self._staged_counts: np.ndarray | None = None
        self._staged_room: np.ndarray | None = None
        self._staged_size = 0

    def _check_write(self, what: str, size: int, where: str = "") -> bool:
        """False when the write is to be dropped (released); raises when it is not allowed."""
        if self._released:
            return False
        if self._finished:
            raise PartitionStateError(f"{what}{where}: result partition {self._partition_idx} is already finished")
        if size < 0:
            raise ValueError(f"{what}: negative record size {size}")
        return True

    # -- single records ------------------------------------------------------------------------------

    def emit_record(self, record: Any, target: int, size: int) -> None:
        """Serializes ``record`` (``size`` bytes) into the target subpartition's buffers."""
        if not self._check_write("emit_record", size, f"(to {target})"):
            return
        self._cut_staged()
        self._write(record, target, size)
        self.total_written_bytes += size

    def broadcast_record(self, record: Any, size: int) -> None:
        for i in range(len(self._subpartitions)):
            self.emit_record(record, i, size)

    def emit_records(self, records_and_targets: Iterable[tuple[Any, int]], size: int) -> None:
        """``emit_record`` for a batch of ``(record, target_subpartition)`` pairs of ``size`` bytes each."""
        if not self._check_write("emit_records", size):
            return
        self._cut_staged()
        count = 0
        for record, target in records_and_targets:
            count += 1
            self._append(record, target, size)
        self.total_written_bytes += count * size

    def emit_batch(self, records: RecordBatch | Sequence[Any], targets: int | Sequence[int], size: int) -> None:
        """``records[k]`` to subpartition ``targets[k]``, or every record to subpartition ``targets`` if it is an
        int; a ``RecordBatch`` goes to ``write_batch``."""
        if type(records) is RecordBatch:
            self.write_batch(records, targets, size)
            return
        if not self._check_write("emit_batch", size):
            return
        self._cut_staged()
        if isinstance(targets, int):
            self._append_all(records, targets, size)
        else:
            groups: list[list[Any]] = [[] for _ in self._subpartitions]
            appends = [g.append for g in groups]
            for record, target in zip(records, targets):
                appends[target](record)
            for target, group in enumerate(groups):
                if group:
                    self._append_all(group, target, size)
        self.total_written_bytes += len(records) * size

    def emit_round_robin(self, records: RecordBatch | Sequence[Any], start: int, size: int) -> None:
        """``records[k]`` to subpartition ``(start + k) % n``; a ``RecordBatch`` goes to ``write_round_robin``."""
        if type(records) is RecordBatch:
            self.write_round_robin(records, start, size)
            return
        if not self._check_write("emit_round_robin", size):
            return
        self._cut_staged()
        n = len(self._subpartitions)
        for j in range(min(n, len(records))):
            self._append_all(records[j::n], (start + j) % n, size)
        self.total_written_bytes += len(records) * size

    def _write(self, record: Any, target: int, size: int) -> None:
        """Appends a record to the target's open buffer, finishing the buffers it fills (a spanning record
        fills and finishes buffers until its last bytes fit)."""
        builder = self.builders[target]
        segment = builder.capacity
        remaining = size
        while remaining > segment - builder.size:  # spanning record: fill and finish
            remaining -= segment - builder.size
            builder.size = segment
            self._finish_builder(target)
            builder = self.builders[target]
            segment = builder.capacity
        builder.records.append(record)
        if type(record) is not RecordBatch:
            builder.batches_only = False
        builder.size += remaining
        if builder.size == segment:
            self._finish_builder(target)

    def _append(self, record: Any, target: int, size: int) -> None:
        builder = self.builders[target]
        filled = builder.size + size
        if filled >= builder.capacity:
            self._write(record, target, size)
        else:
            builder.records.append(record)
            builder.batches_only = False
            builder.size = filled

    def _append_all(self, records: Sequence[Any], target: int, size: int) -> None:
        """Every record to one subpartition: runs of records that leave the open buffer not full are added at
        once; the record that fills it (or spans) goes through ``_write``."""
        n, k = len(records), 0
        while k < n:
            builder = self.builders[target]
            room = (builder.capacity - builder.size - 1) // size if size > 0 else n - k  # records leaving it not full
            if room > 0:
                chunk = records[k : k + room]
                builder.records.extend(chunk)
                builder.batches_only = False
                builder.size += len(chunk) * size
                k += len(chunk)
            else:
                self._write(records[k], target, size)
                k += 1

    # -- record batches ------------------------------------------------------------------------------

    def write_batch(self, records: RecordBatch, targets: np.ndarray | Sequence[int] | int, size: int) -> None:
        """``records.slice(k, k + 1)`` to subpartition ``targets[k]`` (an int array), or every record to subpartition
        ``targets`` if it is an int: each subpartition's share is cut from the batch (grouped stably, so in
        order), without touching single records; the same buffers as ``emit_record`` record by record.

        A write to an int array of targets that fills no buffer is only staged: its records are cut into the
        builders together with the writes staged after it, at the first write that fills a buffer or anything else
        that reads or changes the open buffers (``_cut_staged``). Nothing can tell the difference: a builder's
        content is the same records in the same order, and every buffer is finished in the same write as without
        staging (``tests/runtime/network_output/test_staged_hash_writes.py``); but a hash edge's many small shares
        (a source's step cut into one slice per subpartition) are cut a few writes at a time, in one grouping,
        instead of one write at a time."""
        if not self._check_write("write_batch", size):
            return
        if isinstance(targets, (int, np.integer)):
            self._cut_staged()
            self._append_batch(records, int(targets), size)
        else:
            targets = np.asarray(targets)
            counts = np.bincount(targets, minlength=len(self._subpartitions))
            if not self._stage(records, targets, counts, size):
                if self._staged and size == self._staged_size:  # it fills a buffer: cut with the staged ones
                    self._cut(self._take_staged((records, targets, counts)), size)
                else:
                    self._cut_staged()
                    self._cut((records, targets, counts), size)
        self.total_written_bytes += len(records) * size

    def write_round_robin(self, records: RecordBatch, start: int, size: int) -> None:
        """Record ``k`` of ``records`` to subpartition ``(start + k) % n`` (Flink's ``RebalancePartitioner``):
        subpartition ``(start + j) % n`` gets the strided slice ``j, j + n, ...``."""
        if not self._check_write("write_round_robin", size):
            return
        self._cut_staged()
        n = len(self._subpartitions)
        if n == 1:
            self._append_batch(records, 0, size)
        else:
            for j in range(min(n, len(records))):
                self._append_batch(records.every(j, n), (start + j) % n, size)
        self.total_written_bytes += len(records) * size

    def write_broadcast(self, records: RecordBatch, size: int) -> None:
        """Every record of ``records`` to every subpartition (a broadcast edge), as ``broadcast_record`` for each
        record in order: each subpartition gets the whole batch."""
        if not self._check_write("write_broadcast", size):
            return
        self._cut_staged()
        for target in range(len(self._subpartitions)):
            self._append_batch(records, target, size)
        self.total_written_bytes += len(records) * size * len(self._subpartitions)

    def _append_batch(self, records: RecordBatch, target: int, size: int) -> None:
        """``_append_all`` for a batch: the runs are slices of it (views), the record that fills or spans a
        buffer a slice of one record."""
        n, k = len(records), 0
        while k < n:
            builder = self.builders[target]
            if size > 0:
                free = builder.capacity - builder.size
                room = (free - 1) // size  # records leaving it not full
                if free == (room + 1) * size:
                    room += 1  # and the record that fills it exactly (no spanning): ``_write`` would finish it
            else:
                room = n - k
            if room > 0:
                end = min(n, k + room)
                builder.records.append(records if (k == 0 and end == n) else records.slice(k, end))
                builder.size += (end - k) * size
                k = end
                if builder.size == builder.capacity:
                    self._finish_builder(target)
            else:
                self._write(records.slice(k, k + 1), target, size)
                k += 1

    # -- staged hash writes --------------------------------------------------------------------------

    def _stage(self, records: RecordBatch, targets: np.ndarray, counts: np.ndarray, size: int) -> bool:
        """Stage a hash write if, with what is staged, it leaves every open buffer not full (no flush pending)."""
        if size <= 0 or True in self.flush_requested:
            return False
        if self._staged:
            if size != self._staged_size:
                return False
            staged = self._staged_counts + counts
        else:
            self._staged_room = np.array([b.capacity - b.size for b in self.builders], dtype=np.int64)
            staged = counts
        if not np.logical_and.reduce(staged * size < self._staged_room):  # ``.all()`` without its Python wrapper
            return False
        self._staged.append((records, targets))
        self._staged_counts = staged
        self._staged_size = size
        return True

    def _cut_staged(self) -> None:
        """Cut the staged writes into the builders (nothing if none is staged)."""
        if self._staged:
            size = self._staged_size
            self._cut(self._take_staged(), size)

    def _take_staged(
        self, then: tuple[RecordBatch, np.ndarray, np.ndarray] | None = None
    ) -> tuple[RecordBatch, np.ndarray, np.ndarray]:
        """The staged writes, then ``then``, as one write (records, targets, records per subpartition); nothing is
        staged afterwards."""
        staged_counts = self._staged_counts
        assert staged_counts is not None  # called with writes staged
        writes = self._staged + ([then[:2]] if then is not None else [])
        counts = staged_counts if then is None else staged_counts + then[2]
        self._drop_staged()
        if len(writes) == 1:
            return writes[0][0], writes[0][1], counts
        return RecordBatch.concat([r for r, _ in writes]), np.concatenate([t for _, t in writes]), counts

    def _drop_staged(self) -> None:
        """Nothing is staged any more (the staged writes were taken, or the partition was released)."""
        self._staged = []
        self._staged_counts = self._staged_room = None

    def _cut(self, write: tuple[RecordBatch, np.ndarray, np.ndarray], size: int) -> None:
        """Each subpartition's records of ``write`` (records, targets, records per subpartition), in order, as one
        slice of their stable grouping by target, to its builder."""
        records, targets, counts = write
        order = (targets.astype(np.int16) if len(self._subpartitions) <= 32767 else targets).argsort(kind="stable")
        grouped = records.take(order)
        start = 0
        for target, count in enumerate(counts.tolist()):
            if count:
                self._append_batch(grouped.slice(start, start + count), target, size)
                start += count

    # -- the open buffers ----------------------------------------------------------------------------

    def _finish_builder(self, i: int) -> None:
        builder = self.builders[i]
        if builder.records or builder.size:
            self._subpartitions[i].add_buffer(builder.build())
            self.builders[i] = _BufferBuilder(self.buffer_sizes[i])
        self.flush_requested[i] = False
        self._drained_open[i] = False

    def has_open_buffer(self, i: int) -> int:
        """1 if subpartition ``i``'s open buffer holds anything (staged writes included), else 0."""
        builder = self.builders[i]
        staged = self._staged_counts is not None and self._staged_counts[i] > 0
        return 1 if (builder.records or builder.size or staged) else 0

    def flush(self, i: int) -> None:
        """Flink's ``flush``: the partially filled buffer of one subpartition may be sent as soon as the network
        side can take it (``flushRequested``); until then it keeps filling."""
        self._cut_staged()
        builder = self.builders[i]
        if builder.records or builder.size:
            self.flush_requested[i] = True

    def flush_all(self) -> None:
        for i in range(len(self._subpartitions)):
            self.flush(i)

    def cut_flushed(self, i: int) -> None:
        """The network side takes subpartition ``i``'s flushed open buffer now (it may send it)."""
        self._cut_staged()  # (nothing is staged while a flush is pending)
        self._finish_builder(i)
        self._drained_open[i] = True  # in Flink the builder stays open, read to its end

    def finish_builders(self) -> None:
        """Every open buffer is finished and queued (before an event, Flink's ``finishUnicastBufferBuilders``)."""
        self._cut_staged()
        for i in range(len(self._subpartitions)):
            self._finish_builder(i)

    def finish_builders_before_event(self) -> list[bool]:
        """``finish_builders`` before an event; per subpartition, whether its open buffer had been read to its end
        by a flush with nothing written since (Flink queues an empty buffer for it, which a priority event
        overtakes)."""
        self._cut_staged()  # records staged since the flush go into the builder first: then it is not drained
        drained = [self._drained_open[i] and not (b.records or b.size) for i, b in enumerate(self.builders)]
        self.finish_builders()
        return drained

    def finish_open_buffer(self, i: int) -> None:
        """Subpartition ``i``'s open buffer is finished if it holds anything (before recovered buffers)."""
        self._cut_staged()
        if self.builders[i].records or self.builders[i].size:
            self._finish_builder(i)

    def set_buffer_size(self, i: int, buffer_size: int) -> None:
        """Buffers of subpartition ``i`` opened from now on are cut at ``buffer_size``; an empty open one too."""
        self._cut_staged()
        self.buffer_sizes[i] = buffer_size
        if self.builders[i].size == 0:
            self.builders[i].capacity = buffer_size

    def finish(self) -> None:
        """Every open buffer is finished; later writes raise ``PartitionStateError``."""
        self.finish_builders()
        self._finished = True

    def release(self) -> None:
        """The open buffers and staged writes are dropped; later writes are dropped silently."""
        self._released = True
        self._drop_staged()
        self.builders = [_BufferBuilder(s) for s in self.buffer_sizes]
        self.flush_requested = [False] * len(self._subpartitions)
        self._drained_open = [False] * len(self._subpartitions)

    # -- how many records until ... ------------------------------------------------------------------

    def records_until_buffer_finishes(self, targets: np.ndarray | int | None, n: int, size: int) -> int:
        """Of ``n`` records of ``size`` bytes written to ``targets`` (an int: every record to that subpartition; an
        int array: record ``k`` to ``targets[k]``; None: every record to every subpartition, a broadcast), how many
        until the first of them that finishes a buffer (fills its subpartition's open buffer exactly or spans it,
        as ``_append_batch`` and ``_write`` finish it), that record included; ``n`` if none does, at least 1."""
        return self.records_until(targets, n, size, self._records_to_finish_buffer)

    def records_until(
        self, targets: np.ndarray | int | None, n: int, size: int, records_to: Callable[[int, int], int]
    ) -> int:
        """The records of a write up to and including the first at which ``records_to(p, size)`` further records
        to some subpartition ``p`` are reached (``n`` if at none, at least 1)."""
        if size <= 0 or n <= 0 or self._released:  # a released partition drops what is written
            return max(n, 0)
        if targets is None:
            return max(1, min(n, *(records_to(p, size) for p in range(len(self._subpartitions)))))
        if not isinstance(targets, np.ndarray):
            return max(1, min(n, records_to(int(targets), size)))
        allowed = n
        for p, count in enumerate(np.bincount(targets, minlength=len(self._subpartitions)).tolist()):
            if not count:
                continue
            c = records_to(p, size)
            if count >= c:
                allowed = min(allowed, int(np.flatnonzero(targets == p)[c - 1]) + 1)
        return max(1, allowed)

    def fewest_records_to_finish_buffer(self, size: int) -> int:
        """The fewest further records of ``size`` bytes to one subpartition that finish its open buffer."""
        if size <= 0 or self._released:
            return 1 << 62
        return min(self._records_to_finish_buffer(p, size) for p in range(len(self._subpartitions)))

    def _records_to_finish_buffer(self, p: int, size: int) -> int:
        """The number of further records of ``size`` bytes to subpartition ``p`` whose last one finishes its open
        buffer: the one that reaches the builder's capacity."""
        room = self.builders[p].capacity - self._open_buffer_bytes(p)
        return max(1, -(-room // size))

    def _open_buffer_bytes(self, p: int) -> int:
        """The bytes subpartition ``p``'s open buffer holds once the staged writes are cut into it."""
        counts = self._staged_counts  # set while writes are staged
        return self.builders[p].size + (int(counts[p]) * self._staged_size if counts is not None else 0)

    def room(self, p: int, new_buffers: int) -> int:
        """The bytes subpartition ``p``'s open buffer and ``new_buffers`` more buffers (of its buffer size) take."""
        return self.builders[p].capacity + new_buffers * self.buffer_sizes[p] - self._open_buffer_bytes(p)
