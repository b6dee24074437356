"""The run directory both backends write: ``summary.json`` and the per-checkpoint and per-subtask statistics.

How this works: ``build_summary`` lays out ``summary.json`` the same way for a Ray run and a simulated one, in
this order: ``scenario``, ``seed``, ``backend`` (``ray`` or ``sim``), ``mode``, ``versions``, ``workload``
(``records``, ``generated_by``, ``keys``, ``zipf_exponent``), ``checkpoints`` (Flink's counts: ``completed``,
``aborted``, ``total``, ``in_progress``, ``failed``, ``restored``), ``verification`` (``reference``, then the
verdict's counts), ``job`` (``outcome``, ``restarts``, ``restored_checkpoint_ids``,
``restored_in_flight_bytes``), ``throughput`` (``records_per_second`` and the ``clock`` it was measured on:
``wall`` on Ray, ``virtual`` in the simulator), ``faults`` (the fault schedule run), ``faults_fired`` (each
fault of it with ``fired``, how often it took effect, and ``first_at_ms``: ``runtime.fault_log``), then the
backend's own sections (Ray: ``spark``, ``timings_seconds``; simulator: ``simulation``, ``trace_sha256``, ``replay``), and
``wall_seconds`` last. ``write_run_directory`` writes it atomically (``runtime.storage``'s
``AtomicFileWriter``) beside ``checkpoints`` and ``subtasks`` tables (CSV and Parquet, Flink's field names;
no table without rows).
"""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from barriersim.runtime.storage.atomic_file import AtomicFileWriter
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
    """The coordinator's counts (Flink's ``CheckpointStatsCounts``), with ``aborted`` as the summary names failures."""
    return {
        "completed": counts["completed"],
        "aborted": counts["failed"],
        "total": counts["total"],
        "in_progress": counts["in_progress"],
        "failed": counts["failed"],
        "restored": counts["restored"],
    }


def build_summary(
    *,
    scenario: Scenario,
    seed: int,
    backend: str,
    mode: str,
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
    faults: list,
    faults_fired: list,
    backend_sections: dict,
    wall_seconds: float,
) -> dict:
    summary = {
        "scenario": scenario.name,
        "seed": seed,
        "backend": backend,
        "mode": mode,
        "versions": versions(),
        "workload": {
            "records": records,
            "generated_by": generated_by,
            "keys": scenario.workload.keys,
            "zipf_exponent": scenario.workload.zipf_exponent,
        },
        "checkpoints": checkpoint_counts(counts),
        "verification": verification,
        "job": {
            "outcome": outcome,
            "restarts": restarts,
            "restored_checkpoint_ids": list(restored_checkpoint_ids),
            "restored_in_flight_bytes": restored_in_flight_bytes,
        },
        "throughput": {
            "records_per_second": None if records_per_second is None else round(records_per_second, 1),
            "clock": throughput_clock,
        },
        "faults": faults,
        "faults_fired": faults_fired,
    }
    summary.update(backend_sections)
    summary["wall_seconds"] = round(wall_seconds, 3)
    return summary


def write_run_directory(out_dir: Path, summary: dict, checkpoints: list[dict], subtasks: list[dict]) -> None:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_table(checkpoints, out_dir / "checkpoints")
    write_table(subtasks, out_dir / "subtasks")
    write_json_atomically(out_dir / "summary.json", summary)
