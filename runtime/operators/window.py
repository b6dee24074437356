"""A keyed tumbling event-time window that sums values (Flink's ``WindowOperator`` with ``TumblingEventTimeWindows``
and a sum aggregate). See docs/jobs-and-operators.md, "The tumbling window".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

import numpy as np

from barriersim.runtime.events import Watermark
from barriersim.runtime.operators.records import EVENT_TIME, KEY, VALUE, pack, unpack
from barriersim.runtime.operators.watermarks import NO_WATERMARK
from barriersim.runtime.record_batch import RecordBatch, RecordsLike
from barriersim.runtime.state.snapshot import KeyGroupRange, KeyGroupsStateHandle, OperatorSubtaskState


class TumblingEventTimeWindowSum:
    ROW_KEY_WIDTH = 2  # a state row is (window_start, key, *accumulators)

    def __init__(self, size_ms: int, key_group_range: KeyGroupRange, key_group_of: Callable[[int], int]) -> None:
        if size_ms <= 0:
            raise ValueError(f"window size must be > 0 ms, got {size_ms}")
        self.size_ms = size_ms
        self.key_group_range = key_group_range
        self._key_group_of = key_group_of
        self._windows: dict[tuple[int, int], list[int]] = {}  # (window_start, key) -> [sum, count]
        self.watermark = NO_WATERMARK
        self.late_records = 0

    def window_start(self, event_time: int) -> int:
        return event_time - (event_time % self.size_ms)

    def process_all(self, records: RecordsLike) -> RecordBatch:
        for start, key, total, count in self.on_time_groups(RecordBatch.of(records)):
            acc = self._windows.get((start, key))
            if acc is None:
                self._windows[(start, key)] = [total, count]
            else:
                acc[0] += total
                acc[1] += count
        return RecordBatch.empty()

    def on_time_groups(self, batch: RecordBatch) -> list[tuple[int, int, int, int]]:
        """The records of ``batch`` that are not late, as ``(window_start, key, sum of values, count)`` per window
        and key; late records are counted in ``late_records``."""
        if not len(batch):
            return []
        columns = batch.columns
        times = columns[EVENT_TIME]
        starts = times - times % self.size_ms
        late = starts + (self.size_ms - 1) <= self.watermark
        late_count = int(np.count_nonzero(late))
        keys, values = columns[KEY], columns[VALUE]
        if late_count:
            self.late_records += late_count
            on_time = ~late
            starts, keys, values = starts[on_time], keys[on_time], values[on_time]
        return list(zip(*(a.tolist() for a in window_sums(starts, keys, values))))

    def process_watermark(self, watermark: Watermark) -> RecordBatch:
        return RecordBatch.from_rows(
            [(start, key, total, count) for (start, key), (total, count) in self.fire_due(watermark)]
        )

    def fire_due(self, watermark: Watermark) -> list[tuple[tuple[int, int], list[int]]]:
        """Remove and return, in (window start, key) order, every window whose last timestamp (end - 1) is at or
        before the watermark (Flink's rule), with its accumulators."""
        self.watermark = max(self.watermark, watermark.timestamp)
        due = sorted(w for w in self._windows if w[0] + self.size_ms - 1 <= self.watermark)
        return [(w, self._windows.pop(w)) for w in due]

    def keyed_rows(self) -> Iterable[tuple[int, tuple[int, ...]]]:
        """The open windows as ``(key group, (window_start, key, *accumulators))`` rows
        (``runtime.state.backend.KeyedRows``)."""
        key_group_of = self._key_group_of
        return ((key_group_of(key), (start, key, *acc)) for (start, key), acc in self._windows.items())

    def entry_count(self) -> int:
        return len(self._windows)

    def snapshot_state(self) -> OperatorSubtaskState:
        return snapshot_windows(self._windows, self.key_group_range, self._key_group_of)

    def restore_state(self, state: OperatorSubtaskState | None) -> None:
        self._windows = restore_windows(state, self.key_group_range)


def window_sums(starts: np.ndarray, keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per distinct (window start, key), in that order: the window starts, the keys, the sums of the values and the
    counts of records (four arrays)."""
    n = len(starts)
    if not n:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, empty, empty
    order = np.lexsort((keys, starts))
    starts, keys, values = starts[order], keys[order], values[order]
    first = np.empty(n, dtype=bool)
    first[0] = True
    np.logical_or(starts[1:] != starts[:-1], keys[1:] != keys[:-1], out=first[1:])
    # the arrays' methods and ufuncs, not ``np.flatnonzero``, ``np.diff`` and ``np.append``: their Python wrappers
    # cost more than the few records of a buffer (once per buffer a window processes)
    at = first.nonzero()[0]
    counts = np.empty_like(at)
    np.subtract(at[1:], at[:-1], out=counts[:-1])
    counts[-1] = n - at[-1]
    return starts[at], keys[at], np.add.reduceat(values, at), counts


def snapshot_windows(
    windows: dict[tuple[int, int], list[int]], key_group_range: KeyGroupRange, key_group_of: Callable[[int], int]
) -> OperatorSubtaskState:
    """Open windows ``(window_start, key) -> accumulators`` as keyed state: per key group, the sorted rows
    ``[window_start, key, *accumulators]`` (msgpack)."""
    by_group: dict[int, list[list[int]]] = defaultdict(list)
    for (start, key), acc in windows.items():
        by_group[key_group_of(key)].append([start, key, *acc])
    handle = KeyGroupsStateHandle(key_group_range, {kg: pack(sorted(v)) for kg, v in sorted(by_group.items())})
    return OperatorSubtaskState(managed_keyed_state=(handle,))


def restore_windows(
    state: OperatorSubtaskState | None, key_group_range: KeyGroupRange
) -> dict[tuple[int, int], list[int]]:
    """The open windows of the key groups in ``key_group_range`` (after rescaling, a handle may hold more)."""
    windows: dict[tuple[int, int], list[int]] = {}
    if state is None:
        return windows
    for handle in state.managed_keyed_state:
        # a full snapshot: the state backend turns an incremental one into key groups (state.backend)
        assert isinstance(handle, KeyGroupsStateHandle), handle
        for kg, data in handle.key_groups.items():
            if kg in key_group_range:
                for start, key, *acc in unpack(data):
                    windows[(start, key)] = list(acc)
    return windows
