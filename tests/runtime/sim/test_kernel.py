"""The discrete-event kernel: ordering, cancellation, time limits, seeded sub-streams, trace hashes."""

import pytest

from barriersim.runtime.sim.kernel import Priority, RunOutcome, Simulation, SimulationError


def test_events_run_in_time_then_priority_then_scheduling_order():
    sim = Simulation(seed=1)
    seen = []
    sim.schedule_at(10, lambda: seen.append("t10-normal-a"))
    sim.schedule_at(10, lambda: seen.append("t10-timer"), Priority.TIMER)
    sim.schedule_at(10, lambda: seen.append("t10-urgent"), Priority.URGENT)
    sim.schedule_at(10, lambda: seen.append("t10-normal-b"))
    sim.schedule_at(5, lambda: seen.append("t5"))
    assert sim.run() is RunOutcome.QUIESCENT
    assert seen == ["t5", "t10-urgent", "t10-normal-a", "t10-normal-b", "t10-timer"]
    assert sim.now_us == 10 and sim.events_processed == 5


def test_cancelled_events_do_not_run_and_time_limits_stop_the_clock():
    sim = Simulation(seed=1)
    seen = []
    handle = sim.schedule_at(3, lambda: seen.append("cancelled"))
    sim.schedule_at(4, lambda: seen.append(4))
    sim.schedule_at(9, lambda: seen.append(9))
    handle.cancel()
    assert sim.run(until_us=5) is RunOutcome.TIME_LIMIT
    assert seen == [4] and sim.now_us == 5
    assert sim.run(max_events=0) is RunOutcome.EVENT_LIMIT
    assert sim.run() is RunOutcome.QUIESCENT and seen == [4, 9]


def test_callbacks_schedule_more_events_and_timers_count_in_ms():
    sim = Simulation(seed=1)
    seen = []

    def tick():
        seen.append(sim.clock_ms())
        if len(seen) < 3:
            sim.register_timer(sim.clock_ms() + 100, tick)

    sim.register_timer(100, tick)
    sim.run()
    assert seen == [100, 200, 300]


def test_scheduling_in_the_past_is_an_error_naming_the_event():
    sim = Simulation(seed=1)
    sim.schedule_at(10, lambda: None)
    sim.run()
    with pytest.raises(SimulationError, match="ack.*clock is at 10"):
        sim.schedule_at(5, lambda: None, label="ack")


def test_subsystem_streams_are_seeded_independently():
    a, b = Simulation(seed=7), Simulation(seed=7)
    b.random("faults").random()  # draws in one subsystem never shift another's
    assert [a.random("network").random() for _ in range(3)] == [b.random("network").random() for _ in range(3)]
    assert Simulation(seed=8).random("network").random() != Simulation(seed=7).random("network").random()


def test_same_seed_same_trace_hash():
    def run(seed):
        sim = Simulation(seed)
        rng = sim.random("network")
        for i in range(50):
            sim.schedule_at(rng.randrange(1000), lambda i=i: sim.trace.record(sim.now_us, "event", str(i)))
        sim.run()
        return sim.trace.sha256

    assert run(3) == run(3)
    assert run(3) != run(4)
