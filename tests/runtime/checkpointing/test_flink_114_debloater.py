"""Flink 1.14.0's buffer debloater (``DebloaterVersion.FLINK_1_14``), the one behind Flink 1.14's published
debloating figure: its throughput average ported from Flink 1.14's ThroughputEMATest and ThroughputCalculatorTest,
its size rule from its ``BufferDebloater.recalculateBufferSize``; a scenario picks it with
``network.buffer_debloater = "1.14"``."""

import pytest

from barriersim.runtime.network.config import NetworkConfig
from barriersim.runtime.network.input import buffer_debloater as debloat
from barriersim.runtime.network.input.single_input_gate import SingleInputGate
from barriersim.scenarios.loader import load_scenario, with_setting
from tests.runtime.checkpointing.test_buffer_debloating import CTB, ManualClock

FLINK_1_14 = debloat.BufferDebloatConfiguration(enabled=True, version=debloat.DebloaterVersion.FLINK_1_14)


def _throughputs(samples: int, periods: list[tuple[int, int]]) -> list[int]:
    """The averaged throughput after each ``(bytes, ms)`` period."""
    clock = ManualClock()
    calc = debloat.ThroughputCalculator(clock, ema_samples=samples)
    out = []
    for size, ms in periods:
        calc.incoming_data_size(size)
        clock.now += ms
        out.append(calc.calculate_throughput())
    return out


def test_average_starts_from_the_first_value_and_truncates_as_java_does():
    # ThroughputEMATest.testWarmUpThroughputCalculation / testCalculationThroughput (samples 5 and 3)
    assert _throughputs(5, [(100, 33), (200, 33), (100, 9)]) == [3030, 4040, 6397]
    assert _throughputs(3, [(100, 33), (200, 33), (100, 10), (100, 10), (100, 10)]) == [3030, 4545, 7272, 8636, 9318]


def test_average_falls_by_alpha_when_nothing_arrives():
    # ThroughputCalculatorTest.testResetValueAfterCalculation (samples 10): 6660, then 1 ms without data
    clock = ManualClock()
    calc = debloat.ThroughputCalculator(clock, ema_samples=10)
    calc.incoming_data_size(666)
    clock.now += 100
    assert calc.calculate_throughput() == 6660
    assert calc.calculate_throughput() == 6660  # no time measured: the previous value
    clock.now += 1
    assert calc.calculate_throughput() == 5449
    assert debloat.ThroughputCalculator(ManualClock()).calculate_throughput() == 0  # without samples: Flink 1.15+'s


def test_size_is_the_targets_bytes_shared_by_the_buffers_in_use_and_clamped():
    debloater = debloat.Flink114BufferDebloater(FLINK_1_14, max_buffer_size=32_768)
    assert debloater.recalculate_buffer_size(20_000, 4) == 5_000  # 20,000 B/s x 1 s over 4 buffers
    assert debloater.recalculate_buffer_size(22_000, 4) is None  # 5,500: within 25 % of 5,000
    assert debloater.recalculate_buffer_size(1_000_000, 0) == 32_768  # at least one buffer; at most the segment
    assert debloater.recalculate_buffer_size(0, 10) == 256  # at least the minimum
    assert debloater.last_buffer_size == 256


def test_version_picks_the_debloater_the_starting_size_and_the_average():
    assert isinstance(debloat.buffer_debloater(FLINK_1_14, 32_768), debloat.Flink114BufferDebloater)
    assert isinstance(
        debloat.buffer_debloater(debloat.BufferDebloatConfiguration(enabled=True), 32_768), debloat.BufferDebloater
    )
    assert FLINK_1_14.starting_size(32_768) == 32_768  # Flink 1.14 started at the segment size
    assert debloat.BufferDebloatConfiguration(enabled=True).starting_size(32_768) == 1_024
    gate = SingleInputGate(0, ["remote"], lambda action: None)
    gate.enable_debloating(FLINK_1_14, 32_768, ManualClock())
    assert isinstance(gate.debloater, debloat.Flink114BufferDebloater)
    assert gate.throughput is not None and gate.throughput._alpha == pytest.approx(2 / 21)
    assert NetworkConfig(buffer_debloater=debloat.DebloaterVersion.FLINK_1_14).debloat_configuration().version is (
        debloat.DebloaterVersion.FLINK_1_14
    )


def test_scenario_setting_takes_the_flink_version():
    scenario = with_setting(load_scenario(CTB), "network.buffer_debloater", "1.14")
    assert scenario.network.buffer_debloater is debloat.DebloaterVersion.FLINK_1_14
