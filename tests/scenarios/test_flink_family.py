"""The family of Flink jobs (``benchmarks.flink_family``): the seeded generator, the converter to barriersim's
scenarios and the figures the benchmark computes from Flink's raw statistics. Running Flink is not part of the
suite; the summarizer's test reads a raw file the runner committed."""

from __future__ import annotations

import gzip
import json
import statistics
from dataclasses import replace

import pytest

from barriersim.scenarios.loader import Scenario
from benchmarks.flink_family import calibration
from benchmarks.flink_family.compare import Comparison, judge, ramp_level, self_agreement
from benchmarks.flink_family.converter import NotExpressible, convert, expressible, to_scenario_document
from benchmarks.flink_family.description import Config, Vertex, loads
from benchmarks.flink_family.figures import combined, figures, flink_measures, from_flink
from benchmarks.flink_family.generator import DEFAULT_SEED, FAMILY_JSON, PAIRS, generate, load_family
from benchmarks.flink_family.runner import RAW_DIR

FAMILY = [Config.from_json(c) for c in generate()["configs"]]


def _dimensions(c: Config) -> dict:
    """Each dimension the family must vary, as one value per configuration (several for per-vertex ones)."""
    inner = c.vertices[1:]
    return {
        "exchanges": {len(inner)},
        "exchange": {v.input for v in inner},
        "parallelism": {v.parallelism for v in c.vertices},
        "taskmanagers and slots": {
            (
                c.taskmanagers,
                "each holds the job"
                if c.slots_per_taskmanager >= max(v.parallelism for v in c.vertices)
                else "the job spread",
            )
        },
        "zipf exponent": {c.zipf_exponent},
        "hot key share": {c.hot_key_share},
        "hot key extra": {c.hot_key_extra_us},
        "spin": {v.spin_us for v in inner},
        "load": {c.load},
        "record size": {c.record_bytes},
        "buffer": {c.buffer_kib},
        "debloating": {c.debloat_target_ms if c.debloat else 0},
        "mode": {c.mode},
        "aligned timeout": {c.aligned_timeout_ms} - {0},
        "interval": {c.interval_ms},
    }


def test_the_generator_is_seeded():
    assert generate(DEFAULT_SEED) == generate(DEFAULT_SEED)
    other = generate(DEFAULT_SEED + 1)
    assert [c for c in other["configs"] if c["group"] == "draw"] != [
        c for c in generate()["configs"] if c["group"] == "draw"
    ]


def test_the_committed_family_is_the_generators():
    assert json.loads(FAMILY_JSON.read_text()) == json.loads(json.dumps(generate()))


def test_at_least_30_configurations_every_dimension_three_ways():
    assert len(FAMILY) >= 30 and len({c.name for c in FAMILY}) == len(FAMILY)
    seen: dict[str, set] = {}
    for c in FAMILY:
        for dimension, values in _dimensions(c).items():
            seen.setdefault(dimension, set()).update(values)
    thin = {d: v for d, v in seen.items() if len(v) < 3}
    assert not thin, f"dimensions varied fewer than three ways: {thin}"
    assert seen["exchange"] == {"hash", "rebalance", "forward", "broadcast"} and seen["exchanges"] == {1, 2, 3}
    assert seen["parallelism"] == {1, 2, 4, 8} and {tm for tm, _ in seen["taskmanagers and slots"]} == {1, 2}


def test_the_rates_go_from_idle_to_heavy_backpressure():
    ratios = [c.rate / min(loads(c).capacity, loads(c).cpu_capacity) for c in FAMILY]
    assert min(ratios) <= 0.25 and max(ratios) >= 2.5


def _differences(a: Config, b: Config) -> set[str]:
    out = {
        k
        for k in (
            "keys",
            "zipf_exponent",
            "hot_key_share",
            "hot_key_extra_us",
            "hot_vertex",
            "rate",
            "payload_bytes",
            "taskmanagers",
            "buffer_kib",
            "debloat",
            "debloat_target_ms",
            "mode",
            "aligned_timeout_ms",
            "interval_ms",
            "seconds",
        )
        if getattr(a, k) != getattr(b, k)
    }
    if a.vertices != b.vertices:
        out.add("vertices")
    return out


