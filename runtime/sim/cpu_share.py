"""Processor sharing: subtasks whose CPU work runs at once on a machine of ``cores`` cores. While ``n`` works run,
each progresses at ``min(1, cores / n)`` µs of work per µs (the fair share a kernel's scheduler gives runnable
threads); ``start`` adds a work, ``next_finish`` says when the first one ends if nothing else starts, ``finished``
takes the ones done by then. Pure arithmetic on the virtual clock the caller passes; no scheduling of its own.
Sleeps are not work: the caller keeps them out (docs/fidelity-family.md, "CPU sharing")."""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Generic, TypeVar

DONE_US = 1e-6  # a work with this much left is done (rounding of the virtual clock's whole µs)
K = TypeVar("K", bound=Hashable)


class ProcessorSharing(Generic[K]):
    """The works running on one machine's cores (see the module)."""

    def __init__(self, cores: float) -> None:
        if cores <= 0:
            raise ValueError(f"cores must be positive, not {cores}")
        self.cores = cores
        self._remaining: dict[K, float] = {}  # per key: the work left (µs at full speed)
        self._at = 0  # the virtual time (µs) ``_remaining`` holds for

    def __contains__(self, key: object) -> bool:
        return key in self._remaining

    def __len__(self) -> int:
        return len(self._remaining)

    def rate(self) -> float:
        """How fast each running work progresses now (µs of work per µs)."""
        n = len(self._remaining)
        return 1.0 if n <= self.cores else self.cores / n

    def _advance(self, now: int) -> None:
        if now < self._at:
            raise ValueError(f"the clock went back from {self._at} to {now}")
        if self._remaining and now > self._at:
            done = (now - self._at) * self.rate()
            for key in self._remaining:
                self._remaining[key] -= done
        self._at = now

    def start(self, key: K, work_us: float, now: int) -> None:
        """``key`` starts ``work_us`` of CPU work at ``now`` (it runs no other work)."""
        if key in self._remaining:
            raise ValueError(f"{key} already runs a work")
        self._advance(now)
        self._remaining[key] = float(work_us)

    def set_cores(self, cores: float, now: int) -> None:
        """From ``now`` on, the works share ``cores`` (part of the cores taken by others)."""
        if cores <= 0:
            raise ValueError(f"cores must be positive, not {cores}")
        self._advance(now)
        self.cores = cores

    def next_finish(self) -> int | None:
        """When the first running work ends (whole µs, rounded up) if no work starts before; None if none runs."""
        if not self._remaining:
            return None
        return self._at + max(0, math.ceil(min(self._remaining.values()) / self.rate() - DONE_US))

    def finished(self, now: int) -> list[K]:
        """The works done by ``now``, in the order they started; they leave the machine."""
        self._advance(now)
        done = [key for key, left in self._remaining.items() if left <= DONE_US]
        for key in done:
            del self._remaining[key]
        return done

    def clear(self, now: int) -> None:
        """Every running work is dropped (its tasks died)."""
        self._remaining.clear()
        self._at = max(self._at, now)
