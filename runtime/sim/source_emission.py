"""When a paced source subtask's records are due, in virtual time: the simulator's exact model of a source that
emits its records one at a time at its rate (``JobConfig.source_emission`` ``EXACT``).

How this works: Flink's source task emits one record per ``StreamTask.processInput`` call; a paced source (a rate
limiter, or the measured job's token-bucket map) waits between records, and its mailbox runs a checkpoint trigger or
any other mail between two records. So the barrier of a checkpoint follows exactly the records emitted before the
trigger ran, and a buffer goes out when the record that finishes it is emitted. ``EmissionClock`` is one paced
source subtask's clock: from its anchor (when it started emitting, or last resumed), record ``j`` (1-based) is due
``ceil(j / rate)`` seconds later, at ``rate`` records per second times the slowdown factor's inverse. The
simulator (``DataPlane``) writes the records that are due at *sync points*: when the record that finishes one of
the task's output buffers is due (``StreamTask.source_records_until_buffer_finishes``), at most every
``SOURCE_PACING_MS`` of records (the cadence of the source's watermarks), and before anything that reads or marks
the task's output position (a checkpoint trigger or any other RPC, the output flusher). Between sync points
nothing outside the task could see a record, so the run is as if every record were written when it was due.
A write that stops because an output is backpressured blocks the clock (Flink's source waits for
``taskIsAvailable()``); when the output is available again the clock restarts there, as the rate limiter paces the
next record from then, and so does a synchronous snapshot that held the task thread. Rates are integers and the
clock runs in integer microseconds, so ``due`` and ``due_time_us`` agree exactly (``due(due_time_us(k)) >= k``).
"""

from __future__ import annotations

US_PER_SECOND = 1_000_000


class EmissionClock:
    """One paced source subtask's emission clock (see the module's docstring)."""

    __slots__ = ("_rate", "_num", "_den", "anchor_us", "emitted", "factor", "blocked")

    def __init__(self, rate: int, now_us: int):
        if rate <= 0:
            raise ValueError(f"source emission: the rate must be positive, got {rate}")
        self._rate = rate
        self.factor = 1.0
        self._num, self._den = rate, 1  # records per second, slowed down: num / den
        self.anchor_us = now_us
        self.emitted = 0  # records written since the anchor
        self.blocked = False

    def restart(self, now_us: int, factor: float | None = None) -> None:
        """The clock starts again at ``now_us`` (the next record due one interval later), at ``factor`` times the
        per-record time if given."""
        if factor is not None and factor != self.factor:
            self.factor = factor
            p, q = float(factor).as_integer_ratio()  # exact: the rate over the factor is rate * q / p
            self._num, self._den = self._rate * q, p
        self.anchor_us = now_us
        self.emitted = 0
        self.blocked = False

    def due(self, now_us: int) -> int:
        """Records due by ``now_us`` and not written yet (0 if none)."""
        elapsed = now_us - self.anchor_us
        if elapsed <= 0:
            return 0
        return max(0, elapsed * self._num // (self._den * US_PER_SECOND) - self.emitted)

    def due_time_us(self, ahead: int) -> int:
        """When the ``ahead``-th record after those written is due (``ahead`` >= 1)."""
        j = self.emitted + ahead
        return self.anchor_us - (-(j * self._den * US_PER_SECOND) // self._num)

    def wrote(self, records: int) -> None:
        self.emitted += records
