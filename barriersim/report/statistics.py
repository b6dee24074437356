"""Flink's checkpoint statistics of small simulator runs, computed in pandas instead of Spark.

How this works: ``barriersim report`` of simulator runs whose tables are small (``is_small``: at most
``SMALL_ROWS`` checkpoint and subtask rows in all) does not start Ray and Spark for a few dozen rows:
``compute_locally`` takes the tables ``barriersim.rundir.load_tables`` read and computes what
``barriersim.spark.analytics`` computes in Spark, by the same definitions (the same metrics and scopes: completed
checkpoints, and the acknowledged, non-aborted subtasks of completed checkpoints; ``count, min, max, avg`` and
Flink's percentiles, ``flink_percentile``), then writes them where the Spark path writes them
(``write_analytics``), so a later report reuses them either way. A test holds both paths to the same numbers.
``run`` and ``sweep`` use it by ``engine_for``'s rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from barriersim.backends import Backend, ran_on
from barriersim.rundir import RUN_KEYS, Run, RunTables
from barriersim.spark.analytics import (
    CHECKPOINT_METRICS,
    COUNT_COLUMNS,
    PERCENTILES,
    SUBTASK_METRICS,
    SUMMARY_COLUMNS,
    Analytics,
    flink_percentile,
    write_analytics,
)

SMALL_ROWS = 100_000


def is_small(tables: RunTables) -> bool:
    return len(tables.checkpoints) + len(tables.subtasks) <= SMALL_ROWS


def all_simulated(runs: list[Run]) -> bool:
    return all(ran_on(r.summary) is Backend.SIM for r in runs)


def engine_for(tables: RunTables, spark_up: bool) -> str:
    """Where ``barriersim run``'s and ``barriersim sweep``'s statistics are computed: in the Spark that is up, else
    in pandas when the tables are small, else in Spark ("spark" or "pandas")."""
    return "pandas" if not spark_up and is_small(tables) else "spark"


def _stats(values: pd.Series) -> dict:
    v = np.sort(values.dropna().astype(float).to_numpy())
    if len(v) == 0:
        return {"count": 0, "min": None, "max": None, "avg": None, **{name: None for name, _ in PERCENTILES}}
    return {
        "count": len(v),
        "min": float(v[0]),
        "max": float(v[-1]),
        "avg": float(v.mean()),
        **{name: flink_percentile(v, q) for name, q in PERCENTILES},
    }


def summary_table(tables: RunTables) -> pd.DataFrame:
    """``SUMMARY_COLUMNS``: per run and metric, the summary statistics (Spark's ``summary_frame``)."""
    cp = tables.checkpoints
    completed = cp[cp["status"] == "COMPLETED"]
    st = tables.subtasks
    acked = st.merge(completed[["run", "id"]].drop_duplicates(), on=["run", "id"])
    if "aborted" in acked:
        acked = acked[~acked["aborted"].fillna(False).astype(bool)]
    rows = []
    for run in tables.runs:
        keys = run.keys()
        for scope, frame, metrics in (
            ("checkpoint", completed, CHECKPOINT_METRICS),
            ("subtask", acked, SUBTASK_METRICS),
        ):
            mine = frame[frame["run"] == run.label]
            for metric in metrics:
                values = mine[metric] if metric in mine else pd.Series([], dtype=float)
                rows.append({**keys, "scope": scope, "metric": metric, **_stats(values)})
    out = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    out["count"] = out["count"].astype("int64")
    for column in ("min", "max", "avg", *(name for name, _ in PERCENTILES)):
        out[column] = out[column].astype("float64")
    return out


def counts_table(tables: RunTables) -> pd.DataFrame:
    """Flink's checkpoint counts per run (Spark's ``counts_frame``)."""
    rows = []
    for run in tables.runs:
        status = tables.checkpoints.loc[tables.checkpoints["run"] == run.label, "status"]
        failed = int((status == "FAILED").sum())
        without_row = max(0, run.failed - failed) if run.failed is not None else 0  # failed before they had an id
        rows.append(
            {
                **run.keys(),
                "restored": run.restored,
                "total": len(status) + without_row,
                "in_progress": int((status == "IN_PROGRESS").sum()),
                "completed": int((status == "COMPLETED").sum()),
                "failed": failed + without_row,
            }
        )
    out = pd.DataFrame(rows, columns=[*RUN_KEYS, *COUNT_COLUMNS])
    for column in COUNT_COLUMNS:
        out[column] = out[column].astype("int64")
    return out


def compute_locally(root: str | Path, tables: RunTables) -> Analytics:
    """The statistics of the runs in ``tables`` (under ``root``), written to ``root/analytics/`` and returned."""
    return write_analytics(root, Analytics(summary=summary_table(tables), counts=counts_table(tables)))
