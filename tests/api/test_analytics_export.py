"""A run's analytics written to the object store of its checkpoint storage (``barriersim.analytics_export``)
on a real S3-compatible server (``tests.s3_server``): the same tables in the same layout (a directory per table,
its part file and ``_SUCCESS``), read back equal by pyarrow; a store that cannot be written is one line naming
the URI, and the run directory's tables stay."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow.fs import FileSelector

from barriersim.analytics_export import AnalyticsExportError, export_analytics
from barriersim.runtime.storage.object_storage import child_uri, object_store_filesystem
from barriersim.spark.analytics import Analytics, analytics_dir, read_analytics, write_analytics

pytestmark = pytest.mark.timeout(120)


def _local_analytics(root):
    summary = pd.DataFrame(
        {
            "run": ["."],
            "mode": ["aligned"],
            "scenario": ["q"],
            "seed": [1],
            "zipf_exponent": [1.0],
            "scope": ["checkpoint"],
            "metric": ["end_to_end_duration"],
            "count": [3],
            "min": [1.0],
            "max": [3.0],
            "avg": [2.0],
            "p50": [2.0],
            "p90": [3.0],
            "p95": [3.0],
            "p99": [3.0],
            "p999": [3.0],
        }
    )
    counts = pd.DataFrame(
        {
            "run": ["."],
            "mode": ["aligned"],
            "scenario": ["q"],
            "seed": [1],
            "zipf_exponent": [1.0],
            "restored": [0],
            "total": [4],
            "in_progress": [0],
            "completed": [3],
            "failed": [1],
        }
    )
    return write_analytics(root, Analytics(summary=summary, counts=counts))


def _spark_written_sweep_table(root) -> pd.DataFrame:
    """A sweep table as Spark writes it: a part file, its ``.crc`` checksum file and ``_SUCCESS``."""
    table = analytics_dir(root) / "sweep.parquet"
    table.mkdir(parents=True)
    frame = pd.DataFrame(
        {"run": ["a/aligned", "b/aligned"], "point_index": [0, 1], "end_to_end_duration_p50": [1.5, 2.0]}
    )
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), str(table / "part-00000-1234.snappy.parquet"))
    (table / ".part-00000-1234.snappy.parquet.crc").write_bytes(b"crc")
    (table / "_SUCCESS").write_bytes(b"")
    return frame


def test_the_tables_are_written_in_the_local_layout_and_read_back_equal(s3_server, tmp_path):
    local = _local_analytics(tmp_path)
    sweep = _spark_written_sweep_table(tmp_path)
    uri = child_uri(s3_server.bucket_uri("runs"), "run", "analytics")
    assert export_analytics(analytics_dir(tmp_path), uri) == uri
    assert export_analytics(analytics_dir(tmp_path), uri) == uri  # again, over the first export
    filesystem, base = object_store_filesystem(uri)
    names = sorted(
        i.path[len(base) + 1 :]
        for i in filesystem.get_file_info(FileSelector(base, recursive=True))
        if i.type.name == "File"
    )
    assert names == [
        "counts.parquet/_SUCCESS",
        "counts.parquet/part-00000.parquet",
        "summary.parquet/_SUCCESS",
        "summary.parquet/part-00000.parquet",
        "sweep.parquet/_SUCCESS",
        "sweep.parquet/part-00000-1234.snappy.parquet",
    ]
    for name, frame in (("summary.parquet", local.summary), ("counts.parquet", local.counts), ("sweep.parquet", sweep)):
        remote = pq.read_table(f"{base}/{name}", filesystem=filesystem).to_pandas()
        pd.testing.assert_frame_equal(remote[list(frame.columns)].reset_index(drop=True), frame)


def test_a_store_that_cannot_be_written_is_one_line_naming_the_uri_and_the_local_tables_stay(tmp_path):
    _local_analytics(tmp_path)
    before = read_analytics(tmp_path)
    # nothing listens on port 1
    uri = "s3://bucket/runs/run/analytics?endpoint_override=127.0.0.1:1&scheme=http&connect_timeout=1"
    with pytest.raises(AnalyticsExportError) as err:
        export_analytics(analytics_dir(tmp_path), uri)
    message = str(err.value)
    assert "s3://bucket/runs/run/analytics" in message and "\n" not in message, message
    after = read_analytics(tmp_path)
    pd.testing.assert_frame_equal(after.summary, before.summary)
    pd.testing.assert_frame_equal(after.counts, before.counts)
