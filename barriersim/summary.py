"""The run directory both backends write: the effective scenario, ``summary.json`` and the per-checkpoint and
per-subtask statistics. See docs/runs-and-workloads.md, "The run directory and summary.json".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from barriersim.backends import Backend, WorkloadGenerator
from barriersim.runtime.job.config import JobConfig
from barriersim.runtime.storage.atomic_file import AtomicFileWriter
from barriersim.scenarios.documents import scenario_document, write_scenario
from barriersim.scenarios.loader import Scenario


def versions() -> dict[str, str | None]:
    """The installed versions of barriersim and of the Ray and Spark packages; ``None`` for one not installed
    (a simulator-only install has none of ray, raydp and pyspark)."""
    return {name: _installed_version(name) for name in ("barriersim", "ray", "raydp", "pyspark")}


def _installed_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def write_table(rows: list[dict], path_stem: Path) -> None:
    if not rows:
        return
    table = pa.Table.from_pylist(rows)
    pacsv.write_csv(table, str(path_stem.with_suffix(".csv")))
    pq.write_table(table, str(path_stem.with_suffix(".parquet")))


def write_json_atomically(path: Path, data: dict) -> None:
    AtomicFileWriter().write(Path(path), (json.dumps(data, indent=2, sort_keys=False) + "\n").encode())


def checkpoint_counts(counts: dict[str, int]) -> dict[str, int]:
    """The coordinator's counts (Flink's ``CheckpointStatsCounts``)."""
    return {
        "completed": counts["completed"],
        "total": counts["total"],
        "in_progress": counts["in_progress"],
        "failed": counts["failed"],
        "restored": counts["restored"],
    }


def placement_section(config: JobConfig, deployments: list[dict], ray_nodes: list[dict] | None = None) -> dict:
    """Where the job ran (``runtime.job.placement``): its TaskManagers, slots and nodes, the kinds of its input
    channels, every deployment's node of each TaskManager, the nodes lost, and the Ray nodes (Ray runs)."""
    placement, graph = config.placement, config.graph
    local = remote = 0
    for v in graph.vertices:
        for i in range(v.parallelism):
            n_local, n_remote = placement.input_channel_counts(graph, v.name, i)
            local, remote = local + n_local, remote + n_remote
    nodes_by_deployment = [list(d["taskmanager_nodes"]) for d in deployments]
    first = nodes_by_deployment[0] if nodes_by_deployment else list(placement.taskmanager_nodes())
    section = {
        "taskmanagers": placement.taskmanagers,
        "slots_per_taskmanager": placement.slots_per_taskmanager,
        "nodes": placement.nodes,
        "input_channels": {"local": local, "remote": remote},
        "taskmanager_nodes": nodes_by_deployment,
        # a lost node's TaskManagers move to the survivors, so it is in the first deployment and not in the last
        "nodes_lost": sorted(set(first) - set(nodes_by_deployment[-1] if nodes_by_deployment else first)),
    }
    if ray_nodes is not None:
        section["ray_nodes"] = ray_nodes
    return section


def _job_config(config: JobConfig, job: int | None) -> JobConfig:
    """The settings of job ``job`` of a run of several jobs (restores: their own graphs and placements)."""
    if job is None:
        return config
    graph = config.job_graphs[job]
    return config if graph is config.graph else config.for_job(graph)


def placement_rows(config: JobConfig, deployments: list[dict]) -> list[dict]:
    """One row per deployment and subtask: its TaskManager, slot, node and input channel kinds (a simulated run's
    ``placement`` table; a Ray run's adds the Ray node each actor reported). In a run of several jobs a
    deployment names its job, and its rows do too."""
    rows: list[dict] = []
    for d in deployments:
        job = d.get("job")
        c = _job_config(config, job)
        head = {"deployment": d["epoch"]} if job is None else {"job": job, "deployment": d["epoch"]}
        rows.extend({**head, **row} for row in c.placement.describe(c.graph, tuple(d["taskmanager_nodes"])))
    return rows


