"""A run's (or a sweep's) analytics on the object store of its checkpoint storage: with ``s3://`` checkpoint storage,
the tables under the run directory's ``analytics/`` are also written under ``<storage>/<run>/analytics/``. See
docs/runs-and-workloads.md, "Analytics on the object store".
"""

from __future__ import annotations

from pathlib import Path

from barriersim.errors import BarriersimError
from barriersim.runtime.storage.errors import CheckpointStorageError
from barriersim.runtime.storage.object_storage import object_store_filesystem, uri_for_messages

TABLES = ("summary.parquet", "counts.parquet", "sweep.parquet")
SUCCESS = "_SUCCESS"


class AnalyticsExportError(BarriersimError):
    """The analytics could not be written to the object store; the message names the URI."""


def _part_files(table: Path) -> list[Path]:
    """The table's data files (Spark's checksum files ``.*.crc`` and the marker left out)."""
    return sorted(p for p in table.iterdir() if p.is_file() and not p.name.startswith((".", "_")))


def export_analytics(local_analytics: str | Path, uri: str) -> str:
    """Write the tables of ``local_analytics`` (a run directory's ``analytics/``) under ``uri`` (an ``s3://`` URI
    with the storage's client options in its query), each a directory of part files with ``_SUCCESS`` last.
    Returns ``uri``; raises ``AnalyticsExportError``."""
    shown = uri_for_messages(uri)
    local = Path(local_analytics)
    tables = [local / name for name in TABLES if (local / name / SUCCESS).is_file()]
    try:
        filesystem, base = object_store_filesystem(uri)
    except CheckpointStorageError as err:
        raise AnalyticsExportError(f"analytics: cannot write to {shown}: {err}") from None
    try:
        for table in tables:
            path = f"{base}/{table.name}"
            filesystem.create_dir(path, recursive=True)
            filesystem.delete_dir_contents(path, missing_dir_ok=True)  # the marker of an earlier export first
            for part in _part_files(table):
                with filesystem.open_output_stream(f"{path}/{part.name}") as out:
                    out.write(part.read_bytes())
            with filesystem.open_output_stream(f"{path}/{SUCCESS}") as out:
                out.write(b"")
    except OSError as err:
        reason = " ".join(str(err).split()) or type(err).__name__
        raise AnalyticsExportError(
            f"analytics: writing to {shown} failed ({reason}); the run directory's {local} holds them"
        ) from None
    return uri
