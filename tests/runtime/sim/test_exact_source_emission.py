"""The simulator's exact paced source (``[workload] source_emission = "exact"``, ``runtime.sim.source_emission``):
every record is written when it is due, as Flink's source emits one record per mailbox turn. A checkpoint's barrier
follows exactly the records due when the trigger reached the source (with ``steps`` it follows the whole 10 ms step
the trigger fell in), a buffer goes out when the record that finishes it is due (with ``steps``, when the step that
writes it starts), and generated jobs with random faults keep every guarantee with it, also when the sources
sleep between records (``pacing = "sleep"``, tests/runtime/sim/test_sleeping_source_pacing.py)."""

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from barriersim.runtime.coordinator.configuration import NO_PERIODIC_CHECKPOINTS, CheckpointingConfig
from barriersim.runtime.events import Buffer
from barriersim.runtime.faults.fault_schedule import SlowTask
from barriersim.runtime.job.config import JobConfig, SourceEmission, WorkloadConfig
from barriersim.runtime.job.slowdowns import Slowdowns
from barriersim.runtime.network.config import NetworkConfig
from barriersim.runtime.operators.source import SplitSourceReader
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.runtime.sim.source_emission import EmissionClock
from barriersim.runtime.task.stream_task import StreamTask
from barriersim.scenarios.loader import quickstart_graph
from barriersim.scenarios.workload import local_splits
from barriersim.strategies import simulated_cases
from tests.properties.test_whole_job_properties import check_with_replay, property_settings

RATE = 10_000  # records/s: 100 records per 10 ms step, one every 100 us


def run(
    monkeypatch, emission: SourceEmission, interval_ms: int = 1_000, network: NetworkConfig = NetworkConfig()
) -> dict:
    """A one-source job (source -> keyed sum -> sink, parallelism 1, one TaskManager: local channels) at ``RATE``;
    what the source had read at each of its snapshots, when its clock started, and when the keyed sum received
    each data buffer (virtual us)."""
    seen = {"snapshots": [], "anchors": [], "buffers": []}
    sim = None
    snapshot_state, on_element, clock_init = (
        SplitSourceReader.snapshot_state,
        StreamTask.on_element,
        EmissionClock.__init__,
    )

    def recording_snapshot(reader):
        seen["snapshots"].append((sim.sim.now_us, reader.records_read))
        return snapshot_state(reader)

    def recording_on_element(task, channel, element, *args):
        if task.name.startswith("keyed-sum") and type(element) is Buffer:
            seen["buffers"].append((sim.sim.now_us, len(element.records)))
        return on_element(task, channel, element, *args)

    def recording_clock(clock, rate, now_us, *rest):
        seen["anchors"].append(now_us)
        clock_init(clock, rate, now_us, *rest)

    monkeypatch.setattr(SplitSourceReader, "snapshot_state", recording_snapshot)
    monkeypatch.setattr(StreamTask, "on_element", recording_on_element)
    monkeypatch.setattr(EmissionClock, "__init__", recording_clock)
    splits = {"source": local_splits(6_000, 10, 1.0, 100, 1, seed=1)}
    job = JobConfig(
        quickstart_graph(1, 1),
        checkpointing=CheckpointingConfig(mode="aligned", interval_ms=interval_ms),
        workload=WorkloadConfig(rate_per_source=RATE, source_emission=emission),
        network=network,
    )
    sim = JobSimulation(job, splits, seed=5)
    result = sim.run()
    assert sim.verify(result)[0].lost == 0
    return seen


def test_the_barrier_follows_exactly_the_records_due_when_the_trigger_reached_the_source(monkeypatch):
    exact = run(monkeypatch, SourceEmission.EXACT, interval_ms=137)
    anchor = exact["anchors"][0]
    (first_at, first_read), *_ = exact["snapshots"]
    assert first_at > anchor
    assert first_read == (first_at - anchor) * RATE // 1_000_000  # one record every 100 us since the start
    assert first_read % 100 != 0  # the trigger fell inside a 10 ms step
    steps = run(monkeypatch, SourceEmission.STEPS, interval_ms=137)
    (steps_at, steps_read), *_ = steps["snapshots"]
    assert steps_at == first_at  # the same trigger, at the same time
    assert steps_read % 100 == 0 and steps_read > first_read  # the whole step the trigger fell in


