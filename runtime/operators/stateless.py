"""Stateless operators: map and filter over workload records ``(record_id, key, value, event_time)``.

How this works: both are pure functions of one record, so they keep no state and their snapshot is empty;
their parameters come from the job graph vertex (``factor`` for map, ``modulus`` for filter) so Spark can
compute the same transformation for the reference result.
"""

from __future__ import annotations

from typing import Iterable

from barriersim.runtime.operators.records import VALUE
from barriersim.runtime.state.snapshot import OperatorSubtaskState


class MapOperator:
    """``value -> value * factor`` (Flink's ``StreamMap``)."""

    def __init__(self, factor: int = 2):
        self.factor = factor

    def process_all(self, records: Iterable[tuple]) -> list[tuple]:
        f = self.factor
        return [(r[0], r[1], r[VALUE] * f, r[3]) for r in records]

    def snapshot_state(self) -> OperatorSubtaskState:
        return OperatorSubtaskState()

    def restore_state(self, state: OperatorSubtaskState | None) -> None:
        pass


class FilterOperator:
    """Keeps the records whose value is not a multiple of ``modulus`` (Flink's ``StreamFilter``)."""

    def __init__(self, modulus: int = 3):
        self.modulus = modulus

    def process_all(self, records: Iterable[tuple]) -> list[tuple]:
        m = self.modulus
        return [r for r in records if r[VALUE] % m != 0]

    def snapshot_state(self) -> OperatorSubtaskState:
        return OperatorSubtaskState()

    def restore_state(self, state: OperatorSubtaskState | None) -> None:
        pass
