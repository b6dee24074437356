"""A paced source that sleeps on its task thread (``[workload] pacing = "sleep"``, ``SourcePacing.SLEEP``): Flink's
mailbox runs a checkpoint trigger only between two records, so a trigger that reaches a source sleeping until its
next record is due waits until that record went out; with ``rate_limiter`` (the default) it runs at once. That
generated jobs with random faults keep every guarantee with it: tests/runtime/sim/test_exact_source_emission.py."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from barriersim.runtime.checkpoint_cost import NO_COST
from barriersim.runtime.coordinator.configuration import CheckpointingConfig
from barriersim.runtime.job.config import JobConfig, JobConfigError, SourceEmission, SourcePacing, WorkloadConfig
from barriersim.runtime.operators.source import SplitSourceReader
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.runtime.sim.source_emission import EmissionClock
from barriersim.scenarios.loader import quickstart_graph
from barriersim.scenarios.workload import local_splits

RATE = 100  # records/s: one record every 10 ms
RECORDS = 300  # 3 s of them; once they are read the source no longer sleeps
GAP_US = 1_000_000 // RATE


def snapshots(pacing: SourcePacing, monkeypatch) -> tuple[int, list[tuple[int, int]], list[int]]:
    """A one-source job (source -> keyed sum -> sink, parallelism 1) at ``RATE``, checkpointing every 137 ms, its
    checkpoints free (only the trigger RPC's latency): the source's clock anchor, (time, records read) at each of
    its snapshots, and its start delays (ms)."""
    seen: dict = {"snapshots": [], "anchors": []}
    sim = None
    snapshot_state, clock_init = SplitSourceReader.snapshot_state, EmissionClock.__init__

    def recording_snapshot(reader):
        seen["snapshots"].append((sim.sim.now_us, reader.records_read))
        return snapshot_state(reader)

    def recording_clock(clock, rate, now_us, *rest):
        seen["anchors"].append(now_us)
        clock_init(clock, rate, now_us, *rest)

    job = JobConfig(
        quickstart_graph(1, 1),
        checkpointing=CheckpointingConfig(mode="aligned", interval_ms=137),
        workload=WorkloadConfig(rate_per_source=RATE, source_emission=SourceEmission.EXACT, pacing=pacing),
        storage=NO_COST,  # snapshots take no time: the source's clock never restarts
    )
    with monkeypatch.context() as patch:
        patch.setattr(SplitSourceReader, "snapshot_state", recording_snapshot)
        patch.setattr(EmissionClock, "__init__", recording_clock)
        sim = JobSimulation(job, {"source": local_splits(RECORDS, 10, 1.0, 100, 1, seed=1)}, seed=5)
        result = sim.run()
    assert sim.verify(result)[0].lost == 0
    delays = [r["start_delay"] for r in result.subtasks if r["task"] == "source#0" and not r["finished"]]
    assert len(seen["anchors"]) == 1  # no restart: one clock
    return seen["anchors"][0], seen["snapshots"], delays


def test_a_trigger_waits_for_the_sleeping_source_s_next_record(monkeypatch):
    anchor, sleeping, sleeping_delays = snapshots(SourcePacing.SLEEP, monkeypatch)
    _, at_once, at_once_delays = snapshots(SourcePacing.RATE_LIMITER, monkeypatch)
    sleeping, at_once = ([(at, read) for at, read in snapshots if read < RECORDS] for snapshots in (sleeping, at_once))
    assert min(len(sleeping), len(at_once)) >= 10
    for at, read in sleeping:
        assert (at - anchor) % GAP_US == 0  # the snapshot runs when a record is due ...
        assert read == (at - anchor) // GAP_US  # ... after that record went out
    assert any((at - anchor) % GAP_US for at, _ in at_once)  # at once: between two records' due times
    for (at, read), (at_once_at, at_once_read) in zip(sleeping, at_once):
        assert at_once_at <= at < at_once_at + GAP_US  # the same trigger, later by less than the gap
        assert read == at_once_read + 1  # the record the sleep was for goes out before the barrier
    # the source's start delay (Flink measures it when the trigger's mail runs) grows by the wait
    assert sum(sleeping_delays) > sum(at_once_delays)
    assert all(s - a <= GAP_US // 1000 for s, a in zip(sleeping_delays, at_once_delays))


@given(st.integers(1, 2_000_000), st.integers(0, 10**9), st.integers(0, 10**7), st.floats(0.0, 1.0))
def test_the_sleep_ends_when_the_next_record_is_due(rate, anchor, later, written_share):
    clock = EmissionClock(rate, anchor)
    now = anchor + later
    clock.wrote(int(written_share * (later * rate // 1_000_000)))  # a source writes a record once it is due
    ends = clock.sleep_ends_us(now)
    assert ends > now
    assert clock.due(ends) > clock.due(now)  # the next record is due then (more than one above 1e6 records/s) ...
    assert clock.due(ends - 1) == clock.due(now)  # ... and not a microsecond earlier


def test_sleeping_pacing_needs_exact_emission():
    with pytest.raises(JobConfigError, match=r"workload\.pacing: .*source_emission"):
        JobConfig(quickstart_graph(1, 1), workload=WorkloadConfig(rate_per_source=RATE, pacing="sleep"))
