"""A keyed tumbling event-time window that sums values (Flink's ``WindowOperator`` with
``TumblingEventTimeWindows`` and a sum aggregate).

How this works: each record ``(record_id, key, value, event_time)`` is added to the window
``[start, start + size)`` holding its event time, per key. When the task's combined watermark reaches a
window's end, the window fires: ``(window_start, key, sum, count)`` is emitted and its state dropped, in
(window start, key) order so the output is deterministic. Records for windows that already fired are late
and are dropped (and counted), as Flink does with zero allowed lateness. The state (open windows per key)
is keyed state, snapshotted per key group, so the result after a restore is the same as without failure.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Callable, Iterable

from barriersim.runtime.events import Watermark
from barriersim.runtime.operators.records import EVENT_TIME, KEY, VALUE, pack, unpack
from barriersim.runtime.operators.watermarks import NO_WATERMARK
from barriersim.runtime.state.snapshot import KeyGroupRange, KeyGroupsStateHandle, OperatorSubtaskState


class TumblingEventTimeWindowSum:
    ROW_KEY_WIDTH = 2  # a state row is (window_start, key, *accumulators)

    def __init__(self, size_ms: int, key_group_range: KeyGroupRange, key_group_of: Callable[[int], int]):
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

    def process_all(self, records: Iterable[tuple]) -> list[tuple]:
        for r in records:
            start = self.window_start(r[EVENT_TIME])
            if start + self.size_ms - 1 <= self.watermark:
                self.late_records += 1
                continue
            acc = self._windows.setdefault((start, r[KEY]), [0, 0])
            acc[0] += r[VALUE]
            acc[1] += 1
        return []

    def process_watermark(self, watermark: Watermark) -> list[tuple]:
        return [(start, key, total, count) for (start, key), (total, count) in self.fire_due(watermark)]

    def fire_due(self, watermark: Watermark) -> list[tuple[tuple[int, int], list[int]]]:
        """Remove and return, in (window start, key) order, every window whose last timestamp (end - 1) is at or
        before the watermark (Flink's rule), with its accumulators."""
        self.watermark = max(self.watermark, watermark.timestamp)
        due = sorted(w for w in self._windows if w[0] + self.size_ms - 1 <= self.watermark)
        return [(w, self._windows.pop(w)) for w in due]

    def keyed_rows(self) -> Iterable[tuple[int, tuple]]:
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


def snapshot_windows(windows: dict[tuple[int, int], list[int]], key_group_range: KeyGroupRange,
                     key_group_of: Callable[[int], int]) -> OperatorSubtaskState:
    """Open windows ``(window_start, key) -> accumulators`` as keyed state: per key group, the sorted rows
    ``[window_start, key, *accumulators]`` (msgpack)."""
    by_group: dict[int, list] = defaultdict(list)
    for (start, key), acc in windows.items():
        by_group[key_group_of(key)].append([start, key, *acc])
    handle = KeyGroupsStateHandle(key_group_range, {kg: pack(sorted(v)) for kg, v in sorted(by_group.items())})
    return OperatorSubtaskState(managed_keyed_state=(handle,))


def restore_windows(state: OperatorSubtaskState | None, key_group_range: KeyGroupRange) -> dict[tuple[int, int], list[int]]:
    """The open windows of the key groups in ``key_group_range`` (after rescaling, a handle may hold more)."""
    windows: dict[tuple[int, int], list[int]] = {}
    if state is None:
        return windows
    for handle in state.managed_keyed_state:
        for kg, data in handle.key_groups.items():
            if kg in key_group_range:
                for start, key, *acc in unpack(data):
                    windows[(start, key)] = list(acc)
    return windows
