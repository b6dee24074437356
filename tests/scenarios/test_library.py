"""The scenario library (``scenarios/*.toml``): every file loads, is named after its file, runs on the simulator in
every mode with a small workload and verifies, and is sized for a short run as written; sweeps expand; the
alignment-latency benchmark measures what its table reports."""

from pathlib import Path

import pytest

from barriersim.runtime.job.config import JobOutcome
from barriersim.runtime.jobgraph import OperatorKind, Partitioner
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.runtime.verification.reference import Verdict, expected_sink_input, verify
from barriersim.scenarios.loader import Scenario, expand_sweep, load_scenario, with_setting
from barriersim.scenarios.simulation_inputs import job_config, workload_splits
from tests.modes import ALL_MODES, in_test_mode

SCENARIOS = Path(__file__).parents[2] / "scenarios"
LIBRARY = sorted(SCENARIOS.glob("*.toml"))
NAMES = [p.stem for p in LIBRARY]
SMALL_RECORDS = 3000


def simulate(scenario: Scenario, mode: str):
    scenario = in_test_mode(scenario, mode)
    config = job_config(scenario)
    splits = workload_splits(scenario)
    result = JobSimulation(config, splits, scenario.seed).run()
    at_least_once = not config.checkpointing.mode.exactly_once  # duplicates and inflated sums allowed
    return result, verify(expected_sink_input(config.graph, splits), result.committed_output, at_least_once)


def small(scenario: Scenario) -> Scenario:
    return with_setting(scenario, "workload.records", min(scenario.workload.records, SMALL_RECORDS))


def test_the_library_holds_the_scenarios_of_the_issue():
    assert {
        "quickstart",
        "skew",
        "backpressure_slow_sink",
        "alignment_latency",
        "checkpointing_time_benchmark",
        "two_input",
        "window_join",
        "failure_storm",
    } <= set(NAMES)


@pytest.mark.parametrize("path", LIBRARY, ids=NAMES)
def test_each_file_loads_and_is_named_after_its_file(path):
    s = load_scenario(path)
    assert s.name == path.stem.replace("_", "-")
    assert s.description and s.job.graph.validate() is not None
    assert s.workload.records <= 100_000  # sized for a Ray run well under a minute


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("path", LIBRARY, ids=NAMES)
def test_each_file_runs_in_every_mode_and_verifies(path, mode):
    result, verdict = simulate(small(load_scenario(path)), mode)
    assert result.outcome is JobOutcome.FINISHED
    assert result.counts["completed"] >= 1
    expected = Verdict.AT_LEAST_ONCE if mode == "at-least-once" else Verdict.EXACTLY_ONCE
    assert verdict.verdict in (expected, Verdict.EXACTLY_ONCE), verdict
    assert verdict.lost == verdict.wrong == 0


# the file whose point is an aligned checkpoint under full backpressure: it waits for every queue in front of the
# slow sink to drain, which takes most of its few seconds, and the final checkpoint comes when the job ends
LONG_ALIGNED_CHECKPOINTS = {"backpressure_slow_sink"}
# the CheckpointingTimeBenchmark's aligned checkpoints under backpressure with buffer debloating (target 300 ms, two
# exchanges): from the first one on (the senders' buffers start at Flink's 1 KiB starting segment size) each takes
# about 1-2 x 300 ms up to 1 s (the first, while the pools of the rebalance partitions hold 16 buffers of 4
# subpartitions, the least), where full 8 KiB buffers would hold one checkpoint for most of the run
DEBLOATED_ALIGNED_CHECKPOINTS = {"checkpointing_time_benchmark"}


