"""One run of a scenario, end to end: Spark on Ray generates the workload, the job runs on Ray actors with
periodic checkpoints, Spark verifies the sink's output against its reference result, and the run directory
gets ``summary.json`` and per-checkpoint and per-subtask statistics (CSV and Parquet, Flink's field names).

How this works: ``run_scenario`` owns the run's lifecycle inside ``RayAndSpark`` (Ray and Spark are stopped on
every exit path) and reports progress through an optional callback; the CLI and notebooks both call it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from barriersim.scenarios.loader import Scenario, with_overrides

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


def versions() -> dict[str, str]:
    return {name: version(name) for name in ("barriersim", "ray", "raydp", "pyspark")}


def write_table(rows: list[dict], path_stem: Path) -> None:
    if not rows:
        return
    table = pa.Table.from_pylist(rows)
    pacsv.write_csv(table, str(path_stem.with_suffix(".csv")))
    pq.write_table(table, str(path_stem.with_suffix(".parquet")))


def write_json_atomically(path: Path, data: dict) -> None:
    from barriersim.runtime.skeleton.storage import atomic_write

    atomic_write(path, (json.dumps(data, indent=2, sort_keys=False) + "\n").encode())


class UnsupportedScenario(Exception):
    """A valid scenario that this backend cannot run yet; the message says what and why."""


def check_ray_backend_supports(scenario: Scenario) -> None:
    """The Ray backend so far runs the walking skeleton: the quickstart shape, aligned checkpoints, no faults."""
    where = scenario.path
    if not scenario.job.is_quickstart_shape:
        raise UnsupportedScenario(f"{where}: job: the Ray backend runs only the quickstart shape so far (general graphs: issue 6)")
    if scenario.checkpointing.mode != "aligned":
        raise UnsupportedScenario(
            f"{where}: checkpointing.mode: the Ray backend runs only aligned checkpoints so far, got {scenario.checkpointing.mode!r}"
        )
    if len(scenario.faults):
        raise UnsupportedScenario(f"{where}: faults: the Ray backend does not inject faults yet (issue 6)")


def run_scenario(
    scenario: Scenario,
    out_dir: str | Path | None = None,
    seed: int | None = None,
    address: str | None = None,
    progress: ProgressCallback | None = None,
) -> RunResult:
    from barriersim.actors.job_runner import run_job_on_ray
    from barriersim.scenarios.reference import output_table, verify
    from barriersim.scenarios.spark_on_ray import RayAndSpark
    from barriersim.scenarios.workload import generate_workload, splits_to_object_store

    check_ray_backend_supports(scenario)
    if seed is not None:
        scenario = with_overrides(scenario, seed=seed)
    out = Path(out_dir) if out_dir else default_out_dir(scenario)
    out.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda stage, fraction: None)
    wall_start = time.perf_counter()

    say("starting Ray and Spark on Ray", None)
    with RayAndSpark(app_name=f"barriersim-{scenario.name}", address=address) as cluster:
        say("generating the workload in Spark", None)
        t0 = time.perf_counter()
        workload = generate_workload(cluster.spark, scenario, scenario.seed)
        block_refs = splits_to_object_store(workload)
        workload_seconds = time.perf_counter() - t0

        say("running the job", 0.0)
        total = scenario.workload.records
        result = run_job_on_ray(
            scenario,
            block_refs,
            checkpoint_root=str(out / "checkpoints"),
            job_id=f"{scenario.name}-{scenario.seed}",
            on_progress=lambda emitted, _: say("running the job", emitted / total),
        )

        say("verifying against Spark's reference", None)
        t1 = time.perf_counter()
        verification = verify(cluster.spark, workload.df, output_table(result.sink_rows))
        verify_seconds = time.perf_counter() - t1
        spark_info = cluster.spark_info
        timings = {
            "ray_start": round(cluster.ray_started_seconds, 3),
            "spark_start": round(cluster.spark_started_seconds, 3),
            "workload": round(workload_seconds, 3),
            "job": round(result.job_seconds, 3),
            "verification": round(verify_seconds, 3),
        }

    stats = result.statistics
    summary = {
        "scenario": scenario.name,
        "seed": scenario.seed,
        "backend": "ray",
        "mode": scenario.checkpointing.mode,
        "versions": versions(),
        "spark": spark_info,
        "workload": {
            "records": workload.records,
            "generated_by": "spark",
            "keys": scenario.workload.keys,
            "zipf_exponent": scenario.workload.zipf_exponent,
        },
        "checkpoints": {
            "completed": stats["completed"],
            "aborted": stats["failed"],
            "total": stats["completed"] + stats["failed"],
            "in_progress": 0,
            "failed": stats["failed"],
            "restored": 0,
            "skipped_triggers": stats["skipped"],
        },
        "verification": verification.as_dict(),
        "throughput": {
            "records_per_second": round(result.records_emitted / result.job_seconds, 1) if result.job_seconds else None,
        },
        "timings_seconds": timings,
        "wall_seconds": round(time.perf_counter() - wall_start, 3),
    }
    write_table(stats["checkpoints"], out / "checkpoints")
    write_table(stats["subtasks"], out / "subtasks")
    write_json_atomically(out / "summary.json", summary)
    return RunResult(out_dir=out, summary=summary, checkpoints=stats["checkpoints"], subtasks=stats["subtasks"])
