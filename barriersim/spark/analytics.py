"""Flink-style checkpoint statistics over one or many runs, computed in Spark on Ray: ``compute_analytics(spark,
root)`` reads every run's tables under ``root`` and writes ``analytics/summary.parquet`` (per run and metric,
Flink's ``StatsSummary``: count, min, max, avg, p50 ... p999, with Flink's percentile rule, ``flink_percentile``)
and ``analytics/counts.parquet`` (restored, total, in progress, completed, failed); ``read_sweep_analytics``
reads a sweep's pivot. ``barriersim.report.statistics`` computes the same tables in pandas for small runs. See
docs/runs-and-workloads.md, "Checkpoint statistics in Spark"."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from barriersim.rundir import RUN_KEYS, Run, discover_runs, run_tables
from barriersim.runtime.storage.atomic_file import AtomicFileWriter
from barriersim.spark.frames import arrow_to_spark, small_data_settings
from barriersim.spark.session import RayAndSpark
from barriersim.spark.workload import to_arrow

CHECKPOINT_METRICS = ("end_to_end_duration", "checkpointed_size", "state_size", "processed_data", "persisted_data")
SUBTASK_METRICS = ("alignment_duration", "start_delay")
PERCENTILES = (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999))
STAT_COLUMNS = ("count", "min", "max", "avg", *(name for name, _ in PERCENTILES))
COUNT_COLUMNS = ("restored", "total", "in_progress", "completed", "failed")
SUMMARY_COLUMNS = (*RUN_KEYS, "scope", "metric", *STAT_COLUMNS)

_RUN_KEY_TYPES = {"run": "string", "mode": "string", "scenario": "string", "seed": "bigint", "zipf_exponent": "double"}


@dataclass
class Analytics:
    """The results as pandas: ``summary`` (columns ``SUMMARY_COLUMNS``) and ``counts`` (run keys and
    ``COUNT_COLUMNS``)."""

    summary: pd.DataFrame
    counts: pd.DataFrame


def analytics_dir(root: str | Path) -> Path:
    return Path(root) / "analytics"


_ARROW_TO_SPARK = {
    "int8": "tinyint",
    "int16": "smallint",
    "int32": "int",
    "int64": "bigint",
    "uint8": "smallint",
    "uint16": "int",
    "uint32": "bigint",
    "double": "double",
    "float": "float",
    "string": "string",
    "large_string": "string",
    "bool": "boolean",
}


# Columns that hold only nulls in a run without failures are stored with Arrow's null type, which Spark cannot
# read; they are read as typed nulls instead.
_NULL_COLUMN_TYPES = {
    "failure_timestamp": "bigint",
    "failure_message": "string",
    "failure_reason": "string",
    "external_path": "string",
    "discarded": "boolean",
}


def parquet_to_spark(spark, path: Path, mode: str | None = None):
    """A run's Parquet table as a Spark DataFrame, typed as stored (null-typed columns as typed nulls), with a
    ``mode`` column first when given."""
    from pyspark.sql import functions as F

    if not path.exists():
        return spark.createDataFrame([], "id bigint")
    schema = pq.read_schema(str(path))
    typed = [(n, _ARROW_TO_SPARK.get(str(schema.field(n).type))) for n in schema.names]
    ddl = ", ".join(f"`{n}` {t}" for n, t in typed if t)
    df = spark.read.schema(ddl).parquet(str(path))
    cols = [F.col(f"`{n}`") if t else F.lit(None).cast(_NULL_COLUMN_TYPES.get(n, "string")).alias(n) for n, t in typed]
    if mode is not None:
        cols.insert(0, F.lit(mode).alias("mode"))
    return df.select(*cols)


CHECKPOINT_FRAME_COLUMNS = {"id": "bigint", "status": "string", **{m: "bigint" for m in CHECKPOINT_METRICS}}
SUBTASK_FRAME_COLUMNS = {
    "id": "bigint",
    "task": "string",
    "aborted": "boolean",
    **{m: "bigint" for m in SUBTASK_METRICS},
}


def _typed(df: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    """``df``'s run keys and ``columns`` (absent ones as nulls) as plain numpy or object columns, which PySpark's
    Arrow conversion takes (not pandas' extension types); Spark gets the types from the DDL."""
    out = pd.DataFrame(index=df.index)
    for name, kind in {**_RUN_KEY_TYPES, **columns}.items():
        values = df[name] if name in df else pd.Series([None] * len(df), index=df.index, dtype="object")
        if kind in ("bigint", "double"):
            out[name] = pd.to_numeric(values, errors="coerce").astype("float64")  # nulls as NaN
        else:
            out[name] = values.astype("object").where(values.notna(), None)
    return out.reset_index(drop=True)


def load_run_frames(spark, runs: list[Run]):
    """Spark DataFrames ``(checkpoints, subtasks)`` of all ``runs``, run key columns first: the runs' Parquet
    tables read by pyarrow (``barriersim.rundir.run_tables``) and given to Spark as Arrow batches."""
    cp, st = run_tables(runs)
    return (
        arrow_to_spark_typed(spark, cp, CHECKPOINT_FRAME_COLUMNS),
        arrow_to_spark_typed(spark, st, SUBTASK_FRAME_COLUMNS),
    )


def arrow_to_spark_typed(spark, df: pd.DataFrame, columns: dict[str, str]):
    """``df``'s run keys and ``columns`` as a Spark DataFrame, sent as Arrow batches."""
    ddl = ", ".join(f"`{k}` {t}" for k, t in {**_RUN_KEY_TYPES, **columns}.items())
    return arrow_to_spark(spark, _typed(df, columns), ddl)


def flink_percentile(sorted_values, quantile: float) -> float | None:
    """Flink's quantile of ascending ``sorted_values`` (Commons Math's legacy ``Percentile``, asked for
    ``quantile * 100`` percent as Flink asks it); None for no values."""
    n = len(sorted_values)
    if n == 0:
        return None
    pos = (quantile * 100) / 100 * (n + 1)
    if pos < 1:
        return float(sorted_values[0])
    if pos >= n:
        return float(sorted_values[n - 1])
    lower_index = int(pos // 1)
    lower, upper = float(sorted_values[lower_index - 1]), float(sorted_values[lower_index])
    return lower + (pos - lower_index) * (upper - lower)


def _flink_percentile_sql(values: str, n: str, quantile: float) -> str:
    """``flink_percentile`` as a Spark SQL expression over an ascending array ``values`` of ``n`` doubles."""
    pos = f"(({quantile!r} * 100) / 100 * ({n} + 1))"
    at = f"CAST(FLOOR({pos}) AS INT)"
    return (
        f"CASE WHEN {n} = 0 THEN NULL WHEN {pos} < 1 THEN element_at({values}, 1) "
        f"WHEN {pos} >= {n} THEN element_at({values}, {n}) "
        f"ELSE element_at({values}, {at}) + ({pos} - FLOOR({pos})) * "
        f"(element_at({values}, {at} + 1) - element_at({values}, {at})) END"
    )


def _summarize(df, metrics: tuple[str, ...], scope: str):
    """Long format: one row per run and metric with Flink's summary statistics."""
    from pyspark.sql import functions as F

    pairs = F.array(*[F.struct(F.lit(m).alias("metric"), F.col(m).cast("double").alias("value")) for m in metrics])
    long = df.select(*RUN_KEYS, F.explode(pairs).alias("kv")).select(*RUN_KEYS, "kv.metric", "kv.value")
    stats = long.groupBy(*RUN_KEYS, "metric").agg(
        F.count("value").alias("count"),
        F.min("value").alias("min"),
        F.max("value").alias("max"),
        F.avg("value").alias("avg"),
        F.array_sort(F.collect_list("value")).alias("sorted"),
    )
    return stats.select(
        *RUN_KEYS,
        F.lit(scope).alias("scope"),
        "metric",
        "count",
        "min",
        "max",
        "avg",
        *[
            F.expr(_flink_percentile_sql("sorted", "CAST(count AS INT)", q)).cast("double").alias(name)
            for name, q in PERCENTILES
        ],
    )


def summary_frame(checkpoints, subtasks):
    """Spark DataFrame of the summary statistics (columns ``SUMMARY_COLUMNS``)."""
    from pyspark.sql import functions as F

    completed = checkpoints.where(F.col("status") == "COMPLETED")
    completed_ids = completed.select("run", "id").distinct()
    acked = subtasks.join(completed_ids, ["run", "id"]).where(~F.coalesce(F.col("aborted"), F.lit(False)))
    return _summarize(completed, CHECKPOINT_METRICS, "checkpoint").unionByName(
        _summarize(acked, SUBTASK_METRICS, "subtask")
    )


def counts_frame(spark, checkpoints, runs: list[Run]):
    """Spark DataFrame of Flink's checkpoint counts per run."""
    from pyspark.sql import functions as F

    def status_count(status: str):
        return F.sum(F.when(F.col("status") == status, 1).otherwise(0)).cast("bigint").alias(status.lower())

    counts = checkpoints.groupBy(*RUN_KEYS).agg(
        F.count(F.lit(1)).alias("total"),
        status_count("IN_PROGRESS"),
        status_count("COMPLETED"),
        status_count("FAILED"),
    )
    restored = F.lit(0).cast("bigint")  # from each run's summary.json, looked up by its label
    summary_failed = F.col("failed")  # ... and its failed count, which has the triggers that failed before an id
    for r in runs:
        restored = F.when(F.col("run") == F.lit(r.label), F.lit(r.restored).cast("bigint")).otherwise(restored)
        if r.failed is not None:
            summary_failed = F.when(F.col("run") == F.lit(r.label), F.lit(r.failed).cast("bigint")).otherwise(
                summary_failed
            )
    without_row = F.greatest(F.lit(0).cast("bigint"), summary_failed - F.col("failed"))
    return (
        counts.withColumn("total", F.col("total") + without_row)
        .withColumn("failed", F.col("failed") + without_row)
        .withColumn("restored", restored)
        .select(*RUN_KEYS, *COUNT_COLUMNS)
    )


def plan_analytics(spark) -> None:
    """Plan the statistics' queries over empty tables without running them (the driver's first planning of a
    query shape loads and compiles most of what later ones use)."""
    empty = lambda columns: arrow_to_spark_typed(spark, pd.DataFrame(columns=[*RUN_KEYS, *columns]), columns)  # noqa: E731
    checkpoints, subtasks = empty(CHECKPOINT_FRAME_COLUMNS), empty(SUBTASK_FRAME_COLUMNS)
    for frame in (summary_frame(checkpoints, subtasks), counts_frame(spark, checkpoints, [])):
        frame._jdf.queryExecution().executedPlan()


def _metric_order(summary: pd.DataFrame) -> pd.DataFrame:
    order = {m: i for i, m in enumerate((*CHECKPOINT_METRICS, *SUBTASK_METRICS))}
    summary = summary.assign(_order=summary["metric"].map(order))
    return summary.sort_values(["run", "_order"], kind="stable").drop(columns="_order").reset_index(drop=True)


def read_analytics(root: str | Path) -> Analytics | None:
    """The analytics written earlier under ``root``, or None when there are none."""
    out = analytics_dir(root)
    if not ((out / "summary.parquet" / "_SUCCESS").exists() and (out / "counts.parquet" / "_SUCCESS").exists()):
        return None
    summary = pq.read_table(str(out / "summary.parquet")).to_pandas()
    counts = pq.read_table(str(out / "counts.parquet")).to_pandas()
    return Analytics(
        summary=_metric_order(summary[list(SUMMARY_COLUMNS)]),
        counts=counts[[*RUN_KEYS, *COUNT_COLUMNS]].sort_values("run").reset_index(drop=True),
    )


def write_parquet_dir(out: Path, table) -> None:
    """An Arrow table as the directory Spark writes (one part file, then a ``_SUCCESS`` marker, written last),
    replacing what was there; pyarrow and pandas read the directory as one table."""
    writer = AtomicFileWriter()
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.iterdir():
        stale.unlink()
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    writer.write(out / "part-00000.parquet", sink.getvalue().to_pybytes())
    writer.write(out / "_SUCCESS", b"")


def write_analytics(root: str | Path, analytics: Analytics) -> Analytics:
    """Write analytics computed outside Spark under ``root/analytics/`` in the layout Spark writes
    (``write_parquet_dir``), so ``read_analytics`` reads them alike."""
    for name, df in (("summary.parquet", analytics.summary), ("counts.parquet", analytics.counts)):
        write_parquet_dir(analytics_dir(root) / name, pa.Table.from_pandas(df, preserve_index=False))
    result = read_analytics(root)
    assert result is not None
    return result


def written_at(root: str | Path) -> float | None:
    """When the analytics under ``root`` were written (mtime, seconds), or None."""
    marks = [analytics_dir(root) / name / "_SUCCESS" for name in ("summary.parquet", "counts.parquet")]
    if not all(m.exists() for m in marks):
        return None
    return min(m.stat().st_mtime for m in marks)


def _collect(df) -> pd.DataFrame:
    """A small result brought to the driver as Arrow (a few dozen rows per run)."""
    return to_arrow(df).to_pandas()


def compute_analytics(spark, root: str | Path, runs: list[Run] | None = None) -> Analytics:
    """Compute the statistics of every run under ``root`` in Spark, write them under ``root/analytics/``
    and return them as pandas. The results (tens of rows) are collected and written as Parquet by the driver
    (``write_analytics``), which costs far less than a Spark write job of one row group."""
    runs = runs if runs is not None else discover_runs(root)
    checkpoints, subtasks = load_run_frames(spark, runs)
    with small_data_settings(spark):
        summary = _collect(summary_frame(checkpoints, subtasks))
        counts = _collect(counts_frame(spark, checkpoints, runs))
    return write_analytics(root, Analytics(summary=summary, counts=counts))


SWEEP_STATS = ("min", "max", "avg", "p50", "p90", "p95", "p99", "p999")


def sweep_path(root: str | Path) -> Path:
    return analytics_dir(root) / "sweep.parquet"


def read_sweep_analytics(root: str | Path) -> pd.DataFrame | None:
    """A sweep's table (``barriersim.sweep_table``), or None."""
    path = sweep_path(root)
    if not (path / "_SUCCESS").exists():
        return None
    table = pq.read_table(str(path)).to_pandas()
    return table.sort_values(["point_index", "mode"], kind="stable").reset_index(drop=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m barriersim.spark.analytics RUN_DIR``: compute and print the statistics."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("run_dir")
    args = parser.parse_args(argv)
    runs = discover_runs(args.run_dir)
    with RayAndSpark(app_name="barriersim-analytics") as cluster:
        result = compute_analytics(cluster.spark, args.run_dir, runs)
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(result.counts.to_string(index=False))
        print(result.summary.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