@pytest.mark.parametrize("path", LIBRARY, ids=NAMES)
def test_each_file_as_written_is_a_short_run(path):
    """The file's own size and mode: finishes, verifies, checkpoints several times (for the file about long aligned
    checkpoints: its first checkpoint, triggered as the job starts, spans most of the run), and lasts under 20
    virtual seconds (so a Ray run that paces its sources and costs in real time stays well under a minute)."""
    s = load_scenario(path)
    result, verdict = simulate(s, s.checkpointing.mode)
    assert result.outcome is JobOutcome.FINISHED and verdict.verdict is Verdict.EXACTLY_ONCE
    if path.stem in LONG_ALIGNED_CHECKPOINTS:
        first = min((c for c in result.checkpoints if c["status"] == "COMPLETED"), key=lambda c: c["id"])
        assert first["trigger_timestamp"] == 0 and first["end_to_end_duration"] > result.virtual_ms / 2
    elif path.stem in DEBLOATED_ALIGNED_CHECKPOINTS:
        completed = [c for c in result.checkpoints if c["status"] == "COMPLETED"]
        assert len(completed) >= 3
        assert all(300 <= c["end_to_end_duration"] <= 1_200 for c in completed[:-1])  # the last: the sources ended
    else:
        assert result.counts["completed"] >= 3
    assert result.virtual_ms < 20_000


def test_the_skew_sweep_expands_over_the_zipf_exponent():
    runs = expand_sweep(load_scenario(SCENARIOS / "skew.toml"))
    assert [settings["workload.zipf_exponent"] for settings, _ in runs] == [0.0, 0.5, 1.0, 1.5]
    assert [s.workload.zipf_exponent for _, s in runs] == [0.0, 0.5, 1.0, 1.5]


def test_skew_makes_the_hottest_subtask_slower():
    """With unthrottled sources the job lasts as long as its busiest keyed subtask works: at exponent 1.5 the
    subtask that owns the hottest keys gets about 60 % of the records instead of about 27 %."""
    base = with_setting(load_scenario(SCENARIOS / "skew.toml"), "workload.rate_per_source", 0)
    base = with_setting(base, "workload.records", 20_000)
    uniform, _ = simulate(with_setting(base, "workload.zipf_exponent", 0.0), "aligned")
    skewed, _ = simulate(with_setting(base, "workload.zipf_exponent", 1.5), "aligned")
    assert skewed.virtual_ms > 1.5 * uniform.virtual_ms


def test_the_alignment_latency_scenario_is_flinks_job():
    s = load_scenario(SCENARIOS / "alignment_latency.toml")
    g = s.job.graph
    assert [(v.operator, v.parallelism) for v in g.vertices] == [
        (OperatorKind.SOURCE, 2),
        (OperatorKind.KEYED_SUM, 4),
        (OperatorKind.AT_LEAST_ONCE_SINK, 2),
    ]
    assert [e.partitioner for e in g.edges] == [Partitioner.HASH, Partitioner.REBALANCE]
    assert (s.network.buffer_size, s.network.exclusive_buffers_per_channel, s.network.floating_buffers_per_gate) == (
        32 * 1024,
        2,
        8,
    )
    assert s.checkpointing.interval_ms == 1000 and s.workload.rate_per_source == 2000  # heavy backpressure
    assert (s.workload.keys, s.workload.hot_key_share, s.network.record_size, s.cluster.taskmanagers) == (
        64,
        0.3,
        110,
        1,
    )
    assert g.vertex("keyed").params["hot_key"] == 0 and g.vertex("keyed").params["hot_key_extra_us"] == 1000.0
    # the keyed function's small output records (derived from Flink's heavy aligned processed_data); the sources' 110 B
    assert g.vertex("keyed").params["record_size"] == 28 and "record_size" not in g.vertex("source").params


def test_the_hot_key_carries_its_share_and_the_rest_is_uniform():
    from barriersim.scenarios.workload import zipf_cdf

    cdf = zipf_cdf(64, 0.0, 0.3)
    assert cdf[0] == pytest.approx(0.3)
    assert cdf[1] - cdf[0] == pytest.approx(0.7 / 63) and cdf[-1] == pytest.approx(1.0)


