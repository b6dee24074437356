"""Runs any supported job graph on Ray actors, with the simulator's settings, and collects what it committed.

How this works: ``RayJob`` puts every source split in Ray's object store (msgpack; a split given as an
``ObjectRef``, e.g. an Arrow table of a Spark workload handed over by ``actors.workload_handoff``, is used as it
is, so its records never pass through the driver, and it may still be unresolved: the job is deployed and its
sources wait for it), starts the ``ExternalStoreActor`` and the ``JobManagerActor`` (which deploys, checkpoints,
fails over and ends the job) and calls its ``run``; ``RayJob.wait`` reports progress every quarter second until
that call returns, then reads the committed output from the store. ``run_graph_on_ray`` does both. Every actor
it started is killed on every exit path. The settings are the job's
``runtime.job.config.JobConfig`` (graph, mode, intervals, network, source rate, faults; the simulated network's
latencies do not apply: Ray's are real). Ray must already be initialised.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import ray

from barriersim.actors.external_store import ExternalStoreActor
from barriersim.actors.job_manager_actor import JobManagerActor
from barriersim.actors.messages import decode_records, encode_records
from barriersim.runtime.job.config import JobConfig


class RayJobError(RuntimeError):
    """The job did not end on Ray (timeout, or an error in the job manager); the message says why."""


@dataclass
class RayJobResult:
    committed_output: list[tuple]
    checkpoints: list[dict]
    subtasks: list[dict]
    counts: dict[str, int]
    restarts: int
    job_seconds: float
    records_emitted: int
    outcome: str = "finished"
    restored_checkpoint_ids: list[int] = field(default_factory=list)
    restored_in_flight_bytes: int = 0
    killed: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    store_counters: dict = field(default_factory=dict)
    # per finished task: records, steps, idle waits, last_record_at_ms, cpu_seconds, data and upstream calls, bytes
    task_runs: list[dict] = field(default_factory=list)
    first_deploy_seconds: float = 0.0  # part of job_seconds: starting the first attempt's actors, waiting for splits
    coordinator_failovers: int = 0  # JobManager failovers (crash_coordinator), part of restarts
    storage_errors: list[str] = field(default_factory=list)
    failure_reason: str | None = None  # one line, when the job ended FAILED
    fault_log: list[dict] = field(default_factory=list)  # runtime.fault_log.FaultLog.report(): what fired
    job_manager_cpu_seconds: float = 0.0  # the job manager's process CPU from the first tasks' start to the job's end


class RayJob:
    """A job deployed on Ray: creating it creates the external store and the job manager and calls its ``run`` (the
    task actors are created at once; a source whose split is an unresolved reference, e.g. from
    ``actors.workload_handoff``, builds its task when the split resolves); ``wait`` reports progress until the job
    ended and returns its result; ``kill`` kills every actor the job started (``wait`` does it too)."""

    def __init__(self, config: JobConfig, splits: dict[str, Sequence], checkpoint_root: str, job_id: str, *,
                 seed: int = 0, task_num_cpus: float = 0.01, records: int | None = None):
        self.config = config
        self.job_id = job_id
        self.ended_at: float | None = None  # time.perf_counter() when the job manager's run returned
        self.store = self.job_manager = None
        try:
            self.store = ExternalStoreActor.remote()
            split_refs = {name: [split if isinstance(split, ray.ObjectRef) else ray.put(encode_records(split))
                                 for split in parts] for name, parts in splits.items()}
            if records is None:
                records = sum(len(s) for parts in splits.values() for s in parts if not isinstance(s, ray.ObjectRef))
            self.records = records
            self.job_manager = JobManagerActor.remote(config, split_refs, checkpoint_root, job_id, seed, self.store,
                                                      task_num_cpus)
            self.done = self.job_manager.run.remote()
        except BaseException:
            self.kill()
            raise

    def wait(self, on_progress: Callable[[dict], None] | None = None, timeout_seconds: float = 900.0) -> RayJobResult:
        try:
            deadline = time.monotonic() + timeout_seconds
            while True:
                ready, _ = ray.wait([self.done], timeout=0.25)
                if ready:
                    self.ended_at = time.perf_counter()
                    break
                if time.monotonic() > deadline:
                    progress = ray.get(self.job_manager.progress.remote(), timeout=10)
                    raise RayJobError(f"job {self.job_id} did not finish within {timeout_seconds} s (progress: {progress})")
                if on_progress is not None:
                    on_progress(ray.get(self.job_manager.progress.remote()))
            result = ray.get(self.done)
            output = decode_records(ray.get(self.store.output.remote()))
            counters = ray.get(self.store.counters.remote())
            # the job manager's result dict has every field but what the store and the caller know
            return RayJobResult(committed_output=output, records_emitted=self.records, store_counters=counters,
                                **result)
        finally:
            self.kill()

    def kill(self) -> None:
        job_manager, store = self.job_manager, self.store
        self.job_manager = self.store = None
        if job_manager is not None:
            try:
                ray.get(job_manager.shutdown.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - best effort; the actor is killed next
                pass
            ray.kill(job_manager)
        if store is not None:
            ray.kill(store)


def run_graph_on_ray(
    config: JobConfig,
    splits: dict[str, Sequence[Sequence[tuple]]],
    checkpoint_root: str,
    job_id: str,
    on_progress: Callable[[dict], None] | None = None,
    *,
    seed: int = 0,
    timeout_seconds: float = 900.0,
    task_num_cpus: float = 0.01,
    records: int | None = None,
) -> RayJobResult:
    """Run the job of ``config`` on Ray actors. ``splits`` maps each source vertex to its subtasks' splits,
    each a sequence of ``(record_id, key, value, event_time)`` tuples or an ``ObjectRef`` of their msgpack
    encoding (``actors.messages.encode_records``) or of an Arrow table (``runtime.records_codec.SPLIT_COLUMNS``);
    ``records`` is the workload's size when splits are refs."""
    job = RayJob(config, splits, checkpoint_root, job_id, seed=seed, task_num_cpus=task_num_cpus, records=records)
    return job.wait(on_progress, timeout_seconds)
