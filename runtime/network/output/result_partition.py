"""A task's pipelined result partition: serializes records into buffers per subpartition, broadcasts events,
and hands buffers to the network under credit-based flow control.

How this works: each subpartition has an open buffer builder. ``emit_record`` appends a record of ``size``
bytes to its target's builder; a builder is finished (queued in the subpartition, where it gets the next
buffer index) when it is full (the memory segment size, 32 KiB by default). ``flush`` (the output flusher,
every ``execution.buffer-timeout``) only requests a flush, as Flink's ``PipelinedSubpartition.flush`` sets
``flushRequested``: the open builder keeps filling until the network side may take it (the queue ahead of it
sent, credit available), and is cut then with whatever it holds; so a backpressured subpartition keeps filling
its buffers instead of queueing a small one per flush. A record larger
than the space left spans buffers, as Flink's spanning records do: the full buffers carry its first bytes
and the record value travels in the buffer where it ends. ``broadcast_event`` first finishes every open
builder, so the data written before an event is queued before it, then adds the event to every
subpartition; as a priority event (an unaligned barrier) it overtakes the queued data, and the overtaken
buffers are returned per subpartition for the channel state writer. ``aligned_barrier_timeout`` turns a
queued timeoutable barrier into a priority one the same way. A partition whose edge cannot carry unaligned
barriers (``supports_unaligned_checkpoints`` False: a pointwise or broadcast edge, or any input edge of a vertex that
has one) sends a checkpoint barrier forced aligned and in order, as Flink's ``RecordWriterOutput.broadcastEvent``
does with ``withUnalignedUnsupported``.

Backpressure: a subpartition may hold at most ``max_buffers_per_channel`` buffers (queued, the open builder, and for
a local subpartition the buffers its local channel holds: Flink's local channel reads the producer's own memory
segments, which return to its pool only once the consumer's deserializer has read them). When one reaches it,
``get_availability`` is ``BACKPRESSURED`` and the producer must stop taking input until the network drains it
(Flink's ``LocalBufferPool`` with ``maxBuffersPerChannel``). Records emitted while processing one input are never
refused (Flink blocks inside the write; a sans-IO producer cannot), so the bound is checked by the driver before the
producer takes its next input.

Record batches (``write_batch``, ``write_round_robin``, ``write_broadcast``: ``batch_writes.BatchWrites``, a part
of this class) are cut into slices per subpartition, never into single records; a hash write that fills no buffer
is staged and cut later together with the next ones, which no caller can observe. Every method here that reads or
changes the open builders cuts the staged writes first (``_cut_staged``).

The network side (the driver's netty stand-in): ``add_credit(info, n)`` for the receiver's credit,
``poll_next(info)`` for the next element that may be sent (``BufferAndBacklog`` or None), and
``resume_consumption(info)`` after the receiver's alignment.

``release`` (the task failed): every subpartition drops what it queues, open buffers are dropped, records
and events written later are silently dropped, and the network side hands out nothing more and ignores
credit and resume messages, as a released Flink partition whose readers are gone. So a dead producer never
sends again; its consumer, which lost the elements in flight, cannot see a gap in the wire numbers.

Mirrors Flink's ``PipelinedResultPartition`` / ``BufferWritingResultPartition`` (``emitRecord``,
``broadcastRecord``, ``broadcastEvent(event, isPriorityEvent)``, ``flush``, ``flushAll``, ``finish``,
``alignedBarrierTimeout``) with ``LocalBufferPool`` availability.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Sequence, Union

import numpy as np

from barriersim.runtime.events import Buffer, ChannelElement, CheckpointBarrier, ResultSubpartitionInfo
from barriersim.runtime.network.output.batch_writes import BatchWrites
from barriersim.runtime.network.output.subpartition import BufferAndBacklog, PipelinedSubpartition
from barriersim.runtime.network.output.view_reader import CreditBasedSequenceNumberingViewReader, CreditError
from barriersim.runtime.buffer_content import content_of
from barriersim.runtime.record_batch import RecordBatch

DEFAULT_MEMORY_SEGMENT_SIZE = 32 * 1024
DEFAULT_MAX_BUFFERS_PER_CHANNEL = 10


class Availability(enum.Enum):
    AVAILABLE = "AVAILABLE"
    BACKPRESSURED = "BACKPRESSURED"


class PartitionStateError(RuntimeError):
    """An operation the partition's state does not allow (e.g. writing after ``finish``)."""


