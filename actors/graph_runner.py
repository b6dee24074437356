"""Runs any supported job graph on Ray actors, with the simulator's settings, and collects what it committed
(``RayJob``, ``run_graph_on_ray``); every actor it started is killed on every exit path. See docs/ray-driver.md,
"Running a job graph on Ray".
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import ray

from barriersim.actors.external_store import ExternalStoreActor
from barriersim.actors.job_manager_actor import JobManagerActor
from barriersim.actors.messages import decode_records, encode_records
from barriersim.actors.placement import check_kill_nodes, cluster_nodes, driver_node
from barriersim.actors.socket_links import socket_links_wanted
from barriersim.runtime.job.config import JobConfig
from barriersim.runtime.record_batch import RecordBatch, RecordsLike
from barriersim.runtime.storage import metadata_serializer
from barriersim.runtime.storage.object_storage import is_object_store_uri
from barriersim.runtime.verification.snapshot import pending_transactions


class RayJobError(RuntimeError):
    """The job did not end on Ray (timeout, or an error in the job manager); the message says why."""


@dataclass
class RayJobResult:
    committed_output: RecordBatch  # what the sinks committed, as one batch (a sequence of record tuples too)
    checkpoints: list[dict]
    subtasks: list[dict]
    counts: dict[str, int]
    restarts: int
    job_seconds: float
    records_emitted: int
    outcome: str = "finished"
    jobs: list[dict] = field(default_factory=list)  # each job's report (runtime.job.dispatcher.RunReport.jobs)
    actions: list[dict] = field(default_factory=list)
    final_state: str | None = None
    operations: list[dict] = field(default_factory=list)
    latest_restored: dict | None = None
    retained_checkpoint: str | None = None
    parallelism: dict = field(default_factory=dict)
    job_id: str = ""
    ending: list = field(default_factory=lambda: [False, None])  # [ended by a snapshot, its _metadata (msgpack)]
    next_attempt_number: int = 0
    store_snapshot: bytes = b""  # the external system (ExternalStore.snapshot, msgpack)
    # of the transactions the ending snapshot lists
    pending_records: RecordBatch | list[tuple] = field(default_factory=list)
    restored_checkpoint_ids: list[int] = field(default_factory=list)
    restored_in_flight_bytes: int = 0
    killed: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    store_counters: dict = field(default_factory=dict)
    # per finished task: records, steps, idle waits, last_record_at_ms, cpu_seconds, data and upstream calls, bytes
    task_runs: list[dict] = field(default_factory=list)
    # per source subtask of the first deployment: the records its reader had read once restored (JobReport)
    source_records_at_start: dict = field(default_factory=dict)
    first_deploy_seconds: float = 0.0  # part of job_seconds: starting the first attempt's actors, waiting for splits
    coordinator_failovers: int = 0  # JobManager failovers (crash_coordinator), part of restarts
    storage_errors: list[str] = field(default_factory=list)
    failure_reason: str | None = None  # one line, when the job ended FAILED
    fault_log: list[dict] = field(default_factory=list)  # runtime.faults.fault_log.FaultLog.report(): what fired
    job_manager_cpu_seconds: float = 0.0  # the job manager's process CPU from the first tasks' start to the job's end
    # per deployment: its epoch, restored checkpoint and the node of each TaskManager (runtime.job.placement)
    deployments: list[dict] = field(default_factory=list)
    # per deployment and subtask: TaskManager, slot, node, channel kinds and the Ray node it ran on
    placement: list[dict] = field(default_factory=list)
    ray_nodes: list[dict] = field(default_factory=list)  # node index -> Ray node id and address
    # the JobMaster's messages to tasks and the tasks' reports, per transport: {to_tasks, from_tasks} -> {link, call}
    control_messages: dict = field(default_factory=dict)
    config: JobConfig | None = None  # the settings the job ran with (cluster.nodes resolved to the Ray cluster's)


# the object store's client settings the job manager (the one actor that reads and writes checkpoints) gets from
# the driver's environment, as Flink's JobManager gets its S3 credentials from its own configuration
STORAGE_ENVIRONMENT = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
)


def storage_environment(checkpoint_root: str) -> dict:
    """Actor options giving the job manager the driver's object store settings, for an ``s3://`` storage."""
    variables = {k: os.environ[k] for k in STORAGE_ENVIRONMENT if k in os.environ}
    return {"runtime_env": {"env_vars": variables}} if is_object_store_uri(checkpoint_root) and variables else {}


