"""A keyed tumbling event-time window join of two inputs, aggregated per window and key (Flink's window join,
``a.join(b).where(key).equalTo(key).window(TumblingEventTimeWindows.of(size))``, followed by a sum).

How this works: records ``(record_id, key, value, event_time)`` arrive on input 0 (the left side) or input 1
(the right side) and are added to the window ``[start, start + size)`` holding their event time, per key and
side: a count and a sum of values each. When the task's combined watermark reaches a window's end, the window
fires: if both sides saw the key in that window (an inner join), ``(window_start, key, pairs, value_sum)`` is
emitted, where ``pairs`` is the number of joined pairs ``left_count * right_count`` and ``value_sum`` is the
sum over those pairs of ``left.value + right.value`` (``left_sum * right_count + right_sum * left_count``), i.e.
``SELECT window_start, key, COUNT(*), SUM(l.value + r.value) FROM l JOIN r ON l.key = r.key AND same window
GROUP BY window_start, key``; the per-pair cross product is not materialised, so a hot key costs its records,
not their square. Windows fire in (window start, key) order, so the output is deterministic; records for a
window that already fired are late and dropped (and counted), as Flink does with zero allowed lateness. The
open windows are keyed state, snapshotted per key group, so a restore gives the same result as no failure.
Flink runs a window join as a co-group over a ``WindowOperator`` whose elements are tagged with their side
(``CoGroupedStreams.TaggedUnion``); the tagging here is the ``input_index`` the stream task passes.
"""

from __future__ import annotations

import numpy as np

from barriersim.runtime.events import Watermark
from barriersim.runtime.operators.records import EVENT_TIME, KEY, VALUE
from barriersim.runtime.operators.window import TumblingEventTimeWindowSum, window_sums
from barriersim.runtime.record_batch import RecordBatch, RecordsLike

LEFT, RIGHT = 0, 1


class TumblingEventTimeWindowJoin(TumblingEventTimeWindowSum):
    """The window sum's windows, state and firing rule, with two-sided accumulators
    ``[left_count, left_sum, right_count, right_sum]`` per (window_start, key)."""

    def process_all(self, records: RecordsLike, input_index: int = LEFT) -> RecordBatch:
        if input_index not in (LEFT, RIGHT):
            raise ValueError(f"a join has inputs 0 and 1, not {input_index}")
        at = 2 * input_index
        windows = self._windows
        for start, key, total, count in self.on_time_groups(RecordBatch.of(records)):
            acc = windows.get((start, key))
            if acc is None:
                acc = windows[(start, key)] = [0, 0, 0, 0]
            acc[at] += count
            acc[at + 1] += total
        return RecordBatch.empty()

    def process_watermark(self, watermark: Watermark) -> RecordBatch:
        return RecordBatch.from_rows(
            [
                (start, key, lc * rc, ls * rc + rs * lc)
                for (start, key), (lc, ls, rc, rs) in self.fire_due(watermark)
                if lc and rc
            ]
        )


def reference_window_join(left: RecordsLike, right: RecordsLike, size_ms: int) -> RecordBatch:
    """What the join emits over the whole input, ignoring timing (no record is late then): the reference. Each side
    (a ``RecordBatch``, or record tuples) is summed per window and key; the (window, key) pairs both sides have are
    joined, in (window start, key) order."""
    sides = []
    for records in (left, right):
        batch = RecordBatch.of(records)
        times = batch.columns[EVENT_TIME]
        sides.append(window_sums(times - times % size_ms, batch.columns[KEY], batch.columns[VALUE]))
    (l_start, l_key, l_sum, l_count), (r_start, r_key, r_sum, r_count) = sides
    starts = np.concatenate([l_start, r_start])
    keys = np.concatenate([l_key, r_key])
    side = np.concatenate([np.zeros(len(l_start), dtype=np.int64), np.ones(len(r_start), dtype=np.int64)])
    order = np.lexsort((side, keys, starts))  # a (window, key) of both sides: its left entry, then its right one
    starts, keys = starts[order], keys[order]
    pair = np.flatnonzero((starts[1:] == starts[:-1]) & (keys[1:] == keys[:-1]))
    li, ri = order[pair], order[pair + 1] - len(l_start)
    lc, ls, rc, rs = l_count[li], l_sum[li], r_count[ri], r_sum[ri]
    return RecordBatch.from_columns(starts[pair], keys[pair], lc * rc, ls * rc + rs * lc)
