"""The rule of the fault schedule's ``SlowTask`` faults on one deployed subtask, one for every driver: work inside a
slowdown's window goes ``factor`` times slower (overlapping windows multiply), work outside every window at full
speed. ``stretch`` says how long a piece of work takes from a start (a step that starts inside a window and would
end after it is charged only for its part inside), ``progress`` how much work a stretch of time does, ``met`` which
slowdowns a piece of work met for the first time (each reported once). A schedule of slowdowns (factors >= 1) thus
adds at most the length of its windows to any work and never more than its factors' product times it
(docs/windowed-faults.md). Times are ms on the job's clock, as the fault schedule's.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from barriersim.runtime.faults.fault_schedule import SlowTask


class Slowdowns:
    """The ``SlowTask`` faults of one deployed subtask, in the schedule's order."""

    def __init__(self, slowdowns: Sequence[SlowTask]) -> None:
        self.slowdowns = tuple(slowdowns)
        self._met: set[int] = set()
        # where the speed may change: every window's start and end
        self._edges = sorted(
            {s.from_ms for s in self.slowdowns} | {s.until_ms for s in self.slowdowns if s.until_ms is not None}
        )

    def __bool__(self) -> bool:
        return bool(self.slowdowns)

    def factor_at(self, at_ms: float) -> float:
        """How many times slower work goes at ``at_ms``: the product of the factors whose window holds it."""
        return math.prod(
            s.factor for s in self.slowdowns if s.from_ms <= at_ms and (s.until_ms is None or at_ms < s.until_ms)
        )

    def _next_edge(self, at_ms: float) -> float | None:
        i = bisect.bisect_right(self._edges, at_ms)
        return self._edges[i] if i < len(self._edges) else None

    def overlaps(self, start_ms: float, end_ms: float) -> bool:
        """Whether some window with a factor other than 1 holds part of the time from ``start_ms`` to ``end_ms``."""
        return any(
            s.factor != 1 and max(start_ms, s.from_ms) < (end_ms if s.until_ms is None else min(end_ms, s.until_ms))
            for s in self.slowdowns
        )

    def stretch(self, start_ms: float, work_ms: float) -> float:
        """How long ``work_ms`` of work at full speed takes when it starts at ``start_ms``."""
        t, remaining = start_ms, work_ms
        while remaining > 0:
            factor, edge = self.factor_at(t), self._next_edge(t)
            if edge is None or edge - t >= remaining * factor:
                return t + remaining * factor - start_ms
            remaining -= (edge - t) / factor
            t = edge
        return t - start_ms

    def progress(self, start_ms: float, end_ms: float) -> float:
        """How much work at full speed the time from ``start_ms`` to ``end_ms`` does (``stretch``'s inverse)."""
        t, done = start_ms, 0.0
        while t < end_ms:
            edge = self._next_edge(t)
            until = end_ms if edge is None else min(edge, end_ms)
            done += (until - t) / self.factor_at(t)
            t = until
        return done

    def met(self, start_ms: float, end_ms: float) -> list[tuple[int, int]]:
        """The slowdowns whose window the work from ``start_ms`` to ``end_ms`` overlaps, each the first time only:
        ``(index, the ms it was met)``, to be reported once."""
        first = []
        for i, slow in enumerate(self.slowdowns):
            begin = max(start_ms, slow.from_ms)
            end = end_ms if slow.until_ms is None else min(end_ms, slow.until_ms)
            if i not in self._met and begin < end:
                self._met.add(i)
                first.append((i, int(begin)))
        return first