def with_channel_kinds(subtasks: list[dict], config: JobConfig) -> list[dict]:
    """The per-subtask statistics with each subtask's TaskManager and how many of its input channels are local
    and how many remote (in a run of several jobs, by each row's job)."""
    described: dict = {}

    def rows_of(job):
        if job not in described:
            c = _job_config(config, job)
            described[job] = {row["task"]: row for row in c.placement.describe(c.graph)}
        return described[job]

    keys = ("taskmanager", "local_input_channels", "remote_input_channels")
    out = []
    for r in subtasks:
        rows = rows_of(r.get("job"))
        out.append({**r, **{k: rows[r["task"]][k] for k in keys}} if r.get("task") in rows else r)
    return out


# A source subtask reached the offered rate when it emitted its split at least this fraction of that rate.
RATE_REACHED_FRACTION = 0.9


def source_rates(offered_per_subtask: int, sources: dict[str, tuple[int, int | None]]) -> dict:
    """The offered rate against the achieved one: ``sources`` maps each source subtask (``vertex#i``) to the
    records it read (how far its reader got: its split, unless the job ended before it) and when it emitted its last
    one (ms after the job's start, the clock of the fault schedule; None when it emitted none). A subtask's achieved
    rate is its records over that time; it reached the offered rate when it is at least ``RATE_REACHED_FRACTION`` of
    it. Without an offered rate (0: as fast as possible) nothing is flagged."""
    offered = offered_per_subtask or None
    rows = []
    for task in sorted(sources, key=_subtask_order):
        records, last_ms = sources[task]
        achieved = round(records * 1000 / last_ms, 1) if last_ms else None
        reached = None if offered is None or achieved is None else achieved >= RATE_REACHED_FRACTION * offered
        rows.append(
            {
                "task": task,
                "records": records,
                "seconds": None if last_ms is None else last_ms / 1000,
                "achieved_per_second": achieved,
                "reached": reached,
            }
        )
    flags = [r["reached"] for r in rows if r["reached"] is not None]
    return {
        "offered_per_source_subtask": offered,
        "offered_rate_reached": all(flags) if flags else None,
        "sources": rows,
    }


def _subtask_order(task: str) -> tuple[str, int]:
    vertex, _, index = task.rpartition("#")
    return (vertex, int(index)) if index.isdigit() else (task, 0)


def build_summary(
    *,
    scenario: Scenario,
    backend: Backend,
    generated_by: WorkloadGenerator,
    records: int,
    counts: dict[str, int],
    verification: dict,
    outcome: str,
    restarts: int,
    restored_checkpoint_ids: list[int],
    restored_in_flight_bytes: int,
    records_per_second: float | None,
    throughput_clock: str,
    faults_fired: list,
    backend_sections: dict,
    wall_seconds: float,
    job_extra: dict | None = None,
    jobs: list[dict] | None = None,
    actions: list[dict] | None = None,
    verification_scope: str = "workload",
    placement: dict | None = None,
    source_rates: dict | None = None,
    failure_reason: str | None = None,
    output_after_snapshot: dict | None = None,
) -> dict:
    """``summary.json`` of a run of the effective ``scenario`` (the one its ``scenario.toml`` holds);
    ``output_after_snapshot``: of a run restored from an earlier run's snapshot, what that run committed after it
    (``barriersim.continuation.OutputAfterSnapshot``)."""
    document = scenario_document(scenario)
    summary = {
        "scenario": scenario.name,
        "seed": scenario.seed,
        "backend": backend.value,
        "mode": scenario.checkpointing.mode.value,
        "versions": versions(),
        # records: in all (a general graph's workload.records is per source vertex; scenario.toml has it)
        "workload": {
            "records": records,
            "generated_by": generated_by.value,
            **{k: v for k, v in document["workload"].items() if k != "records"},
        },
        "checkpointing": document["checkpointing"],
        "restart": document["restart"],
        "network": document["network"],
        "cluster": document["cluster"],
        "placement": placement,
        "checkpoints": checkpoint_counts(counts),
        # covers: "workload" (every record), or "snapshot" (a run that ended by a stop or a cancel: what its last
        # snapshot accounts for, runtime.verification.snapshot)
        "verification": {**verification, "covers": verification_scope},
        "job": {
            "outcome": outcome,
            "failure_reason": failure_reason,
            "restarts": restarts,
            "restored_checkpoint_ids": list(restored_checkpoint_ids),
            "restored_in_flight_bytes": restored_in_flight_bytes,
            **(job_extra or {}),
        },
        "throughput": {
            "records_per_second": None if records_per_second is None else round(records_per_second, 1),
            "clock": throughput_clock,
            **(source_rates or {}),
        },
        "faults": scenario.faults.to_plain(),
        "faults_fired": faults_fired,
    }
    if scenario.restore is not None or len(scenario.actions):
        summary["restore"] = (
            None
            if scenario.restore is None
            else {**scenario.restore.to_plain(), "earlier_output_after_snapshot": output_after_snapshot}
        )
        summary["actions"] = actions or []
        summary["jobs"] = jobs or []
    summary.update(backend_sections)
    summary["wall_seconds"] = round(wall_seconds, 3)
    return summary


