"""A stream task's thin checkpointing path: aligned barrier alignment on its inputs, buffered output
channels, and the snapshot-broadcast-acknowledge steps.

How this works: ``SkeletonTask`` is sans-IO. A driver hands it what happens (records a source produced, an
element arriving on input channel ``i``, a checkpoint trigger, a completion notice) together with the time
in ms, and gets back a list of actions (``SendBuffer``, ``BroadcastEvent``, ``AcknowledgeCheckpoint``,
``TaskFinished``) to carry out in order. Alignment follows Flink's aligned exactly-once rule: after the
first barrier of checkpoint n the channel that delivered it is blocked (its buffers queue up unprocessed)
until barrier n has arrived on every channel; then the task snapshots its operator, emits the barrier
downstream (after flushing the records produced before it), acknowledges, and unblocks its channels.
A source snapshots its offset before it emits the barrier.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from barriersim.runtime.events import Buffer, CheckpointBarrier, EndOfPartition, END_OF_PARTITION
from barriersim.runtime.state.snapshot import OperatorSubtaskState


class Operator(Protocol):
    def snapshot_state(self) -> OperatorSubtaskState: ...


@dataclass(frozen=True)
class SendBuffer:
    channel: int
    buffer: Buffer


@dataclass(frozen=True)
class BroadcastEvent:
    event: Any


@dataclass(frozen=True)
class SubtaskCheckpointMetrics:
    """Per-subtask checkpoint figures, named as Flink's REST API names them."""

    checkpoint_id: int
    start_delay: int = 0  # ms from the barrier's creation to its first arrival here
    alignment_duration: int = 0  # ms from the first to the last barrier
    alignment_processed: int = 0  # bytes processed during alignment
    alignment_buffered: int = 0  # bytes queued behind blocked channels during alignment
    alignment_persisted: int = 0  # in-flight bytes persisted (unaligned only)
    sync_duration: int = 0
    async_duration: int = 0


@dataclass(frozen=True)
class AcknowledgeCheckpoint:
    checkpoint_id: int
    operator_state: OperatorSubtaskState
    metrics: SubtaskCheckpointMetrics


@dataclass(frozen=True)
class TaskFinished:
    pass


class OutputChannels:
    """Records waiting to be sent, one list per output channel, cut into buffers of ``records_per_buffer``."""

    def __init__(self, num_channels: int, records_per_buffer: int, record_size: int = 32):
        self.num_channels = num_channels
        self.records_per_buffer = records_per_buffer
        self.record_size = record_size
        self._pending: list[list[tuple]] = [[] for _ in range(num_channels)]
        self._next_seq = [0] * num_channels

    def _cut(self, channel: int) -> SendBuffer:
        records = tuple(self._pending[channel])
        self._pending[channel] = []
        seq = self._next_seq[channel]
        self._next_seq[channel] += 1
        return SendBuffer(channel, Buffer(records, len(records) * self.record_size, seq))

    def emit(self, channel: int, record: tuple, out: list) -> None:
        self._pending[channel].append(record)
        if len(self._pending[channel]) >= self.records_per_buffer:
            out.append(self._cut(channel))

    def flush(self, out: list) -> None:
        for channel in range(self.num_channels):
            if self._pending[channel]:
                out.append(self._cut(channel))


@dataclass
class _Alignment:
    barrier: CheckpointBarrier
    started_at: int
    arrived: set[int] = field(default_factory=set)
    processed_bytes: int = 0


