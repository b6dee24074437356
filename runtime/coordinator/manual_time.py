"""A manual clock and timer service for driving the coordinator by hand (tests, notebooks, small drivers).

How this works: ``ManualTimerService`` keeps registered timers in a list; ``advance_to(ms)`` / ``advance(ms)`` moves
the clock and runs, in time order (ties in registration order), every timer due by then, including timers that
those callbacks register. A cancelled timer never runs. This plays the role of Flink's
``ManuallyTriggeredScheduledExecutor`` and ``ManualClock`` in the coordinator tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class ManualTimer:
    at_ms: int
    seq: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualTimerService:
    def __init__(self, now_ms: int = 0) -> None:
        self.now_ms = now_ms
        self._timers: list[ManualTimer] = []
        self._seq = 0

    def clock(self) -> int:
        return self.now_ms

    def register_timer(self, at_ms: int, callback: Callable[[], None]) -> ManualTimer:
        timer = ManualTimer(at_ms, self._seq, callback)
        self._seq += 1
        self._timers.append(timer)
        return timer

    @property
    def active_timers(self) -> list[ManualTimer]:
        return sorted((t for t in self._timers if not t.cancelled), key=lambda t: (t.at_ms, t.seq))

    def next_timer_at(self) -> int | None:
        active = self.active_timers
        return active[0].at_ms if active else None

    def advance_to(self, at_ms: int) -> int:
        """Move the clock to ``at_ms`` running every due timer; return how many ran."""
        ran = 0
        while True:
            due = [t for t in self.active_timers if t.at_ms <= at_ms]
            if not due:
                break
            timer = due[0]
            self._timers.remove(timer)
            self.now_ms = max(self.now_ms, timer.at_ms)
            timer.callback()
            ran += 1
        self.now_ms = max(self.now_ms, at_ms)
        self._timers = [t for t in self._timers if not t.cancelled]
        return ran

    def advance(self, delta_ms: int) -> int:
        return self.advance_to(self.now_ms + delta_ms)

    def trigger_next(self) -> bool:
        """Run the next active timer (moving the clock to its time); False if there is none."""
        at = self.next_timer_at()
        if at is None:
            return False
        active = self.active_timers[0]
        self._timers.remove(active)
        self.now_ms = max(self.now_ms, active.at_ms)
        active.callback()
        return True
