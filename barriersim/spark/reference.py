"""The reference result, computed by Spark SQL on the workload DataFrame, and the verdict on a run's output (the
runtime's ``Verification`` and its one rule, ``runtime.verification.reference.verdict_of``). See
docs/verification.md, "The reference in Spark SQL".
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import pyarrow as pa

from barriersim.runtime.record_batch import RecordBatch, RecordsLike
from barriersim.runtime.records_codec import decode_split
from barriersim.runtime.storage import metadata_serializer
from barriersim.runtime.verification.reference import Verification, verdict_of
from barriersim.runtime.verification.snapshot import verify_run
from barriersim.spark.frames import arrow_to_spark, small_data_settings
from barriersim.spark.workload import to_arrow

OUTPUT_SCHEMA = pa.schema(
    [("record_id", pa.int64()), ("key", pa.int64()), ("value", pa.int64()), ("running_sum", pa.int64())]
)
OUTPUT_DDL = "record_id long, key long, value long, running_sum long"


def output_table(rows) -> pa.Table:
    """The sink's output (a ``RecordBatch``, or record tuples) as an Arrow table, column by column."""
    columns = RecordBatch.of(rows).columns if len(rows) else RecordBatch.empty().columns
    return pa.Table.from_arrays([pa.array(c, type=pa.int64()) for c in columns], schema=OUTPUT_SCHEMA)


VERIFICATION_QUERY = """
WITH by_record_and_values AS (
  SELECT record_id, key, value, SUM(w) AS w, SUM(o) AS o, MAX(running_sum) AS last_sum FROM (
    SELECT record_id, key, value, 1 AS w, 0 AS o, CAST(NULL AS BIGINT) AS running_sum FROM workload
    UNION ALL
    SELECT record_id, key, value, 0 AS w, 1 AS o, running_sum FROM sink_output)
  GROUP BY record_id, key, value),
by_record_or_key AS (
  SELECT GROUPING(key) = 1 AS per_record, SUM(w) AS in_workload, SUM(o) AS produced,
         SUM(CASE WHEN w > 0 THEN o ELSE 0 END) AS matching, SUM(CASE WHEN w > 0 THEN value * w END) AS expected_sum,
         MAX(last_sum) AS last_sum
  FROM by_record_and_values GROUP BY GROUPING SETS ((record_id), (key)))
SELECT SUM(CASE WHEN per_record THEN in_workload ELSE 0 END) AS expected,
       SUM(CASE WHEN per_record THEN produced ELSE 0 END) AS produced,
       SUM(CASE WHEN per_record AND in_workload > 0 AND produced = 0 THEN 1 ELSE 0 END) AS lost,
       SUM(CASE WHEN per_record THEN GREATEST(produced - 1, 0) ELSE 0 END) AS duplicated,
       SUM(CASE WHEN per_record THEN produced - matching ELSE 0 END) AS wrong,
       SUM(CASE WHEN NOT per_record AND (expected_sum IS NULL OR last_sum IS NULL OR expected_sum <> last_sum)
                THEN 1 ELSE 0 END) AS mismatched,
       SUM(CASE WHEN NOT per_record AND expected_sum IS NOT NULL AND (last_sum IS NULL OR last_sum < expected_sum)
                THEN 1 ELSE 0 END) AS short
FROM by_record_or_key
"""


def prepare_verification(spark, workload_df) -> None:
    """Plan the verification query over the workload and an empty output, without running it."""
    arrow_to_spark(spark, OUTPUT_SCHEMA.empty_table(), OUTPUT_DDL).createOrReplaceTempView("sink_output")
    workload_df.createOrReplaceTempView("workload")
    spark.sql(VERIFICATION_QUERY)._jdf.queryExecution().executedPlan()


def verify(spark, workload_df, output: pa.Table, exactly_once: bool = True) -> Verification:
    output_df = arrow_to_spark(spark, output, OUTPUT_DDL)
    workload_df.createOrReplaceTempView("workload")
    output_df.createOrReplaceTempView("sink_output")
    with small_data_settings(spark):
        row = spark.sql(VERIFICATION_QUERY).collect()[0]
    counts = {
        name: int(row[name] or 0)
        for name in ("expected", "produced", "lost", "duplicated", "wrong", "mismatched", "short")
    }
    return Verification(
        reference="spark",
        expected_records=counts["expected"],
        output_records=counts["produced"],
        lost=counts["lost"],
        duplicated=counts["duplicated"],
        wrong=counts["wrong"],
        final_sum_mismatched_keys=counts["mismatched"],
        verdict=verdict_of(
            counts["lost"],
            counts["duplicated"],
            counts["wrong"],
            counts["mismatched"],
            exactly_once=exactly_once,
            final_sum_short_keys=counts["short"],
        ),
        final_sum_short_keys=counts["short"],
    )


REFERENCE_QUERY = "SELECT key, COUNT(*) AS records, SUM(value) AS expected_sum FROM workload GROUP BY key ORDER BY key"
REFERENCE_SCHEMA = pa.schema([("key", pa.int64()), ("records", pa.int64()), ("expected_sum", pa.int64())])