class SkeletonTask:
    """One subtask: ``num_inputs`` input channels (0 for a source), an operator, and its output channels.

    ``process`` turns a batch of input records into ``(channel, record)`` pairs to emit (empty for a sink).
    """

    def __init__(self, num_inputs: int, operator: Operator, outputs: OutputChannels | None, process=None):
        self.num_inputs = num_inputs
        self.operator = operator
        self.outputs = outputs
        self._process = process
        self._alignment: _Alignment | None = None
        self._blocked: dict[int, deque] = {}
        self._ended: set[int] = set()
        self.latest_checkpoint_id = 0
        self.finished = False

    # -- sources ----------------------------------------------------------------------------------

    def emit_records(self, routed: Sequence[tuple[int, tuple]], end_of_input: bool) -> list:
        out: list = []
        for channel, record in routed:
            self.outputs.emit(channel, record, out)
        self.outputs.flush(out)
        if end_of_input:
            out.extend(self._finish())
        return out

    def trigger_checkpoint(self, barrier: CheckpointBarrier, now: int) -> list:
        """A source's checkpoint, triggered by the coordinator: snapshot, then barrier, then ack."""
        if self.finished or barrier.id <= self.latest_checkpoint_id:
            return []
        return self._perform_checkpoint(barrier, SubtaskCheckpointMetrics(barrier.id, max(0, now - barrier.timestamp)), now)

    # -- downstream tasks --------------------------------------------------------------------------

    def on_element(self, channel: int, element: Any, now: int) -> list:
        if channel in self._blocked:
            self._blocked[channel].append(element)
            return []
        return self._process_element(channel, element, now)

    def _process_element(self, channel: int, element: Any, now: int) -> list:
        if isinstance(element, Buffer):
            if self._alignment is not None:
                self._alignment.processed_bytes += element.size
            out: list = []
            routed = self._process(element.records)
            if self.outputs is not None:
                for ch, record in routed:
                    self.outputs.emit(ch, record, out)
                self.outputs.flush(out)
            return out
        if isinstance(element, CheckpointBarrier):
            return self._on_barrier(channel, element, now)
        if isinstance(element, EndOfPartition):
            self._ended.add(channel)
            if len(self._ended) == self.num_inputs:
                return self._finish()
            return self._maybe_complete_alignment(now)
        raise TypeError(f"task cannot process {element!r} on channel {channel}")

    def _on_barrier(self, channel: int, barrier: CheckpointBarrier, now: int) -> list:
        if barrier.id <= self.latest_checkpoint_id:
            return []
        if self._alignment is None:
            self._alignment = _Alignment(barrier, now)
        self._alignment.arrived.add(channel)
        self._blocked[channel] = deque()
        return self._maybe_complete_alignment(now)

    def _maybe_complete_alignment(self, now: int) -> list:
        alignment = self._alignment
        if alignment is None or len(alignment.arrived | self._ended) < self.num_inputs:
            return []
        self._alignment = None
        metrics = SubtaskCheckpointMetrics(
            alignment.barrier.id,
            start_delay=max(0, alignment.started_at - alignment.barrier.timestamp),
            alignment_duration=now - alignment.started_at,
            alignment_processed=alignment.processed_bytes,
            alignment_buffered=sum(e.size for q in self._blocked.values() for e in q if isinstance(e, Buffer)),
        )
        out = self._perform_checkpoint(alignment.barrier, metrics, now)
        # Unblock: the queued elements are processed in arrival order per channel.
        blocked, self._blocked = self._blocked, {}
        for channel, queue in sorted(blocked.items()):
            while queue:
                element = queue.popleft()
                if channel in self._blocked:  # a newer barrier blocked the channel again
                    self._blocked[channel].append(element)
                else:
                    out.extend(self._process_element(channel, element, now))
        return out

    # -- shared steps ------------------------------------------------------------------------------

    def _perform_checkpoint(self, barrier: CheckpointBarrier, metrics: SubtaskCheckpointMetrics, now: int) -> list:
        out: list = []
        if self.outputs is not None:
            self.outputs.flush(out)
        state = self.operator.snapshot_state()
        out.append(BroadcastEvent(barrier))
        out.append(AcknowledgeCheckpoint(barrier.id, state, metrics))
        self.latest_checkpoint_id = barrier.id
        return out

    def _finish(self) -> list:
        if self.finished:
            return []
        self.finished = True
        out: list = []
        if self.outputs is not None:
            self.outputs.flush(out)
            out.append(BroadcastEvent(END_OF_PARTITION))
        out.append(TaskFinished())
        return out