def _field(value, name: str):
    return value[name] if isinstance(value, dict) else getattr(value, name)


def jobs_sections(report, next_attempt_number: int, verification_scope: str) -> dict:
    """``build_summary``'s job-level arguments from a run's report (``runtime.job.dispatcher.RunReport``, or its
    fields as the Ray backend's result holds them, each job's report a dict)."""
    stop = (
        next(
            (
                op
                for op in report.operations
                if op["operation"] == "stop_with_savepoint" and op["status"] == "COMPLETED"
            ),
            None,
        )
        if report.final_state == "FINISHED"
        else None
    )
    jobs = []
    for k, job in enumerate(report.jobs):
        outcome = _field(job, "outcome")
        jobs.append(
            {
                "job": k,
                "job_id": _field(job, "job_id"),
                "final_state": _field(job, "final_state"),
                "outcome": getattr(outcome, "value", outcome),
                "parallelism": _field(job, "parallelism"),
                "latest_restored": _field(job, "latest_restored"),
                "checkpoints": checkpoint_counts(_field(job, "counts")),
                "restarts": _field(job, "restarts"),
                "operations": _field(job, "operations"),
                "retained_checkpoint": _field(job, "retained_checkpoint"),
            }
        )
    return {
        "job_extra": {
            "final_state": report.final_state,
            "stopped_with_savepoint": None
            if stop is None
            else {"savepoint_id": stop["checkpoint_id"], "path": stop["path"], "drain": stop["drain"]},
            "retained_checkpoint": report.retained_checkpoint,
            "latest_restored": report.latest_restored,
            "next_attempt_number": next_attempt_number,
        },
        "jobs": jobs,
        "actions": report.actions,
        "verification_scope": verification_scope,
    }


SCENARIO_FILE = "scenario.toml"
SUMMARY_FILE = "summary.json"


def write_run_directory(
    out_dir: Path,
    scenario: Scenario,
    summary: dict | None,
    checkpoints: list[dict],
    subtasks: list[dict],
    placement: Sequence[dict] = (),
) -> None:
    """The run directory: the effective scenario (``scenario.toml``), the statistics tables, where each subtask
    ran (``placement``), ``summary.json`` (last: a directory with ``summary.json`` is a finished run; None leaves
    it to ``write_summary``)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_scenario(scenario, out_dir / SCENARIO_FILE)
    write_table(checkpoints, out_dir / "checkpoints")
    write_table(subtasks, out_dir / "subtasks")
    write_table(list(placement), out_dir / "placement")
    if summary is not None:
        write_summary(out_dir, summary)


def write_summary(out_dir: Path, summary: dict) -> None:
    write_json_atomically(Path(out_dir) / SUMMARY_FILE, summary)


def default_out_dir(scenario: Scenario, root: str | Path = "runs", suffix: str = "") -> Path:
    """``runs/<scenario><suffix>-<UTC timestamp>``."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return Path(root) / f"{scenario.name}{suffix}-{stamp}"
