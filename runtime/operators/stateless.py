"""Stateless operators: map and filter over workload records ``(record_id, key, value, event_time)``.

How this works: both are pure functions of one record, so they keep no state and their snapshot is empty;
their parameters come from the job graph vertex (``factor`` for map, ``modulus`` for filter) so Spark can
compute the same transformation for the reference result. Both work on a whole ``RecordBatch`` at once (the
value column multiplied; a mask over the value column), record by record the same as Flink's per-record calls.
"""

from __future__ import annotations

from barriersim.runtime.operators.records import VALUE
from barriersim.runtime.record_batch import RecordBatch, RecordsLike
from barriersim.runtime.state.snapshot import OperatorSubtaskState


class MapOperator:
    """``value -> value * factor`` (Flink's ``StreamMap``)."""

    def __init__(self, factor: int = 2) -> None:
        self.factor = factor

    def process_all(self, records: RecordsLike) -> RecordBatch:
        columns = RecordBatch.of(records).columns.copy()
        columns[VALUE] *= self.factor
        return RecordBatch(columns)

    def snapshot_state(self) -> OperatorSubtaskState:
        return OperatorSubtaskState()

    def restore_state(self, state: OperatorSubtaskState | None) -> None:
        pass


class FilterOperator:
    """Keeps the records whose value is not a multiple of ``modulus`` (Flink's ``StreamFilter``)."""

    def __init__(self, modulus: int = 3) -> None:
        self.modulus = modulus

    def process_all(self, records: RecordsLike) -> RecordBatch:
        batch = RecordBatch.of(records)
        keep = batch.columns[VALUE] % self.modulus != 0
        return batch if keep.all() else batch.take(keep)

    def snapshot_state(self) -> OperatorSubtaskState:
        return OperatorSubtaskState()

    def restore_state(self, state: OperatorSubtaskState | None) -> None:
        pass
