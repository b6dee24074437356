"""A source task's input: Flink's ``StreamTaskSourceInput`` over its ``SourceOperator``. It reads its splits' records
in batches, as many as its outputs take before one is backpressured, writes them through the ``OperatorChain`` and
follows them with the reader's watermark when the job has event time.
"""

from __future__ import annotations

from barriersim.runtime.events import MAX_WATERMARK, StopMode, Watermark
from barriersim.runtime.operators.source import SplitSourceReader
from barriersim.runtime.task.operator_chain import OperatorChain
from barriersim.runtime.task.record_writers import RecordWriters
from barriersim.runtime.task.step_result import StepOutcome, StepResult

UNPACED_SOURCE_BATCH_RECORDS = 256  # records an unpaced source reads per step


class SourceInput:
    def __init__(
        self,
        reader: SplitSourceReader,
        chain: OperatorChain,
        record_writers: RecordWriters,
        *,
        batch_records: int | None,
        emit_watermarks: bool,
    ) -> None:
        """``reader``: the source operator's split reader; ``batch_records``: the records a step reads at most
        unless its driver says how many are due (None: ``UNPACED_SOURCE_BATCH_RECORDS``); ``emit_watermarks``:
        whether the job has event time."""
        self.reader = reader
        self._chain = chain
        self._record_writers = record_writers
        self._batch_records = batch_records or UNPACED_SOURCE_BATCH_RECORDS
        self._emit_watermarks = emit_watermarks

    def emit_next(self, max_records: int | None = None) -> StepResult:
        """Up to ``max_records`` records (else the configured batch) of the source's splits, written to its outputs."""
        reader = self.reader
        # Flink's source emits one record per StreamTask.processInput and goes on while taskIsAvailable(): the step
        # ends at the record after which an output is backpressured
        records = reader.poll(max_records or self._batch_records, self._record_writers.records_until_backpressured)
        self._chain.emit(records)
        n = len(records)
        if self._emit_watermarks and n:
            # Flink's WatermarkStrategy.forMonotonousTimestamps, per split: the largest timestamp seen minus 1 (the
            # next record may carry the same timestamp), the minimum over the reader's splits
            watermark = reader.current_watermark()
            if watermark is not None:
                self._chain.broadcast_watermark(Watermark(watermark))
        return StepResult(StepOutcome.PROCESSED, n, self._chain.hot_records(records))

    def records_until_buffer_finishes(self, max_records: int) -> int:
        """Of the next records the source would read, how many until the one that finishes a buffer of one of its
        outputs (``RecordWriters.records_until_buffer_finishes``), looking at no more than ``max_records`` and
        about twice the outputs' horizon (``buffer_finish_bounds``); the records looked at if none of them does
        (``max_records`` without a look when no buffer can finish within them)."""
        fewest, horizon = self._record_writers.buffer_finish_bounds()
        if fewest >= max_records:
            return max_records
        upcoming = self.reader.peek(max(1, min(max_records, 2 * horizon)))
        return self._record_writers.records_until_buffer_finishes(upcoming) if len(upcoming) else max_records

    # -- how its data ends (``runtime.task.end_of_data.TaskInput``) -----------------------------------------

    def advance_to_end_of_event_time(self) -> None:
        """Flink's ``SourceStreamTask.advanceToEndOfEventTime``: ``MAX_WATERMARK``, in a job with event time."""
        if self._emit_watermarks:
            self._chain.broadcast_watermark(MAX_WATERMARK)

    def end_mode(self) -> StopMode:
        return StopMode.DRAIN  # a source's input ends drained (a stop without --drain ends it otherwise)

    def input_channels_ended(self) -> bool:
        return True  # a source reads no input channel
