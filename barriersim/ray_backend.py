"""Runs on Ray, end to end: ``run_on_ray`` runs the effective scenarios of one request (one per mode, on one
workload) under one start of Ray and Spark, in phases (``_RayRequest``): Ray starts, the workload comes from the
cache or from Spark (its jobs deploy meanwhile, waiting for their splits), each mode's job runs on Ray actors
(``actors.graph_runner``) and is verified while the next deploys, the cache entry and the checkpoint statistics are
computed once no job runs, and each mode's run directory gets its effective scenario, ``summary.json`` (with every
phase's time) and per-checkpoint and per-subtask statistics, its checkpoints, savepoints and external system
beside them or under the request's checkpoint storage. A cluster given by ``address`` (or ``RAY_ADDRESS``) is
attached to and left running; everything else started is stopped on every exit path. docs/architecture.md ("The
drivers") has the narrative."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import ray

from barriersim import run_storage, workload_cache
from barriersim.actors.graph_runner import RayJob, RayJobResult
from barriersim.actors.placement import check_kill_nodes, cluster_nodes
from barriersim.actors.workload_handoff import WorkloadHandOff, refs
from barriersim.analytics_export import AnalyticsExportError, export_analytics
from barriersim.backends import Backend, WorkloadGenerator
from barriersim.continuation import (
    RunPublishError,
    output_after_snapshot,
    previous_run,
    publish_run,
    write_external_store,
)
from barriersim.errors import UnsupportedScenario
from barriersim.report.statistics import compute_locally, engine_for
from barriersim.rundir import Run, RunTables, run_tables
from barriersim.runtime.job.config import JobConfig
from barriersim.runtime.job.placement import PlacementError
from barriersim.runtime.job.report import records_read_in_run
from barriersim.runtime.storage.errors import CheckpointStorageError
from barriersim.runtime.storage.object_storage import child_uri, is_object_store_uri, savepoint_directory_for
from barriersim.runtime.verification.reference import Verification
from barriersim.scenarios.loader import Scenario
from barriersim.scenarios.simulation_inputs import job_config
from barriersim.spark.analytics import analytics_dir, compute_analytics, plan_analytics
from barriersim.spark.reference import (
    compare_with_reference,
    output_table,
    prepare_verification,
    reference_table,
    verify,
    verify_in_ray,
)
from barriersim.spark.session import RayAndSpark, ray_address
from barriersim.spark.workload import Workload, generate_workload, hand_off
from barriersim.summary import (
    build_summary,
    jobs_sections,
    placement_section,
    source_rates,
    with_channel_kinds,
    write_run_directory,
    write_summary,
)

ProgressCallback = Callable[[str, float | None], None]
LOGS_DIR = "logs"


def prepare(spark, scenario: Scenario) -> Workload:
    """What the Spark driver can do while Spark's executor starts: plan the workload's Spark job, the verification
    query and the statistics' queries once (the driver's first queries load and compile most of what later ones
    use)."""
    workload = generate_workload(spark, scenario, scenario.seed)
    workload.df._jdf.queryExecution().executedPlan()
    if scenario.job.is_quickstart_shape:
        prepare_verification(spark, workload.df)
    plan_analytics(spark)
    return workload


@dataclass(frozen=True)
class _CachedWorkload:
    """A workload read from the cache with Spark's reference (Spark did not start for it)."""

    splits: dict[str, list[pa.Table]]
    reference: pa.Table

    @staticmethod
    def of(lookup: workload_cache.CacheLookup | None) -> _CachedWorkload | None:
        """A hit's workload (a hit read both its splits and its reference); None for anything else."""
        if lookup is None or lookup.outcome is not workload_cache.Lookup.HIT:
            return None
        if lookup.splits is None or lookup.reference is None:
            return None
        return _CachedWorkload(lookup.splits, lookup.reference)


@dataclass(frozen=True)
class _SparkWorkload:
    """A workload Spark generated (its DataFrame cached in Spark) and the splits handed to the sources."""

    splits: dict[str, list[pa.Table]]
    generated: Workload


def _warn(message: str) -> None:
    print(f"barriersim: warning: {message}", file=sys.stderr)


