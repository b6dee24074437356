"""CPU sharing among subtasks (``runtime.sim.cpu_share``, ``[cluster] cpu_cores``): the rule on its own, and a job on
the simulator whose CPU work stretches when more subtasks run than there are cores, its sleeps not."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from barriersim.runtime.sim.cpu_share import ProcessorSharing
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.scenarios.loader import load_scenario, parse_scenario
from barriersim.scenarios.simulation_inputs import job_config, workload_splits

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"


def test_two_works_on_one_core_take_twice_as_long():
    cpu = ProcessorSharing(1)
    cpu.start("a", 100, now=0)
    cpu.start("b", 100, now=0)
    assert cpu.next_finish() == 200
    assert cpu.finished(199) == []
    assert cpu.finished(200) == ["a", "b"]
    assert cpu.next_finish() is None


def test_works_up_to_the_cores_run_at_full_speed():
    cpu = ProcessorSharing(2)
    cpu.start("a", 100, now=0)
    cpu.start("b", 50, now=0)
    assert cpu.next_finish() == 50
    assert cpu.finished(50) == ["b"]
    assert cpu.next_finish() == 100


def test_a_work_starting_later_slows_the_running_one_from_then_on():
    cpu = ProcessorSharing(1)
    cpu.start("a", 100, now=0)
    cpu.start("b", 100, now=50)  # a has 50 left; both at half speed from 50: a ends at 150, b has 50 left
    assert cpu.next_finish() == 150
    assert cpu.finished(150) == ["a"]
    assert cpu.next_finish() == 200  # b alone again at full speed


def test_fewer_cores_from_then_on_slow_the_running_works():
    cpu = ProcessorSharing(2)
    cpu.start("a", 100, now=0)
    cpu.start("b", 100, now=0)
    cpu.set_cores(1, now=50)  # each has 50 left, at half speed from 50
    assert cpu.next_finish() == 150
    cpu.set_cores(1.5, now=100)  # 25 left each, at 0.75 from 100
    assert cpu.next_finish() == 134  # 100 + 25 / 0.75, rounded up


def test_a_task_runs_one_work_at_a_time_and_cores_are_positive():
    cpu = ProcessorSharing(1)
    cpu.start("a", 10, now=0)
    with pytest.raises(ValueError):
        cpu.start("a", 10, now=0)
    with pytest.raises(ValueError):
        ProcessorSharing(0)
    with pytest.raises(ValueError):
        cpu.set_cores(0, now=5)


def _run(cpu_cores: int, *, cost_us: float, hot_key_extra_us: float = 0.0, **cluster):
    """source p=1 -> rebalance -> work p=2 (every record ``cost_us`` of CPU, ``hot_key_extra_us`` of sleep) -> sink,
    400 records; the virtual time the job took (ms)."""
    work = {"name": "work", "operator": "map", "parallelism": 2, "factor": 1, "cost_us_per_record": cost_us}
    if hot_key_extra_us:
        work.update(hot_key=0, hot_key_extra_us=hot_key_extra_us)
    document = {
        "scenario": {"name": "cpu-share", "seed": 7},
        "workload": {"records": 400, "keys": 4, "hot_key_share": 0.99 if hot_key_extra_us else 0.0},
        "cluster": {"cpu_cores": cpu_cores, **cluster},
        "checkpointing": {"interval_ms": 3_600_000},
        "job": {
            "vertex": [
                {"name": "source", "operator": "source", "parallelism": 1},
                work,
                {"name": "sink", "operator": "at_least_once_sink", "parallelism": 1, "cost_us_per_record": 0.01},
            ],
            "edge": [
                {"from": "source", "to": "work", "partitioner": "rebalance"},
                {"from": "work", "to": "sink", "partitioner": "rebalance"},
            ],
        },
    }
    scenario = parse_scenario(document, "<cpu-share>")
    result = JobSimulation(job_config(scenario), workload_splits(scenario), scenario.seed).run()
    assert result.outcome.value == "finished"
    return result.virtual_ms


def test_two_subtasks_on_one_core_take_twice_as_long_as_on_their_own_cores():
    alone = _run(0, cost_us=1000)  # 200 records per work subtask, 1 ms each: about 200 ms
    shared = _run(1, cost_us=1000)
    assert 190 <= alone <= 260
    assert 1.8 * alone <= shared <= 2.2 * alone


def test_enough_cores_is_todays_behaviour():
    assert _run(3, cost_us=1000) == _run(0, cost_us=1000)


def test_the_jvm_threads_share_of_the_cores_slows_a_cpu_bound_job_while_it_holds_it():
    alone = _run(2, cost_us=1000)  # two work subtasks on two cores
    half = _run(2, cost_us=1000, jvm_share_start=0.5, jvm_share_steady=0.5)  # the JVM holds one core throughout
    assert 1.8 * alone <= half <= 2.2 * alone
    passing = _run(2, cost_us=1000, jvm_share_start=0.5, jvm_share_decay_ms=10)  # gone after about 50 ms
    assert alone < passing <= 1.2 * alone
    assert _run(0, cost_us=1000, jvm_share_start=0.5) == _run(0, cost_us=1000)  # only with shared cores


def test_a_sleep_is_not_stretched():
    alone = _run(0, cost_us=1, hot_key_extra_us=1000)
    shared = _run(1, cost_us=1, hot_key_extra_us=1000)
    assert 190 <= alone <= 260
    assert shared <= 1.1 * alone


@pytest.mark.parametrize("jvm_share", [0.0, 0.5])
@pytest.mark.parametrize("name", ["failure_storm", "checkpointing_time_benchmark"])
def test_sharing_one_core_keeps_exactly_once_through_failures_and_checkpoints(name, jvm_share):
    scenario = load_scenario(SCENARIOS / f"{name}.toml")
    cluster = replace(scenario.cluster, cpu_cores=1, jvm_share_start=jvm_share, jvm_share_steady=jvm_share / 4)
    scenario = replace(scenario, cluster=cluster)
    simulation = JobSimulation(job_config(scenario), workload_splits(scenario), scenario.seed, record_cuts=True)
    result = simulation.run()
    verdict, _ = simulation.verify(result)
    assert result.outcome.value == "finished" and result.checkpoints
    assert verdict.as_dict()["verdict"] == "exactly-once", verdict.as_dict()
