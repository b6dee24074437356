"""The run directory both backends write: the effective scenario, ``summary.json`` and the per-checkpoint and
per-subtask statistics.

How this works: ``build_summary`` lays out ``summary.json`` the same way for a Ray run and a simulated one, in
this order: ``scenario``, ``seed``, ``backend`` (``ray`` or ``sim``), ``mode``, ``versions``, ``workload``
(``records``, ``generated_by``, then the scenario's workload settings), ``checkpointing``, ``network`` and ``cluster`` (the
settings the run used, as the scenario file names them), ``checkpoints`` (Flink's counts: ``completed``,
``total``, ``in_progress``, ``failed``, ``restored``), ``verification`` (``reference``, then the
verdict's counts), ``job`` (``outcome``, ``failure_reason``: one line saying what failed the job, or null,
``restarts``, ``restored_checkpoint_ids``, ``restored_in_flight_bytes``), ``throughput`` (``records_per_second``
and the ``clock`` it was measured on: ``wall`` on Ray, ``virtual`` in the simulator; then the offered rate against
the achieved one per source subtask, ``source_rates``), ``faults`` (the fault schedule run), ``faults_fired`` (each
fault of it with ``fired``, how often it took effect, and ``first_at_ms``: ``runtime.fault_log``), then the
backend's own sections (Ray: ``spark``, ``timings_seconds``; simulator: ``simulation``, ``trace_sha256``, ``replay``), and
``wall_seconds`` last. ``write_run_directory`` writes it atomically (``runtime.storage``'s
``AtomicFileWriter``) beside ``scenario.toml`` (the effective scenario: overrides, sweep values, seed, mode and
faults applied, so ``barriersim replay`` of it runs the same run) and the ``checkpoints`` and ``subtasks``
tables (CSV and Parquet, Flink's field names; no table without rows).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

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


# A source subtask reached the offered rate when it emitted its split at least this fraction of that rate.
RATE_REACHED_FRACTION = 0.9


def source_rates(offered_per_subtask: int, sources: dict[str, tuple[int, int | None]]) -> dict:
    """The offered rate against the achieved one: ``sources`` maps each source subtask (``vertex#i``) to its
    split's records and when it emitted its last one (ms after the job's start, the clock of the fault schedule;
    None when it did not finish). A subtask's achieved rate is its records over that time; it reached the offered
    rate when it is at least ``RATE_REACHED_FRACTION`` of it. Without an offered rate (0: as fast as possible)
    nothing is flagged."""
    offered = offered_per_subtask or None
    rows = []
    for task in sorted(sources, key=_subtask_order):
        records, last_ms = sources[task]
        achieved = round(records * 1000 / last_ms, 1) if last_ms else None
        reached = None if offered is None or achieved is None else achieved >= RATE_REACHED_FRACTION * offered
        rows.append({"task": task, "records": records, "seconds": None if last_ms is None else last_ms / 1000,
                     "achieved_per_second": achieved, "reached": reached})
    flags = [r["reached"] for r in rows if r["reached"] is not None]
    return {"offered_per_source_subtask": offered, "offered_rate_reached": all(flags) if flags else None,
            "sources": rows}


def _subtask_order(task: str) -> tuple[str, int]:
    vertex, _, index = task.rpartition("#")
    return (vertex, int(index)) if index.isdigit() else (task, 0)


def build_summary(
    *,
    scenario: Scenario,
    backend: str,
    generated_by: str,
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
    source_rates: dict | None = None,
    failure_reason: str | None = None,
) -> dict:
    """``summary.json`` of a run of the effective ``scenario`` (the one its ``scenario.toml`` holds)."""
    document = scenario_document(scenario)
    summary = {
        "scenario": scenario.name,
        "seed": scenario.seed,
        "backend": backend,
        "mode": scenario.checkpointing.mode.value,
        "versions": versions(),
        # records: in all (a general graph's workload.records is per source vertex; scenario.toml has it)
        "workload": {"records": records, "generated_by": generated_by,
                     **{k: v for k, v in document["workload"].items() if k != "records"}},
        "checkpointing": document["checkpointing"],
        "network": document["network"],
        "cluster": document["cluster"],
        "checkpoints": checkpoint_counts(counts),
        "verification": verification,
        "job": {
            "outcome": outcome,
            "failure_reason": failure_reason,
            "restarts": restarts,
            "restored_checkpoint_ids": list(restored_checkpoint_ids),
            "restored_in_flight_bytes": restored_in_flight_bytes,
        },
        "throughput": {
            "records_per_second": None if records_per_second is None else round(records_per_second, 1),
            "clock": throughput_clock,
            **(source_rates or {}),
        },
        "faults": scenario.faults.to_plain(),
        "faults_fired": faults_fired,
    }
    summary.update(backend_sections)
    summary["wall_seconds"] = round(wall_seconds, 3)
    return summary


SCENARIO_FILE = "scenario.toml"
SUMMARY_FILE = "summary.json"


def write_run_directory(out_dir: Path, scenario: Scenario, summary: dict | None, checkpoints: list[dict],
                        subtasks: list[dict]) -> None:
    """The run directory: the effective scenario (``scenario.toml``), the statistics tables, ``summary.json``
    (last: a directory with ``summary.json`` is a finished run; None leaves it to ``write_summary``)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_scenario(scenario, out_dir / SCENARIO_FILE)
    write_table(checkpoints, out_dir / "checkpoints")
    write_table(subtasks, out_dir / "subtasks")
    if summary is not None:
        write_summary(out_dir, summary)


def write_summary(out_dir: Path, summary: dict) -> None:
    write_json_atomically(Path(out_dir) / SUMMARY_FILE, summary)


def default_out_dir(scenario: Scenario, root: str | Path = "runs", suffix: str = "") -> Path:
    """``runs/<scenario><suffix>-<UTC timestamp>``."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return Path(root) / f"{scenario.name}{suffix}-{stamp}"
