"""Building the operator of one subtask from its job vertex, with a uniform interface for the stream task. See
docs/jobs-and-operators.md, "Building a subtask's operator".
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

from barriersim.runtime.events import MAX_WATERMARK, CheckpointType, Watermark
from barriersim.runtime.jobgraph import JobVertex, OperatorKind
from barriersim.runtime.operators.keyed_sum import KeyedRunningSum
from barriersim.runtime.operators.sinks import AtLeastOnceSink, ExternalStore, SinkStore, TwoPhaseCommitSink
from barriersim.runtime.operators.source import SplitSourceReader
from barriersim.runtime.operators.stateless import FilterOperator, MapOperator
from barriersim.runtime.operators.window import TumblingEventTimeWindowSum
from barriersim.runtime.operators.window_join import TumblingEventTimeWindowJoin
from barriersim.runtime.record_batch import RecordBatch, RecordsLike
from barriersim.runtime.state.backend import KeyedRows, StateBackendConfig, StateBackendKind
from barriersim.runtime.state.backend_loader import create_keyed_backend
from barriersim.runtime.state.heap_backend import HeapKeyedStateBackend
from barriersim.runtime.state.incremental import IncrementalKeyedStateBackend
from barriersim.runtime.state.key_groups import KeyGroupAssigner, compute_key_group_range_for_operator_index
from barriersim.runtime.state.snapshot import OperatorSubtaskState

_NOTHING = RecordBatch.empty()


# what the wrappers below hold
_KeyedInner = KeyedRunningSum | TumblingEventTimeWindowSum | TumblingEventTimeWindowJoin
_Inner = MapOperator | FilterOperator | _KeyedInner
KeyedStateBackend = HeapKeyedStateBackend | IncrementalKeyedStateBackend


class UnsupportedOperator(ValueError):
    """An operator kind this backend cannot run yet; names the vertex."""


class SubtaskOperator:
    """Uniform wrapper; subclasses override what their operator does."""

    is_source = False
    is_sink = False

    def process(self, records: RecordBatch, input_index: int = 0) -> RecordBatch:
        return records

    def process_watermark(self, watermark: Watermark) -> RecordBatch:
        return _NOTHING

    def end_of_input(self, final_checkpoint: bool = False) -> RecordBatch:
        """End of all input; ``final_checkpoint``: a final checkpoint will follow (FLIP-147) and commit."""
        return _NOTHING

    def snapshot(
        self,
        checkpoint_id: int,
        checkpoint_type: CheckpointType = CheckpointType.CHECKPOINT,
    ) -> OperatorSubtaskState:
        """The subtask's state for a checkpoint or a savepoint (``checkpoint_type``: a keyed backend writes a
        savepoint in the canonical full format)."""
        return OperatorSubtaskState()

    def restore(self, state: OperatorSubtaskState | None) -> None:
        pass

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        pass

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        pass

    def close_on_failover(self) -> None:
        pass


class _Wrapped(SubtaskOperator):
    def __init__(self, inner: _Inner) -> None:
        self.inner = inner

    def process(self, records: RecordBatch, input_index: int = 0) -> RecordBatch:
        return self.inner.process_all(records)

    def snapshot(
        self, checkpoint_id: int, checkpoint_type: CheckpointType = CheckpointType.CHECKPOINT
    ) -> OperatorSubtaskState:
        return self.inner.snapshot_state()

    def restore(self, state: OperatorSubtaskState | None) -> None:
        if state is not None:
            self.inner.restore_state(state)


class _Keyed(_Wrapped):
    """A keyed operator: its snapshots and restores go through its state backend (``runtime.state.backend``)."""

    def __init__(self, inner: _KeyedInner, backend: KeyedStateBackend) -> None:
        super().__init__(inner)
        self.backend = backend

    def snapshot(
        self, checkpoint_id: int, checkpoint_type: CheckpointType = CheckpointType.CHECKPOINT
    ) -> OperatorSubtaskState:
        return self.backend.snapshot(checkpoint_id, checkpoint_type)

    def restore(self, state: OperatorSubtaskState | None) -> None:
        if state is not None:
            self.backend.restore(state)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.backend.notify_checkpoint_complete(checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self.backend.notify_checkpoint_aborted(checkpoint_id)


class _Window(_Keyed):
    inner: TumblingEventTimeWindowSum

    def process_watermark(self, watermark: Watermark) -> RecordBatch:
        return self.inner.process_watermark(watermark)

    def end_of_input(self, final_checkpoint: bool = False) -> RecordBatch:
        return self.inner.process_watermark(MAX_WATERMARK)


class _WindowJoin(_Window):
    inner: TumblingEventTimeWindowJoin

    def process(self, records: RecordBatch, input_index: int = 0) -> RecordBatch:
        return self.inner.process_all(records, input_index)


class _Source(SubtaskOperator):
    is_source = True

    def __init__(self, reader: SplitSourceReader) -> None:
        self.reader = reader

    def snapshot(
        self, checkpoint_id: int, checkpoint_type: CheckpointType = CheckpointType.CHECKPOINT
    ) -> OperatorSubtaskState:
        return self.reader.snapshot_state()

    def restore(self, state: OperatorSubtaskState | None) -> None:
        if state is not None:
            self.reader.restore_state(state)


class _Sink(SubtaskOperator):
    is_sink = True

    def __init__(self, sink: TwoPhaseCommitSink | AtLeastOnceSink) -> None:
        self.sink = sink

    def process(self, records: RecordBatch, input_index: int = 0) -> RecordBatch:
        self.sink.invoke_all(records)
        return _NOTHING

    def end_of_input(self, final_checkpoint: bool = False) -> RecordBatch:
        if not final_checkpoint:  # without a final checkpoint, end of input is the last chance to commit
            self.sink.finish()
        return _NOTHING

    def snapshot(
        self, checkpoint_id: int, checkpoint_type: CheckpointType = CheckpointType.CHECKPOINT
    ) -> OperatorSubtaskState:
        return self.sink.snapshot_state(checkpoint_id)

    def restore(self, state: OperatorSubtaskState | None) -> None:
        self.sink.restore_state(state)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.sink.notify_checkpoint_complete(checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self.sink.notify_checkpoint_aborted(checkpoint_id)

    def close_on_failover(self) -> None:
        self.sink.close_on_failover()


def create_operator(
    vertex: JobVertex,
    subtask_index: int,
    *,
    split: RecordsLike = (),  # the source split: a RecordBatch, or record tuples
    splits: Mapping[int, RecordsLike] | None = None,
    store: SinkStore | None = None,
    attempt: int = 0,
    state_backend: StateBackendConfig = StateBackendConfig(),
    memory_threshold: int = 20 * 1024,
    rng: random.Random | None = None,
) -> SubtaskOperator:
    """``splits``: a source's assigned splits (split id -> a RecordBatch or record tuples); without them it reads
    ``split`` as the split of its own index. ``state_backend``: the keyed operators' backend
    (``runtime.state.backend``); ``memory_threshold``: state streams at or over it are files of their own; ``rng``:
    the task's random stream (an incremental backend seeds its compaction policy from it)."""
    kind = vertex.operator
    name = f"{vertex.name}#{subtask_index}"
    if kind is OperatorKind.SOURCE:
        return _Source(SplitSourceReader(splits if splits is not None else {subtask_index: split}))
    if kind is OperatorKind.MAP:
        return _Wrapped(MapOperator(vertex.params.get("factor", 2)))
    if kind is OperatorKind.FILTER:
        return _Wrapped(FilterOperator(vertex.params.get("modulus", 3)))
    if kind is OperatorKind.UNION:
        return SubtaskOperator()
    key_groups = compute_key_group_range_for_operator_index(vertex.max_parallelism, vertex.parallelism, subtask_index)
    key_group_of = KeyGroupAssigner(vertex.max_parallelism)

    def backend(inner: KeyedRows) -> KeyedStateBackend:
        # only an incremental backend draws (its compaction policy): a heap backend leaves the task's stream alone
        incremental = state_backend.backend is StateBackendKind.INCREMENTAL
        seeded = random.Random(rng.getrandbits(64) if incremental and rng is not None else f"{name}@{attempt}")
        return create_keyed_backend(inner, key_groups, state_backend, memory_threshold, seeded, f"{name}@{attempt}")

    if kind is OperatorKind.KEYED_SUM:
        keyed_sum = KeyedRunningSum(key_groups, key_group_of)
        return _Keyed(keyed_sum, backend(keyed_sum))
    if kind is OperatorKind.TUMBLING_WINDOW:
        window = TumblingEventTimeWindowSum(vertex.params.get("window_ms", 1000), key_groups, key_group_of)
        return _Window(window, backend(window))
    if kind is OperatorKind.JOIN:
        join = TumblingEventTimeWindowJoin(vertex.params.get("window_ms", 1000), key_groups, key_group_of)
        return _WindowJoin(join, backend(join))
    if kind is OperatorKind.TWO_PHASE_COMMIT_SINK:
        return _Sink(TwoPhaseCommitSink(store if store is not None else ExternalStore(), name, attempt))
    if kind is OperatorKind.AT_LEAST_ONCE_SINK:
        return _Sink(AtLeastOnceSink(store if store is not None else ExternalStore(), name, attempt))
    raise UnsupportedOperator(f"vertex {vertex.name!r}: operator {kind.value} is not supported by the stream task yet")


def records_of(items: Iterable[Any]) -> list[Any]:
    return [r for r in items if not isinstance(r, Watermark)]