class RayJob:
    """A job deployed on Ray: creating it creates the external store and the job manager and calls its ``run`` (the
    task actors are created at once; a source whose split is an unresolved reference, e.g. from
    ``actors.workload_handoff``, builds its task when the split resolves); ``wait`` reports progress until the job
    ended and returns its result; ``kill`` kills every actor the job started (``wait`` does it too)."""

    def __init__(
        self,
        config: JobConfig,
        splits: Mapping[str, Sequence[Any]],
        checkpoint_root: str,
        job_id: str,
        *,
        seed: int = 0,
        task_num_cpus: float = 0.01,
        records: int | None = None,
        savepoint_root: str | None = None,
        first_attempt_number: int = 0,
        store_snapshot: bytes | None = None,
        socket_links: bool | None = None,
    ):
        self.config = config
        self.job_id = job_id
        self.ended_at: float | None = None  # time.perf_counter() when the job manager's run returned
        # Ray actor handles (their remote methods are not typed)
        self.store: Any = None
        self.job_manager: Any = None
        try:
            ray_nodes = cluster_nodes(config.cluster.nodes)
            check_kill_nodes(config.faults, ray_nodes)
            if config.cluster.nodes == 0:  # every node of the cluster: the placement spreads over that many
                config = dataclasses.replace(config, cluster=dataclasses.replace(config.cluster, nodes=len(ray_nodes)))
            self.config = config
            # ray.remote's type information gives the decorated class, not the actor class with options()
            self.store = ExternalStoreActor.options(**driver_node()).remote()  # type: ignore[attr-defined]
            if store_snapshot is not None:
                ray.get(self.store.load.remote(store_snapshot))
            split_refs = {
                name: [split if isinstance(split, ray.ObjectRef) else ray.put(encode_records(split)) for split in parts]
                for name, parts in splits.items()
            }
            if records is None:
                records = sum(len(s) for parts in splits.values() for s in parts if not isinstance(s, ray.ObjectRef))
            self.records = records
            self.job_manager = JobManagerActor.options(  # type: ignore[attr-defined]
                **driver_node(), **storage_environment(checkpoint_root)
            ).remote(
                config,
                split_refs,
                checkpoint_root,
                job_id,
                seed,
                self.store,
                task_num_cpus,
                ray_nodes,
                savepoint_root,
                first_attempt_number,
                socket_links_wanted(socket_links),
            )
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
                    try:
                        progress = ray.get(self.job_manager.progress.remote(True), timeout=30)
                    except Exception as err:  # noqa: BLE001 - the report is best effort; the timeout is the error
                        progress = f"not available ({type(err).__name__}: {err})"
                    raise RayJobError(
                        f"job {self.job_id} did not finish within {timeout_seconds} s (progress: {progress})"
                    )
                if on_progress is not None:
                    on_progress(ray.get(self.job_manager.progress.remote()))
            result = ray.get(self.done)
            output = RecordBatch.of(decode_records(ray.get(self.store.output.remote())))
            counters = ray.get(self.store.counters.remote())
            pending: RecordBatch | list[tuple] = []
            if result["ending"][1] is not None:
                tids = pending_transactions(metadata_serializer.deserialize(result["ending"][1], "<ending snapshot>"))
                pending = decode_records(ray.get(self.store.pending_records.remote(tids)))
            # the job manager's result dict has every field but what the store and the caller know
            return RayJobResult(
                committed_output=output,
                records_emitted=self.records,
                store_counters=counters,
                store_snapshot=ray.get(self.store.snapshot.remote()),
                pending_records=pending,
                config=self.config,
                **result,
            )
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
    splits: Mapping[str, Sequence[RecordsLike]],
    checkpoint_root: str,
    job_id: str,
    on_progress: Callable[[dict], None] | None = None,
    *,
    seed: int = 0,
    timeout_seconds: float = 900.0,
    task_num_cpus: float = 0.01,
    records: int | None = None,
    savepoint_root: str | None = None,
    first_attempt_number: int = 0,
    store_snapshot: bytes | None = None,
    socket_links: bool | None = None,
) -> RayJobResult:
    """Run the job of ``config`` on Ray actors. ``splits`` maps each source vertex to its subtasks' splits,
    each a ``RecordBatch`` (or a sequence of ``(record_id, key, value, event_time)`` tuples) or an ``ObjectRef`` of
    its encoding (``actors.messages.encode_records``) or of an Arrow table (``runtime.records_codec.SPLIT_COLUMNS``);
    ``records`` is the workload's size when splits are refs. ``savepoint_root``: the savepoint directory;
    ``store_snapshot`` and ``first_attempt_number``: the external system and the attempts of the run this one
    continues (a restore of one of its snapshots). ``socket_links``: whether task actors on one Ray node
    exchange their channels' messages over links (``actors.socket_links``) rather than actor calls; None: yes,
    unless the environment sets ``BARRIERSIM_RAY_LINKS=calls``."""
    job = RayJob(
        config,
        splits,
        checkpoint_root,
        job_id,
        seed=seed,
        task_num_cpus=task_num_cpus,
        records=records,
        savepoint_root=savepoint_root,
        first_attempt_number=first_attempt_number,
        store_snapshot=store_snapshot,
        socket_links=socket_links,
    )
    return job.wait(on_progress, timeout_seconds)
