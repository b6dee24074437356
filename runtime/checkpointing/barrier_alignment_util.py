"""The alignment timer of the exactly-once barrier handler, after Flink's ``BarrierAlignmentUtil``: the delay of an
announced barrier's aligned-checkpoint timeout (``get_timer_delay``) and ``AlignmentTimer``, which registers that
timeout with the task's ``TimerService`` and owns its handle until it fires or is reset."""

from __future__ import annotations

from collections.abc import Callable

from barriersim.runtime.checkpointing.barrier_handler import Cancellable, Clock, TimerService
from barriersim.runtime.events import CheckpointBarrier


def get_timer_delay(now_ms: int, announced_barrier: CheckpointBarrier) -> int:
    """Flink's ``BarrierAlignmentUtil.getTimerDelay``: the barrier's timeout minus its age at ``now_ms`` (never
    negative), in ms."""
    timeout = announced_barrier.options.aligned_checkpoint_timeout
    return max(timeout - (now_ms - announced_barrier.timestamp), 0)


class _NoTimers:
    def register_timer(self, at_ms: int, callback: Callable[[], None]) -> Cancellable:
        raise RuntimeError("strictly aligned or unaligned checkpoints never register alignment timers")


class AlignmentTimer:
    """The current alignment timer (Flink's ``currentAlignmentTimer`` with its ``registerTimer``): at most one."""

    def __init__(self, clock: Clock, timer_service: TimerService | None) -> None:
        """Without ``timer_service`` (strictly aligned or unaligned checkpoints) registering a timer is an error."""
        self._clock = clock
        self._timer_service: TimerService = timer_service if timer_service is not None else _NoTimers()
        self._current: Cancellable | None = None

    def register(self, announced_barrier: CheckpointBarrier, on_timeout: Callable[[], None]) -> None:
        """``on_timeout`` runs once the alignment of ``announced_barrier`` timed out, unless ``reset`` comes first."""
        now = self._clock()

        def fire() -> None:
            on_timeout()
            self._current = None

        self._current = self._timer_service.register_timer(now + get_timer_delay(now, announced_barrier), fire)

    def reset(self) -> None:
        """Flink's ``resetAlignmentTimer``: cancel the current timer, if any."""
        if self._current is not None:
            self._current.cancel()
            self._current = None
