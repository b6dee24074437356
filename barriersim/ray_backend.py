"""Runs on Ray, end to end: Spark on Ray generates the workload, the job runs on Ray actors
(``actors.graph_runner``: every job graph, every mode, the scenario's faults), the output is verified, and each
run directory gets its effective scenario, ``summary.json`` and per-checkpoint and per-subtask statistics
(``barriersim.summary``) beside the job's filesystem checkpoints.

How it works: ``docs/modules.md``, ``barriersim/ray_backend.py``.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

from barriersim import run_storage, workload_cache
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
from barriersim.report.statistics import compute_locally, is_small
from barriersim.rundir import Run, RunTables, run_tables
from barriersim.runtime.job.placement import PlacementError
from barriersim.runtime.job.report import records_read_in_run
from barriersim.runtime.storage.errors import CheckpointStorageError
from barriersim.runtime.storage.object_storage import child_uri, is_object_store_uri, savepoint_directory_for
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
from barriersim.spark.workload import generate_workload, hand_off
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


def prepare(spark, scenario: Scenario):
    """What the Spark driver can do while Spark's executor starts: plan the workload's Spark job, the verification
    query and the statistics' queries once (the driver's first queries load and compile most of what later ones
    use)."""
    workload = generate_workload(spark, scenario, scenario.seed)
    workload.df._jdf.queryExecution().executedPlan()
    if scenario.job.is_quickstart_shape:
        prepare_verification(spark, workload.df)
    plan_analytics(spark)
    return workload


def _warn(message: str) -> None:
    print(f"barriersim: warning: {message}", file=sys.stderr)


def run_on_ray(runs: Sequence[tuple[Path, Scenario]], address: str | None = None,
               progress: ProgressCallback | None = None, checkpoint_storage: str | None = None,
               cache: bool = True, warn: Callable[[str], None] = _warn) -> list[dict]:
    """Run each ``(run directory, effective scenario)`` on Ray, on one workload; returns their summaries.
    ``checkpoint_storage``: Flink's ``state.checkpoints.dir`` (a path every node sees, ``file://`` or ``s3://``),
    each run's checkpoints under ``<storage>/<run directory name>[/<mode>]``; default: each run directory's
    ``checkpoints/``. ``cache``: take the workload and its reference from ``barriersim.workload_cache`` when it
    has them (then Spark does not start, unless the statistics are large), and store them there when Spark
    computed them; False: Spark computes them and the cache is neither read nor written. ``warn`` hears of a
    cache entry that could not be read, in one line."""
    import ray

    from barriersim.actors.graph_runner import RayJob
    from barriersim.actors.placement import check_kill_nodes, cluster_nodes
    from barriersim.actors.workload_handoff import WorkloadHandOff, refs

    say = progress or (lambda stage, fraction: None)
    first = runs[0][1]
    several = len(runs) > 1
    root = runs[0][0].parent if several else runs[0][0]
    fresh = not root.exists() or not any(root.iterdir())
    root.mkdir(parents=True, exist_ok=True)
    sources = tuple((v.name, v.parallelism) for v in first.job.graph.sources)
    records = first.workload.records * len(sources)
    cluster = RayAndSpark(app_name=f"barriersim-{first.name}", address=ray_address(address),
                          log_dir=root / LOGS_DIR)
    shared: dict[str, float] = {}
    cached = workload_cache.lookup(first) if cache else None
    if cached is not None and cached.outcome is workload_cache.Lookup.CORRUPT:
        warn(f"workload cache: {cached.problem}; Spark recomputes the entry")
    hit = cached is not None and cached.outcome is workload_cache.Lookup.HIT
    cache_section = {"status": "disabled" if cached is None else cached.outcome.value,
                     "key": workload_cache.cache_key(first) if cached is None else cached.key,
                     "path": None if cached is None else str(cached.path), "written": False}
    spark = None
    handoffs: list = []
    put_splits: dict[str, list] | None = None  # a cache hit's splits, in the object store before the first job deploys
    jobs: list = []
    after_snapshot: dict[Path, dict | None] = {}  # per run: what the run it restores committed after its snapshot

    # on a storage URI, everything of the request goes under <storage>/<run directory name>: each mode's checkpoints
    # and savepoints (in <mode>/ when there are several), and the analytics
    remote_root, on_storage = run_storage.storage_uris(checkpoint_storage, list(runs))
    storage_uris = {target: str(target / "checkpoints") if uri is None else uri for target, uri in on_storage.items()}

    def start_job(target: Path, scenario: Scenario, splits_now: dict[str, list] | None = None):
        """Deploy a mode's job now: its sources read ``splits_now`` (object references) if given, else they wait for
        the splits its own hand-off gets later."""
        if splits_now is not None:
            job_splits = splits_now
        else:
            handoffs.append(WorkloadHandOff.remote())
            job_splits = refs(handoffs[-1], sources)
        target.mkdir(parents=True, exist_ok=True)
        previous = previous_run(scenario)  # the run whose snapshot this one restores, continued
        after_snapshot[target] = output_after_snapshot(previous)
        jobs.append(RayJob(job_config(scenario), job_splits, storage_uris[target],
                           f"{scenario.name}-{scenario.seed}", seed=scenario.seed, records=records,
                           savepoint_root=savepoint_directory_for(on_storage[target], target),
                           first_attempt_number=previous.next_attempt_number if previous else 0,
                           store_snapshot=previous.store.to_msgpack() if previous else None))
        return jobs[-1]

    try:
        say("starting Ray", None)
        try:
            cluster.start_ray()
        except BaseException:
            cluster.close()  # its log file closed: a run that never started leaves nothing behind
            if fresh:
                shutil.rmtree(root, ignore_errors=True)
            raise
        shared["ray_start"] = cluster.ray_started_seconds
        try:  # the Ray cluster must have the nodes the scenario spreads its TaskManagers over
            for _, scenario in runs:
                check_kill_nodes(scenario.faults, cluster_nodes(scenario.cluster.nodes))
        except PlacementError as err:
            raise UnsupportedScenario(f"{first.path}: {err}") from None
        if hit:
            say("reading the workload and its reference from the cache (Spark not started)", None)
            t0 = time.perf_counter()
            workload, splits, reference = None, cached.splits, cached.reference
            # known before the first job deploys: its sources read them from the object store at once, with no
            # hand-off actor (one actor process fewer to start before the job manager's); a later mode's job still
            # waits for its hand-off, so that it does not run while the previous mode is verified
            put_splits = {vertex: [ray.put(table) for table in tables] for vertex, tables in splits.items()}
            job = start_job(*runs[0], splits_now=put_splits)
            shared["spark_start"] = 0.0
        else:
            cluster.start_spark_in_background(prepare=lambda spark: prepare(spark, first))
            job = start_job(*runs[0])  # its actors deploy while Spark starts
            say("starting Spark on Ray (the job's actors deploy meanwhile)", None)
            try:
                spark = cluster.wait_for_spark()
            except BaseException as err:
                handoffs[0].fail.remote(f"Spark did not start: {type(err).__name__}")
                raise
            shared["spark_start"] = cluster.spark_started_seconds
            say("generating the workload in Spark", None)
            t0 = time.perf_counter()
            workload = cluster.prepared
            splits = hand_off(workload)
            handoffs[0].supply.remote(splits)
        # resolved: for the Ray task of a general graph's reference
        split_refs = put_splits if put_splits is not None else refs(handoffs[0], sources)
        split_sizes = {f"{vertex}#{i}": t.num_rows for vertex, tables in splits.items() for i, t in enumerate(tables)}
        mode_start = time.perf_counter()
        shared["workload"] = mode_start - t0
        spark_info = cluster.spark_info if spark is not None else {"started": False}

        finished: list[tuple[Path, dict]] = []
        for n, (target, scenario) in enumerate(runs):
            mode = scenario.checkpointing.mode.value
            config = job.config
            stage = f"running the job ({mode})" if several else "running the job"
            say(stage, 0.0)

            def on_progress(p: dict, stage=stage) -> None:
                if p.get("source_records") is not None:
                    say(stage, min(1.0, p["source_records"] / records))

            result = job.wait(on_progress)
            running = result.job_seconds - result.first_deploy_seconds
            deploy = max(0.0, job.ended_at - mode_start - running)
            # the next mode's actors deploy while this one is verified; its sources wait for their splits
            job = start_job(*runs[n + 1]) if n + 1 < len(runs) else None

            suffix = f" ({mode})" if several else ""
            t1 = time.perf_counter()
            ended_by_snapshot = bool(result.ending[0])
            if scenario.job.is_quickstart_shape and not ended_by_snapshot and spark is None:
                say(f"verifying against Spark's cached reference{suffix}", None)
                verification = compare_with_reference(splits, reference, output_table(result.committed_output),
                                                      exactly_once=config.checkpointing.mode.exactly_once)
            elif scenario.job.is_quickstart_shape and not ended_by_snapshot:
                say(f"verifying against Spark's reference{suffix}", None)
                verification = verify(spark, workload.df, output_table(result.committed_output),
                                      exactly_once=config.checkpointing.mode.exactly_once)
            else:
                say(f"verifying against the reference{suffix}", None)
                verification = verify_in_ray(config.graph, split_refs, result.committed_output,
                                             at_least_once=not config.checkpointing.mode.exactly_once,
                                             ending=result.ending,
                                             pending=result.pending_records, operations=result.operations)
            own = {"deploy": deploy, "job": running, "verification": time.perf_counter() - t1}
            write_run_directory(target, scenario, None, result.checkpoints,
                                with_channel_kinds(result.subtasks, result.config), result.placement)
            write_external_store(target, result.store_snapshot)
            # how far each source subtask's last run read (its reader's offsets: the records that went through the
            # job, also when it stopped before its input ended; a task whose run did not return, its split), less
            # where the run's first deployment started (a run --from an earlier run's snapshot: its offsets), as the
            # simulator counts it
            at_start = result.source_records_at_start
            source_runs = {r["task"]: (records_read_in_run(r["task"], r["records_read"], at_start),
                                       r.get("last_record_at_ms"))
                           for r in result.task_runs if r.get("task") in split_sizes}
            through = sum(source_runs.get(task, (records_read_in_run(task, size, at_start),))[0]
                          for task, size in split_sizes.items())
            summary = build_summary(
                scenario=scenario, backend=Backend.RAY, generated_by=WorkloadGenerator.SPARK,
                records=records, counts=result.counts, verification=verification.as_dict(),
                outcome=result.outcome, restarts=result.restarts,
                restored_checkpoint_ids=result.restored_checkpoint_ids,
                restored_in_flight_bytes=result.restored_in_flight_bytes,
                records_per_second=through / running if running > 0 else None,
                throughput_clock="wall", source_rates=source_rates(scenario.workload.rate_per_source, source_runs),
                faults_fired=result.fault_log, failure_reason=result.failure_reason,
                **jobs_sections(result, result.next_attempt_number, "snapshot" if ended_by_snapshot else "workload"),
                # cache_section is shared: "written" is set once the jobs are over, before any summary is written
                backend_sections={"spark": spark_info, "workload_cache": cache_section, "timings_seconds": own,
                                  "ray": {"coordinator_failovers": result.coordinator_failovers,
                                          "killed": result.killed, "failures": result.failures,
                                          "storage_errors": result.storage_errors,
                                          "checkpoint_storage": storage_uris[target]}},
                wall_seconds=time.perf_counter() - mode_start,
                placement=placement_section(result.config, result.deployments, result.ray_nodes),
                output_after_snapshot=after_snapshot.get(target),
            )
            finished.append((target, summary))
            if job is not None:
                handoffs[-1].supply.remote(splits)
                mode_start = time.perf_counter()

        # once no job runs (nothing competes with a job for the CPU): Spark's reference, then the cache entry
        t3 = time.perf_counter()
        if cached is not None and not hit:
            say("computing the verification reference in Spark and writing the workload cache", None)
            try:
                workload_cache.store(first, splits, reference_table(spark, workload.df))
                cache_section["written"] = True
            except (OSError, CheckpointStorageError) as err:
                warn(f"workload cache: could not write {cached.path} ({err}); the run goes on without it")
        shared["cache_write"] = time.perf_counter() - t3

        # Flink's REST summaries (min, max, avg, p50 ... p999) of every run just written: in the Spark that is up,
        # else in pandas when they are small (barriersim.report.statistics), else in a Spark started for them
        t2 = time.perf_counter()
        written = [Run(path=target, label="." if target == root else target.name, summary=s) for target, s in finished]
        in_pandas = False
        if spark is None:
            tables = RunTables(written, *run_tables(written))
            if is_small(tables):
                in_pandas = True
                say("computing the checkpoint statistics (pandas)", None)
                compute_locally(root, tables)
            else:
                say("starting Spark on Ray for the checkpoint statistics", None)
                spark = cluster.start_spark()
                shared["spark_start"] = cluster.spark_started_seconds
                t2 = time.perf_counter()
        if not in_pandas:
            say("computing the checkpoint statistics in Spark", None)
            compute_analytics(spark, root, written)
        analytics_uri, export_error = None, None
        if remote_root is not None and is_object_store_uri(remote_root):
            say("writing the checkpoint statistics to the object store", None)
            try:
                analytics_uri = export_analytics(analytics_dir(root), child_uri(remote_root, "analytics"))
            except AnalyticsExportError as err:
                export_error = err  # raised once the run directory is complete
        shared["analytics"] = time.perf_counter() - t2
        summaries = []
        for target, summary in finished:
            timings = {key: round(value, 3) for key, value in {**shared, **summary["timings_seconds"]}.items()}
            summary = {**summary, "timings_seconds": timings,
                       "workload_cache": {**summary["workload_cache"], "statistics": "pandas" if in_pandas else "spark"}}
            if spark is not None and not summary["spark"].get("started", True):  # started for the statistics
                summary["spark"] = cluster.spark_info
            if analytics_uri is not None:
                summary["ray"] = {**summary["ray"], "analytics_uri": analytics_uri}
            write_summary(target, summary)
            summaries.append(summary)
            if on_storage[target] is not None:
                try:  # beside its savepoints and checkpoints, where a restore from them finds the run
                    publish_run(target, storage_uris[target])
                except RunPublishError as err:
                    export_error = export_error or err
        if export_error is not None:
            raise export_error
        return summaries
    finally:
        try:
            for started in jobs:
                started.kill()
            for handoff in handoffs:
                ray.kill(handoff)
        finally:
            try:
                say("stopping Ray" if hit and spark is None else "stopping Spark and Ray", None)
            finally:
                cluster.close()
