"""Buffer debloating (FLIP-183), ported from Flink's ThroughputCalculatorTest, BufferSizeEMATest and
BufferDebloaterTest, then the whole path: a gate measures its throughput and announces a buffer size, the
sender's result partition cuts new buffers at it, and on the simulator an aligned checkpoint under heavy
backpressure waits for far less in-flight data."""

from pathlib import Path

import pytest

from barriersim.runtime.events import Buffer, InputChannelInfo, ResultSubpartitionInfo
from barriersim.runtime.network.input.buffer_debloater import (
    BufferDebloatConfiguration,
    BufferDebloater,
    BufferSizeEMA,
    ThroughputCalculator,
)
from barriersim.runtime.network.input.input_channel import AnnounceBufferSize
from barriersim.runtime.network.input.single_input_gate import SingleInputGate
from barriersim.runtime.network.output.result_partition import ResultPartition
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.scenarios.loader import effective_scenario, load_scenario, with_setting
from barriersim.scenarios.simulation_inputs import job_config, workload_splits

CTB = Path(__file__).resolve().parents[3] / "scenarios" / "checkpointing_time_benchmark.toml"


class ManualClock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def test_throughput_leaves_idle_time_out():
    clock = ManualClock()
    calc = ThroughputCalculator(clock)
    calc.incoming_data_size(7)
    clock.now += 1
    calc.pause_measurement()
    clock.now += 9  # idle: not measured
    calc.incoming_data_size(3)  # resumes the measurement
    clock.now += 1
    assert calc.calculate_throughput() == 5_000  # 10 bytes in 2 ms


def test_throughput_without_measured_time_keeps_the_previous_value():
    clock = ManualClock()
    calc = ThroughputCalculator(clock)
    calc.incoming_data_size(10)
    clock.now += 2
    assert calc.calculate_throughput() == 5_000
    calc.pause_measurement()
    assert calc.calculate_throughput() == 5_000


def test_ema_shrinks_by_alpha_and_grows_at_most_to_twice_the_current_size():
    ema = BufferSizeEMA(max_buffer_size=32_768, min_buffer_size=256, samples=19)  # alpha = 0.1
    assert [ema.calculate_buffer_size(0, 1) for _ in range(3)] == [29_491, 26_542, 23_888]
    ema = BufferSizeEMA(max_buffer_size=32_768, min_buffer_size=256, samples=19)
    for _ in range(200):
        ema.calculate_buffer_size(0, 1)
    assert ema.calculate_buffer_size(0, 1) == 256  # clamped at the minimum
    assert ema.calculate_buffer_size(10**9, 1) == round(256 + 0.1 * 256)  # capped at 2 x the current size


def test_debloater_announces_only_changes_beyond_the_threshold():
    config = BufferDebloatConfiguration(
        enabled=True, target_ms=1000, samples=1, threshold_percentages=50, min_buffer_size=50, starting_buffer_size=1000
    )
    debloater = BufferDebloater(config, max_buffer_size=1000)  # samples 1: alpha 1, no smoothing
    assert debloater.recalculate_buffer_size(throughput=500, buffers_in_use=1) == 500
    assert debloater.recalculate_buffer_size(throughput=400, buffers_in_use=1) is None  # 20 % < 50 %
    assert debloater.recalculate_buffer_size(throughput=200, buffers_in_use=1) == 200
    assert debloater.recalculate_buffer_size(throughput=10, buffers_in_use=1) == 50  # the minimum: always
    assert debloater.recalculate_buffer_size(throughput=100, buffers_in_use=0) == 100  # at least one buffer


@pytest.mark.parametrize(
    "bad",
    [
        {"target_ms": 0},
        {"period_ms": -1},
        {"threshold_percentages": 101},
        {"min_buffer_size": 64 * 1024},
        {"starting_buffer_size": 64 * 1024},
        {"starting_buffer_size": 128},
    ],
)
def test_bad_debloat_settings_are_refused(bad):
    with pytest.raises(ValueError, match="buffer debloating"):
        BufferDebloatConfiguration(enabled=True, **bad).validate(32 * 1024)


