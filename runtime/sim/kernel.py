"""The discrete-event kernel: an event heap ordered by ``(time, priority, sequence number)``, a virtual clock,
cancellable timers, one seed from which every random choice derives, and a trace with its SHA-256. See
docs/simulator.md, "The discrete-event kernel".
"""

from __future__ import annotations

import enum
import hashlib
import heapq
import random
from collections.abc import Callable
from typing import Any

US_PER_MS = 1000


class Priority(enum.IntEnum):
    """Order of events scheduled for the same instant: lower runs first."""

    URGENT = 0  # failures and recoveries: take effect before anything else at that instant
    CONTROL = 1  # RPCs of the checkpoint protocol (trigger, ack, notify)
    NORMAL = 2  # data and events on channels, processing
    TIMER = 3  # timers registered by components
    LOW = 4


class RunOutcome(enum.Enum):
    QUIESCENT = "quiescent"  # no event left
    TIME_LIMIT = "time_limit"
    EVENT_LIMIT = "event_limit"
    STOPPED = "stopped"


class SimulationError(Exception):
    """A misuse of the kernel, naming the event and the state."""


class ScheduledEvent:
    """Handle of a scheduled callback; ``cancel()`` makes it a no-op (Flink's ``ScheduledFuture.cancel``). The heap
    holds ``[time, priority, seq, callback]`` lists, so ordering is compared in C on three ints (``seq`` is unique,
    the callback is never compared); cancelling sets the callback to None."""

    __slots__ = ("_item",)

    def __init__(self, item: list[Any]) -> None:
        self._item = item

    @property
    def time(self) -> int:
        return int(self._item[0])

    @property
    def cancelled(self) -> bool:
        return self._item[3] is None

    def cancel(self) -> None:
        self._item[3] = None


class Trace:
    """The run's trace: lines ``time|label|detail``, hashed as they come (in batches: hashing the concatenation
    equals hashing line by line); kept in memory only if asked."""

    _BATCH = 512

    def __init__(self, keep_lines: bool = False) -> None:
        self._hash = hashlib.sha256()
        self._pending: list[str] = []
        self.lines: list[str] | None = [] if keep_lines else None
        self.count = 0

    def record(self, time_us: int, label: str, detail: str = "") -> None:
        line = f"{time_us}|{label}|{detail}\n"
        pending = self._pending
        pending.append(line)
        self.count += 1
        if self.lines is not None:
            self.lines.append(line)
        if len(pending) >= self._BATCH:
            self._flush()

    @staticmethod
    def parse(line: str) -> tuple[int, str, str]:
        """A kept line as ``(time_us, label, detail)``: the inverse of ``record``."""
        time_us, label, detail = line.rstrip("\n").split("|", 2)
        return int(time_us), label, detail

    def _flush(self) -> None:
        if self._pending:
            self._hash.update("".join(self._pending).encode())
            self._pending.clear()

    @property
    def sha256(self) -> str:
        self._flush()
        return self._hash.hexdigest()


def derive_seed(seed: int, subsystem: str) -> int:
    digest = hashlib.sha256(f"{seed}/{subsystem}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


class Simulation:
    def __init__(self, seed: int, keep_trace_lines: bool = False) -> None:
        self.seed = seed
        self.now_us = 0
        self._heap: list[list[Any]] = []  # [time, priority, seq, callback or None (cancelled)]
        self._seq = 0
        self._rngs: dict[str, random.Random] = {}
        self._stopped = False
        self.events_processed = 0
        self.trace = Trace(keep_trace_lines)

    # -- time ------------------------------------------------------------------------------------

    def clock_ms(self) -> int:
        return self.now_us // US_PER_MS

    # -- scheduling ------------------------------------------------------------------------------

    def schedule_at(
        self, time_us: int, callback: Callable[[], Any], priority: Priority = Priority.NORMAL, label: str = ""
    ) -> ScheduledEvent:
        if time_us < self.now_us:
            raise SimulationError(
                f"cannot schedule {label or callback!r} at {time_us} us: the clock is at {self.now_us} us"
            )
        seq = self._seq
        self._seq = seq + 1
        item = [time_us, int(priority), seq, callback]
        heapq.heappush(self._heap, item)
        return ScheduledEvent(item)

    def post_at(self, time_us: int, callback: Callable[[], Any], priority: int, label: str) -> None:
        """``schedule_at`` for a callback that is never cancelled: no handle is made for it."""
        if time_us < self.now_us:
            raise SimulationError(
                f"cannot schedule {label or callback!r} at {time_us} us: the clock is at {self.now_us} us"
            )
        seq = self._seq
        self._seq = seq + 1
        heapq.heappush(self._heap, [time_us, priority, seq, callback])

    def schedule_after(
        self, delay_us: int, callback: Callable[[], Any], priority: Priority = Priority.NORMAL, label: str = ""
    ) -> ScheduledEvent:
        if delay_us < 0:
            raise SimulationError(f"negative delay {delay_us} us for {label or callback!r}")
        return self.schedule_at(self.now_us + delay_us, callback, priority, label)

    def register_timer(self, at_ms: int, callback: Callable[[], None]) -> ScheduledEvent:
        """The ``TimerService`` protocol: run ``callback`` once the clock reaches ``at_ms`` milliseconds."""
        return self.schedule_at(max(self.now_us, at_ms * US_PER_MS), callback, Priority.TIMER, "timer")

    # -- randomness ------------------------------------------------------------------------------

    def random(self, subsystem: str) -> random.Random:
        rng = self._rngs.get(subsystem)
        if rng is None:
            rng = self._rngs[subsystem] = random.Random(derive_seed(self.seed, subsystem))
        return rng

    # -- running ---------------------------------------------------------------------------------

    def stop(self) -> None:
        self._stopped = True

    def pending_events(self) -> int:
        return sum(1 for item in self._heap if item[3] is not None)

    def run(self, until_us: int | None = None, max_events: int | None = None) -> RunOutcome:
        """Process events in ``(time, priority, seq)`` order until none is left, the clock would pass
        ``until_us``, ``max_events`` were processed, or a callback called ``stop()``."""
        self._stopped = False
        processed = 0
        heap = self._heap
        pop = heapq.heappop
        limit = max_events if max_events is not None else -1
        try:
            while heap:
                if self._stopped:
                    return RunOutcome.STOPPED
                if processed == limit:
                    return RunOutcome.EVENT_LIMIT
                item = heap[0]
                if until_us is not None and item[0] > until_us:
                    self.now_us = until_us
                    return RunOutcome.TIME_LIMIT
                pop(heap)
                callback = item[3]
                if callback is None:  # cancelled
                    continue
                self.now_us = item[0]
                processed += 1
                callback()
        finally:
            self.events_processed += processed
        return RunOutcome.STOPPED if self._stopped else RunOutcome.QUIESCENT
