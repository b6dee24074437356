"""The simulator's output flushers (Flink's ``OutputFlusher``, one thread per task, started when the task builds its
record writers, sleeping ``buffer_timeout_ms`` and then flushing): the tasks of a deployment flush in step at first,
as far into a period as their initialization took (``task_initialization_ms``, drawn per deployment), each period
is the timeout plus an overshoot drawn from the run's seed (``flusher_overshoot_us``), so the flushes drift from
the timeout's grid and slowly apart."""

import dataclasses

from barriersim.runtime.coordinator.configuration import CheckpointingConfig
from barriersim.runtime.job.config import JobConfig, WorkloadConfig
from barriersim.runtime.network.config import NetworkConfig
from barriersim.runtime.sim.data_plane import DataPlane
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.scenarios.loader import quickstart_graph
from barriersim.scenarios.workload import local_splits

SCHEDULE_FLUSH = DataPlane._schedule_flush


def flush_times(monkeypatch, seed: int, network: NetworkConfig = NetworkConfig()) -> dict[str, list[int]]:
    """Every task's output-flusher flushes in a short aligned run, in virtual µs (a flush schedules the next one
    as it runs)."""
    splits = {"source": local_splits(2_000, 20, 1.0, 100, 2, seed=1)}
    config = JobConfig(
        quickstart_graph(2, 2),
        checkpointing=CheckpointingConfig(mode="aligned", interval_ms=100),
        workload=WorkloadConfig(rate_per_source=2_000),
        network=network,
    )
    sim = JobSimulation(config, splits, seed)
    times: dict[str, list[int]] = {}

    def recording(plane, key, epoch, lead_us=0):
        times.setdefault(f"{key[0]}#{key[1]}", []).append(plane.sim.now_us)  # at the deployment, then each flush
        return SCHEDULE_FLUSH(plane, key, epoch, lead_us)

    monkeypatch.setattr(DataPlane, "_schedule_flush", recording)
    sim.run()
    return times


def test_the_flushers_start_in_step_and_each_period_overshoots_the_timeout(monkeypatch):
    times = flush_times(monkeypatch, seed=3)
    assert len(times) == 5  # two sources, two keyed sums, one sink
    assert {flushes[0] for flushes in times.values()} == {0}  # every flusher is scheduled with the deployment at 0
    for flushes in times.values():
        periods = [b - a for a, b in zip(flushes[1:], flushes[2:])]
        assert len(periods) >= 5
        assert all(100_000 < p < 100_000 + 10 * 120 for p in periods)  # the timeout and a drawn overshoot
        assert len(set(periods)) > 1  # drawn per period
    firsts = {flushes[1] for flushes in times.values()}
    assert max(firsts) - min(firsts) < 10 * 120  # in step at first, apart by overshoots only
    assert max(firsts) < 100_000  # their initialization took them into the first period
    assert flush_times(monkeypatch, seed=3) == times  # the seed fixes the initialization and the overshoots
    assert flush_times(monkeypatch, seed=4) != times


def test_the_initialization_sets_the_flushers_phase_once_per_deployment(monkeypatch):
    # 250 ms of initialization with a 100 ms timeout: the flushers are 50 ms into a period when the tasks run
    network = dataclasses.replace(
        NetworkConfig(), flusher_overshoot_us=0.0, task_initialization_ms=250.0, task_initialization_sigma=0.0
    )
    for flushes in flush_times(monkeypatch, seed=3, network=network).values():
        assert flushes[1:4] == [50_000, 150_000, 250_000]
    firsts = set()
    for seed in range(6):  # drawn per deployment: the phase differs from seed to seed
        drawn = flush_times(monkeypatch, seed=seed)
        first = [flushes[1] for flushes in drawn.values()]
        assert max(first) - min(first) < 10 * 120  # one draw for all the tasks, apart by their overshoots only
        firsts.add(min(first) // 5_000)
    assert len(firsts) > 3


def test_without_initialization_or_overshoot_every_flusher_keeps_the_timeout_s_grid(monkeypatch):
    network = dataclasses.replace(NetworkConfig(), flusher_overshoot_us=0.0, task_initialization_ms=0.0)
    for flushes in flush_times(monkeypatch, seed=3, network=network).values():
        assert flushes == [i * 100_000 for i in range(len(flushes))]
