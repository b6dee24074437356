"""A keyed tumbling event-time window join of two inputs, aggregated per window and key (Flink's window join,
``a.join(b).where(key).equalTo(key).window(TumblingEventTimeWindows.of(size))``, followed by a sum). See
docs/jobs-and-operators.md, "The window join".
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
