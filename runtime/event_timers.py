"""Timers that deliver events: a sans-IO component asks for ``event`` at ``at_ms`` (``EventTimers.start``) and,
when the time comes, its driver hands the event to the component's ``handle``, its one way in, and carries out
the actions that returns. ``DeliveringTimers`` is the driver's side over a ``TimerService``
(``register_timer(at_ms, callback)``); ``WrappingTimers`` lets a component give the timers of a part of it the
enclosing component's own timers, each event wrapped so that it finds its way back there."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class TimerService(Protocol):
    """A driver's timers: ``callback`` runs once time reaches ``at_ms``; the handle cancels it."""

    def register_timer(self, at_ms: int, callback: Callable[[], None]) -> Cancellable: ...


class EventTimers(Protocol):
    """Deliver ``event`` to the component's ``handle`` once time reaches ``at_ms``; the handle cancels it."""

    def start(self, at_ms: int, event: Any) -> Cancellable: ...


class DeliveringTimers:
    """``EventTimers`` over a driver's timer service: at ``at_ms``, ``deliver(event)``."""

    __slots__ = ("_timer_service", "_deliver")

    def __init__(self, timer_service: TimerService, deliver: Callable[[Any], None]):
        self._timer_service = timer_service
        self._deliver = deliver

    def start(self, at_ms: int, event: Any) -> Cancellable:
        deliver = self._deliver
        return self._timer_service.register_timer(at_ms, lambda: deliver(event))


class WrappingTimers:
    """``EventTimers`` of a part of a component: each event, wrapped by ``wrap``, goes to the component's timers."""

    __slots__ = ("_outer", "_wrap")

    def __init__(self, outer: EventTimers, wrap: Callable[[Any], Any]):
        self._outer = outer
        self._wrap = wrap

    def start(self, at_ms: int, event: Any) -> Cancellable:
        return self._outer.start(at_ms, self._wrap(event))