def run_on_ray(
    runs: Sequence[tuple[Path, Scenario]],
    address: str | None = None,
    progress: ProgressCallback | None = None,
    checkpoint_storage: str | None = None,
    cache: bool = True,
    warn: Callable[[str], None] = _warn,
) -> list[dict]:
    """Run each ``(run directory, effective scenario)`` on Ray, on one workload; returns their summaries.
    ``checkpoint_storage``: Flink's ``state.checkpoints.dir`` (a path every node sees, ``file://`` or ``s3://``),
    each run's checkpoints under ``<storage>/<run directory name>[/<mode>]``; default: each run directory's
    ``checkpoints/``. ``cache``: take the workload and its reference from ``barriersim.workload_cache`` when it
    has them (then Spark does not start, unless the statistics are large), and store them there when Spark
    computed them; False: Spark computes them and the cache is neither read nor written. ``warn`` hears of a
    cache entry that could not be read, in one line."""
    request = _RayRequest(runs, address, progress, checkpoint_storage, cache, warn)
    try:
        request.start_ray()
        request.obtain_workload()
        finished = [request.run_mode(n) for n in range(len(runs))]
        request.write_cache()
        statistics = request.compute_statistics(finished)
        return request.write_summaries(finished, statistics)
    finally:
        request.close()


