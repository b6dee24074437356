"""Real time for the sans-IO core on Ray: a clock in ms and a timer service on an actor's asyncio loop.

How this works: ``now_ms`` (``actors.clock``) is the wall clock in ms, the same base on every actor of the
machine, so a barrier's timestamp set by the coordinator and a task's clock can be compared (start delay).
``LoopTimerService.register_timer(at_ms, callback)`` schedules ``callback`` on the actor's event loop when
the wall clock reaches ``at_ms`` (at once if it has passed) and returns the loop's handle, whose
``cancel()`` is what the runtime's timer protocol needs. A callback that raises is reported to
``on_error`` rather than lost in the loop's exception handler.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from barriersim.actors.clock import now_ms


class LoopTimerService:
    def __init__(self, loop: asyncio.AbstractEventLoop, on_error: Callable[[BaseException], None] | None = None):
        self._loop = loop
        self._on_error = on_error

    def register_timer(self, at_ms: int, callback: Callable[[], None]) -> asyncio.TimerHandle:
        delay = max(0.0, (at_ms - now_ms()) / 1000.0)
        return self._loop.call_later(delay, self._run, callback)

    def _run(self, callback: Callable[[], None]) -> None:
        try:
            callback()
        except BaseException as err:  # noqa: BLE001 - reported to the owner, which fails the task
            if self._on_error is None:
                raise
            self._on_error(err)
