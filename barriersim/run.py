"""Runs of a scenario on Ray, end to end: Spark on Ray generates the workload, the job runs on Ray actors
(``actors.graph_runner.run_graph_on_ray``: every job graph, every mode, the scenario's faults), the output is
verified, and the run directory gets ``summary.json`` and per-checkpoint and per-subtask statistics (CSV and
Parquet, Flink's field names, ``barriersim.summary``) beside the job's filesystem checkpoints.

How this works: ``run_scenario`` runs one mode, ``run_scenario_modes`` several on the same Spark-generated
workload (each in ``OUT/<mode>/``) under one start of Ray and Spark. Ray and Spark live inside ``RayAndSpark``
(stopped on every exit path; a cluster given by ``address``, or by ``RAY_ADDRESS`` when no address is given,
is attached to and left running). The workload's records go from Spark through Ray's object store to the
source actors (``scenarios.workload.splits_to_object_store``); the settings are the simulator's
(``scenarios.simulation_inputs.simulation_config``). The quickstart shape is verified by Spark SQL
(``scenarios.reference.verify``), any other graph by the simulator's reference evaluated in a Ray task
(``scenarios.reference.verify_in_ray``). Progress goes to an optional callback; the CLI and notebooks both
call these functions.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Sequence

from barriersim.errors import UnsupportedScenario
from barriersim.runtime.faults import FaultSchedule
from barriersim.scenarios.loader import Scenario, with_overrides
from barriersim.summary import build_summary, versions, write_json_atomically, write_run_directory, write_table

__all__ = [
    "ProgressCallback", "RunResult", "UnsupportedScenario", "default_out_dir",
    "ray_address", "run_scenario",
    "run_scenario_modes", "versions", "write_json_atomically", "write_table",
]

ProgressCallback = Callable[[str, float | None], None]


@dataclass
class RunResult:
    out_dir: Path
    summary: dict
    checkpoints: list[dict] = field(default_factory=list)
    subtasks: list[dict] = field(default_factory=list)


def default_out_dir(scenario: Scenario, root: str | Path = "runs") -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return Path(root) / f"{scenario.name}-{stamp}"


def run_scenario(
    scenario: Scenario,
    out_dir: str | Path | None = None,
    seed: int | None = None,
    address: str | None = None,
    progress: ProgressCallback | None = None,
    *,
    mode: str | None = None,
    faults: FaultSchedule | None = None,
) -> RunResult:
    """One run on Ray in ``mode`` (default: the scenario's) with ``faults`` (default: the scenario's)."""
    if seed is not None:
        scenario = with_overrides(scenario, seed=seed)
    out = Path(out_dir) if out_dir else default_out_dir(scenario)
    [result] = _run_on_ray(scenario, [mode or scenario.checkpointing.mode], out, address, progress, faults,
                           per_mode_dirs=False)
    return result


def run_scenario_modes(
    scenario: Scenario,
    modes: Sequence[str],
    out_dir: str | Path | None = None,
    seed: int | None = None,
    address: str | None = None,
    progress: ProgressCallback | None = None,
) -> list[RunResult]:
    """Several modes on the same Spark-generated workload, one Ray and Spark start, each in ``OUT/<mode>/``."""
    if seed is not None:
        scenario = with_overrides(scenario, seed=seed)
    out = Path(out_dir) if out_dir else default_out_dir(scenario)
    return _run_on_ray(scenario, list(modes), out, address, progress, None, per_mode_dirs=True)


def ray_address(address: str | None) -> str | None:
    """The cluster to attach to: ``address``, else ``RAY_ADDRESS`` (Ray's convention), else None (start one)."""
    return address or os.environ.get("RAY_ADDRESS") or None


def _run_on_ray(scenario: Scenario, modes: list[str], out: Path, address: str | None,
                progress: ProgressCallback | None, faults: FaultSchedule | None, per_mode_dirs: bool) -> list[RunResult]:
    from barriersim.actors.graph_runner import run_graph_on_ray
    from barriersim.rundir import discover_runs
    from barriersim.spark.analytics import compute_analytics
    from barriersim.spark.reference import output_table, verify, verify_in_ray
    from barriersim.scenarios.simulation_inputs import simulation_config
    from barriersim.spark.session import RayAndSpark
    from barriersim.spark.workload import generate_workload, splits_to_object_store

    out.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda stage, fraction: None)
    wall_start = time.perf_counter()
    seed = scenario.seed
    results = []

    say("starting Ray and Spark on Ray", None)
    with RayAndSpark(app_name=f"barriersim-{scenario.name}", address=ray_address(address)) as cluster:
        say("generating the workload in Spark", None)
        t0 = time.perf_counter()
        workload = generate_workload(cluster.spark, scenario, seed)
        split_refs = splits_to_object_store(workload)
        workload_seconds = time.perf_counter() - t0
        spark_info = cluster.spark_info

        for mode in modes:
            mode_start = time.perf_counter()
            target = out / mode if per_mode_dirs else out
            target.mkdir(parents=True, exist_ok=True)
            config = simulation_config(scenario, mode, faults)
            stage = f"running the job ({mode})" if per_mode_dirs else "running the job"
            say(stage, 0.0)

            def on_progress(p: dict, stage=stage) -> None:
                if p.get("source_records") is not None:
                    say(stage, min(1.0, p["source_records"] / workload.records))

            result = run_graph_on_ray(config, split_refs, str(target / "checkpoints"), f"{scenario.name}-{seed}",
                                      on_progress, seed=seed, records=workload.records)

            say("verifying against Spark's reference" if scenario.job.is_quickstart_shape
                else "verifying against the reference", None)
            t1 = time.perf_counter()
            if scenario.job.is_quickstart_shape:
                verification = verify(cluster.spark, workload.df, output_table(result.committed_output))
            else:
                verification = verify_in_ray(config.graph, split_refs, result.committed_output,
                                             at_least_once=not config.mode.exactly_once)
            verify_seconds = time.perf_counter() - t1
            first = not results
            timings = {
                "ray_start": round(cluster.ray_started_seconds, 3),
                "spark_start": round(cluster.spark_started_seconds, 3),
                "workload": round(workload_seconds, 3) if first else 0.0,
                "job": round(result.job_seconds, 3),
                "first_deploy": round(result.first_deploy_seconds, 3),
                "verification": round(verify_seconds, 3),
            }
            wall = time.perf_counter() - (wall_start if first else mode_start)
            summary = build_summary(
                scenario=scenario, seed=seed, backend="ray", mode=config.mode.value, generated_by="spark",
                records=workload.records, counts=result.counts, verification=verification.as_dict(),
                outcome=result.outcome, restarts=result.restarts,
                restored_checkpoint_ids=result.restored_checkpoint_ids,
                restored_in_flight_bytes=result.restored_in_flight_bytes,
                records_per_second=result.records_emitted / result.job_seconds if result.job_seconds else None,
                throughput_clock="wall", faults=config.faults.to_plain(), faults_fired=result.fault_log,
                backend_sections={"spark": spark_info, "timings_seconds": timings,
                                  "ray": {"coordinator_failovers": result.coordinator_failovers,
                                          "killed": result.killed, "failures": result.failures,
                                          "storage_errors": result.storage_errors}},
                wall_seconds=wall,
            )
            write_run_directory(target, summary, result.checkpoints, result.subtasks)
            results.append(RunResult(out_dir=target, summary=summary, checkpoints=result.checkpoints,
                                     subtasks=result.subtasks))

        # Flink's REST summaries (min, max, avg, p50 ... p999) of every run just written, in the Spark that is up
        say("computing the checkpoint statistics in Spark", None)
        compute_analytics(cluster.spark, out, discover_runs(out))
    return results
