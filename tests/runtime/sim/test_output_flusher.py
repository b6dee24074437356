"""The simulator's output flushers (Flink's ``OutputFlusher``, one thread per task, started when the task builds its
record writers): every task flushes every ``buffer_timeout_ms`` at a phase of its own, drawn from the run's seed,
not all tasks in the same instant."""

from barriersim.runtime.coordinator.configuration import CheckpointingConfig
from barriersim.runtime.job.config import JobConfig, WorkloadConfig
from barriersim.runtime.sim.data_plane import DataPlane
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.scenarios.loader import quickstart_graph
from barriersim.scenarios.workload import local_splits

SCHEDULE_FLUSH = DataPlane._schedule_flush


def flush_times(monkeypatch, seed: int) -> dict[str, list[int]]:
    """Every task's output-flusher flushes in a short aligned run, in virtual µs (a flush schedules the next one
    as it runs)."""
    splits = {"source": local_splits(2_000, 20, 1.0, 100, 2, seed=1)}
    config = JobConfig(
        quickstart_graph(2, 2),
        checkpointing=CheckpointingConfig(mode="aligned", interval_ms=100),
        workload=WorkloadConfig(rate_per_source=2_000),
    )
    sim = JobSimulation(config, splits, seed)
    times: dict[str, list[int]] = {}

    def recording(plane, key, epoch, first=False):
        if not first:
            times.setdefault(f"{key[0]}#{key[1]}", []).append(plane.sim.now_us)
        return SCHEDULE_FLUSH(plane, key, epoch, first)

    monkeypatch.setattr(DataPlane, "_schedule_flush", recording)
    sim.run()
    return times


def test_each_task_flushes_every_timeout_at_a_phase_of_its_own_drawn_from_the_seed(monkeypatch):
    times = flush_times(monkeypatch, seed=3)
    assert len(times) == 5  # two sources, two keyed sums, one sink
    for flushes in times.values():
        assert 0 < flushes[0] <= 100_000  # the first within one timeout of the deployment at 0
        assert all(b - a == 100_000 for a, b in zip(flushes, flushes[1:]))
    assert len({flushes[0] for flushes in times.values()}) == 5  # no two tasks in step
    assert flush_times(monkeypatch, seed=3) == times  # the seed fixes the phases
    assert flush_times(monkeypatch, seed=4) != times
