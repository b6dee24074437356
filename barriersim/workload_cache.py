"""A content-addressed cache of what Spark computes for a Ray run's workload, kept across runs, so that a run of a
workload Spark generated before (another mode, other faults, the same experiment again) does not start Spark. See
docs/runs-and-workloads.md, "The workload cache".
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path

import msgpack
import pyarrow as pa

from barriersim.runtime.records_codec import SPLIT_COLUMNS
from barriersim.runtime.storage.atomic_file import AtomicFileWriter
from barriersim.scenarios import workload as draws
from barriersim.scenarios.loader import Scenario
from barriersim.spark import reference as spark_reference
from barriersim.spark import workload as spark_workload
from barriersim.spark.workload import split_plan

FORMAT = 1
SPLITS_FILE = "splits.arrow"
REFERENCE_FILE = "reference.arrow"
MANIFEST_FILE = "manifest.msgpack"
ENTRIES_DIR = "workloads"


def cache_dir() -> Path:
    """``$BARRIERSIM_CACHE_DIR``, else ``$XDG_CACHE_HOME/barriersim``, else ``~/.cache/barriersim``."""
    if os.environ.get("BARRIERSIM_CACHE_DIR"):
        return Path(os.environ["BARRIERSIM_CACHE_DIR"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "barriersim"
    return Path.home() / ".cache" / "barriersim"


def generator_version() -> str:
    """A hash of the source text of the modules that generate the workload and compute its reference."""
    digest = hashlib.sha256()
    for module in (spark_workload, draws, spark_reference):
        assert module.__file__ is not None  # modules of this package, loaded from files
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()


def key_fields(scenario: Scenario) -> dict:
    """What the generated workload depends on, as plain values (the manifest records them)."""
    plan = split_plan(scenario, scenario.seed)
    return {
        "workload": {k: (v.value if isinstance(v, enum.Enum) else v) for k, v in asdict(scenario.workload).items()},
        "sources": [[v.name, v.parallelism] for v in scenario.job.graph.sources],
        "splits": [list(s) for s in plan.splits],
        "seed": scenario.seed,
        "generator": generator_version(),
    }


def cache_key(scenario: Scenario) -> str:
    text = json.dumps(key_fields(scenario), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def entry_path(key: str, root: Path | None = None) -> Path:
    return (root if root is not None else cache_dir()) / ENTRIES_DIR / key


class Lookup(enum.Enum):
    HIT = "hit"
    MISS = "miss"
    CORRUPT = "corrupt"  # an entry was there but unreadable; the run recomputes it


@dataclass(frozen=True)
class CacheLookup:
    outcome: Lookup
    key: str
    path: Path
    splits: dict[str, list[pa.Table]] | None = None
    reference: pa.Table | None = None
    problem: str | None = None  # CORRUPT: one line naming the file and what is wrong with it


class CorruptEntry(Exception):
    """A cache entry's file that cannot be used, with the file and the reason."""


def _file_facts(data: bytes) -> dict:
    return {"bytes": len(data), "crc32": zlib.crc32(data)}


def _arrow_file(batches: list[pa.RecordBatch], schema: pa.Schema) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


SPLIT_SCHEMA = pa.schema([(name, pa.int64()) for name in SPLIT_COLUMNS])


def store(scenario: Scenario, splits: dict[str, list[pa.Table]], reference: pa.Table, root: Path | None = None) -> Path:
    """Write the entry of ``scenario``'s workload: its ``splits`` (vertex -> one table per subtask) and the
    ``reference``; returns the entry's directory."""
    fields = key_fields(scenario)
    key = cache_key(scenario)
    path = entry_path(key, root)
    order = [(name, i, table) for name, tables in splits.items() for i, table in enumerate(tables)]
    batches = [
        pa.RecordBatch.from_arrays(
            [table.column(c).combine_chunks().cast(pa.int64()) for c in SPLIT_COLUMNS], schema=SPLIT_SCHEMA
        )
        for _, _, table in order
    ]
    splits_bytes = _arrow_file(batches, SPLIT_SCHEMA)
    reference = reference.combine_chunks()
    reference_bytes = _arrow_file(reference.to_batches(), reference.schema)
    writer = AtomicFileWriter()
    writer.write(path / SPLITS_FILE, splits_bytes)
    writer.write(path / REFERENCE_FILE, reference_bytes)
    manifest = {
        "format": FORMAT,
        "key": key,
        "scenario": scenario.name,
        **fields,
        "split_rows": [[name, i, table.num_rows] for name, i, table in order],
        "reference_rows": reference.num_rows,
        "files": {SPLITS_FILE: _file_facts(splits_bytes), REFERENCE_FILE: _file_facts(reference_bytes)},
    }
    writer.write(path / MANIFEST_FILE, msgpack.packb(manifest, use_bin_type=True))
    return path


