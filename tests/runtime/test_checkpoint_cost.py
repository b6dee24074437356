"""The checkpoint cost model: what each piece of checkpoint work costs, what each driver charges of it."""

from __future__ import annotations

import math
import random

import pytest

from barriersim.runtime.checkpoint_cost import FREE, MIB, NO_COST, Charging, CheckpointCostModel, CostCharger

FLAT = CheckpointCostModel(
    snapshot_fixed_ms=2.0,
    snapshot_mib_per_s=100.0,
    async_fixed_ms=5.0,
    upload_mib_per_s=50.0,
    file_latency_ms=3.0,
    channel_state_fixed_ms=4.0,
    latency_sigma=0.0,
)


def test_each_piece_is_its_fixed_part_plus_bytes_over_bandwidth_plus_a_latency_per_file():
    rng = random.Random(0)
    assert FLAT.sync_ms(10 * MIB, rng) == pytest.approx(2.0 + 100.0)
    assert FLAT.async_ms(5 * MIB, 2, rng) == pytest.approx(5.0 + 2 * 3.0 + 100.0)
    assert FLAT.channel_state_ms(MIB // 2, 1, rng) == pytest.approx(4.0 + 3.0 + 10.0)
    assert FLAT.metadata_ms(0, rng) == pytest.approx(3.0)
    assert CheckpointCostModel(trigger_fixed_ms=7.0, trigger_constant_ms=0.0, latency_sigma=0.0).trigger_ms(rng) == 7.0


def test_only_the_measured_part_of_the_trigger_path_spreads():
    """The constant part (the facts' fit) is added as it is; the spread part is one log-normal draw, the same draw
    the path took before the constant part existed."""
    model = CheckpointCostModel(trigger_fixed_ms=3.0, trigger_constant_ms=5.5, latency_sigma=0.5)
    alone = CheckpointCostModel(trigger_fixed_ms=3.0, trigger_constant_ms=0.0, latency_sigma=0.5)
    with_constant = [model.trigger_ms(random.Random(seed)) for seed in range(200)]
    without = [alone.trigger_ms(random.Random(seed)) for seed in range(200)]
    assert all(a == pytest.approx(b + 5.5) for a, b in zip(with_constant, without))
    assert min(with_constant) > 5.5 and max(with_constant) - min(with_constant) < 3.0 * 6  # spread: the 3 ms part
    defaults = CheckpointCostModel()
    assert (defaults.trigger_fixed_ms, defaults.trigger_constant_ms) == (3.0, 5.5)  # the facts' 8.5 ms median


def test_the_trigger_path_is_charged_on_the_simulator_only():
    model = CheckpointCostModel(trigger_fixed_ms=7.0, trigger_constant_ms=0.0, latency_sigma=0.0)
    assert CostCharger(model, Charging.VIRTUAL, random.Random(0)).trigger_ms() == 7.0
    # on Ray the coordinator actor's real trigger path takes real time, emulated store or not
    emulated = CheckpointCostModel(**{**model.__dict__, "emulate_remote_store": True})
    assert CostCharger(emulated, Charging.REAL_TIME, random.Random(0)).trigger_ms() == 0.0
    assert NO_COST.trigger_ms(random.Random(0)) == 0.0


def test_the_spread_is_seeded_log_normal_around_the_median():
    model = CheckpointCostModel(latency_sigma=0.5)
    draws = [model.async_ms(0, 0, random.Random(7)) for _ in range(3)]
    assert draws[0] == draws[1] == draws[2]  # the same seed, the same draw
    many = sorted(model.async_ms(0, 0, rng) for rng in [random.Random(1)] for _ in range(2001))
    assert many[1000] == pytest.approx(model.async_fixed_ms, rel=0.1)  # the median is the configured figure
    assert many[-1] > 2 * model.async_fixed_ms and many[0] < model.async_fixed_ms / 2


def test_the_simulator_charges_everything_and_ray_only_an_emulated_remote_store():
    sim = CostCharger(FLAT, Charging.VIRTUAL, random.Random(0))
    assert (sim.sync_ms(0), sim.async_ms(0, 1), sim.channel_state_ms(0, 0), sim.metadata_ms(0)) == (2.0, 8.0, 4.0, 3.0)
    ray = CostCharger(FLAT, Charging.REAL_TIME, random.Random(0))
    assert (ray.sync_ms(MIB), ray.async_ms(MIB, 1), ray.channel_state_ms(MIB, 1), ray.metadata_ms(MIB)) == (0, 0, 0, 0)
    remote = CostCharger(
        CheckpointCostModel(**{**FLAT.__dict__, "emulate_remote_store": True}), Charging.REAL_TIME, random.Random(0)
    )
    # real work took real time; the emulated store adds only its uploads (no fixed parts: those were real too)
    assert remote.sync_ms(MIB) == 0 and remote.async_ms(MIB, 1) == pytest.approx(3.0 + 20.0)
    assert remote.metadata_ms(0) == pytest.approx(3.0)


def test_no_cost_charges_exactly_nothing():
    assert FREE.sync_ms(10**12) == 0 and FREE.async_ms(10**12, 5) == 0 and FREE.metadata_ms(10**9) == 0
    assert NO_COST.upload_mib_per_s == math.inf


@pytest.mark.parametrize(
    "field, value",
    [("async_fixed_ms", -1.0), ("upload_mib_per_s", 0.0), ("latency_sigma", float("nan")), ("file_latency_ms", "1")],
)
def test_a_bad_figure_is_refused_naming_the_storage_key(field, value):
    with pytest.raises(ValueError, match=f"storage.{field}"):
        CheckpointCostModel(**{field: value})
