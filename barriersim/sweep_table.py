"""A sweep's table: one row per (point, mode) with the axis values, the verdict, Flink's checkpoint counts and
``<metric>_<min|max|avg|p50|p90|p95|p99|p999>`` of every metric, in ``OUT/analytics/sweep.parquet``.

``aggregate`` computes the runs' statistics by ``barriersim run``'s rule (``report.statistics.engine_for``: in
the Spark that is up, else in pandas when small, else in Spark on Ray; ``engine`` forces one) and writes them as
``analytics/``'s ``summary`` and ``counts``; ``sweep_table`` pivots those (tens of rows per run) into the sweep's
rows, on the driver, whichever engine computed them. The layout is Spark's (a part file and ``_SUCCESS``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pyarrow as pa

from barriersim.errors import ArgumentError
from barriersim.report.statistics import compute_locally, engine_for
from barriersim.rundir import Run, RunTables, run_tables
from barriersim.spark.analytics import (
    CHECKPOINT_METRICS,
    COUNT_COLUMNS,
    SUBTASK_METRICS,
    SWEEP_STATS,
    Analytics,
    compute_analytics,
    read_sweep_analytics,
    sweep_path,
    write_parquet_dir,
)

ENGINES = ("auto", "pandas", "spark")
_ARROW_TYPES = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string()}


def sweep_index_columns(axes: list[tuple[str, type]]) -> list[tuple[str, pa.DataType]]:
    """``(name, Arrow type)`` of a sweep's index rows: ``run, point, point_index, mode``, the axes (typed as the
    scenario schema types them, named by their dotted keys), then ``backend, seed, generated_by, verdict, lost,
    duplicated, wrong``."""
    cols = [("run", pa.string()), ("point", pa.string()), ("point_index", pa.int32()), ("mode", pa.string())]
    cols += [(key, _ARROW_TYPES[kind]) for key, kind in axes]
    cols += [
        ("backend", pa.string()),
        ("seed", pa.int64()),
        ("generated_by", pa.string()),
        ("verdict", pa.string()),
        ("lost", pa.int64()),
        ("duplicated", pa.int64()),
        ("wrong", pa.int64()),
    ]
    return cols


def sweep_schema(axes: list[tuple[str, type]]) -> pa.Schema:
    metrics = [*CHECKPOINT_METRICS, *SUBTASK_METRICS]
    return pa.schema(
        [
            *sweep_index_columns(axes),
            *((c, pa.int64()) for c in COUNT_COLUMNS),
            *((f"{m}_{stat}", pa.float64()) for m in metrics for stat in SWEEP_STATS),
        ]
    )


def _value(value):
    return None if value is None or value != value else value  # NaN: no value


def sweep_table(analytics: Analytics, point_rows: list[dict], axes: list[tuple[str, type]]) -> pa.Table:
    """The sweep's rows: each of ``point_rows`` (the keys of ``sweep_index_columns``; ``run`` is the run's label)
    with its run's counts and statistics (null where the run has none), ordered by point and mode."""
    schema = sweep_schema(axes)
    stats = {(r["run"], r["metric"]): r for r in analytics.summary.to_dict("records")}
    counts = {r["run"]: r for r in analytics.counts.to_dict("records")}
    rows = []
    for point in sorted(point_rows, key=lambda r: (r["point_index"], r["mode"])):
        row = {name: point.get(name) for name in schema.names[: len(sweep_index_columns(axes))]}
        c = counts.get(point["run"], {})
        row.update({name: _value(c.get(name)) for name in COUNT_COLUMNS})
        for metric in (*CHECKPOINT_METRICS, *SUBTASK_METRICS):
            s = stats.get((point["run"], metric), {})
            row.update({f"{metric}_{stat}": _value(s.get(stat)) for stat in SWEEP_STATS})
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=schema)


def write_sweep_table(root: str | Path, table: pa.Table) -> None:
    """``table`` as ``root/analytics/sweep.parquet`` in Spark's layout, ``_SUCCESS`` last."""
    write_parquet_dir(sweep_path(root), table)


def aggregate(
    root: str | Path,
    point_rows: list[dict],
    axes: list[tuple[str, type]],
    runs: list[Run],
    *,
    engine: str = "auto",
    spark: Callable[[], object] | None = None,
    spark_up: bool = False,
    say: Callable[[str], None] = lambda what: None,
) -> tuple[pd.DataFrame, str]:
    """The runs' statistics (in pandas or Spark: ``engine``; ``auto``: ``report.statistics.engine_for``, as
    ``barriersim run`` decides, ``spark_up`` saying whether a Spark session is up) written under
    ``root/analytics/``, and the sweep table; returns it as pandas and the engine used. ``spark()`` gives a live
    SparkSession (started on first call)."""
    tables = RunTables(runs, *run_tables(runs))
    if engine == "auto":
        engine = engine_for(tables, spark_up)
    if engine == "pandas":
        say("aggregating the runs (pandas)")
        analytics = compute_locally(root, tables)
    else:
        if spark is None:
            raise ArgumentError("aggregate: the Spark engine needs spark, the function that gives a SparkSession")
        session = spark()
        say("aggregating the runs in Spark")
        analytics = compute_analytics(session, root, runs)
    write_sweep_table(root, sweep_table(analytics, point_rows, axes))
    table = read_sweep_analytics(root)
    assert table is not None
    return table, engine
