"""A keyed running sum (Flink's ``KeyedStream.sum`` as a ``StreamGroupedReduceOperator``).

How this works: for each record ``(record_id, key, value, event_time)`` the operator adds ``value`` to the
sum of ``key`` and emits ``(record_id, key, value, running_sum)``. Its state is one integer per key, kept in
the key group the key belongs to, so a snapshot is a ``KeyGroupsStateHandle`` that can be redistributed
when the parallelism changes. A batch is processed at once, with the per-record result of Flink's one call per
record: the batch's records are ordered stably by key, each key's values summed cumulatively in arrival order
and added to the key's sum before the batch (``KeyedSums``: the sums as a numpy column, one slot per key). Its state
backend (``runtime.state.backend``) reads it as ``(key, running_sum)`` rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple

import numpy as np

from barriersim.runtime.operators.records import KEY, VALUE, pack, unpack
from barriersim.runtime.record_batch import RecordBatch, RecordsLike
from barriersim.runtime.state.snapshot import KeyGroupRange, KeyGroupsStateHandle, OperatorSubtaskState

# the ufuncs' reductions, called directly: ``ndarray.max()`` and its siblings go through a Python wrapper each time,
# which costs as much as the reduction of a buffer's few records
_MAX, _MIN = np.maximum.reduce, np.minimum.reduce


class KeySlots:
    """Integer keys -> dense slots ``0, 1, ...`` in the order keys are first seen, for state held in numpy
    columns. Keys in ``[0, DENSE_LIMIT)`` are looked up in a table indexed by key (every workload's keys are small
    non-negative ints); any other key in a dict."""

    DENSE_LIMIT = 1 << 20

    def __init__(self) -> None:
        self._table = np.full(0, -1, dtype=np.int64)
        self._other: dict[int, int] = {}
        self.keys = np.empty(0, dtype=np.int64)  # slot -> key
        self.count = 0

    def slots_of(self, keys: np.ndarray) -> np.ndarray:
        """The slot of every key of an int64 column, new keys getting new slots."""
        table = self._table
        size = len(table)
        if size and _MAX(keys.view(np.uint64)) < size:  # every key in [0, size) (a negative one is huge as uint64)
            slots: np.ndarray = table[keys]
            if _MIN(slots) >= 0:
                return slots
        low, high = int(_MIN(keys)), int(_MAX(keys))
        if low >= 0 and high < self.DENSE_LIMIT:
            if high >= len(self._table):
                grown = np.full(min(self.DENSE_LIMIT, max(1024, 2 * (high + 1))), -1, dtype=np.int64)
                grown[: len(self._table)] = self._table
                self._table = grown
                for key in [k for k in self._other if 0 <= k < len(grown)]:  # now in the table's range
                    grown[key] = self._other.pop(key)
            slots = self._table[keys]
            if _MIN(slots) < 0:
                self._add(np.unique(keys[slots < 0]))
                slots = self._table[keys]
            return slots
        unique, inverse = np.unique(keys, return_inverse=True)
        slots = np.empty(len(unique), dtype=np.int64)
        for i, key in enumerate(unique.tolist()):
            slots[i] = self._slot(key)
        return slots[inverse]

    def _slot(self, key: int) -> int:
        if 0 <= key < len(self._table):
            slot = int(self._table[key])
        else:
            slot = self._other.get(key, -1)
        if slot < 0:
            self._add(np.array([key], dtype=np.int64))
            return self._slot(key)
        return slot

    def _add(self, new_keys: np.ndarray) -> None:
        """Slots for keys that have none (distinct)."""
        first = self.count
        self.count += len(new_keys)
        if self.count > len(self.keys):
            grown = np.empty(max(64, 2 * self.count), dtype=np.int64)
            grown[:first] = self.keys[:first]
            self.keys = grown
        self.keys[first : self.count] = new_keys
        for i, key in enumerate(new_keys.tolist()):
            if 0 <= key < len(self._table):
                self._table[key] = first + i
            else:
                self._other[key] = first + i


class _SnapshotLayout(NamedTuple):
    """Of ``slot_count`` slots: their order by (key group, key), their keys in that order, and per key group
    ``(group, start, end)`` of its run in it."""

    slot_count: int
    order: np.ndarray
    keys: np.ndarray
    runs: list[tuple[int, int, int]]


class KeyedRunningSum:
    ROW_KEY_WIDTH = 1  # a state row is (key, running_sum)

    def __init__(self, key_group_range: KeyGroupRange, key_group_of: Callable[[int], int]) -> None:
        """``key_group_of``: a key's key group; given a ``KeyGroupAssigner`` (``of_keys``), snapshots assign a
        whole key column at once."""
        self.key_group_range = key_group_range
        self._key_group_of = key_group_of
        self._clear()

    def _clear(self) -> None:
        self._slots = KeySlots()
        self._sums = np.zeros(0, dtype=np.int64)  # per slot
        self._layout: _SnapshotLayout | None = None  # ``_snapshot_layout`` of the slots so far

    def process(self, record: tuple[int, ...]) -> tuple[int, ...]:
        return self.process_all([record])[0]

    def process_all(self, records: RecordsLike) -> RecordBatch:
        batch = records if type(records) is RecordBatch else RecordBatch.of(records)
        columns = batch.columns
        n = columns.shape[1]
        if not n:
            return batch
        slots = self._slots.slots_of(columns[KEY])
        if self._slots.count > len(self._sums):
            grown = np.zeros(max(64, 2 * self._slots.count), dtype=np.int64)
            grown[: len(self._sums)] = self._sums
            self._sums = grown
        sums = self._sums
        values = columns[VALUE]
        out = columns.copy()  # record_id, key, value; the running sum replaces the event time below
        if n == 1:
            total = sums[slots[0]] + values[0]
            sums[slots[0]] = total
            out[3, 0] = total
            return RecordBatch(out)
        # the batch's records grouped by key, in arrival order within a key (a stable sort; radix on small slots);
        # in that order a record's running sum is the batch's cumulative sum through it, minus the cumulative sum
        # before its key's first record, plus its key's sum before the batch
        order = (slots.astype(np.int16) if self._slots.count <= 32767 else slots).argsort(kind="stable")
        ordered_slots = slots[order]
        cumulative = np.add.accumulate(values[order])  # ``cumsum`` (int64), without the method's overhead
        last = np.empty(n, dtype=bool)  # the last record of each key in the ordered batch
        last[-1] = True
        np.not_equal(ordered_slots[1:], ordered_slots[:-1], out=last[:-1])
        ends = last.nonzero()[0]
        key_slots = ordered_slots[ends]  # per key of the batch, in order
        through = cumulative[ends]  # the cumulative sum through the key's last record
        before = np.empty_like(through)  # ... and before its first record
        before[0] = 0
        before[1:] = through[:-1]
        lengths = ends.copy()  # the key's number of records
        lengths[1:] -= ends[:-1]
        lengths[0] += 1
        base = sums[key_slots] - before
        out[3][order] = cumulative + base.repeat(lengths)
        sums[key_slots] = base + through
        return RecordBatch(out)

    def _key_groups(self, keys: np.ndarray) -> np.ndarray:
        of_keys = getattr(self._key_group_of, "of_keys", None)
        if of_keys is not None:
            groups: np.ndarray = of_keys(keys)
            return groups
        return np.array([self._key_group_of(k) for k in keys.tolist()], dtype=np.int64)

    def keyed_rows(self) -> Iterable[tuple[int, tuple[int, ...]]]:
        """The state as ``(key group, (key, running_sum))`` rows (``runtime.state.backend.KeyedRows``), keys in the
        order they were first seen."""
        count = self._slots.count
        keys, sums = self._slots.keys[:count], self._sums[:count]
        return zip(self._key_groups(keys).tolist(), zip(keys.tolist(), sums.tolist()))

    def entry_count(self) -> int:
        return self._slots.count

    def snapshot_state(self) -> OperatorSubtaskState:
        """Per key group, the sorted ``[key, sum]`` pairs of its keys (msgpack)."""
        count = self._slots.count
        key_groups: dict[int, bytes] = {}
        if count:
            layout = self._snapshot_layout(count)
            rows = np.stack([layout.keys, self._sums[:count][layout.order]], axis=1).tolist()
            key_groups = {group: pack(rows[a:b]) for group, a, b in layout.runs}
        handle = KeyGroupsStateHandle(self.key_group_range, key_groups)
        return OperatorSubtaskState(managed_keyed_state=(handle,))

    def _snapshot_layout(self, count: int) -> _SnapshotLayout:
        """The first ``count`` slots ordered by (key group, key), and each key group's run in that order; found
        again only once new keys got slots (a key's slot and key group never change), not at every snapshot."""
        layout = self._layout
        if layout is None or layout.slot_count != count:
            keys = self._slots.keys[:count]
            groups = self._key_groups(keys)
            order = np.lexsort((keys, groups))
            groups = groups[order]
            bounds = (np.flatnonzero(np.diff(groups)) + 1).tolist()
            runs = [(int(groups[a]), a, b) for a, b in zip([0, *bounds], [*bounds, count])]
            layout = self._layout = _SnapshotLayout(count, order, keys[order], runs)
        return layout

    def restore_state(self, state: OperatorSubtaskState) -> None:
        self._clear()
        entries: dict[int, int] = {}
        for handle in state.managed_keyed_state:
            # a full snapshot: the state backend turns an incremental one into key groups (state.backend)
            assert isinstance(handle, KeyGroupsStateHandle), handle
            for kg, data in handle.key_groups.items():
                if kg in self.key_group_range:
                    for key, total in unpack(data):
                        entries[key] = total
        if entries:
            keys = np.fromiter(entries.keys(), dtype=np.int64, count=len(entries))
            slots = self._slots.slots_of(keys)
            self._sums = np.zeros(max(64, 2 * self._slots.count), dtype=np.int64)
            self._sums[slots] = np.fromiter(entries.values(), dtype=np.int64, count=len(entries))