def test_the_checkpointing_time_benchmark_scenario_is_flinks_topology():
    s = load_scenario(SCENARIOS / "checkpointing_time_benchmark.toml")
    g = s.job.graph
    assert [v.parallelism for v in g.vertices] == [4, 4, 4]
    # as the benchmark runs it: a slot sharing group per vertex, one slot per TaskManager, so every channel is remote
    from barriersim.runtime.job.placement import ChannelKind, ClusterConfig, place, slots_needed

    placement = place(g, ClusterConfig(s.cluster.taskmanagers, s.cluster.slots_per_taskmanager))
    assert slots_needed(g) == 12
    kinds = {placement.channel_kind((e.source, i), (e.target, j)) for e in g.edges for i in range(4) for j in range(4)}
    assert kinds == {ChannelKind.REMOTE}
    assert [e.partitioner for e in g.edges] == [Partitioner.REBALANCE, Partitioner.REBALANCE]
    # the benchmark's constants: a sink busy-waiting 200 us per record, 8 KiB segments, 29-byte records, debloating
    # to 300 ms over 5 samples taken every 200 ms
    assert g.vertex("sink").params["cost_us_per_record"] == 200.0 and s.network.buffer_size == 8192
    assert s.network.record_size == 29
    assert (
        s.network.buffer_debloat,
        s.network.buffer_debloat_target_ms,
        s.network.buffer_debloat_period_ms,
        s.network.buffer_debloat_samples,
    ) == (True, 300, 200, 5)


def test_the_failure_storm_restarts_and_restores():
    s = load_scenario(SCENARIOS / "failure_storm.toml")
    result, verdict = simulate(s, "aligned")
    assert result.restarts >= 3 and len(result.restored_checkpoint_ids) >= 3
    assert verdict.verdict is Verdict.EXACTLY_ONCE


@pytest.mark.parametrize("mode", ["aligned", "unaligned", "at-least-once", "aligned-with-timeout"])
def test_every_fault_of_the_failure_storm_fires(mode):
    """The library's failure storm meets every one of its faults on the simulator, in every mode: none falls
    into a restart (where a crash or a slowdown does nothing) or after the job."""
    s = load_scenario(SCENARIOS / "failure_storm.toml")
    result, _ = simulate(s, mode)
    assert len(result.fault_log) == len(s.faults) == 11
    assert [e for e in result.fault_log if not e["fired"]] == []


def test_the_benchmark_measures_the_bottleneck_under_heavy_backpressure():
    """One row of the alignment-latency benchmark on a small workload: the hot key's subtask is the one whose
    barrier waits (start delay), an unaligned checkpoint persists in-flight data while an aligned one does not,
    and a subtask reports unaligned_checkpoint when it persisted in-flight data (Flink 1.16+): the bottleneck, with
    the data queued in front of it, in most unaligned checkpoints; none in aligned ones."""
    from benchmarks.alignment_latency import bottleneck_subtask, measure

    base = load_scenario(SCENARIOS / "alignment_latency.toml")
    small_heavy = {"workload.records": 20_000}
    aligned = measure(base, "aligned", "heavy", **small_heavy)
    unaligned = measure(base, "unaligned", "heavy", **small_heavy)
    assert bottleneck_subtask(base) == "keyed#2"  # key 0's key group (Flink's KeyGroupRangeAssignment)
    assert aligned.checkpoints >= 1 and unaligned.checkpoints >= 1
    assert aligned.verdict == unaligned.verdict == "exactly-once"
    assert aligned.start_delay_ms > 10 * unaligned.start_delay_ms
    assert aligned.median_persisted_bytes == 0 < unaligned.median_persisted_bytes
    assert unaligned.unaligned_subtasks and not aligned.unaligned_subtasks
    assert aligned.keyed_unaligned == "0,0,0,0" and unaligned.keyed_unaligned.split(",")[2] == "1"
    # the job's steady rate is the bottleneck's: key 0's 1 ms plus the function's cost caps it near 2,650 records/s
    assert 2_000 < aligned.throughput < 3_000 and 2_000 < unaligned.throughput < 3_000