def test_gate_measures_what_it_hands_out_and_announces_to_every_unfinished_channel():
    clock = ManualClock()
    out = []
    gate = SingleInputGate(0, ["local", "local"], out.append)
    # starting at the segment size, so that the first measured size is far enough from it to be announced
    gate.enable_debloating(
        BufferDebloatConfiguration(enabled=True, target_ms=1000, samples=1, starting_buffer_size=32 * 1024),
        32 * 1024,
        clock,
    )
    gate.setup()
    gate.on_element(0, Buffer(("a",), 10), 0)
    gate.on_element(1, Buffer(("b",), 10), 0)
    assert gate.poll_next() is not None
    clock.now += 10
    assert gate.poll_next() is not None
    clock.now += 10
    assert gate.poll_next() is None  # idle from here: not measured
    clock.now += 1000
    assert gate.trigger_debloating() == 1000  # 20 bytes in 20 ms: 1000 B/s for 1 s, over one buffer in use
    assert [a for a in out if isinstance(a, AnnounceBufferSize)] == [
        AnnounceBufferSize(InputChannelInfo(0, 0), 1000),
        AnnounceBufferSize(InputChannelInfo(0, 1), 1000),
    ]
    assert gate.trigger_debloating() is None  # nothing measured since: the same size, not announced again


def test_partition_cuts_buffers_opened_after_the_announcement_at_the_new_size():
    partition = ResultPartition(0, 1, memory_segment_size=1024)
    info = ResultSubpartitionInfo(0, 0)
    partition.emit_batch(list(range(10)), 0, 64)  # 640 bytes into a 1024-byte buffer that is still open
    partition.set_buffer_size(info, 256)
    partition.emit_batch(list(range(10, 30)), 0, 64)  # the open buffer keeps its 1024 bytes, then 256-byte ones
    partition.add_credit(info, 100)
    sizes = []
    while (item := partition.poll_next(info)) is not None:
        sizes.append(item.element.size)
    assert sizes[:1] == [1024] and set(sizes[1:]) == {256}
    assert partition.buffer_size(info) == 256
    with pytest.raises(ValueError, match="buffer size"):
        partition.set_buffer_size(info, 2048)


def checkpointing_time_benchmark(debloat: bool):
    scenario = with_setting(load_scenario(CTB), "workload.records", 300_000)  # about 15 s of the job
    scenario = with_setting(scenario, "network.buffer_debloat", debloat)
    scenario = effective_scenario(scenario, mode="aligned", seed=7)
    result = JobSimulation(job_config(scenario), workload_splits(scenario), seed=7).run()
    # the checkpoints every source acknowledged: the later ones run on queues drained after the sources ended
    sources = {}
    for row in result.subtasks:
        if row["task"].startswith("source#"):
            sources[row["id"]] = sources.get(row["id"], 0) + 1
    durations = sorted(
        c["end_to_end_duration"] for c in result.checkpoints if c["status"] == "COMPLETED" and sources.get(c["id"]) == 4
    )
    return result, durations


def test_debloating_shortens_aligned_checkpoints_under_backpressure_and_keeps_exactly_once():
    full, full_durations = checkpointing_time_benchmark(False)
    debloated, debloated_durations = checkpointing_time_benchmark(True)
    # the scenario's target is 300 ms per exchange (Flink's benchmark); without debloating every exchange keeps
    # its full 8 KiB buffers in flight
    assert debloated_durations[len(debloated_durations) // 2] * 3 < full_durations[len(full_durations) // 2]
    assert len(debloated_durations) > len(full_durations)
    assert sorted(debloated.committed_output) == sorted(full.committed_output)


def test_with_debloating_senders_and_debloaters_start_at_the_starting_segment_size():
    """Flink 2.3's ``taskmanager.memory.starting-segment-size`` (1 KiB): with debloating on, a subpartition's first
    buffers and a gate's debloater start at it (``PipelinedSubpartition``'s and ``BufferDebloater``'s
    ``startingBufferSize``), not at the segment size; without debloating buffers are segments."""
    on = BufferDebloatConfiguration(enabled=True, samples=1)
    assert on.starting_size(32 * 1024) == 1024 and BufferDebloatConfiguration().starting_size(32 * 1024) == 32 * 1024
    debloater = BufferDebloater(on.validate(32 * 1024), max_buffer_size=32 * 1024)
    assert debloater.last_buffer_size == 1024
    # samples 1 (alpha 1): the first size is the instant one, capped at twice the starting size
    assert debloater.recalculate_buffer_size(throughput=10**9, buffers_in_use=1) == 2048
    partition = ResultPartition(0, 1, memory_segment_size=32 * 1024, starting_buffer_size=on.starting_size(32 * 1024))
    info = ResultSubpartitionInfo(0, 0)
    assert partition.buffer_size(info) == 1024
    partition.emit_batch(list(range(20)), 0, 64)  # 1,280 bytes: the first 1 KiB buffer finishes
    partition.flush_all()
    partition.add_credit(info, 100)
    sizes = []
    while (item := partition.poll_next(info)) is not None:
        sizes.append(item.element.size)
    assert sizes == [1024, 256]