def test_a_buffer_goes_out_when_the_record_that_finishes_it_is_due(monkeypatch):
    # 32 KiB buffers of 32-byte records: 1,024 records, due 102.4 ms after the start; no flush before (1 s timeout)
    # and no barrier (checkpoint 1 would be triggered as the job starts, and its barrier finish the open buffer)
    exact = run(
        monkeypatch,
        SourceEmission.EXACT,
        network=NetworkConfig(buffer_timeout_ms=1_000),
        interval_ms=NO_PERIODIC_CHECKPOINTS,
    )
    anchor = exact["anchors"][0]
    first_at, records = exact["buffers"][0]
    assert records == 1_024
    assert first_at == anchor + 102_400  # a local channel: handed over when it is finished
    steps = run(
        monkeypatch,
        SourceEmission.STEPS,
        network=NetworkConfig(buffer_timeout_ms=1_000),
        interval_ms=NO_PERIODIC_CHECKPOINTS,
    )
    assert steps["buffers"][0] == (anchor + 100_000, 1_024)  # written with the step that starts at 100 ms


def exact_cases(pacing: str):
    def with_exact_emission(case):
        workload = {**case.document["workload"], "source_emission": "exact", "pacing": pacing}
        return dataclasses.replace(case, document={**case.document, "workload": workload})

    return simulated_cases().map(with_exact_emission)


@pytest.mark.parametrize("pacing", ["rate_limiter", "sleep"])  # a sleeping source's mails wait for its next record
def test_generated_jobs_with_exact_sources_keep_every_guarantee_under_random_faults(pacing):
    @property_settings(40)
    @given(exact_cases(pacing))
    def check(case):
        check_with_replay(case)

    check()


@given(
    st.integers(1, 2_000_000),
    st.sampled_from([1.0, 0.5, 1.5, 2.0, 3.0, 20.0, 1.1]),
    st.integers(0, 10**9),
    st.integers(0, 100_000),
    st.integers(1, 100_000),
)
def test_the_emission_clock_says_when_each_record_is_due_and_how_many_are(rate, factor, anchor, written, ahead):
    clock = EmissionClock(rate, 0, Slowdowns([SlowTask("source#0", factor)]))  # slowed from 0 on
    clock.restart(anchor)
    clock.wrote(written)
    at = clock.due_time_us(ahead)
    assert clock.due(at) >= ahead > clock.due(at - 1)  # the ahead-th record after those written is due at `at`
    # at the rate over the factor: as many records in a second of its time as the rate allows, less those written
    assert clock.due(anchor + 1_000_000) == max(0, int(rate / factor) - written) or factor not in (1.0, 0.5, 2.0)
    assert clock.due(anchor) == 0  # nothing is due at the anchor itself: the first record one interval later


@given(
    st.integers(1, 200_000),
    st.integers(0, 10_000),
    st.integers(0, 1_000),
    st.integers(1, 1_000),
    st.lists(
        st.tuples(st.integers(0, 20), st.integers(0, 20), st.sampled_from([0.5, 2.0, 50.0, 125_000.0])), max_size=3
    ),
)
def test_the_emission_clock_charges_only_the_time_inside_a_slowdowns_window(rate, anchor_us, written, ahead, windows):
    """Records are due when their work at full speed is done, slowed only inside a window (``runtime.job.slowdowns``):
    ``due_time_us`` is the first microsecond at which ``due`` counts the record."""
    slowdowns = Slowdowns([SlowTask("source#0", factor, start, start + length) for start, length, factor in windows])
    clock = EmissionClock(rate, anchor_us, slowdowns)
    clock.wrote(written)
    at = clock.due_time_us(ahead)
    assert clock.due(at) >= ahead > clock.due(at - 1)
    unslowed = anchor_us - (-((written + ahead) * 1_000_000) // rate)
    if all(factor > 1 for *_, factor in windows):  # slowdowns only: later, by at most their windows' time
        assert unslowed <= at <= unslowed + sum(1000 * length for _, length, _ in windows) + 1