@dataclass(slots=True)
class _BufferBuilder:
    capacity: int  # the subpartition's buffer size when the builder was opened (Flink's BufferBuilder.trim)
    records: list = field(default_factory=list)  # record batches (runs of records), watermarks, or single records
    size: int = 0
    batches_only: bool = True  # every part is a RecordBatch (the common case: no watermark, no single record)

    def build(self) -> Buffer:
        parts = self.records
        if self.batches_only:
            return Buffer(RecordBatch.concat(parts) if parts else (), self.size)
        return Buffer(content_of(parts), self.size)


class ResultPartition(BatchWrites):
    def __init__(
        self,
        partition_idx: int,
        num_subpartitions: int,
        *,
        memory_segment_size: int = DEFAULT_MEMORY_SEGMENT_SIZE,
        max_buffers_per_channel: int = DEFAULT_MAX_BUFFERS_PER_CHANNEL,
        initial_credit: int = 0,
        block_on_aligned_barrier: bool = True,
        supports_unaligned_checkpoints: bool = True,
        local_subpartitions: Sequence[bool] = (),
        starting_buffer_size: Optional[int] = None,
    ):
        """``local_subpartitions``: per subpartition, whether its consumer runs in this TaskManager (a local
        channel reads it); none by default. ``starting_buffer_size``: the size of each subpartition's buffers until
        its consumer announces one (Flink's ``PipelinedSubpartition`` ``startingBufferSize``: the starting segment size
        with buffer debloating on); the segment size by default."""
        if num_subpartitions <= 0 or memory_segment_size <= 0 or max_buffers_per_channel <= 0:
            raise ValueError(
                f"result partition {partition_idx}: subpartitions ({num_subpartitions}), segment size "
                f"({memory_segment_size}) and max buffers per channel ({max_buffers_per_channel}) must be positive"
            )
        self.partition_idx = partition_idx
        self.supports_unaligned_checkpoints = supports_unaligned_checkpoints
        self.memory_segment_size = memory_segment_size
        self.max_buffers_per_channel = max_buffers_per_channel
        self.subpartitions = [
            PipelinedSubpartition(ResultSubpartitionInfo(partition_idx, i), block_on_aligned_barrier=block_on_aligned_barrier)
            for i in range(num_subpartitions)
        ]
        self._readers = [CreditBasedSequenceNumberingViewReader(s, initial_credit) for s in self.subpartitions]
        starting = memory_segment_size if starting_buffer_size is None else min(starting_buffer_size,
                                                                                 memory_segment_size)
        self._buffer_sizes = [starting] * num_subpartitions  # debloated sizes, announced by the receivers
        self._builders = [_BufferBuilder(starting) for _ in range(num_subpartitions)]
        self._flush_requested = [False] * num_subpartitions
        # per subpartition: Flink's open BufferBuilder was read to its end by a flush and nothing written since; it
        # stays queued (an empty BufferConsumer) until the next finish, so an unaligned barrier persists it
        self._drained_open = [False] * num_subpartitions
        self._all_data_processed = [False] * num_subpartitions  # each consumer acknowledged its EndOfData
        # the local subpartitions, and the buffers each one's local channel holds (handed out, not yet recycled);
        # a local channel's first credit is its partition request, each later one recycles that many buffers
        if local_subpartitions and len(local_subpartitions) != num_subpartitions:
            raise ValueError(f"result partition {partition_idx}: {len(local_subpartitions)} local flags for "
                             f"{num_subpartitions} subpartitions")
        self._local = [bool(f) for f in local_subpartitions] if local_subpartitions else [False] * num_subpartitions
        self._any_local = any(self._local)
        self._requested = [False] * num_subpartitions
        self._at_consumer = [0] * num_subpartitions
        self._finished = False
        self._released = False
        self.total_written_bytes = 0
        # hash-partitioned writes not yet cut into the builders (``write_batch``): the batches and their targets, the
        # records staged per subpartition, the bytes each builder had free when staging began, the record size
        self._staged: list[tuple[RecordBatch, np.ndarray]] = []
        self._staged_counts: Optional[np.ndarray] = None
        self._staged_room: Optional[np.ndarray] = None
        self._staged_size = 0

    @property
    def number_of_subpartitions(self) -> int:
        return len(self.subpartitions)

    @property
    def subpartition_infos(self) -> list[ResultSubpartitionInfo]:
        return [s.info for s in self.subpartitions]

    def _index(self, info: ResultSubpartitionInfo) -> int:
        if info.partition_idx != self.partition_idx or not 0 <= info.subpartition_idx < len(self.subpartitions):
            raise KeyError(f"{info} is not a subpartition of result partition {self.partition_idx}")
        return info.subpartition_idx

    def _check_in_produce_state(self, what: str) -> None:
        if self._finished:
            raise PartitionStateError(f"{what}: result partition {self.partition_idx} is already finished")

    # -- records -----------------------------------------------------------------------------------

    def emit_record(self, record: Any, target_subpartition: int, size: int) -> Availability:
        """Serializes ``record`` (``size`` bytes) into the target subpartition's buffers (silently dropped
        once the partition is released)."""
        if self._released:
            return Availability.AVAILABLE
        if self._finished:
            self._check_in_produce_state(f"emit_record(to {target_subpartition})")
        if size < 0:
            raise ValueError(f"emit_record: negative record size {size}")
        self._cut_staged()
        self._write(record, target_subpartition, size)
        self.total_written_bytes += size
        return self.get_availability()

    def _write(self, record: Any, target: int, size: int) -> None:
        """Appends a record to the target's open buffer, finishing the buffers it fills (a spanning record
        fills and finishes buffers until its last bytes fit)."""
        builder = self._builders[target]
        segment = builder.capacity
        remaining = size
        while remaining > segment - builder.size:  # spanning record: fill and finish
            remaining -= segment - builder.size
            builder.size = segment
            self._finish_builder(target)
            builder = self._builders[target]
            segment = builder.capacity
        builder.records.append(record)
        if type(record) is not RecordBatch:
            builder.batches_only = False
        builder.size += remaining
        if builder.size == segment:
            self._finish_builder(target)

    def emit_records(self, records_and_targets: Iterable[tuple[Any, int]], size: int) -> Availability:
        """``emit_record`` for a batch of ``(record, target_subpartition)`` pairs of ``size`` bytes each, with
        the availability computed once at the end (what one input buffer's processing writes)."""
        if self._released:
            return Availability.AVAILABLE
        self._check_in_produce_state("emit_records")
        if size < 0:
            raise ValueError(f"emit_records: negative record size {size}")
        self._cut_staged()
        count = 0
        for record, target in records_and_targets:
            count += 1
            self._append(record, target, size)
        self.total_written_bytes += count * size
        return self.get_availability()

    def emit_batch(self, records: Sequence[Any], targets: Union[int, Sequence[int]], size: int) -> Availability:
        """``emit_records`` for ``records[k]`` to subpartition ``targets[k]``, or every record to subpartition
        ``targets`` if it is an int (a forward edge): same buffers, fewer steps. ``records`` is a ``RecordBatch``
        (``write_batch``) or a sequence of single records."""
        if type(records) is RecordBatch:
            self.write_batch(records, targets, size)
            return self.get_availability()
        if self._released:
            return Availability.AVAILABLE
        self._check_in_produce_state("emit_batch")
        if size < 0:
            raise ValueError(f"emit_batch: negative record size {size}")
        self._cut_staged()
        if isinstance(targets, int):
            self._append_all(records, targets, size)
        else:
            groups: list[list] = [[] for _ in self.subpartitions]
            appends = [g.append for g in groups]
            for record, target in zip(records, targets):
                appends[target](record)
            for target, group in enumerate(groups):
                if group:
                    self._append_all(group, target, size)
        self.total_written_bytes += len(records) * size
        return self.get_availability()

    def emit_round_robin(self, records: Sequence[Any], start: int, size: int) -> Availability:
        """``records[k]`` to subpartition ``(start + k) % n`` (Flink's ``RebalancePartitioner``), as
        ``emit_batch`` with those targets."""
        if type(records) is RecordBatch:
            self.write_round_robin(records, start, size)
            return self.get_availability()
        if self._released:
            return Availability.AVAILABLE
        self._check_in_produce_state("emit_round_robin")
        if size < 0:
            raise ValueError(f"emit_round_robin: negative record size {size}")
        self._cut_staged()
        n = len(self.subpartitions)
        for j in range(min(n, len(records))):
            self._append_all(records[j::n], (start + j) % n, size)
        self.total_written_bytes += len(records) * size
        return self.get_availability()

    def _append(self, record: Any, target: int, size: int) -> None:
        builder = self._builders[target]
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
            builder = self._builders[target]
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

    def broadcast_record(self, record: Any, size: int) -> Availability:
        for i in range(len(self.subpartitions)):
            self.emit_record(record, i, size)
        return self.get_availability()

    def _finish_builder(self, i: int) -> None:
        builder = self._builders[i]
        if builder.records or builder.size:
            self.subpartitions[i].add_buffer(builder.build())
            self._builders[i] = _BufferBuilder(self._buffer_sizes[i])
        self._flush_requested[i] = False
        self._drained_open[i] = False

    def flush(self, target_subpartition: int) -> None:
        """Flink's ``flush``: the partially filled buffer of one subpartition may be sent as soon as the network
        side can take it (``flushRequested``); until then it keeps filling."""
        self._cut_staged()
        builder = self._builders[target_subpartition]
        if builder.records or builder.size:
            self._flush_requested[target_subpartition] = True

    def flush_all(self) -> None:
        for i in range(len(self.subpartitions)):
            self.flush(i)

    def _finish_builders(self) -> None:
        """Every open buffer is finished and queued (before an event, Flink's ``finishUnicastBufferBuilders``)."""
        self._cut_staged()
        for i in range(len(self.subpartitions)):
            self._finish_builder(i)

    def _cut_flushed(self, i: int) -> bool:
        """A requested flush takes effect when the network side could send the open buffer now: nothing queued
        ahead of it and credit for it (Flink's reader reads the flushed builder's data at that point)."""
        if not self._flush_requested[i]:
            return False
        self._cut_staged()  # (nothing is staged while a flush is pending)
        sub = self.subpartitions[i]
        if sub.has_queued_elements or sub.is_blocked or self._readers[i].num_credits_available <= 0:
            return False
        self._finish_builder(i)
        self._drained_open[i] = True  # in Flink the builder stays open, read to its end
        return True

    # -- events ------------------------------------------------------------------------------------

    def broadcast_event(
        self, event: ChannelElement, is_priority_event: bool = False
    ) -> dict[ResultSubpartitionInfo, tuple[Buffer, ...]]:
        """Adds ``event`` to every subpartition after finishing the open buffers. Returns, for a priority
        event, the data buffers it overtook per subpartition (only subpartitions with any). Dropped once
        released."""
        if self._released:
            return {}
        if self._finished:
            self._check_in_produce_state(f"broadcast_event({event!r})")
        if isinstance(event, CheckpointBarrier) and not self.supports_unaligned_checkpoints:
            event = dataclasses.replace(event, options=event.options.with_unaligned_unsupported())
            is_priority_event = False
        # Flink's finishUnicastBufferBuilders finishes a drained open builder too: its empty consumer stays queued,
        # and PipelinedSubpartition.processPriorityBuffer persists every buffer the barrier overtakes, an empty copy
        # of that one included (4 bytes of channel state: ChannelStateSerializerImpl's length)
        self._cut_staged()  # records staged since the flush go into the builder first: then it is not drained
        drained = [self._drained_open[i] and not (b.records or b.size) for i, b in enumerate(self._builders)]
        self._finish_builders()
        overtaken: dict[ResultSubpartitionInfo, tuple[Buffer, ...]] = {}
        for i, sub in enumerate(self.subpartitions):
            data = sub.add_event(event, is_priority_event)
            if is_priority_event and drained[i]:
                data = (*data, Buffer((), 0))
            if data:
                overtaken[sub.info] = data
        return overtaken

    def aligned_barrier_timeout(self, checkpoint_id: int) -> dict[ResultSubpartitionInfo, tuple[Buffer, ...]]:
        """Flink's ``alignedBarrierTimeout``: every still queued timeoutable barrier of ``checkpoint_id``
        becomes an unaligned priority barrier; returns the overtaken data of each converted subpartition
        (an empty tuple where it overtook nothing)."""
        converted: dict[ResultSubpartitionInfo, tuple[Buffer, ...]] = {}
        for sub in self.subpartitions:
            data = sub.aligned_barrier_timeout(checkpoint_id)
            if data is not None:
                converted[sub.info] = data
        return converted

    def has_pending_timeoutable_barrier(self, checkpoint_id: int) -> bool:
        """True while any subpartition still queues the timeoutable barrier of ``checkpoint_id`` (its output
        channel state is not known yet: empty if it is sent aligned, the overtaken data if it times out)."""
        return any(s.has_queued_timeoutable_barrier(checkpoint_id) for s in self.subpartitions)

    def finish(self) -> None:
        """Flink's ``finish``: flushes and ends every subpartition with an end of partition."""
        if self._finished or self._released:
            return
        self._finish_builders()
        for sub in self.subpartitions:
            sub.finish()
        self._finished = True

    @property
    def is_finished(self) -> bool:
        return self._finished

    def release(self) -> None:
        """Flink's ``ResultPartition.release`` (via ``fail`` when the task fails): the subpartitions are
        released and the open buffers dropped; from now on writes are dropped and nothing is sent. Idempotent."""
        if self._released:
            return
        self._released = True
        self._drop_staged()
        self._builders = [_BufferBuilder(s) for s in self._buffer_sizes]
        self._flush_requested = [False] * len(self.subpartitions)
        self._drained_open = [False] * len(self.subpartitions)
        for sub in self.subpartitions:
            sub.release()

    @property
    def is_released(self) -> bool:
        return self._released

    def on_subpartition_all_data_processed(self, info: ResultSubpartitionInfo) -> None:
        """Flink's ``ResultPartition.onSubpartitionAllDataProcessed``: the consumer of ``info`` processed every
        record this partition gave it (it consumed the ``EndOfData``)."""
        self._all_data_processed[info.subpartition_idx] = True

    @property
    def all_data_processed(self) -> bool:
        """Flink's ``getAllDataProcessedFuture``, done: every consumer processed all the data."""
        return all(self._all_data_processed)

    # -- restore -----------------------------------------------------------------------------------

    def add_recovered(self, info: ResultSubpartitionInfo, buffers: Iterable[Buffer]) -> None:
        """Re-queues persisted output buffers of ``info`` before any new data (restore)."""
        i = self._index(info)
        self._cut_staged()
        if self._builders[i].records or self._builders[i].size:
            self._finish_builder(i)  # new data already written: the subpartition refuses the recovered buffers
        self.subpartitions[i].add_recovered(buffers)

    # -- the network side --------------------------------------------------------------------------

    def add_recovered_elements(self, info: ResultSubpartitionInfo, elements: Iterable) -> None:
        """Re-queues recovered buffers of a rescaled restore, with their virtual-channel events, before new data."""
        i = self._index(info)
        self._cut_staged()
        if self._builders[i].records or self._builders[i].size:
            self._finish_builder(i)  # new data already written: the subpartition refuses the recovered buffers
        self.subpartitions[i].add_recovered_elements(elements)

    def set_buffer_size(self, info: ResultSubpartitionInfo, buffer_size: int) -> None:
        """The receiver's debloated buffer size (Flink's ``PipelinedSubpartition.bufferSize`` set by
        ``notifyNewBufferSize``): buffers opened from now on are cut at it; one already filling keeps its size."""
        if self._released:
            return
        i = self._index(info)
        if not 0 < buffer_size <= self.memory_segment_size:
            raise ValueError(f"{info}: buffer size {buffer_size} outside (0, {self.memory_segment_size}]")
        self._cut_staged()
        self._buffer_sizes[i] = buffer_size
        if self._builders[i].size == 0:
            self._builders[i].capacity = buffer_size

    def buffer_size(self, info: ResultSubpartitionInfo) -> int:
        return self._buffer_sizes[self._index(info)]

    def add_credit(self, info: ResultSubpartitionInfo, credit: int) -> None:
        if self._released:
            return  # the reader is gone: Flink's PartitionRequestQueue ignores messages for released readers
        i = self._index(info)
        self._readers[i].add_credit(credit)
        if self._local[i]:
            if not self._requested[i]:
                self._requested[i] = True
            elif credit > self._at_consumer[i]:
                raise CreditError(f"add_credit({credit}) on local subpartition {info}: its channel holds only "
                                  f"{self._at_consumer[i]} buffer(s) to recycle")
            else:
                self._at_consumer[i] -= credit

    def num_credits_available(self, info: ResultSubpartitionInfo) -> int:
        return self._readers[self._index(info)].num_credits_available

    def poll_next(self, info: ResultSubpartitionInfo) -> Optional[BufferAndBacklog]:
        """The next element of ``info`` that may be sent now, or None (empty, blocked, no credit, released)."""
        if self._released:
            return None
        i = self._index(info)
        item = self._readers[i].get_next_buffer()
        if item is None and self._cut_flushed(i):
            item = self._readers[i].get_next_buffer()
        if item is not None and self._local[i] and item.is_buffer:
            self._handed_to_local_channel(i, 1)
        return item

    def poll_sendable(self) -> list[tuple[ResultSubpartitionInfo, BufferAndBacklog]]:
        """Everything the network may send now: subpartition by subpartition, in order, ``poll_next`` until
        it returns None."""
        if self._released:
            return []
        out = []
        flush_requested = self._flush_requested
        for i, reader in enumerate(self._readers):
            sub = reader.subpartition
            if not sub.has_queued_elements and not flush_requested[i]:
                continue
            info = sub.info
            sent = len(out)
            while True:
                while (item := reader.get_next_buffer()) is not None:
                    out.append((info, item))
                if not self._cut_flushed(i):
                    break
            if self._any_local and self._local[i]:
                self._handed_to_local_channel(i, sum(1 for _, item in out[sent:] if item.is_buffer))
        return out

    def _handed_to_local_channel(self, i: int, buffers: int) -> None:
        """``buffers`` data buffers of local subpartition ``i`` went to its ``LocalInputChannel``: they stay this
        partition's (Flink's local channel reads the producer's own memory segments) until the channel recycles
        them (``add_credit``), so they count in ``buffers_in_use`` and ``is_backpressured``."""
        self._at_consumer[i] += buffers

    def is_subpartition_available(self, info: ResultSubpartitionInfo) -> bool:
        i = self._index(info)
        if self._readers[i].is_available():
            return True
        return (self._flush_requested[i] and not self._released and not self.subpartitions[i].has_queued_elements
                and self._readers[i].num_credits_available > 0)

    def resume_consumption(self, info: ResultSubpartitionInfo) -> None:
        if self._released:
            return
        self._readers[self._index(info)].resume_consumption()

    def get_backlog(self, info: ResultSubpartitionInfo) -> int:
        i = self._index(info)
        sub = self.subpartitions[i]
        # Flink's getBuffersInBacklog counts a flushed, unfinished buffer too (flushRequested)
        flushed = 1 if self._flush_requested[i] and not sub.is_blocked else 0
        return sub.get_buffers_in_backlog() + flushed

    # -- availability ------------------------------------------------------------------------------

    def buffers_in_use(self, target_subpartition: int) -> int:
        """The subpartition's buffers of the pool: queued, the open builder, and those its local channel holds."""
        builder = self._builders[target_subpartition]
        staged = self._staged_counts is not None and self._staged_counts[target_subpartition] > 0
        open_builder = 1 if (builder.records or builder.size or staged) else 0
        return (self.subpartitions[target_subpartition].number_of_queued_buffers + open_builder
                + self._at_consumer[target_subpartition])

    def get_availability(self) -> Availability:
        """``BACKPRESSURED`` while any subpartition holds ``max_buffers_per_channel`` buffers or more."""
        return Availability.BACKPRESSURED if self.is_backpressured() else Availability.AVAILABLE

    def is_backpressured(self) -> bool:
        limit = self.max_buffers_per_channel
        return any(self.buffers_in_use(i) >= limit for i in range(len(self.subpartitions)))
