"""When a paced source subtask's records are due, in virtual time: the simulator's exact model of a source that
emits its records one at a time at its rate (``JobConfig.source_emission`` ``EXACT``). ``EmissionClock`` is one
paced source subtask's clock: from its anchor (when it started emitting, or last resumed after backpressure or a
synchronous snapshot), record ``j`` is due when ``j / rate`` seconds of work at full speed are done, which the
``SlowTask`` rule (``runtime.job.slowdowns``) stretches inside a slowdown's window only. The simulator writes the
records that are due at its sync points (``runtime.sim.data_plane``). Without a slowdown in the way the clock runs
in integer microseconds and ``due`` and ``due_time_us`` agree exactly; with one they agree as well
(``due(due_time_us(k)) >= k``, the time rounded up). docs/windowed-faults.md has the narrative.
"""

from __future__ import annotations

import math

from barriersim.runtime.job.slowdowns import Slowdowns

US_PER_SECOND = 1_000_000
_ROUNDING = 1e-6  # of a record: what a float's rounding may take from a record that is due


class EmissionClock:
    """One paced source subtask's emission clock (see the module's docstring); ``slowdowns``: its task's
    ``runtime.job.slowdowns.Slowdowns`` (times in ms on the job's clock, the simulator's virtual ms)."""

    __slots__ = ("_rate", "_slowdowns", "anchor_us", "emitted", "blocked")

    def __init__(self, rate: int, now_us: int, slowdowns: Slowdowns | None = None) -> None:
        if rate <= 0:
            raise ValueError(f"source emission: the rate must be positive, got {rate}")
        self._rate = rate
        self._slowdowns = slowdowns if slowdowns else None
        self.anchor_us = now_us
        self.emitted = 0  # records written since the anchor
        self.blocked = False

    def restart(self, now_us: int) -> None:
        """The clock starts again at ``now_us`` (the next record due one interval of work later)."""
        self.anchor_us = now_us
        self.emitted = 0
        self.blocked = False

    def _slowed(self, until_us: int) -> bool:
        return self._slowdowns is not None and self._slowdowns.overlaps(self.anchor_us / 1000, until_us / 1000)

    def due(self, now_us: int) -> int:
        """Records due by ``now_us`` and not written yet (0 if none)."""
        elapsed = now_us - self.anchor_us
        if elapsed <= 0:
            return 0
        if not self._slowed(now_us):
            return max(0, elapsed * self._rate // US_PER_SECOND - self.emitted)
        assert self._slowdowns is not None  # _slowed
        work_us = self._slowdowns.progress(self.anchor_us / 1000, now_us / 1000) * 1000
        return max(0, math.floor(work_us * self._rate / US_PER_SECOND + _ROUNDING) - self.emitted)

    def due_time_us(self, ahead: int) -> int:
        """When the ``ahead``-th record after those written is due (``ahead`` >= 1)."""
        j = self.emitted + ahead
        at = self.anchor_us - (-(j * US_PER_SECOND) // self._rate)
        if not self._slowed(at):
            return at
        work_ms = j * 1000 / self._rate
        assert self._slowdowns is not None  # _slowed
        at = self.anchor_us + math.ceil(self._slowdowns.stretch(self.anchor_us / 1000, work_ms) * 1000)
        while self.due(at) < ahead:  # a float's rounding, either way
            at += 1
        while at - 1 > self.anchor_us and self.due(at - 1) >= ahead:
            at -= 1
        return at

    def sleep_ends_us(self, now_us: int) -> int:
        """When a source that sleeps on its task thread until each record is due (``SourcePacing.SLEEP``) wakes
        next: at the due time of its first record not due by ``now_us``. Flink's mailbox runs a mail only between
        two records, so a mail that arrives during the sleep waits until then (and until that record went out)."""
        return self.due_time_us(self.due(now_us) + 1)

    def wrote(self, records: int) -> None:
        self.emitted += records
