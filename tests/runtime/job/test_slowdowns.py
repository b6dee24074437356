"""The rule of the ``slow_task`` faults (``runtime.job.slowdowns``): work is slowed only for its part inside a
slowdown's window, so a fault schedule cannot multiply time beyond its stated factors and windows, whatever the
steps the work comes in; and a simulated job with three x50 slowdowns of 0-1 ms on one source takes about as long
as without them (it took 1,254 virtual seconds when a step that began in a window was charged whole)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from barriersim.runtime.coordinator.configuration import CheckpointingConfig
from barriersim.runtime.faults.fault_schedule import FaultSchedule, SlowTask
from barriersim.runtime.job.config import JobConfig, JobOutcome, WorkloadConfig
from barriersim.runtime.job.slowdowns import Slowdowns
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.runtime.verification.reference import Verdict, expected_sink_input, verify
from barriersim.scenarios.loader import quickstart_graph
from barriersim.scenarios.workload import local_splits


@st.composite
def windows(draw, factors=st.floats(1.0, 1000.0)):  # noqa: B008 - a strategy, immutable
    starts = draw(st.lists(st.integers(0, 200), max_size=5))
    out = []
    for start in starts:
        until = draw(st.one_of(st.none(), st.integers(start, start + 100)))
        out.append(SlowTask("t#0", draw(factors), start, until))
    return out


def union_length(slowdowns, start: float, duration: float) -> Fraction:
    """How much of [start, start + duration) lies inside some window, exactly: in floats ``start + duration`` may
    round to ``start`` (a duration below half an ulp of the start), which would make every window miss it."""
    start = Fraction(start)
    end = start + Fraction(duration)
    spans = sorted((max(s.from_ms, start), end if s.until_ms is None else min(s.until_ms, end)) for s in slowdowns)
    total, reach = Fraction(0), start
    for begin, finish in spans:
        begin = max(begin, reach)
        if finish > begin:
            total += finish - begin
            reach = finish
    return total


close = lambda a, b: math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)  # noqa: E731


@settings(max_examples=300, deadline=None)
@given(windows(), st.floats(0, 300), st.floats(0, 500))
@example(  # 1.0 + work == 1.0 in floats: the work lies in the windows all the same, slowed x4.2e10 to 1e-6 ms
    [SlowTask("t#0", f, 0, None) for f in (227.0, 491.0, 519.0, 728.0)], 1.0, 2.3747906344178512e-17
)
def test_slowdowns_add_at_most_their_windows_and_multiply_at_most_by_their_factors(slowdowns, start, work):
    rule = Slowdowns(slowdowns)
    took = rule.stretch(start, work)
    assert took >= work - 1e-9
    assert took <= work * math.prod(s.factor for s in slowdowns) * (1 + 1e-9) + 1e-9
    # the time added is spent inside the windows the work ran through, and never more than their length
    assert took - work <= union_length(slowdowns, start, took) * (1 + 1e-9) + 1e-6
    if union_length(slowdowns, start, work) == 0:
        assert close(took, work)  # work outside every window is not slowed at all
    assert close(rule.progress(start, start + took), work)  # stretch and progress agree


@settings(max_examples=300, deadline=None)
@given(windows(factors=st.floats(0.1, 100.0)), st.floats(0, 300), st.lists(st.floats(0, 50), min_size=1, max_size=8))
def test_how_work_is_cut_into_steps_does_not_change_when_it_ends(slowdowns, start, steps):
    """The end of some work does not depend on the steps it is done in (a step is charged for what it does where
    it does it): one step of the whole work ends when the steps one after the other do."""
    rule = Slowdowns(slowdowns)
    t = start
    for step in steps:
        t += rule.stretch(t, step)
    assert close(t - start, rule.stretch(start, sum(steps)))


def test_each_slowdown_is_met_once_and_only_by_work_inside_its_window():
    rule = Slowdowns([SlowTask("t#0", 50, 10, 20), SlowTask("t#0", 2, 30)])
    assert rule.met(0, 10) == []  # ends where the window starts
    assert rule.met(5, 12) == [(0, 10)]
    assert rule.met(11, 40) == [(1, 30)]  # the first one was met already
    assert rule.met(0, 100) == []


def test_a_step_that_starts_in_a_short_window_is_charged_only_for_its_part_inside():
    rule = Slowdowns([SlowTask("t#0", 50, 0, 1)] * 3)  # three x50 slowdowns of 0-1 ms: x125,000 inside
    assert close(rule.stretch(0, 10), 1 + (10 - 1 / 125_000))  # 1 ms at x125,000, the rest at full speed
    assert close(rule.stretch(5, 10), 10)


def simulate(faults: list[dict]):
    graph = quickstart_graph(2, 1)
    splits = {"source": local_splits(1_000, 100, 1.0, 100, 2, seed=1)}
    config = JobConfig(
        graph,
        checkpointing=CheckpointingConfig(mode="aligned", interval_ms=400),
        workload=WorkloadConfig(rate_per_source=25_000),
        faults=FaultSchedule.from_plain(faults),
    )
    job = JobSimulation(config, splits, 42)
    result = job.run()
    return result, verify(expected_sink_input(graph, splits), result.committed_output)


@pytest.mark.parametrize("task, until_ms", [("source#0", 1), ("keyed-sum#0", 20)])
def test_three_short_slowdowns_on_one_task_cost_about_their_window_not_their_factors(task, until_ms):
    baseline, _ = simulate([])
    slowed, verdict = simulate(
        [{"type": "slow_task", "task": task, "factor": 50, "from_ms": 0, "until_ms": until_ms}] * 3
    )
    assert slowed.outcome is JobOutcome.FINISHED and verdict.verdict is Verdict.EXACTLY_ONCE
    assert all(entry["fired"] for entry in slowed.fault_log), slowed.fault_log
    # at most the window and a record's time more than without them (the source's took 1,254 s)
    assert slowed.virtual_ms <= baseline.virtual_ms + until_ms + 1, (slowed.virtual_ms, baseline.virtual_ms)