class _RayRequest:
    """One request's runs on one start of Ray (and Spark, if it starts): ``run_on_ray``'s phases, in order, with
    what they share (the cluster, the workload, the jobs, the shared timings, the cache's section)."""

    def __init__(
        self,
        runs: Sequence[tuple[Path, Scenario]],
        address: str | None,
        progress: ProgressCallback | None,
        checkpoint_storage: str | None,
        cache: bool,
        warn: Callable[[str], None],
    ):
        self.runs = runs
        self.say = progress or (lambda stage, fraction: None)
        self.warn = warn
        self.first = first = runs[0][1]
        self.several = len(runs) > 1
        self.root = runs[0][0].parent if self.several else runs[0][0]
        self.fresh = not self.root.exists() or not any(self.root.iterdir())
        self.root.mkdir(parents=True, exist_ok=True)
        self.sources = tuple((v.name, v.parallelism) for v in first.job.graph.sources)
        self.records = first.workload.records * len(self.sources)
        self.cluster = RayAndSpark(
            app_name=f"barriersim-{first.name}", address=ray_address(address), log_dir=self.root / LOGS_DIR
        )
        self.shared: dict[str, float] = {}  # the timings every mode shares
        self.cached = workload_cache.lookup(first) if cache else None
        if self.cached is not None and self.cached.outcome is workload_cache.Lookup.CORRUPT:
            warn(f"workload cache: {self.cached.problem}; Spark recomputes the entry")
        self.from_cache = _CachedWorkload.of(self.cached)
        self.hit = self.from_cache is not None
        # shared by every summary: "written" is set once the jobs are over, before any summary is written
        self.cache_section = {
            "status": "disabled" if self.cached is None else self.cached.outcome.value,
            "key": workload_cache.cache_key(first) if self.cached is None else self.cached.key,
            "path": None if self.cached is None else str(self.cached.path),
            "written": False,
        }
        self.spark: Any = None  # a pyspark SparkSession, once Spark started
        self.handoffs: list[Any] = []  # WorkloadHandOff actors (their remote methods are not typed)
        self.jobs: list[RayJob] = []  # mode n's job is jobs[n], deployed while mode n - 1 runs or is verified
        self.after_snapshot: dict[Path, dict | None] = {}  # per run: what the run it restores committed after it
        # on a storage URI, everything of the request goes under <storage>/<run directory name>: each mode's
        # checkpoints and savepoints (in <mode>/ when there are several), and the analytics
        self.remote_root, self.on_storage = run_storage.storage_uris(checkpoint_storage, list(runs))
        self.storage_uris = {
            target: str(target / "checkpoints") if uri is None else uri for target, uri in self.on_storage.items()
        }
        self.export_error: Exception | None = None

    # -- 1. Ray ---------------------------------------------------------------------------------------------------

    def start_ray(self) -> None:
        """Ray starts; the cluster must have the nodes the scenarios spread their TaskManagers over."""
        self.say("starting Ray", None)
        self.started_at = time.time()  # the request's wall-clock span, in every summary's ray section
        try:
            self.cluster.start_ray()
        except BaseException:
            self.cluster.close()  # its log file closed: a run that never started leaves nothing behind
            if self.fresh:
                shutil.rmtree(self.root, ignore_errors=True)
            raise
        self.shared["ray_start"] = self.cluster.ray_started_seconds
        try:
            for _, scenario in self.runs:
                check_kill_nodes(scenario.faults, cluster_nodes(scenario.cluster.nodes))
        except PlacementError as err:
            raise UnsupportedScenario(f"{self.first.path}: {err}") from None

    def _start_job(self, target: Path, scenario: Scenario, splits_now: dict[str, list] | None = None) -> None:
        """Deploy a mode's job now: its sources read ``splits_now`` (object references) if given, else they wait for
        the splits its own hand-off gets later."""
        if splits_now is not None:
            job_splits = splits_now
        else:
            # ray.remote's type information gives the decorated class, not the actor class with remote()
            self.handoffs.append(WorkloadHandOff.remote())  # type: ignore[attr-defined]
            job_splits = refs(self.handoffs[-1], self.sources)
        target.mkdir(parents=True, exist_ok=True)
        previous = previous_run(scenario)  # the run whose snapshot this one restores, continued
        self.after_snapshot[target] = output_after_snapshot(previous)
        self.jobs.append(
            RayJob(
                job_config(scenario),
                job_splits,
                self.storage_uris[target],
                f"{scenario.name}-{scenario.seed}",
                seed=scenario.seed,
                records=self.records,
                savepoint_root=savepoint_directory_for(self.on_storage[target], target),
                first_attempt_number=previous.next_attempt_number if previous else 0,
                store_snapshot=previous.store.to_msgpack() if previous else None,
            )
        )

    # -- 2. the workload ------------------------------------------------------------------------------------------

    def obtain_workload(self) -> None:
        """The workload, from the cache (Spark does not start; the first job deploys with its splits in the object
        store) or generated by Spark (started on a thread while the first job's actors deploy, waiting for their
        splits, which its hand-off gets then)."""
        put_splits = None
        self.workload: _CachedWorkload | _SparkWorkload
        if self.from_cache is not None:
            self.say("reading the workload and its reference from the cache (Spark not started)", None)
            t0 = time.perf_counter()
            self.workload = self.from_cache
            # known before the first job deploys: its sources read them from the object store at once, with no
            # hand-off actor (one actor process fewer to start before the job manager's); a later mode's job still
            # waits for its hand-off, so that it does not run while the previous mode is verified
            put_splits = {vertex: [ray.put(table) for table in tables] for vertex, tables in self.splits.items()}
            self._start_job(*self.runs[0], splits_now=put_splits)
            self.shared["spark_start"] = 0.0
        else:
            cluster = self.cluster
            cluster.start_spark_in_background(prepare=lambda spark: prepare(spark, self.first))
            self._start_job(*self.runs[0])  # its actors deploy while Spark starts
            self.say("starting Spark on Ray (the job's actors deploy meanwhile)", None)
            try:
                self.spark = cluster.wait_for_spark()
            except BaseException as err:
                self.handoffs[0].fail.remote(f"Spark did not start: {type(err).__name__}")
                raise
            self.shared["spark_start"] = cluster.spark_started_seconds
            self.say("generating the workload in Spark", None)
            t0 = time.perf_counter()
            generated = cluster.prepared
            assert isinstance(generated, Workload)  # what prepare() returned, Spark being up
            self.workload = _SparkWorkload(hand_off(generated), generated)
            self.handoffs[0].supply.remote(self.splits)
        # resolved: for the Ray task of a general graph's reference
        self.split_refs = put_splits if put_splits is not None else refs(self.handoffs[0], self.sources)
        self.split_sizes = {
            f"{vertex}#{i}": t.num_rows for vertex, tables in self.splits.items() for i, t in enumerate(tables)
        }
        self.mode_start = time.perf_counter()
        self.shared["workload"] = self.mode_start - t0
        self.spark_info = self.cluster.spark_info if self.spark is not None else {"started": False}

    @property
    def splits(self) -> dict[str, list[pa.Table]]:
        """Every source subtask's split (vertex -> one table per subtask), once ``obtain_workload`` has them."""
        return self.workload.splits

    # -- 3. each mode's job ---------------------------------------------------------------------------------------

    def run_mode(self, n: int) -> tuple[Path, dict]:
        """Mode ``n``'s job runs to its end; the next mode's actors deploy while this one is verified (its sources
        wait for their splits, supplied once this mode's run directory is written)."""
        target, scenario = self.runs[n]
        job = self.jobs[n]
        mode = scenario.checkpointing.mode.value
        stage = f"running the job ({mode})" if self.several else "running the job"
        self.say(stage, 0.0)

        def on_progress(p: dict) -> None:
            if p.get("source_records") is not None:
                self.say(stage, min(1.0, p["source_records"] / self.records))

        result = job.wait(on_progress)
        assert job.ended_at is not None  # set by wait() once the job manager's run returned
        running = result.job_seconds - result.first_deploy_seconds
        deploy = max(0.0, job.ended_at - self.mode_start - running)
        more = n + 1 < len(self.runs)
        if more:
            self._start_job(*self.runs[n + 1])
        t1 = time.perf_counter()
        verification = self._verify(scenario, job.config, result, f" ({mode})" if self.several else "")
        own = {"deploy": deploy, "job": running, "verification": time.perf_counter() - t1}
        write_run_directory(
            target,
            scenario,
            None,
            result.checkpoints,
            with_channel_kinds(result.subtasks, job.config),
            result.placement,
        )
        write_external_store(target, result.store_snapshot)
        summary = self._summary(target, scenario, job.config, result, verification, own, running)
        if more:
            self.handoffs[-1].supply.remote(self.splits)
            self.mode_start = time.perf_counter()
        return target, summary

    def _verify(self, scenario: Scenario, config: JobConfig, result: RayJobResult, suffix: str) -> Verification:
        """The quickstart shape against Spark's reference (cached, or one Spark SQL job over Arrow data), any other
        graph, or a run whose last job ended by a snapshot, against the reference evaluated in a Ray task."""
        ended_by_snapshot = bool(result.ending[0])
        if scenario.job.is_quickstart_shape and not ended_by_snapshot:
            workload = self.workload
            if isinstance(workload, _CachedWorkload):
                self.say(f"verifying against Spark's cached reference{suffix}", None)
                return compare_with_reference(
                    workload.splits,
                    workload.reference,
                    output_table(result.committed_output),
                    exactly_once=config.checkpointing.mode.exactly_once,
                )
            self.say(f"verifying against Spark's reference{suffix}", None)
            return verify(
                self.spark,
                workload.generated.df,
                output_table(result.committed_output),
                exactly_once=config.checkpointing.mode.exactly_once,
            )
        self.say(f"verifying against the reference{suffix}", None)
        return verify_in_ray(
            config.graph,
            self.split_refs,
            result.committed_output,
            at_least_once=not config.checkpointing.mode.exactly_once,
            ending=result.ending,
            pending=result.pending_records,
            operations=result.operations,
        )

    def _summary(
        self,
        target: Path,
        scenario: Scenario,
        config: JobConfig,
        result: RayJobResult,
        verification: Verification,
        own: dict,
        running: float,
    ) -> dict:
        # how far each source subtask's last run read (its reader's offsets: the records that went through the job,
        # also when it stopped before its input ended; a task whose run did not return, its split), less where the
        # run's first deployment started (a run --from an earlier run's snapshot: its offsets), as the simulator
        # counts it
        at_start = result.source_records_at_start
        source_runs = {
            r["task"]: (records_read_in_run(r["task"], r["records_read"], at_start), r.get("last_record_at_ms"))
            for r in result.task_runs
            if r.get("task") in self.split_sizes
        }
        through = sum(
            source_runs.get(task, (records_read_in_run(task, size, at_start),))[0]
            for task, size in self.split_sizes.items()
        )
        ended_by_snapshot = bool(result.ending[0])
        return build_summary(
            scenario=scenario,
            backend=Backend.RAY,
            generated_by=WorkloadGenerator.SPARK,
            records=self.records,
            counts=result.counts,
            verification=verification.as_dict(),
            outcome=result.outcome,
            restarts=result.restarts,
            restored_checkpoint_ids=result.restored_checkpoint_ids,
            restored_in_flight_bytes=result.restored_in_flight_bytes,
            records_per_second=through / running if running > 0 else None,
            throughput_clock="wall",
            source_rates=source_rates(scenario.workload.rate_per_source, source_runs),
            faults_fired=result.fault_log,
            failure_reason=result.failure_reason,
            **jobs_sections(result, result.next_attempt_number, "snapshot" if ended_by_snapshot else "workload"),
            backend_sections={
                "spark": self.spark_info,
                "workload_cache": self.cache_section,
                "timings_seconds": own,
                "ray": {
                    "coordinator_failovers": result.coordinator_failovers,
                    "killed": result.killed,
                    "failures": result.failures,
                    "storage_errors": result.storage_errors,
                    "checkpoint_storage": self.storage_uris[target],
                },
            },
            wall_seconds=time.perf_counter() - self.mode_start,
            placement=placement_section(config, result.deployments, result.ray_nodes),
            output_after_snapshot=self.after_snapshot.get(target),
        )

    # -- 4. the cache, the statistics, the summaries --------------------------------------------------------------

    def write_cache(self) -> None:
        """Once no job runs (nothing competes with a job for the CPU): Spark's reference, then the cache entry."""
        t3 = time.perf_counter()
        if self.cached is not None and isinstance(self.workload, _SparkWorkload):
            self.say("computing the verification reference in Spark and writing the workload cache", None)
            try:
                workload_cache.store(self.first, self.splits, reference_table(self.spark, self.workload.generated.df))
                self.cache_section["written"] = True
            except (OSError, CheckpointStorageError) as err:
                self.warn(f"workload cache: could not write {self.cached.path} ({err}); the run goes on without it")
        self.shared["cache_write"] = time.perf_counter() - t3

    def compute_statistics(self, finished: list[tuple[Path, dict]]) -> str:
        """Flink's REST summaries (min, max, avg, p50 ... p999) of every run just written: in the Spark that is up,
        else in pandas when they are small (``barriersim.report.statistics``), else in a Spark started for them;
        on ``s3://``, written to the object store too. Returns where they were computed."""
        t2 = time.perf_counter()
        root = self.root
        written = [Run(path=target, label="." if target == root else target.name, summary=s) for target, s in finished]
        statistics = "spark"
        if self.spark is None:
            tables = RunTables(written, *run_tables(written))
            statistics = engine_for(tables, spark_up=False)
            if statistics == "pandas":
                self.say("computing the checkpoint statistics (pandas)", None)
                compute_locally(root, tables)
            else:
                self.say("starting Spark on Ray for the checkpoint statistics", None)
                self.spark = self.cluster.start_spark()
                self.shared["spark_start"] = self.cluster.spark_started_seconds
                t2 = time.perf_counter()
        if statistics == "spark":
            self.say("computing the checkpoint statistics in Spark", None)
            compute_analytics(self.spark, root, written)
        self.analytics_uri = None
        if self.remote_root is not None and is_object_store_uri(self.remote_root):
            self.say("writing the checkpoint statistics to the object store", None)
            try:
                self.analytics_uri = export_analytics(analytics_dir(root), child_uri(self.remote_root, "analytics"))
            except AnalyticsExportError as err:
                self.export_error = err  # raised once the run directory is complete
        self.shared["analytics"] = time.perf_counter() - t2
        return statistics

    def write_summaries(self, finished: list[tuple[Path, dict]], statistics: str) -> list[dict]:
        """Each mode's ``summary.json`` with the shared timings; on a storage URI, each mode's files published
        beside its savepoints and checkpoints, where a restore from them finds the run."""
        summaries = []
        span = {"started_at": round(self.started_at, 3), "ended_at": round(time.time(), 3)}
        for target, summary in finished:
            timings = {key: round(value, 3) for key, value in {**self.shared, **summary["timings_seconds"]}.items()}
            summary = {
                **summary,
                "timings_seconds": timings,
                "workload_cache": {**summary["workload_cache"], "statistics": statistics},
            }
            if self.spark is not None and not summary["spark"].get("started", True):  # started for the statistics
                summary["spark"] = self.cluster.spark_info
            summary["ray"] = {**summary["ray"], **span}
            if self.analytics_uri is not None:
                summary["ray"] = {**summary["ray"], "analytics_uri": self.analytics_uri}
            write_summary(target, summary)
            summaries.append(summary)
            if self.on_storage[target] is not None:
                try:
                    publish_run(target, self.storage_uris[target])
                except RunPublishError as err:
                    self.export_error = self.export_error or err
        if self.export_error is not None:
            raise self.export_error
        return summaries

    def close(self) -> None:
        """Every actor the request started is killed, and Spark and Ray stop (a cluster attached to stays up)."""
        try:
            for started in self.jobs:
                started.kill()
            for handoff in self.handoffs:
                ray.kill(handoff)
        finally:
            try:
                self.say("stopping Ray" if self.hit and self.spark is None else "stopping Spark and Ray", None)
            finally:
                self.cluster.close()
