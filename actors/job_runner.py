"""Deploys a job on Ray actors, runs it to the end and collects what it produced.

How this works: one ``TaskActor`` per subtask plus one ``CoordinatorActor``; each upstream subtask is told
its downstream handles and the input channel it occupies there (source ``i`` is channel ``i`` of every
keyed-sum subtask; keyed-sum ``j`` is channel ``j`` of the sink). Sources first load their splits from the
object store, then run; the coordinator's loop ends when every task has finished. Actors are killed when the
run ends, whatever happens.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import ray

from barriersim.actors.coordinator_actor import CoordinatorActor
from barriersim.actors.task_actor import TaskActor
from barriersim.runtime.skeleton.job import QuickstartJob
from barriersim.scenarios.loader import Scenario


@dataclass(frozen=True)
class JobRunResult:
    sink_rows: list
    statistics: dict
    records_emitted: int
    job_seconds: float


def build_job(scenario: Scenario) -> QuickstartJob:
    return QuickstartJob(
        source_parallelism=scenario.job.source_parallelism,
        keyed_sum_parallelism=scenario.job.keyed_sum_parallelism,
        records_per_buffer=scenario.job.records_per_buffer,
    )


def run_job_on_ray(
    scenario: Scenario,
    block_refs: list,
    checkpoint_root: str,
    job_id: str,
    on_progress: Callable[[int, dict], None] | None = None,
) -> JobRunResult:
    job = build_job(scenario)
    cp = scenario.checkpointing
    actors: dict = {}
    try:
        coordinator = CoordinatorActor.remote(job.tasks, cp.interval_ms, cp.timeout_ms, checkpoint_root, job_id)
        for name in job.tasks:
            actors[name] = TaskActor.options(name=None).remote(name, job, checkpoint_root, job_id)
        sink = actors[job.sink]
        keyed = [actors[n] for n in job.keyed_sums]
        wiring = [actors[n].connect.remote(keyed, i, coordinator) for i, n in enumerate(job.sources)]
        wiring += [actors[n].connect.remote([sink], j, coordinator) for j, n in enumerate(job.keyed_sums)]
        wiring += [sink.connect.remote([], 0, coordinator), coordinator.connect.remote(actors, job.sources)]
        ray.get(wiring)
        ray.get([actors[n].load_split.remote(block_refs) for n in job.sources])

        started = time.perf_counter()
        coordinator_done = coordinator.run_until_finished.remote()
        source_runs = [actors[n].run_source.remote(scenario.workload.rate_per_source) for n in job.sources]
        pending = [coordinator_done]
        while pending:
            _, pending = ray.wait(pending, timeout=0.25)
            if on_progress is not None:
                emitted = sum(ray.get([actors[n].progress.remote() for n in job.sources]))
                on_progress(emitted, {})
        job_seconds = time.perf_counter() - started
        statistics = ray.get(coordinator_done)
        emitted = sum(ray.get(source_runs))
        rows = ray.get(sink.sink_output.remote())
        return JobRunResult(sink_rows=rows, statistics=statistics, records_emitted=emitted, job_seconds=job_seconds)
    finally:
        for handle in list(actors.values()):
            ray.kill(handle)
        if "coordinator" in locals():
            ray.kill(coordinator)
