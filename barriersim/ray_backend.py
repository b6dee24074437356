"""Runs on Ray, end to end: Spark on Ray generates the workload, the job runs on Ray actors
(``actors.graph_runner.run_graph_on_ray``: every job graph, every mode, the scenario's faults), the output is
verified, and each run directory gets its effective scenario, ``summary.json`` and per-checkpoint and
per-subtask statistics (``barriersim.summary``) beside the job's filesystem checkpoints.

How this works: ``run_on_ray`` takes the effective scenarios of one request (one per mode, all with the same
workload: ``barriersim.api.plan``) and runs them under one start of Ray and Spark (``RayAndSpark``, stopped on
every exit path; a cluster given by ``address``, or by ``RAY_ADDRESS`` when no address is given, is attached to
and left running), on one Spark-generated workload whose records go from Spark through Ray's object store to the
source actors (``barriersim.spark.workload``). The quickstart shape is verified by Spark SQL
(``barriersim.spark.reference.verify``), any other graph by the reference evaluated in a Ray task
(``verify_in_ray``). Each mode's ``wall_seconds`` is its own; the shared start of Ray and Spark and the workload
are in every mode's ``timings_seconds``. Progress goes to an optional callback.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Sequence

from barriersim.scenarios.loader import Scenario
from barriersim.summary import build_summary, write_run_directory

ProgressCallback = Callable[[str, float | None], None]


def run_on_ray(runs: Sequence[tuple[Path, Scenario]], address: str | None = None,
               progress: ProgressCallback | None = None) -> list[dict]:
    """Run each ``(run directory, effective scenario)`` on Ray, on one workload; returns their summaries."""
    from barriersim.actors.graph_runner import run_graph_on_ray
    from barriersim.rundir import discover_runs
    from barriersim.scenarios.simulation_inputs import job_config
    from barriersim.spark.analytics import compute_analytics
    from barriersim.spark.reference import output_table, verify, verify_in_ray
    from barriersim.spark.session import RayAndSpark, ray_address
    from barriersim.spark.workload import generate_workload, splits_to_object_store

    say = progress or (lambda stage, fraction: None)
    first = runs[0][1]
    several = len(runs) > 1
    summaries = []
    say("starting Ray and Spark on Ray", None)
    with RayAndSpark(app_name=f"barriersim-{first.name}", address=ray_address(address)) as cluster:
        say("generating the workload in Spark", None)
        t0 = time.perf_counter()
        workload = generate_workload(cluster.spark, first, first.seed)
        split_refs = splits_to_object_store(workload)
        workload_seconds = time.perf_counter() - t0
        spark_info = cluster.spark_info

        for target, scenario in runs:
            mode_start = time.perf_counter()
            mode = scenario.checkpointing.mode.value
            target.mkdir(parents=True, exist_ok=True)
            config = job_config(scenario)
            stage = f"running the job ({mode})" if several else "running the job"
            say(stage, 0.0)

            def on_progress(p: dict, stage=stage) -> None:
                if p.get("source_records") is not None:
                    say(stage, min(1.0, p["source_records"] / workload.records))

            result = run_graph_on_ray(config, split_refs, str(target / "checkpoints"),
                                      f"{scenario.name}-{scenario.seed}", on_progress, seed=scenario.seed,
                                      records=workload.records)

            say("verifying against Spark's reference" if scenario.job.is_quickstart_shape
                else "verifying against the reference", None)
            t1 = time.perf_counter()
            if scenario.job.is_quickstart_shape:
                verification = verify(cluster.spark, workload.df, output_table(result.committed_output),
                                      exactly_once=config.mode.exactly_once)
            else:
                verification = verify_in_ray(config.graph, split_refs, result.committed_output,
                                             at_least_once=not config.mode.exactly_once)
            timings = {
                "ray_start": round(cluster.ray_started_seconds, 3),
                "spark_start": round(cluster.spark_started_seconds, 3),
                "workload": round(workload_seconds, 3),
                "job": round(result.job_seconds, 3),
                "first_deploy": round(result.first_deploy_seconds, 3),
                "verification": round(time.perf_counter() - t1, 3),
            }
            summary = build_summary(
                scenario=scenario, backend="ray", generated_by="spark",
                records=workload.records, counts=result.counts, verification=verification.as_dict(),
                outcome=result.outcome, restarts=result.restarts,
                restored_checkpoint_ids=result.restored_checkpoint_ids,
                restored_in_flight_bytes=result.restored_in_flight_bytes,
                records_per_second=result.records_emitted / result.job_seconds if result.job_seconds else None,
                throughput_clock="wall", faults_fired=result.fault_log, failure_reason=result.failure_reason,
                backend_sections={"spark": spark_info, "timings_seconds": timings,
                                  "ray": {"coordinator_failovers": result.coordinator_failovers,
                                          "killed": result.killed, "failures": result.failures,
                                          "storage_errors": result.storage_errors}},
                wall_seconds=time.perf_counter() - mode_start,
            )
            write_run_directory(target, scenario, summary, result.checkpoints, result.subtasks)
            summaries.append(summary)

        # Flink's REST summaries (min, max, avg, p50 ... p999) of every run just written, in the Spark that is up
        say("computing the checkpoint statistics in Spark", None)
        root = runs[0][0].parent if several else runs[0][0]
        compute_analytics(cluster.spark, root, discover_runs(root))
    return summaries
