"""The record-batch writes of a ``ResultPartition`` (the data path): a batch goes to the subpartitions its
partitioner picks as slices, never as single records; the caller checks the partition's availability before it
takes more input.

How this works: ``write_batch`` groups a batch stably by target subpartition (a hash edge) or hands it whole to
one (a forward edge); ``write_round_robin`` cuts strided slices (a rebalance edge); ``write_broadcast`` gives every
subpartition the whole batch. ``_append_batch`` fills a subpartition's open buffer builder with runs of records
that leave it not full, finishing it at the record that fills it exactly or spans it, so the buffers are those
``emit_record`` would make record by record. A hash write that fills no buffer is staged (``_stage``) and cut
into the builders with the next ones (``_cut_staged``): at the write that fills a buffer, or before anything else
of the partition reads or changes the open buffers (every other write, flush, event, buffer size, restore), which
no caller can observe; a hash edge's many small shares (a source's step cut into one slice per subpartition) are
so cut a few writes at a time. ``BatchWrites`` is the part of ``ResultPartition`` that does this; it uses the
partition's subpartitions, builders, flush requests and staging state, and its ``_write`` and
``_finish_builder``. Mirrors the batch side of Flink's ``BufferWritingResultPartition.emitRecord`` (Flink writes
serialized records one at a time; the buffers are the same).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from barriersim.runtime.record_batch import RecordBatch


class BatchWrites:
    """Record-batch writes of ``ResultPartition`` (a part of it, not used alone)."""

    def _check_batch_write(self, what: str, size: int) -> bool:
        """False when the write is to be dropped (released); raises when it is not allowed."""
        if self._released:
            return False
        self._check_in_produce_state(what)
        if size < 0:
            raise ValueError(f"{what}: negative record size {size}")
        return True

    def write_batch(self, records: RecordBatch, targets, size: int) -> None:
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
        if not self._check_batch_write("write_batch", size):
            return
        if isinstance(targets, (int, np.integer)):
            self._cut_staged()
            self._append_batch(records, int(targets), size)
        else:
            targets = np.asarray(targets)
            counts = np.bincount(targets, minlength=len(self.subpartitions))
            if not self._stage(records, targets, counts, size):
                if self._staged and size == self._staged_size:  # it fills a buffer: cut with the staged ones
                    self._cut(self._take_staged((records, targets, counts)), size)
                else:
                    self._cut_staged()
                    self._cut((records, targets, counts), size)
        self.total_written_bytes += len(records) * size

    def _stage(self, records: RecordBatch, targets: np.ndarray, counts: np.ndarray, size: int) -> bool:
        """Stage a hash write if, with what is staged, it leaves every open buffer not full (no flush pending)."""
        if size <= 0 or True in self._flush_requested:
            return False
        if self._staged:
            if size != self._staged_size:
                return False
            staged = self._staged_counts + counts
        else:
            self._staged_room = np.array([b.capacity - b.size for b in self._builders], dtype=np.int64)
            staged = counts
        if not (staged * size < self._staged_room).all():
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

    def _take_staged(self, then: Optional[tuple[RecordBatch, np.ndarray, np.ndarray]] = None
                     ) -> tuple[RecordBatch, np.ndarray, np.ndarray]:
        """The staged writes, then ``then``, as one write (records, targets, records per subpartition); nothing is
        staged afterwards."""
        writes = self._staged + ([then[:2]] if then is not None else [])
        counts = self._staged_counts if then is None else self._staged_counts + then[2]
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
        order = np.argsort(targets.astype(np.int16) if len(self.subpartitions) <= 32767 else targets, kind="stable")
        grouped = records.take(order)
        start = 0
        for target, count in enumerate(counts.tolist()):
            if count:
                self._append_batch(grouped.slice(start, start + count), target, size)
                start += count

    def write_round_robin(self, records: RecordBatch, start: int, size: int) -> None:
        """Record ``k`` of ``records`` to subpartition ``(start + k) % n`` (Flink's ``RebalancePartitioner``):
        subpartition ``(start + j) % n`` gets the strided slice ``j, j + n, ...``."""
        if not self._check_batch_write("write_round_robin", size):
            return
        self._cut_staged()
        n = len(self.subpartitions)
        if n == 1:
            self._append_batch(records, 0, size)
        else:
            for j in range(min(n, len(records))):
                self._append_batch(records.every(j, n), (start + j) % n, size)
        self.total_written_bytes += len(records) * size

    def write_broadcast(self, records: RecordBatch, size: int) -> None:
        """Every record of ``records`` to every subpartition (a broadcast edge), as ``broadcast_record`` for each
        record in order: each subpartition gets the whole batch."""
        if not self._check_batch_write("write_broadcast", size):
            return
        self._cut_staged()
        for target in range(len(self.subpartitions)):
            self._append_batch(records, target, size)
        self.total_written_bytes += len(records) * size * len(self.subpartitions)

    def records_until_backpressured(self, targets, n: int, size: int) -> int:
        """Of ``n`` records of ``size`` bytes written to ``targets`` (an int: every record to that subpartition; an
        int array: record ``k`` to ``targets[k]``; None: every record to every subpartition, a broadcast), how many
        the partition takes until it is backpressured: the records up to and including the one after which some
        subpartition holds ``max_buffers_per_channel`` buffers (``buffers_in_use``); ``n`` if none does, at least 1.
        Flink's source emits one record per ``StreamTask.processInput`` and goes on only while ``taskIsAvailable()``,
        so it stops there."""
        return self._records_until(targets, n, size, self._records_to_backpressure)

    def records_until_buffer_finishes(self, targets, n: int, size: int) -> int:
        """Of ``n`` records written as for ``records_until_backpressured``, how many until the first of them that
        finishes a buffer (fills its subpartition's open buffer exactly or spans it, as ``_append_batch`` and
        ``_write`` finish it), that record included; ``n`` if none does, at least 1. A buffer goes out when it is
        finished, so a paced source that emits its records when they are due sends it when that record is due
        (the simulator's ``EmissionClock``, ``SourceEmission.EXACT``)."""
        return self._records_until(targets, n, size, self._records_to_finish_buffer)

    def _records_until(self, targets, n: int, size: int, records_to) -> int:
        """The records of a write up to and including the first at which ``records_to(p, size)`` further records
        to some subpartition ``p`` are reached (``n`` if at none, at least 1)."""
        if size <= 0 or n <= 0 or self._released:  # a released partition drops what is written
            return max(n, 0)
        if targets is None:
            return max(1, min(n, *(records_to(p, size) for p in range(len(self.subpartitions)))))
        if not isinstance(targets, np.ndarray):
            return max(1, min(n, records_to(int(targets), size)))
        allowed = n
        for p, count in enumerate(np.bincount(targets, minlength=len(self.subpartitions)).tolist()):
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
        return min(self._records_to_finish_buffer(p, size) for p in range(len(self.subpartitions)))

    def _records_to_finish_buffer(self, p: int, size: int) -> int:
        """The number of further records of ``size`` bytes to subpartition ``p`` whose last one finishes its open
        buffer: the one that reaches the builder's capacity."""
        room = self._builders[p].capacity - self._open_buffer_bytes(p)
        return max(1, -(-room // size))

    def _open_buffer_bytes(self, p: int) -> int:
        """The bytes subpartition ``p``'s open buffer holds once the staged writes are cut into it."""
        return self._builders[p].size + (int(self._staged_counts[p]) * self._staged_size if self._staged else 0)

    def _records_to_backpressure(self, p: int, size: int) -> int:
        """The number of further records of ``size`` bytes to subpartition ``p`` whose last one brings its
        ``buffers_in_use`` to ``max_buffers_per_channel``: the open builder fills to its capacity, then each new
        buffer to the subpartition's buffer size (spanning records as ``_write`` writes them)."""
        builder = self._builders[p]
        written = self._open_buffer_bytes(p)
        builders_allowed = (self.max_buffers_per_channel - self.subpartitions[p].number_of_queued_buffers
                            - self._at_consumer[p])  # the open builder and the buffers it fills count from here
        if builders_allowed <= 1:
            return 1
        room = builder.capacity + (builders_allowed - 2) * self._buffer_sizes[p] - written
        return room // size + 1 if room >= 0 else 1

    def _append_batch(self, records: RecordBatch, target: int, size: int) -> None:
        """``_append_all`` for a batch: the runs are slices of it (views), the record that fills or spans a
        buffer a slice of one record."""
        n, k = len(records), 0
        while k < n:
            builder = self._builders[target]
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
