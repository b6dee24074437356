"""A keyed running sum (Flink's ``KeyedStream.sum`` as a ``StreamGroupedReduceOperator``).

How this works: for each record ``(record_id, key, value, event_time)`` the operator adds ``value`` to the
sum of ``key`` and emits ``(record_id, key, value, running_sum)``. Its state is one integer per key, kept in
the key group the key belongs to, so a snapshot is a ``KeyGroupsStateHandle`` that can be redistributed
when the parallelism changes; its state backend (``runtime.state.backend``) reads it as ``(key, running_sum)``
rows.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Callable, Iterable

from barriersim.runtime.operators.records import KEY, RECORD_ID, VALUE, pack, unpack
from barriersim.runtime.state.snapshot import KeyGroupRange, KeyGroupsStateHandle, OperatorSubtaskState


class KeyedRunningSum:
    ROW_KEY_WIDTH = 1  # a state row is (key, running_sum)

    def __init__(self, key_group_range: KeyGroupRange, key_group_of: Callable[[int], int]):
        self.key_group_range = key_group_range
        self._key_group_of = key_group_of
        self._sums: dict[int, int] = {}

    def process(self, record: tuple) -> tuple:
        key = record[KEY]
        total = self._sums.get(key, 0) + record[VALUE]
        self._sums[key] = total
        return (record[RECORD_ID], key, record[VALUE], total)

    def process_all(self, records: Iterable[tuple]) -> list[tuple]:
        sums = self._sums
        get = sums.get
        out = []
        append = out.append
        for r in records:  # process() inlined: this loop is the simulator's hottest operator code
            key = r[KEY]
            value = r[VALUE]
            total = get(key, 0) + value
            sums[key] = total
            append((r[RECORD_ID], key, value, total))
        return out

    def keyed_rows(self) -> Iterable[tuple[int, tuple]]:
        """The state as ``(key group, (key, running_sum))`` rows (``runtime.state.backend.KeyedRows``)."""
        key_group_of = self._key_group_of
        return ((key_group_of(key), (key, total)) for key, total in self._sums.items())

    def entry_count(self) -> int:
        return len(self._sums)

    def snapshot_state(self) -> OperatorSubtaskState:
        by_group: dict[int, list] = defaultdict(list)
        key_group_of = self._key_group_of
        for key, total in self._sums.items():
            by_group[key_group_of(key)].append([key, total])
        handle = KeyGroupsStateHandle(
            self.key_group_range, {kg: pack(sorted(entries)) for kg, entries in sorted(by_group.items())}
        )
        return OperatorSubtaskState(managed_keyed_state=(handle,))

    def restore_state(self, state: OperatorSubtaskState) -> None:
        self._sums.clear()
        for handle in state.managed_keyed_state:
            for kg, data in handle.key_groups.items():
                if kg in self.key_group_range:
                    for key, total in unpack(data):
                        self._sums[key] = total