def test_the_one_dimension_pairs_are_there_and_change_one_dimension():
    family = generate()
    configs = {c["name"]: Config.from_json(c) for c in family["configs"]}
    by_dimension: dict[str, list] = {}
    for pair in family["pairs"]:
        by_dimension.setdefault(pair["dimension"], []).append(pair)
        base, variant = configs[pair["base"]], configs[pair["variant"]]
        changed = _differences(base, variant)
        expected = {
            "parallelism 4 -> 8": {"vertices"},
            "debloating off -> on": {"debloat"},
            "32 -> 8 KiB buffers": {"buffer_kib"},
            "1 -> 2 TaskManagers": {"taskmanagers"},
        }[pair["dimension"]]
        assert changed == expected, (pair, changed)
        if pair["dimension"] == "parallelism 4 -> 8":
            assert [v.parallelism for v in base.vertices] == [2, 4, 2] and [
                v.parallelism for v in variant.vertices
            ] == [2, 8, 2]
        if pair["dimension"] == "32 -> 8 KiB buffers":
            assert (base.buffer_kib, variant.buffer_kib) == (32, 8)
        if pair["dimension"] == "1 -> 2 TaskManagers":
            assert (base.taskmanagers, variant.taskmanagers) == (1, 2)
            assert variant.slots_per_taskmanager * 2 == base.slots_per_taskmanager  # the job spreads over both
        if pair["dimension"] == "debloating off -> on":
            assert (base.debloat, variant.debloat) == (False, True)
    assert set(by_dimension) == set(PAIRS) and all(len(p) >= 2 for p in by_dimension.values())


def test_every_configuration_is_a_valid_scenario_or_says_why_not():
    for c in FAMILY:
        scenario = convert(c)
        if isinstance(scenario, NotExpressible):
            assert scenario.reason and expressible(c) == scenario.reason
            continue
        assert isinstance(scenario, Scenario), c.name
        graph = scenario.job.graph
        assert [v.name for v in graph.vertices] == [v.name for v in c.vertices]
        assert [e.partitioner.value for e in graph.edges] == [v.input for v in c.vertices[1:]]
        assert scenario.network.buffer_size == c.buffer_kib * 1024 and scenario.cluster.taskmanagers == c.taskmanagers
        assert scenario.checkpointing.mode.value == c.mode and scenario.network.buffer_debloat == c.debloat
        hot = [v for v in graph.vertices if v.params.get("hot_key_extra_us")]
        assert [v.name for v in hot] == ([c.hot_vertex] if c.hot_key_share and c.hot_key_extra_us else [])
        # the one calibration of the machine kind, the same for every configuration
        assert scenario.cluster.cpu_cores == calibration.CPU_CORES
        storage = scenario.storage
        assert (
            storage.trigger_fixed_ms,
            storage.trigger_constant_ms,
            storage.snapshot_fixed_ms,
            storage.async_fixed_ms,
        ) == (
            calibration.TRIGGER_FIXED_MS,
            calibration.TRIGGER_CONSTANT_MS,
            calibration.SNAPSHOT_FIXED_MS,
            calibration.ASYNC_FIXED_MS,
        )
        # FamilyJob's pacing map sleeps on the source's task thread
        assert scenario.workload.source_emission.value == "exact" and scenario.workload.pacing.value == "sleep"
        for v, spec in zip(graph.vertices[1:], c.vertices[1:]):
            assert v.params["cost_us_per_record"] == spec.spin_us + calibration.RECORD_OVERHEAD_US
        for v in hot:
            assert v.params["hot_key_extra_us"] == calibration.sleep_with_overshoot_us(c.hot_key_extra_us)
            assert v.params["hot_key_extra_us"] > c.hot_key_extra_us


def test_a_keyed_sink_is_not_expressible():
    c = FAMILY[0]
    keyed_sink = replace(c, vertices=c.vertices[:-1] + (Vertex("sink", 2, "hash", 5.0),))
    out = convert(keyed_sink)
    assert isinstance(out, NotExpressible) and "keyed sink" in out.reason
    assert to_scenario_document(c)["job"]["vertex"][-1]["operator"] == "at_least_once_sink"


def test_the_facts_shape_has_its_bottleneck_on_the_hot_keys_subtask():
    base = next(c for c in FAMILY if c.name == "base-heavy")
    job = loads(base)
    assert job.bottleneck == ("keyed", 2)  # Java's key-group assignment puts key 0 on keyed subtask 2 of 4
    assert job.records_in["keyed"][2] == pytest.approx(
        0.3 + 0.7 * sum(1 for k in range(1, 64) if k in _keys_on(2)) / 63
    )


def _keys_on(subtask: int) -> set[int]:
    from barriersim.runtime.state.key_groups import assign_key_to_parallel_operator

    return {k for k in range(64) if assign_key_to_parallel_operator(k, 128, 4) == subtask}


def _committed_raw() -> tuple[Config, dict]:
    configs = {c.name: c for c in load_family()[0]}
    path = sorted(RAW_DIR.glob("*-run1.json.gz"))[0]
    return configs[path.name.removesuffix("-run1.json.gz")], json.loads(gzip.decompress(path.read_bytes()))


