"""The checkpoint figures a run's table shows per mode, as the run's own statistics hold them.

How this works: ``mode_statistics(out, runs)`` takes the run directory of a request and each mode's run directory
and returns, per mode, Flink's p50 and p99 of ``end_to_end_duration``, ``persisted_data`` and ``processed_data``
(over the completed checkpoints) and of ``alignment_duration`` and ``start_delay`` (over their acknowledged
subtasks): from the statistics the run wrote (``OUT/analytics/``, a Ray run's, in Spark or pandas), else computed
by the same definitions in pandas (``barriersim.report.statistics.summary_table``, what ``barriersim report`` of a
simulated run computes); and the failed checkpoints by reason: the checkpoint table's FAILED rows by
``failure_reason``, and the failures Flink counts without a row (``summary.json``'s count minus the rows: triggers
refused before a checkpoint id, while not all tasks were running)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from barriersim.report.statistics import summary_table
from barriersim.rundir import Run, RunTables, input_files, run_tables
from barriersim.spark.analytics import read_analytics, written_at

PERCENTILE_METRICS = (
    ("checkpoint", "end_to_end_duration"),
    ("subtask", "alignment_duration"),
    ("subtask", "start_delay"),
    ("checkpoint", "persisted_data"),
    ("checkpoint", "processed_data"),
)
WITHOUT_ROW = "before tasks ran"  # Flink's failures without a PendingCheckpointStats, as they arise here


@dataclass(frozen=True)
class ModeStatistics:
    """One mode's figures: ``metric -> (p50, p99)`` (None without values), and ``(count, reason)`` of its failed
    checkpoints."""

    percentiles: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    failures: tuple[tuple[int, str], ...] = ()


def reason_label(reason: str | None) -> str:
    """Flink's ``CheckpointFailureReason`` name, short: ``CHECKPOINT_EXPIRED`` -> ``expired``."""
    if not reason:
        return "no reason recorded"
    name = reason[len("CHECKPOINT_") :] if reason.startswith("CHECKPOINT_") else reason
    return name.lower().replace("_", " ")


def _label(out: Path, run_dir: Path) -> str:
    return "." if run_dir == out else run_dir.relative_to(out).as_posix()


def _summary_frame(out: Path, runs: list, tables):
    """The statistics' summary frame: the run's own analytics when they cover these runs and are newer than their
    tables, else the same computed in pandas."""
    stamp = written_at(out)
    if stamp is not None and all(f.stat().st_mtime <= stamp for f in input_files(runs)):
        written = read_analytics(out)
        if written is not None and {r.label for r in runs} <= set(written.summary["run"]):
            return written.summary
    return summary_table(tables)


def mode_statistics(out: Path, runs: Mapping[str, Path], summaries: Mapping[str, dict]) -> dict[str, ModeStatistics]:
    """Per mode (``runs``: mode -> its run directory under ``out``; ``summaries``: mode -> its summary)."""
    out = Path(out)
    with_tables = [
        Run(path=Path(d), label=_label(out, Path(d)), summary=summaries[mode])
        for mode, d in runs.items()
        if (Path(d) / "checkpoints.parquet").exists()
    ]
    frame: Any = None  # pandas DataFrames (pandas is untyped here)
    checkpoints: Any = None
    if with_tables:
        checkpoints, subtasks = run_tables(with_tables)
        frame = _summary_frame(out, with_tables, RunTables(with_tables, checkpoints, subtasks))
    labels = {r.summary["mode"]: r.label for r in with_tables}
    result = {}
    for mode, summary in summaries.items():
        percentiles: dict[str, tuple[float | None, float | None]] = {
            metric: (None, None) for _, metric in PERCENTILE_METRICS
        }
        failed_rows: Counter = Counter()
        label = labels.get(mode)
        if label is not None:
            mine = frame[frame["run"] == label]
            for scope, metric in PERCENTILE_METRICS:
                row = mine[(mine["scope"] == scope) & (mine["metric"] == metric)]
                if len(row) and int(row["count"].iloc[0]) > 0:
                    percentiles[metric] = (float(row["p50"].iloc[0]), float(row["p99"].iloc[0]))
            cp = checkpoints[checkpoints["run"] == label]
            failed = cp[cp["status"] == "FAILED"]
            reasons = failed["failure_reason"] if "failure_reason" in failed else [None] * len(failed)
            failed_rows.update(reason_label(r if isinstance(r, str) else None) for r in reasons)
        without_row = max(0, int(summary.get("checkpoints", {}).get("failed", 0)) - sum(failed_rows.values()))
        failures = ([(without_row, WITHOUT_ROW)] if without_row else []) + [
            (n, reason) for reason, n in sorted(failed_rows.items(), key=lambda kv: (-kv[1], kv[0]))
        ]
        result[mode] = ModeStatistics(percentiles, tuple(failures))
    return result
