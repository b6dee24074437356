"""A Hypothesis rule-based state machine for the discrete-event kernel: scheduling at times and priorities,
cancelling, running until a time or for a number of events, stopping from a callback. Invariants: callbacks run
of one run in ``(time, priority, scheduling order)`` order, never before their time, cancelled ones never, the
clock never goes back, runs end for the reason they report, and the count of processed events is exact."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from barriersim.runtime.sim.kernel import Priority, RunOutcome, Simulation


class KernelMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.sim = Simulation(seed=1)
        self.scheduled: dict[int, tuple[int, int, int]] = {}  # token -> (time, priority, seq)
        self.handles: dict[int, object] = {}
        self.cancelled: set[int] = set()
        self.ran: list[int] = []
        self.clock_seen: list[int] = [0]
        self.seq = 0
        self.stop_token: int | None = None

    def _callback(self, token: int):
        def run() -> None:
            assert self.sim.now_us == self.scheduled[token][0]
            self.ran.append(token)
            self.clock_seen.append(self.sim.now_us)
            if token == self.stop_token:
                self.sim.stop()

        return run

    @rule(delay=st.integers(0, 50), priority=st.sampled_from(list(Priority)), stops=st.booleans())
    def schedule(self, delay, priority, stops):
        token = self.seq
        self.seq += 1
        at = self.sim.now_us + delay
        self.scheduled[token] = (at, int(priority), token)
        self.handles[token] = self.sim.schedule_at(at, self._callback(token), priority)
        if stops:
            self.stop_token = token

    @rule(pick=st.integers(0, 1000))
    def cancel(self, pick):
        waiting = [t for t in self.scheduled if t not in self.ran and t not in self.cancelled]
        if waiting:
            token = waiting[pick % len(waiting)]
            self.handles[token].cancel()
            self.cancelled.add(token)

    def _waiting(self) -> list[int]:
        return [t for t in self.scheduled if t not in self.ran and t not in self.cancelled]

    def _check_batch(self, ran_before: int) -> list[int]:
        batch = self.ran[ran_before:]
        keys = [self.scheduled[t] for t in batch]
        assert keys == sorted(keys), "one run must process what is pending in (time, priority, seq) order"
        if batch:  # nothing still waiting comes before what ran last
            assert all(self.scheduled[t] > keys[-1] for t in self._waiting())
        return batch

    @rule(until=st.integers(0, 60))
    def run_until(self, until):
        before = self.sim.events_processed
        ran_before = len(self.ran)
        limit = self.sim.now_us + until
        outcome = self.sim.run(until_us=limit)
        batch = self._check_batch(ran_before)
        assert self.sim.events_processed - before == len(batch)
        if outcome is RunOutcome.TIME_LIMIT:
            assert self.sim.now_us == limit and all(self.scheduled[t][0] > limit for t in self._waiting())
        elif outcome is RunOutcome.QUIESCENT:
            assert self._waiting() == []
        else:
            assert outcome is RunOutcome.STOPPED and batch[-1] == self.stop_token

    @rule(n=st.integers(0, 5))
    def run_events(self, n):
        ran_before = len(self.ran)
        outcome = self.sim.run(max_events=n)
        batch = self._check_batch(ran_before)
        assert len(batch) <= n and (outcome is not RunOutcome.EVENT_LIMIT or len(batch) == n)

    @invariant()
    def never_cancelled_clock_monotonic(self):
        assert not set(self.ran) & self.cancelled
        assert self.clock_seen == sorted(self.clock_seen)
        waiting = sum(1 for t in self.scheduled if t not in self.ran and t not in self.cancelled)
        assert self.sim.pending_events() == waiting


TestKernelMachine = KernelMachine.TestCase
TestKernelMachine.settings = settings(
    max_examples=30,
    stateful_step_count=30,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
