"""The buffer-debloating scenario (``scenarios/debloat_chain.toml``, Flink 1.14's job): five exchanges under
backpressure; with debloating on (target 1 s) its aligned checkpoints take a fraction of what they take with full
buffers, and the benchmark's table and verdicts are computed from the runs (virtual time only, no wall clock)."""

from barriersim.runtime.jobgraph import Partitioner
from barriersim.scenarios.loader import load_scenario
from benchmarks.debloat import FLINK_MS, SCENARIO, Run, measure, table, verdicts

RECORDS = 30_000  # about 96 s of the job: two checkpoints without debloating, the first left out


def test_the_scenario_is_a_chain_through_five_exchanges_with_flinks_network_defaults():
    s = load_scenario(SCENARIO)
    g = s.job.graph
    assert len(g.edges) == 5 and all(e.partitioner is Partitioner.REBALANCE for e in g.edges)
    assert [v.name for v in g.vertices][0] == "source" and g.sinks[0].params["cost_us_per_record"] > 0
    assert (
        s.network.buffer_size,
        s.network.exclusive_buffers_per_channel,
        s.network.floating_buffers_per_gate,
        s.network.max_buffers_per_channel,
    ) == (32 * 1024, 2, 8, 10)
    # Flink's debloat options as they are by default: only the target varies
    assert (
        s.network.buffer_debloat,
        s.network.buffer_debloat_period_ms,
        s.network.buffer_debloat_samples,
        s.network.buffer_debloat_threshold_percentages,
        s.network.min_buffer_size,
    ) == (True, 200, 20, 25, 256)
    assert s.checkpointing.mode.value == "aligned"


def test_debloating_shortens_the_aligned_checkpoint_against_full_buffers():
    off = measure(None, RECORDS, interval_ms=None)  # the scenario's own interval: checkpoints back to back
    one_second = measure(1_000, RECORDS, interval_ms=None)
    assert off.checkpoints >= 1 and one_second.checkpoints >= 3
    # full buffers: every exchange holds many seconds of the job's data and the barrier waits behind all of it
    assert off.e2e_ms > 5 * 10_000
    # a target of 1 s: each exchange holds about a second of it, five exchanges a few seconds
    assert 1_000 < one_second.e2e_ms < 10_000
    assert off.e2e_ms >= 5 * max(one_second.all_e2e_ms)


def test_the_verdicts_follow_the_criteria():
    def run(target, e2e):
        return Run(target, e2e, 3, [e2e] * 3, 1.0, 0.0)

    like_flink = [run(t, FLINK_MS[t]) for t in FLINK_MS]
    assert all(v.passed for v in verdicts(like_flink))
    off_too_short = [run(None, 30_000)] + [run(t, FLINK_MS[t]) for t in FLINK_MS if t]
    assert [v.passed for v in verdicts(off_too_short)] == [True, True, True, True, False]
    ten_seconds_too_short = [run(t, FLINK_MS[t] if t != 10_000 else 20_000) for t in FLINK_MS]
    assert [v.passed for v in verdicts(ten_seconds_too_short)] == [True, True, True, False, True]
    assert "off" in table(like_flink) and "34,646" in table(like_flink)