def _read_manifest(path: Path) -> dict:
    file = path / MANIFEST_FILE
    try:
        manifest = msgpack.unpackb(file.read_bytes(), raw=False)
    except (OSError, ValueError, msgpack.UnpackException) as err:
        raise CorruptEntry(f"{file}: unreadable manifest ({type(err).__name__}: {err})") from None
    if (
        not isinstance(manifest, dict)
        or manifest.get("format") != FORMAT
        or not isinstance(manifest.get("files"), dict)
    ):
        raise CorruptEntry(f"{file}: not a format-{FORMAT} manifest")
    return manifest


def _read_arrow(path: Path, name: str, manifest: dict) -> tuple[pa.Schema, list[pa.RecordBatch]]:
    file = path / name
    facts = manifest["files"].get(name)
    if not isinstance(facts, dict):
        raise CorruptEntry(f"{path / MANIFEST_FILE}: no entry for {name}")
    try:
        data = file.read_bytes()
    except OSError as err:
        raise CorruptEntry(f"{file}: unreadable ({err.strerror or err})") from None
    if len(data) != facts.get("bytes") or zlib.crc32(data) != facts.get("crc32"):
        raise CorruptEntry(
            f"{file}: {len(data)} bytes with CRC-32 {zlib.crc32(data)}, the manifest says "
            f"{facts.get('bytes')} bytes with CRC-32 {facts.get('crc32')}"
        )
    try:
        reader = pa.ipc.open_file(pa.py_buffer(data))
        return reader.schema, [reader.get_batch(i) for i in range(reader.num_record_batches)]
    except (pa.ArrowException, OSError, ValueError) as err:
        raise CorruptEntry(f"{file}: not an Arrow IPC file ({err})") from None


def lookup(scenario: Scenario, root: Path | None = None) -> CacheLookup:
    """The entry of ``scenario``'s workload: a ``HIT`` with its splits and reference, a ``MISS``, or ``CORRUPT``
    with the problem."""
    key = cache_key(scenario)
    path = entry_path(key, root)
    if not (path / MANIFEST_FILE).exists():
        return CacheLookup(Lookup.MISS, key, path)
    try:
        manifest = _read_manifest(path)
        if manifest.get("key") != key:
            raise CorruptEntry(f"{path / MANIFEST_FILE}: the manifest is of key {manifest.get('key')!r}")
        _, batches = _read_arrow(path, SPLITS_FILE, manifest)
        reference_schema, reference = _read_arrow(path, REFERENCE_FILE, manifest)
        expected = [(v.name, i) for v in scenario.job.graph.sources for i in range(v.parallelism)]
        rows = manifest.get("split_rows") or []
        if (
            [(n, i) for n, i, _ in rows] != expected
            or len(batches) != len(expected)
            or [b.num_rows for b in batches] != [r for _, _, r in rows]
            or any(b.schema.names != list(SPLIT_COLUMNS) for b in batches)
        ):
            raise CorruptEntry(
                f"{path / SPLITS_FILE}: its splits are not the {len(expected)} splits of "
                f"{[list(e) for e in expected]} the manifest promises"
            )
    except CorruptEntry as err:
        return CacheLookup(Lookup.CORRUPT, key, path, problem=str(err))
    splits: dict[str, list[pa.Table]] = {}
    for (name, _), batch in zip(expected, batches):
        splits.setdefault(name, []).append(pa.Table.from_batches([batch]))
    reference_table = pa.Table.from_batches(reference, schema=reference_schema)
    if reference_table.num_rows != manifest.get("reference_rows"):
        return CacheLookup(
            Lookup.CORRUPT,
            key,
            path,
            problem=f"{path / REFERENCE_FILE}: not the {manifest.get('reference_rows')} rows the manifest promises",
        )
    return CacheLookup(Lookup.HIT, key, path, splits=splits, reference=reference_table)
