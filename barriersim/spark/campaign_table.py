"""A campaign's table of verdicts, computed in Spark on Ray: per mode (and for all modes), how many cases ran,
passed, violated a property or raised an error, their outputs' verdicts, the faults they held, the cases that
restarted, and their virtual, wall and CPU times. ``aggregate_verdicts`` gives the campaign's rows (``OUT/rows/``) to
Spark as Arrow batches, collects the table and writes it as ``OUT/analytics/verdicts.parquet`` (Spark's layout)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pyarrow as pa

from barriersim.spark.analytics import analytics_dir, write_parquet_dir
from barriersim.spark.frames import arrow_to_spark, small_data_settings
from barriersim.spark.session import SparkOnDemand
from barriersim.spark.workload import to_arrow

ROW_DDL = (
    "seed bigint, mode string, status string, verdict string, faults_count int, restarts bigint, "
    "virtual_ms bigint, wall_seconds double, cpu_seconds double"
)
ALL_MODES_LABEL = "all"


def verdicts_path(root: str | Path) -> Path:
    return analytics_dir(root) / "verdicts.parquet"


def verdict_frame(rows):
    """The verdict table of a Spark DataFrame of campaign rows (``ROW_DDL``'s columns)."""
    from pyspark.sql import functions as F

    def count_where(condition, name: str):
        return F.sum(F.when(condition, 1).otherwise(0)).cast("bigint").alias(name)

    table = rows.rollup("mode").agg(
        F.count(F.lit(1)).alias("cases"),
        count_where(F.col("status") == "passed", "passed"),
        count_where(F.col("status") == "violated", "violated"),
        count_where(F.col("status") == "error", "errors"),
        count_where(F.col("verdict") == "exactly-once", "exactly_once"),
        count_where(F.col("verdict") == "at-least-once", "at_least_once"),
        F.sum("faults_count").cast("bigint").alias("faults"),
        count_where(F.col("restarts") > 0, "restarted"),
        (F.avg("virtual_ms") / 1000).alias("virtual_seconds_avg"),
        F.sum("wall_seconds").alias("wall_seconds"),
        F.max("wall_seconds").alias("wall_seconds_max"),
        F.sum("cpu_seconds").alias("cpu_seconds"),
    )
    label = F.coalesce(F.col("mode"), F.lit(ALL_MODES_LABEL)).alias("mode")
    return table.select(label, *[c for c in table.columns if c != "mode"]).orderBy(
        F.col("mode") == ALL_MODES_LABEL, "mode"
    )


def _plain(rows: pa.Table) -> pd.DataFrame:
    """The rows' ``ROW_DDL`` columns as numpy or object columns, which PySpark's Arrow conversion takes (not
    pandas' Arrow-backed strings); numbers as doubles (nulls as NaN), Spark casting them as ``ROW_DDL`` says."""
    out = pd.DataFrame()
    for column in ROW_DDL.split(", "):
        name, kind = column.split()
        values = rows.column(name).to_pylist()
        out[name] = (
            pd.Series(values, dtype="object")
            if kind == "string"
            else pd.Series([float("nan") if v is None else float(v) for v in values], dtype="float64")
        )
    return out


def aggregate_verdicts(
    root: str | Path,
    rows: pa.Table,
    spark=None,
    address: str | None = None,
    say: Callable[[str], None] = lambda what: None,
) -> pd.DataFrame:
    """The verdict table of ``rows``, computed in Spark (``spark``, else Spark on Ray started for it, on the Ray
    this process uses or at ``address``), written under ``root/analytics/`` and returned as pandas."""
    with SparkOnDemand(spark, address, app_name="barriersim-campaign", log_dir=Path(root) / "logs") as session:
        if not session.started:
            say("starting Spark on Ray")
        spark = session.get()
        say("aggregating the verdicts in Spark")
        frame = arrow_to_spark(spark, _plain(rows), ROW_DDL)
        with small_data_settings(spark):
            table = to_arrow(verdict_frame(frame))
    write_parquet_dir(verdicts_path(root), table)
    return table.to_pandas()
