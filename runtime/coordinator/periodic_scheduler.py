"""The periodic checkpoint trigger: a fixed-rate timer started while the job runs, with Flink 2.3's trigger delay.
Mirrors the ``ScheduledTrigger`` part of Flink's ``CheckpointCoordinator``. See docs/coordinator.md, "The periodic
trigger".
"""

from __future__ import annotations

import random
from collections.abc import Callable

from barriersim.runtime.checkpointing.barrier_handler import Cancellable
from barriersim.runtime.coordinator.configuration import NO_PERIODIC_CHECKPOINTS

MINIMAL_CHECKPOINT_TIME = 10


class PeriodicScheduler:
    """``register_after(delay_ms, generation)`` registers a timer (on the coordinator's ``TimerService``) that
    delivers ``TimerFired(PERIODIC_TRIGGER, generation)``; it returns a cancellable handle. A firing whose
    generation is not the current one (the timer was cancelled or replaced) is ignored."""

    def __init__(
        self, interval: int, min_pause: int, rng: random.Random, register_after: Callable[[int, int], Cancellable]
    ) -> None:
        # as Flink: it does not make sense to schedule checkpoints more often than the min pause allows; Flink's
        # DISABLED_CHECKPOINT_INTERVAL (Long.MAX_VALUE) is no periodic checkpointing
        configured = MINIMAL_CHECKPOINT_TIME <= interval < NO_PERIODIC_CHECKPOINTS
        self.base_interval = max(interval, min_pause) if configured else None
        self.min_pause = min_pause
        self._rng = rng
        self._register_after = register_after
        self._handle: Cancellable | None = None
        self.generation = 0
        self.running = False
        self._started_before = False  # once started, a start waits the min pause, not a random delay

    @property
    def is_periodic_checkpointing_configured(self) -> bool:
        return self.base_interval is not None

    def random_init_delay(self) -> int:
        assert self.base_interval is not None
        low = min(self.min_pause, self.base_interval)
        return self._rng.randint(low, self.base_interval)

    def start(self) -> bool:
        """Start the fixed-rate trigger; False if periodic checkpointing is not configured."""
        if not self.is_periodic_checkpointing_configured:
            return False
        self.stop()
        self.running = True
        delay = self.min_pause if self._started_before else self.random_init_delay()  # Flink's triggerDelay
        self._started_before = True
        self._schedule_after(delay)
        return True

    def stop(self) -> None:
        self.running = False
        self._cancel()

    def reschedule(self, delay: int) -> None:
        if self.running:
            self._cancel()
            self._schedule_after(max(0, delay))

    def fired(self, generation: int) -> bool:
        """A periodic timer fired: True if a periodic checkpoint must be requested now (the next firing is
        then already scheduled, fixed rate)."""
        if not self.running or generation != self.generation:
            return False
        assert self.base_interval is not None
        self._schedule_after(self.base_interval)
        return True

    def _cancel(self) -> None:
        self.generation += 1
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _schedule_after(self, delay: int) -> None:
        self.generation += 1
        self._handle = self._register_after(delay, self.generation)
