"""The task thread of a task actor on Ray: Flink's ``TaskMailbox`` and ``MailboxProcessor`` with real time. No
protocol rule lives here. See docs/ray-driver.md, "The task thread".
"""

from __future__ import annotations

import concurrent.futures
import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TypeVar

from barriersim.actors.clock import now_ms

T = TypeVar("T")


class TaskMailbox:
    """Mails for the task thread, put from any thread, taken in the order they were put (Flink's ``TaskMailbox``)."""

    def __init__(self):
        self._mails: deque = deque()
        self._ready = threading.Condition(threading.Lock())

    def put(self, mail: Callable[[], None]) -> None:
        with self._ready:
            self._mails.append(mail)
            if len(self._mails) == 1:
                self._ready.notify()

    def take(self, timeout: float | None) -> list:
        """Every mail there is, waiting for one at most ``timeout`` seconds (None: until one comes; 0: not at all)."""
        with self._ready:
            if not self._mails and timeout != 0:
                self._ready.wait(timeout)
            mails = list(self._mails)
            self._mails.clear()
        return mails

    def call(self, fn: Callable[[], T], timeout: float) -> T:
        """Run ``fn`` on the task thread and return what it returns (or raise what it raised); ``TimeoutError`` if
        the task thread did not run it within ``timeout`` seconds."""
        answer: concurrent.futures.Future[T] = concurrent.futures.Future()

        def mail() -> None:
            try:
                answer.set_result(fn())
            except BaseException as err:  # noqa: BLE001 - handed to the caller
                answer.set_exception(err)

        self.put(mail)
        return answer.result(timeout)


class _Timer:
    __slots__ = ("callback", "cancelled")

    def __init__(self, callback: Callable[[], None]):
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class MailboxTimers:
    """The task thread's timers, a ``(deadline, seq)`` heap; also the runtime's timer service
    (``register_timer(at_ms, callback)``, whose handle has ``cancel()``). Used from the task thread only."""

    def __init__(self):
        self._heap: list = []
        self._seq = itertools.count()

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> _Timer:
        timer = _Timer(callback)
        heapq.heappush(self._heap, (time.monotonic() + delay_s, next(self._seq), timer))  # a past deadline: due first
        return timer

    def register_timer(self, at_ms: int, callback: Callable[[], None]) -> _Timer:
        return self.call_later((at_ms - now_ms()) / 1000.0, callback)

    def seconds_to_next(self) -> float | None:
        """Seconds until the next timer is due (0 if one is due now); None if there is none."""
        heap = self._heap
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
        return max(0.0, heap[0][0] - time.monotonic()) if heap else None

    def due(self) -> list[Callable[[], None]]:
        """The callbacks of the timers due now, in deadline order, taken off the heap."""
        now, heap, due = time.monotonic(), self._heap, []
        while heap and heap[0][0] <= now:
            timer = heapq.heappop(heap)[2]
            if not timer.cancelled:
                due.append(timer.callback)
        return due
