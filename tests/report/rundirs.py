"""Tiny run directories for the report tests, built with pyarrow in the layout ``barriersim run`` writes."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

TRIGGER0 = 1_700_000_000_000


def checkpoint_row(
    cid: int,
    e2e: int,
    status: str = "COMPLETED",
    persisted: int = 0,
    processed: int = 0,
    size: int = 1000,
    subtasks: int = 3,
) -> dict:
    trigger = TRIGGER0 + cid * 1000
    unaligned = persisted > 0
    return {
        "id": cid,
        "status": status,
        "is_savepoint": False,
        "checkpoint_type": "UNALIGNED_CHECKPOINT" if unaligned else "CHECKPOINT",
        "trigger_timestamp": trigger,
        "latest_ack_timestamp": trigger + e2e,
        "end_to_end_duration": e2e,
        "state_size": size,
        "checkpointed_size": size,
        "alignment_buffered": 0,
        "processed_data": processed,
        "persisted_data": persisted,
        "num_subtasks": subtasks,
        "num_acknowledged_subtasks": subtasks if status == "COMPLETED" else subtasks - 1,
        "failure_reason": None if status == "COMPLETED" else "CHECKPOINT_DECLINED",
    }


def subtask_row(
    cid: int,
    task: str,
    start_delay: int,
    alignment: int,
    sync: int,
    ack_after: int,
    aborted: bool = False,
    unaligned: bool = False,
) -> dict:
    trigger = TRIGGER0 + cid * 1000
    return {
        "id": cid,
        "task": task,
        "ack_timestamp": trigger + ack_after,
        "end_to_end_duration": ack_after,
        "state_size": 10,
        "checkpointed_size": 10,
        "checkpoint_sync": sync,
        "checkpoint_async": max(0, ack_after - start_delay - alignment - sync),
        "alignment_buffered": 0,
        "alignment_processed": 0,
        "alignment_persisted": 0,
        "alignment_duration": alignment,
        "start_delay": start_delay,
        "unaligned_checkpoint": unaligned,
        "aborted": aborted,
    }


def write_run(
    path: Path,
    mode: str,
    checkpoints: list[dict],
    subtasks: list[dict],
    *,
    zipf: float = 1.0,
    seed: int = 7,
    scenario: str = "tiny",
    restored: int = 0,
    string_failure_reason: bool = True,
    failed_without_id: int = 0,
) -> Path:
    """``failed_without_id``: triggers that failed before they had an id (no row), counted in the summary's total and
    failed as Flink counts them."""
    path.mkdir(parents=True, exist_ok=True)
    count = {
        status: sum(1 for c in checkpoints if c["status"] == status)
        for status in ("COMPLETED", "FAILED", "IN_PROGRESS")
    }
    summary = {
        "scenario": scenario,
        "seed": seed,
        "backend": "ray",
        "mode": mode,
        "workload": {"records": 1000, "generated_by": "spark", "keys": 10, "zipf_exponent": zipf},
        "checkpoints": {
            "completed": count["COMPLETED"],
            "total": len(checkpoints) + failed_without_id,
            "in_progress": count["IN_PROGRESS"],
            "failed": count["FAILED"] + failed_without_id,
            "restored": restored,
        },
        "verification": {
            "reference": "spark",
            "expected_records": 1000,
            "lost": 0,
            "duplicated": 0,
            "wrong": 0,
            "verdict": "exactly-once",
        },
    }
    (path / "summary.json").write_text(json.dumps(summary, indent=2))
    cp_schema = pa.schema([("failure_reason", pa.string())])
    cp = pa.Table.from_pylist(checkpoints)
    if string_failure_reason:  # else all-None stays Arrow's null type, as in real runs without failures
        cp = cp.set_column(
            cp.schema.get_field_index("failure_reason"),
            cp_schema.field("failure_reason"),
            cp.column("failure_reason").cast(pa.string()),
        )
    pq.write_table(cp, str(path / "checkpoints.parquet"))
    if subtasks:  # like ``barriersim run``, which writes no table without rows
        pq.write_table(pa.Table.from_pylist(subtasks), str(path / "subtasks.parquet"))
    return path


TASKS = ("source#0", "keyed-sum#0", "sink#0")


def two_mode_run_dir(root: Path) -> Path:
    """``root/aligned`` and ``root/unaligned``, three checkpoints each (the second aligned one is the
    longest completed; the aligned run's checkpoint 4 failed and is longer still)."""
    aligned_cps = [
        checkpoint_row(1, 40),
        checkpoint_row(2, 90),
        checkpoint_row(3, 60),
        checkpoint_row(4, 500, status="FAILED"),
    ]
    aligned_st = [
        subtask_row(c["id"], t, 5 + 10 * i, 3 * i, 1, c["end_to_end_duration"] - 2 + i)
        for c in aligned_cps[:3]
        for i, t in enumerate(TASKS)
    ]
    unaligned_cps = [
        checkpoint_row(1, 20, persisted=4096),
        checkpoint_row(2, 25, persisted=8192),
        checkpoint_row(3, 22, persisted=2048),
    ]
    unaligned_st = [
        subtask_row(c["id"], t, 2 + i, 0, 1, c["end_to_end_duration"] - 2 + i, unaligned=True)
        for c in unaligned_cps
        for i, t in enumerate(TASKS)
    ]
    write_run(root / "aligned", "aligned", aligned_cps, aligned_st)
    write_run(root / "unaligned", "unaligned", unaligned_cps, unaligned_st)
    return root


def tiny_runs(root: Path) -> Path:
    """Two hand-made runs (aligned with failed, in-progress and aborted rows and a trigger that failed before it had
    an id; unaligned) whose statistics are computed by hand in the tests."""
    aligned_cps = [
        checkpoint_row(1, 10, processed=100, size=1000),
        checkpoint_row(2, 20, processed=300, size=2000),
        checkpoint_row(3, 30, processed=0, size=3000),
        checkpoint_row(4, 40, processed=200, size=4000),
        checkpoint_row(5, 1000, status="FAILED", processed=9999, size=99999),
        checkpoint_row(6, 0, status="IN_PROGRESS"),
    ]
    aligned_st = [
        subtask_row(i, "sink#0", start_delay=10 * i, alignment=i, sync=0, ack_after=10 * i + i) for i in (1, 2, 3, 4)
    ]
    aligned_st += [
        subtask_row(1, "keyed-sum#0", 77, 100, 0, 200, aborted=True),  # aborted: not counted
        subtask_row(5, "sink#0", 5, 500, 0, 600),
    ]  # checkpoint 5 failed: not counted
    write_run(root / "aligned", "aligned", aligned_cps, aligned_st, zipf=1.0, seed=3, restored=2, failed_without_id=1)
    unaligned_cps = [checkpoint_row(1, 7, persisted=100), checkpoint_row(2, 9, persisted=300)]
    unaligned_st = [subtask_row(1, "sink#0", 2, 0, 0, 7), subtask_row(2, "sink#0", 4, 0, 0, 9)]
    write_run(
        root / "unaligned", "unaligned", unaligned_cps, unaligned_st, zipf=2.0, seed=3, string_failure_reason=False
    )
    return root


MODES = ("aligned", "unaligned", "at-least-once")


def sweep_run_dir(
    root: Path, parameter: str, values: list, tasks: tuple[str, ...] = TASKS, modes: tuple[str, ...] = MODES
) -> Path:
    """A sweep's directory as ``barriersim sweep`` lays it out (``root/<name>=<value>/<mode>/`` and ``sweep.json``),
    three checkpoints per run; point ``i``'s checkpoints take ``10 * i`` ms longer, its subtasks align for
    ``i`` ms per subtask index, and only unaligned runs persist in-flight data (``1024 * (i + 1)`` bytes)."""
    index = {
        "scenario": "tiny",
        "backend": "sim",
        "seed": 7,
        "workload": "local",
        "modes": "all",
        "axes": {parameter: list(values)},
        "points": [],
        "analytics": None,
    }
    for i, value in enumerate(values):
        label = f"{parameter.rpartition('.')[2]}={value}"
        runs = []
        for mode in modes:
            cps = [
                checkpoint_row(
                    c, 20 + 10 * i + c, persisted=1024 * (i + 1) if mode == "unaligned" else 0, subtasks=len(tasks)
                )
                for c in (1, 2, 3)
            ]
            sts = [
                subtask_row(c["id"], t, 2 + j % 5, i * (j % 3), 1, c["end_to_end_duration"] - 1)
                for c in cps
                for j, t in enumerate(tasks)
            ]
            write_run(root / label / mode, mode, cps, sts)
            runs.append(
                {
                    "mode": mode,
                    "dir": f"{label}/{mode}",
                    "verdict": "exactly-once",
                    "lost": 0,
                    "duplicated": 0,
                    "wrong": 0,
                    "checkpoints": {"completed": 3, "failed": 0},
                }
            )
        index["points"].append({"index": i, "label": label, "settings": {parameter: value}, "runs": runs})
    (root / "sweep.json").write_text(json.dumps(index, indent=1))
    return root


def write_sweep_analytics(root: Path, index: dict) -> None:
    """``root/analytics/sweep.parquet`` in Spark's layout for a sweep's ``index`` (``sweep.json``), every statistic
    ``100 * row + the statistic's position``, as ``barriersim sweep``'s aggregation would write it."""
    from barriersim import sweep
    from barriersim.spark.analytics import SWEEP_STATS, sweep_path

    rows = []
    for i, row in enumerate(sweep.index_rows(index)):
        stats = {
            f"{m}_{s}": float(100 * i + j)
            for m in ("end_to_end_duration", "alignment_duration", "start_delay", "persisted_data")
            for j, s in enumerate(SWEEP_STATS)
        }
        rows.append({**row, "restored": 0, "total": 3, "in_progress": 0, "completed": 3, "failed": 0, **stats})
    path = sweep_path(root)
    path.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), str(path / "part-00000.parquet"))
    (path / "_SUCCESS").touch()