def reference_table(spark, workload_df) -> pa.Table:
    """The reference Spark computes from the workload for a later verification without Spark
    (``compare_with_reference``; ``barriersim.workload_cache`` keeps it): per key, its records and
    ``SUM(value)``, collected as Arrow."""
    workload_df.createOrReplaceTempView("workload")
    with small_data_settings(spark):
        table = to_arrow(spark.sql(REFERENCE_QUERY))
    return table.cast(REFERENCE_SCHEMA) if table.num_rows else REFERENCE_SCHEMA.empty_table()


def compare_with_reference(
    splits: dict[str, list[pa.Table]], reference: pa.Table, output: pa.Table, exactly_once: bool = True
) -> Verification:
    """``verify``'s counts, computed here over Arrow columns (pandas, no record as a Python object): the workload's
    records from its ``splits`` (as handed to the sources), the per-key sums from Spark's ``reference_table``.
    The same definitions as ``VERIFICATION_QUERY``: ``lost``, workload records no output row names; ``duplicated``,
    output rows beyond the first per record; ``wrong``, output rows whose ``(record_id, key, value)`` is no
    workload record's; ``final_sum_mismatched_keys``, keys (of the workload or the output) whose largest running
    sum is absent or differs from the reference's sum; ``final_sum_short_keys``, keys of the workload whose largest
    running sum is absent or below it. ``reference`` is ``spark``: Spark computed what is compared
    against (the splits and the sums), in this run or in an earlier one."""
    tables = [t.select(["record_id", "key", "value"]) for ts in splits.values() for t in ts]
    workload = (
        pa.concat_tables(tables) if tables else OUTPUT_SCHEMA.empty_table().select(["record_id", "key", "value"])
    ).to_pandas()
    out = output.to_pandas()
    expected = len(workload)
    produced = len(out)
    records = pd.Index(pd.unique(workload["record_id"]))
    lost = int((~records.isin(out["record_id"])).sum())
    duplicated = produced - int(out["record_id"].nunique())
    triples = workload.drop_duplicates(["record_id", "key", "value"])
    matching = len(out.merge(triples, on=["record_id", "key", "value"], how="inner"))
    wrong = produced - matching
    sums = reference.select(["key", "expected_sum"]).to_pandas()
    last = out.groupby("key", sort=False)["running_sum"].max().rename("last_sum").reset_index()
    keys = sums.merge(last, on="key", how="outer")
    mismatched = int(
        (keys["expected_sum"].isna() | keys["last_sum"].isna() | (keys["expected_sum"] != keys["last_sum"])).sum()
    )
    short = int(
        (keys["expected_sum"].notna() & (keys["last_sum"].isna() | (keys["last_sum"] < keys["expected_sum"]))).sum()
    )
    return Verification(
        reference="spark",
        expected_records=expected,
        output_records=produced,
        lost=lost,
        duplicated=duplicated,
        wrong=wrong,
        final_sum_mismatched_keys=mismatched,
        verdict=verdict_of(lost, duplicated, wrong, mismatched, exactly_once=exactly_once, final_sum_short_keys=short),
        final_sum_short_keys=short,
    )


def _python_verdict(
    graph,
    split_refs: dict,
    committed: RecordsLike,
    at_least_once: bool = False,
    ending: list | None = None,
    pending: RecordsLike = (),
    operations: Sequence[dict] = (),
) -> Verification:
    import ray

    splits = {name: [decode_split(data) for data in ray.get(refs)] for name, refs in split_refs.items()}
    ended_by_snapshot = bool(ending and ending[0])
    metadata = None
    if ending and ended_by_snapshot and ending[1] is not None:
        metadata = metadata_serializer.deserialize(ending[1], "<ending snapshot>")
    return verify_run(
        graph, splits, (ended_by_snapshot, metadata), committed, lambda tids: list(pending), at_least_once, operations
    )[0]


def verify_in_ray(
    graph,
    split_refs: dict[str, list],
    committed: RecordsLike,
    at_least_once: bool = False,
    ending: list | None = None,
    pending: RecordsLike = (),
    operations: Sequence[dict] = (),
) -> Verification:
    """The verdict on any job graph (``runtime.verification.reference``: the graph evaluated over its workload)
    computed in a Ray task that reads the splits from the object store, so the workload never comes to the
    driver; the reference is ``python``. ``ending`` (``[ended by a snapshot, its _metadata]``) and ``pending``
    (the records of the transactions that snapshot lists) verify a run whose last job was stopped or cancelled
    against its snapshot; ``operations`` (the run report's) tell of a failed drained stop, whose early window
    results an at-least-once sink keeps (``runtime.verification.snapshot.verify_run``)."""
    import ray

    task = ray.remote(num_cpus=0.5)(_python_verdict)
    return ray.get(task.remote(graph, split_refs, committed, at_least_once, ending, list(pending), list(operations)))