def test_the_summarizer_computes_the_figures_from_a_committed_raw_file():
    config, raw = _committed_raw()
    got = figures(from_flink(raw, config), config)
    completed = [c for c in raw["history"] if c["status"] == "COMPLETED"]
    steady = sorted(completed, key=lambda c: c["id"])[1:]
    assert got["checkpoints"] == len(steady) >= 5
    assert got["e2e"] == statistics.median(c["end_to_end_duration"] for c in steady)
    ids = [v["id"] for v in raw["job"]["vertices"]]
    bottleneck = ids[[v.name for v in config.vertices].index(loads(config).bottleneck_vertex)]
    assert got["start_delay"] == statistics.median(
        max(s["start_delay"] for s in raw["subtasks"][str(c["id"])][bottleneck]) for c in steady
    )
    assert got["sink_alignment"] == statistics.median(
        max(s["alignment"]["duration"] for s in raw["subtasks"][str(c["id"])][ids[-1]]) for c in steady
    )
    assert got["persisted_kib"] == statistics.median(c["persisted_data"] / 1024 for c in steady)
    assert set(got["flags"]) == {v.name for v in config.vertices}
    assert got["ramp"] == [c["end_to_end_duration"] for c in sorted(completed, key=lambda c: c["id"])[:6]]
    measured = flink_measures(raw, config)
    assert measured["throughput"] > 0 and all(b is None or b > 0 for b in measured["busy_us_per_record"].values())


def test_several_runs_combine_to_medians_a_ramp_per_checkpoint_and_majority_flags():
    def run(e2e, ramp, flags):
        figures_ = dict.fromkeys(("e2e_p90", "start_delay", "sink_alignment", "persisted_kib", "processed_kib"), 1.0)
        return {**figures_, "checkpoints": 10, "e2e": e2e, "ramp": ramp, "flags": {"v1": flags}}

    runs = [run(10, [5, 6, 7], "1,0"), run(30, [5, 8], "1,1"), run(20, [9, 10, 11], "0,0")]
    got = combined(runs)
    assert got["e2e"] == 20 and got["start_delay"] == 1.0 and got["checkpoints"] == 10
    assert got["ramp"] == [5, 8, 9]  # per checkpoint, over the runs that reached it
    assert got["flags"] == {"v1": "1,0"}
    assert combined(runs[:1]) == runs[0]


def _judged_run(e2e: float, ramp: list[float], flags: str = "0,0") -> dict:
    """One run's figures as ``figures`` gives them."""
    fixed = dict.fromkeys(("e2e_p90", "start_delay", "sink_alignment", "persisted_kib", "processed_kib"), 100.0)
    return {**fixed, "checkpoints": 10, "e2e": e2e, "ramp": ramp, "flags": {"v1": flags}}


def test_the_ramp_is_judged_by_the_median_of_checkpoints_2_to_6():
    assert ramp_level([500, 80, 90, 400, 70, 60]) == 80  # checkpoint 1 left out; one slow checkpoint does not decide
    assert ramp_level([500, 80, 90, 100, 70]) is None  # fewer than six checkpoints: no ramp figure
    flink = [_judged_run(100, [900, 200, 210, 220, 230, 240]), _judged_run(100, [900, 250, 260, 900, 270, 280])]

    def ramp_check(ours: list[float]) -> dict:
        checks = judge(Comparison("c", flink, [], _judged_run(100, ours)))
        (check,) = [c for c in checks if c["figure"].startswith("ramp")]
        return check

    inside = ramp_check([1, 300, 320, 330, 340, 350])  # Flink's levels 220 and 270, the band 154-351
    assert inside["passed"] and inside["flink"] == (220, 270) and inside["barriersim"] == 330
    assert not ramp_check([1, 100, 120, 130, 140, 150])["passed"]  # 130: below the band, as a level far too fast


def test_flinks_runs_are_judged_against_each_other_the_way_barriersim_is():
    a = _judged_run(100, [1, 100, 100, 100, 100, 100], "0,0")
    b = _judged_run(200, [1, 110, 110, 110, 110, 110], "0,1")  # e2e twice a's; flags apart; the same ramp
    c = Comparison("c", [a, b], [], _judged_run(100, [1, 100, 100, 100, 100, 100]))
    c.checks = judge(c)
    got = self_agreement({"c": c, "not judged": Comparison("x", [a, b], [])})
    assert got["end-to-end median ms"] == (0, 2)  # 100 against 200 +-30 % and the other way round: both out
    assert got["end-to-end p90 ms"] == (2, 2)
    assert got["unaligned flags"] == (0, 2)
    assert got["ramp: median of checkpoints 2-6 ms"] == (2, 2)
    assert sum(n for _, n in got.values()) == 2 * len(c.checks)  # the configuration not judged is not counted
