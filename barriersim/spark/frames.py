"""Tables into Spark and the settings for small ones: ``arrow_to_spark`` (an Arrow table or a pandas DataFrame as a
Spark DataFrame, through Spark's Arrow path) and ``small_data_settings`` (Spark's settings for tables of tens to
thousands of rows), shared by the reference and the analytics."""

from __future__ import annotations

from contextlib import contextmanager

import pyarrow as pa


def arrow_to_spark(spark, table, ddl: str):
    """An Arrow table (or a pandas DataFrame) as a Spark DataFrame, sent as Arrow batches
    (``spark.sql.execution.arrow.pyspark.enabled``, without fallback: ``barriersim.spark.session.spark_configs``)."""
    return spark.createDataFrame(table.to_pandas() if isinstance(table, pa.Table) else table, ddl)


# A run has tens of checkpoints and hundreds of subtask rows: one shuffle partition spares Spark scheduling
# empty tasks, and compiling whole-stage code costs more than interpreting so few rows.
SMALL_DATA_SETTINGS = {
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.adaptive.enabled": "false",
}


@contextmanager
def small_data_settings(spark):
    """Spark settings for tables of tens to thousands of rows, in force for the ``with`` block only."""
    previous = {key: spark.conf.get(key, None) for key in SMALL_DATA_SETTINGS}
    for key, value in SMALL_DATA_SETTINGS.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
