"""A task's pipelined result partition: its subpartitions, the buffer writer that fills them (``BufferWriter``),
events broadcast to every subpartition, and the network side under credit-based flow control with the pool's
availability (``max_buffers_per_channel``). ``release`` (the task failed) drops everything and sends nothing more.

Mirrors Flink's ``PipelinedResultPartition`` / ``BufferWritingResultPartition`` (``emitRecord``,
``broadcastRecord``, ``broadcastEvent(event, isPriorityEvent)``, ``flush``, ``flushAll``, ``finish``,
``alignedBarrierTimeout``) with ``LocalBufferPool`` availability. See ``docs/architecture.md``, "The data plane".
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from barriersim.runtime.events import Buffer, ChannelElement, CheckpointBarrier, ResultSubpartitionInfo
from barriersim.runtime.faults.mutations import PlantedBug, is_planted
from barriersim.runtime.network.output.buffer_writer import BufferWriter, PartitionStateError
from barriersim.runtime.network.output.subpartition import BufferAndBacklog, PipelinedSubpartition
from barriersim.runtime.network.output.view_reader import CreditBasedSequenceNumberingViewReader, CreditError
from barriersim.runtime.record_batch import RecordBatch

__all__ = ["Availability", "PartitionStateError", "ResultPartition", "pipelined_pool_size"]

DEFAULT_MEMORY_SEGMENT_SIZE = 32 * 1024
DEFAULT_MAX_BUFFERS_PER_CHANNEL = 10


def pipelined_pool_size(num_subpartitions: int, buffers_per_channel: int, floating_buffers_per_gate: int) -> int:
    """The most buffers a pipelined (bounded) result partition's pool holds: Flink's
    ``NettyShuffleUtils.getMinMaxNetworkBuffersPerResultPartition``, ``numSubpartitions * buffersPerChannel +
    floatingBuffersPerGate`` and at least ``numSubpartitions + 1`` (the network memory is assumed to suffice)."""
    return max(num_subpartitions + 1, num_subpartitions * buffers_per_channel + floating_buffers_per_gate)


class Availability(enum.Enum):
    AVAILABLE = "AVAILABLE"
    BACKPRESSURED = "BACKPRESSURED"


class ResultPartition:
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
        starting_buffer_size: int | None = None,
        pool_size: int | None = None,
        broadcast: bool = False,
    ) -> None:
        """``pool_size``: the buffers the partition's ``LocalBufferPool`` may hand out at once (its open buffers, the
        queued ones and those a local consumer holds); Flink's is ``pipelined_pool_size`` for a streaming job. None:
        no limit beyond ``max_buffers_per_channel`` per subpartition. ``broadcast``: a broadcast edge's partition,
        whose records Flink writes into one buffer that every subpartition shares (``broadcastRecord``, the buffer
        charged to subpartition 0): it holds as many of the pool's buffers as its longest subpartition.
        ``local_subpartitions``: per subpartition, whether its consumer runs in this TaskManager (a local channel
        reads it); none by default. ``starting_buffer_size``: the size of each subpartition's buffers until
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
        if pool_size is not None and pool_size <= 0:
            raise ValueError(f"result partition {partition_idx}: pool size must be positive, got {pool_size}")
        self.pool_size = pool_size
        self.broadcast = broadcast
        self.subpartitions = [
            PipelinedSubpartition(
                ResultSubpartitionInfo(partition_idx, i), block_on_aligned_barrier=block_on_aligned_barrier
            )
            for i in range(num_subpartitions)
        ]
        self._readers = [CreditBasedSequenceNumberingViewReader(s, initial_credit) for s in self.subpartitions]
        self._queues = [s.queues for s in self.subpartitions]
        self._all_queues = [q for s in self.subpartitions for q in s.queues]  # every subpartition's two deques
        starting = (
            memory_segment_size if starting_buffer_size is None else min(starting_buffer_size, memory_segment_size)
        )
        self.writer = BufferWriter(partition_idx, self.subpartitions, starting)  # the open buffers and all writes
        self._all_data_processed = [False] * num_subpartitions  # each consumer acknowledged its EndOfData
        # the local subpartitions, and the buffers each one's local channel holds (handed out, not yet recycled);
        # a local channel's first credit is its partition request, each later one recycles that many buffers
        if local_subpartitions and len(local_subpartitions) != num_subpartitions:
            raise ValueError(
                f"result partition {partition_idx}: {len(local_subpartitions)} local flags for "
                f"{num_subpartitions} subpartitions"
            )
        self._local = [bool(f) for f in local_subpartitions] if local_subpartitions else [False] * num_subpartitions
        self._any_local = any(self._local)
        self._requested = [False] * num_subpartitions
        self._at_consumer = [0] * num_subpartitions
        self._finished = False
        self._released = False

    @property
    def number_of_subpartitions(self) -> int:
        return len(self.subpartitions)

    @property
    def subpartition_infos(self) -> list[ResultSubpartitionInfo]:
        return [s.info for s in self.subpartitions]

    @property
    def total_written_bytes(self) -> int:
        return self.writer.total_written_bytes

    @property
    def _builders(self) -> list[Any]:
        """The writer's open buffer builders (a test looks at them)."""
        return self.writer.builders

    def _index(self, info: ResultSubpartitionInfo) -> int:
        if info.partition_idx != self.partition_idx or not 0 <= info.subpartition_idx < len(self.subpartitions):
            raise KeyError(f"{info} is not a subpartition of result partition {self.partition_idx}")
        return info.subpartition_idx

    # -- records (``BufferWriter``; the ``emit_*`` writes return the availability after them) --------------

    def emit_record(self, record: Any, target_subpartition: int, size: int) -> Availability:
        """Serializes ``record`` (``size`` bytes) into the target subpartition's buffers (silently dropped
        once the partition is released)."""
        if self._released:
            return Availability.AVAILABLE
        self.writer.emit_record(record, target_subpartition, size)
        return self.get_availability()

    def emit_records(self, records_and_targets: Iterable[tuple[Any, int]], size: int) -> Availability:
        """``emit_record`` for a batch of ``(record, target_subpartition)`` pairs of ``size`` bytes each, with
        the availability computed once at the end (what one input buffer's processing writes)."""
        if self._released:
            return Availability.AVAILABLE
        self.writer.emit_records(records_and_targets, size)
        return self.get_availability()

    def emit_batch(self, records: RecordBatch | Sequence[Any], targets: int | Sequence[int], size: int) -> Availability:
        """``emit_records`` for ``records[k]`` to subpartition ``targets[k]``, or every record to subpartition
        ``targets`` if it is an int (a forward edge): same buffers, fewer steps. ``records`` is a ``RecordBatch``
        (``write_batch``) or a sequence of single records."""
        if self._released and type(records) is not RecordBatch:
            return Availability.AVAILABLE
        self.writer.emit_batch(records, targets, size)
        return self.get_availability()

    def emit_round_robin(self, records: RecordBatch | Sequence[Any], start: int, size: int) -> Availability:
        """``records[k]`` to subpartition ``(start + k) % n`` (Flink's ``RebalancePartitioner``), as
        ``emit_batch`` with those targets."""
        if self._released and type(records) is not RecordBatch:
            return Availability.AVAILABLE
        self.writer.emit_round_robin(records, start, size)
        return self.get_availability()

    def broadcast_record(self, record: Any, size: int) -> Availability:
        self.writer.broadcast_record(record, size)
        return self.get_availability()

    def write_batch(self, records: RecordBatch, targets: np.ndarray | int, size: int) -> None:
        """``BufferWriter.write_batch``: ``records`` to subpartitions ``targets`` (an int array, or one int)."""
        self.writer.write_batch(records, targets, size)

    def write_round_robin(self, records: RecordBatch, start: int, size: int) -> None:
        self.writer.write_round_robin(records, start, size)

    def write_broadcast(self, records: RecordBatch, size: int) -> None:
        self.writer.write_broadcast(records, size)

    def flush(self, target_subpartition: int) -> None:
        """Flink's ``flush``: the partially filled buffer of one subpartition may be sent as soon as the network
        side can take it (``flushRequested``); until then it keeps filling."""
        self.writer.flush(target_subpartition)

    def flush_all(self) -> None:
        self.writer.flush_all()

    def records_until_backpressured(self, targets: np.ndarray | int | None, n: int, size: int) -> int:
        """Of ``n`` records of ``size`` bytes written to ``targets`` (an int: every record to that subpartition; an
        int array: record ``k`` to ``targets[k]``; None: every record to every subpartition, a broadcast), how many
        the partition takes until it is backpressured: the records up to and including the one after which some
        subpartition holds ``max_buffers_per_channel`` buffers (``buffers_in_use``); ``n`` if none does, at least 1.
        Flink's source emits one record per ``StreamTask.processInput`` and goes on only while ``taskIsAvailable()``,
        so it stops there."""
        return self.writer.records_until(targets, n, size, self._records_to_backpressure)

    def _records_to_backpressure(self, p: int, size: int) -> int:
        """The number of further records of ``size`` bytes to subpartition ``p`` whose last one brings its
        ``buffers_in_use`` to ``max_buffers_per_channel``: the open builder fills to its capacity, then each new
        buffer to the subpartition's buffer size (spanning records as the writer writes them)."""
        builders_allowed = (
            self.max_buffers_per_channel - self.subpartitions[p].number_of_queued_buffers - self._at_consumer[p]
        )  # the open builder and the buffers it fills count from here
        if builders_allowed <= 1:
            return 1
        room = self.writer.room(p, builders_allowed - 2)
        return room // size + 1 if room >= 0 else 1

    def records_until_buffer_finishes(self, targets: np.ndarray | int | None, n: int, size: int) -> int:
        """``BufferWriter.records_until_buffer_finishes``. A buffer goes out when it is finished, so a paced source
        that emits its records when they are due sends it when that record is due (the simulator's
        ``EmissionClock``, ``SourceEmission.EXACT``)."""
        return self.writer.records_until_buffer_finishes(targets, n, size)

    def fewest_records_to_finish_buffer(self, size: int) -> int:
        return self.writer.fewest_records_to_finish_buffer(size)

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
            raise PartitionStateError(
                f"broadcast_event({event!r}): result partition {self.partition_idx} is already finished"
            )
        if (
            isinstance(event, CheckpointBarrier)
            and not self.supports_unaligned_checkpoints
            # FLINK-33693: RecordWriterOutput.broadcastEvent forced only priority (unaligned) barriers aligned
            and (is_priority_event or not is_planted(PlantedBug.TIMEOUTABLE_BARRIER_NOT_FORCED_ALIGNED))
        ):
            event = dataclasses.replace(event, options=event.options.with_unaligned_unsupported())
            is_priority_event = False
        # Flink's finishUnicastBufferBuilders finishes a drained open builder too: its empty consumer stays queued,
        # and PipelinedSubpartition.processPriorityBuffer persists every buffer the barrier overtakes, an empty copy
        # of that one included (4 bytes of channel state: ChannelStateSerializerImpl's length)
        drained = self.writer.finish_builders_before_event()
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
        self.writer.finish()
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
        self.writer.release()
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
        self.writer.finish_open_buffer(i)  # new data already written: the subpartition refuses the recovered buffers
        self.subpartitions[i].add_recovered(buffers)

    # -- the network side --------------------------------------------------------------------------

    def add_recovered_elements(self, info: ResultSubpartitionInfo, elements: Iterable[Any]) -> None:
        """Re-queues recovered buffers of a rescaled restore, with their virtual-channel events, before new data."""
        i = self._index(info)
        self.writer.finish_open_buffer(i)  # new data already written: the subpartition refuses the recovered buffers
        self.subpartitions[i].add_recovered_elements(elements)

    def set_buffer_size(self, info: ResultSubpartitionInfo, buffer_size: int) -> None:
        """The receiver's debloated buffer size (Flink's ``PipelinedSubpartition.bufferSize`` set by
        ``notifyNewBufferSize``): buffers opened from now on are cut at it; one already filling keeps its size."""
        if self._released:
            return
        i = self._index(info)
        if not 0 < buffer_size <= self.memory_segment_size:
            raise ValueError(f"{info}: buffer size {buffer_size} outside (0, {self.memory_segment_size}]")
        self.writer.set_buffer_size(i, buffer_size)

    def buffer_size(self, info: ResultSubpartitionInfo) -> int:
        return self.writer.buffer_sizes[self._index(info)]

    def add_credit(self, info: ResultSubpartitionInfo, credit: int) -> None:
        if self._released:
            return  # the reader is gone: Flink's PartitionRequestQueue ignores messages for released readers
        i = self._index(info)
        self._readers[i].add_credit(credit)
        if self._local[i]:
            if not self._requested[i]:
                self._requested[i] = True
            elif credit > self._at_consumer[i]:
                raise CreditError(
                    f"add_credit({credit}) on local subpartition {info}: its channel holds only "
                    f"{self._at_consumer[i]} buffer(s) to recycle"
                )
            else:
                self._at_consumer[i] -= credit

    def num_credits_available(self, info: ResultSubpartitionInfo) -> int:
        return self._readers[self._index(info)].num_credits_available

    def _cut_flushed(self, i: int) -> bool:
        """A requested flush takes effect when the network side could send the open buffer now: nothing queued
        ahead of it and credit for it (Flink's reader reads the flushed builder's data at that point)."""
        if not self.writer.flush_requested[i]:
            return False
        sub = self.subpartitions[i]
        if sub.has_queued_elements or sub.is_blocked or self._readers[i].num_credits_available <= 0:
            return False
        self.writer.cut_flushed(i)
        return True

    def poll_next(self, info: ResultSubpartitionInfo) -> BufferAndBacklog | None:
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
        flush_requested = self.writer.flush_requested
        if not any(self._all_queues) and True not in flush_requested:
            return []  # nothing queued, no flush pending (most polls: after a step that sent what it could), in C
        out: list[tuple[ResultSubpartitionInfo, BufferAndBacklog]] = []
        for i, (priority, normal) in enumerate(self._queues):
            if not priority and not normal and not flush_requested[i]:
                continue  # nothing queued (the common case, tested without a call)
            reader = self._readers[i]
            info = reader.subpartition.info
            sent = len(out)
            while True:
                while (item := reader.get_next_buffer()) is not None:
                    out.append((info, item))
                if not self._cut_flushed(i):
                    break
            if self._any_local and self._local[i]:
                buffers = 0
                for k in range(sent, len(out)):
                    if type(out[k][1].element) is Buffer:
                        buffers += 1
                self._handed_to_local_channel(i, buffers)
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
        return (
            self.writer.flush_requested[i]
            and not self._released
            and not self.subpartitions[i].has_queued_elements
            and self._readers[i].num_credits_available > 0
        )

    def resume_consumption(self, info: ResultSubpartitionInfo) -> None:
        if self._released:
            return
        self._readers[self._index(info)].resume_consumption()

    def get_backlog(self, info: ResultSubpartitionInfo) -> int:
        i = self._index(info)
        sub = self.subpartitions[i]
        # Flink's getBuffersInBacklog counts a flushed, unfinished buffer too (flushRequested)
        flushed = 1 if self.writer.flush_requested[i] and not sub.is_blocked else 0
        return sub.get_buffers_in_backlog() + flushed

    # -- availability ------------------------------------------------------------------------------

    def buffers_in_use(self, target_subpartition: int) -> int:
        """The subpartition's buffers of the pool: queued, the open builder, and those its local channel holds."""
        return (
            self.subpartitions[target_subpartition].number_of_queued_buffers
            + self.writer.has_open_buffer(target_subpartition)
            + self._at_consumer[target_subpartition]
        )

    def get_availability(self) -> Availability:
        """``BACKPRESSURED`` while any subpartition holds ``max_buffers_per_channel`` buffers or more."""
        return Availability.BACKPRESSURED if self.is_backpressured() else Availability.AVAILABLE

    def is_backpressured(self) -> bool:
        """Flink's ``LocalBufferPool`` is unavailable while a subpartition holds ``max_buffers_per_channel`` of its
        buffers, or while it has handed out all ``pool_size`` of them (each subpartition's ``buffers_in_use``: its
        queued buffers, its open one and those its local consumer holds)."""
        limit = self.max_buffers_per_channel
        at_consumer = self._at_consumer
        has_open = self.writer.has_open_buffer
        handed_out = longest = 0
        for i, sub in enumerate(self.subpartitions):
            held = sub.number_of_queued_buffers + at_consumer[i] + has_open(i)  # ``buffers_in_use``, inline
            if held >= limit:
                return True
            handed_out += held
            if held > longest:
                longest = held
        pool_size = self.pool_size
        return pool_size is not None and (longest if self.broadcast else handed_out) >= pool_size
