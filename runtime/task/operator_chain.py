"""A task's operator and the outputs it writes to: Flink's ``OperatorChain`` (one operator here) with its
``RecordWriterOutput``s. Records the operator emits go through the task's ``RecordWriters`` into its result
partitions; watermarks, events and flushes reach every partition; the chain snapshots the operator's state.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from barriersim.runtime.checkpoint_cost import SnapshotWork
from barriersim.runtime.events import ChannelElement, CheckpointType, Watermark
from barriersim.runtime.network.output.result_partition import ResultPartition
from barriersim.runtime.operators.factory import KeyedStateBackend, SubtaskOperator
from barriersim.runtime.operators.records import KEY
from barriersim.runtime.record_batch import RecordBatch
from barriersim.runtime.state.backend import full_snapshot_work
from barriersim.runtime.state.snapshot import OperatorSubtaskState
from barriersim.runtime.task.record_writers import RecordWriters


class OperatorChain:
    def __init__(
        self,
        operator: SubtaskOperator,
        partitions: Sequence[ResultPartition],
        record_writers: RecordWriters,
        *,
        hot_key: int,
        memory_threshold: int,
    ) -> None:
        """``hot_key``: the key whose records cost extra (-1: none), counted by ``hot_records``;
        ``memory_threshold``: state streams at or above it are files of their own (``snapshot_work``)."""
        self.operator = operator
        self.partitions = partitions
        self.record_writers = record_writers
        self.hot_key = hot_key
        self._memory_threshold = memory_threshold

    # -- records and watermarks ----------------------------------------------------------------------

    def process(self, records: RecordBatch, side: int) -> None:
        """The operator processes ``records`` of its input ``side``; what it emits goes to the outputs."""
        out = self.operator.process(records, side)
        if len(out):
            self.record_writers.emit(out)

    def emit(self, records: RecordBatch) -> None:
        """``records`` (a source's) to the outputs."""
        if len(records):
            self.record_writers.emit(records)

    def hot_records(self, records: RecordBatch) -> int:
        """How many of ``records`` carry the hot key."""
        if self.hot_key < 0:
            return 0
        return int(np.count_nonzero(records.columns[KEY] == self.hot_key))

    def process_watermark(self, watermark: Watermark) -> None:
        """The operator advances to ``watermark`` (windows fire), then the watermark goes downstream."""
        self.emit(self.operator.process_watermark(watermark))
        self.record_writers.broadcast(watermark)

    def broadcast_watermark(self, watermark: Watermark) -> None:
        self.record_writers.broadcast(watermark)

    def end_input(self, final_checkpoint: bool) -> None:
        """Flink's ``endInput``/``finish`` of the operator: what it still holds goes out."""
        self.emit(self.operator.end_of_input(final_checkpoint=final_checkpoint))

    # -- the outputs ---------------------------------------------------------------------------------

    def broadcast_event(self, event: ChannelElement) -> None:
        for p in self.partitions:
            p.broadcast_event(event)

    def flush_outputs(self) -> None:
        """Flink's output flusher (``execution.buffer-timeout``, 100 ms by default) finishing open buffers."""
        for p in self.partitions:
            p.flush_all()

    @property
    def all_data_processed(self) -> bool:
        """Every consumer of every output processed all the data (``ResultPartition.all_data_processed``)."""
        return all(p.all_data_processed for p in self.partitions)

    def finish_partitions(self) -> None:
        for p in self.partitions:
            p.finish()

    def close_on_failover(self) -> None:
        """The task failed: the operator aborts what it holds externally and the partitions are released."""
        self.operator.close_on_failover()
        for p in self.partitions:
            p.release()

    # -- state ---------------------------------------------------------------------------------------

    def snapshot_state(self, checkpoint_id: int, checkpoint_type: CheckpointType) -> OperatorSubtaskState:
        return self.operator.snapshot(checkpoint_id, checkpoint_type)

    def snapshot_work(self, state: OperatorSubtaskState) -> SnapshotWork:
        """What the snapshot wrote: a keyed operator's backend knows (an incremental one uploads only new runs);
        any other state is written in full."""
        backend: KeyedStateBackend | None = getattr(self.operator, "backend", None)
        if backend is not None:
            return backend.last_work
        return full_snapshot_work(state, self._memory_threshold)
