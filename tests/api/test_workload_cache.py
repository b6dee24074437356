"""The workload cache without Ray or Spark: entries are found by what the workload depends on (not the mode or
the faults), read back as the very tables written, and an unreadable entry is reported, naming its file."""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
import pytest

from barriersim import workload_cache
from barriersim.api import as_faults
from barriersim.runtime.checkpointing_mode import CheckpointingMode
from barriersim.scenarios.loader import load_scenario, with_overrides
from barriersim.spark.reference import REFERENCE_SCHEMA
from barriersim.spark.workload import split_batches, split_plan, split_tables
from barriersim.workload_cache import Lookup
from tests.api.scenarios import TINY, TWO_SOURCES, write


def generated(scenario):
    """The splits Spark's batch function draws (the same function, called here) and a per-key reference."""
    plan = split_plan(scenario, scenario.seed)
    table = pa.Table.from_batches([b for p in range(len(plan.splits)) for b in split_batches(plan, p)])
    splits = split_tables(table, tuple((v.name, v.parallelism) for v in scenario.job.graph.sources))
    reference = (
        table.group_by("key")
        .aggregate([("record_id", "count"), ("value", "sum")])
        .rename_columns(["key", "records", "expected_sum"])
        .sort_by("key")
        .cast(REFERENCE_SCHEMA)
    )
    return splits, reference


@pytest.fixture
def tiny(tmp_path):
    return load_scenario(write(tmp_path, TINY))


def test_an_entry_is_read_back_as_written_and_shared_by_every_mode_and_fault_schedule(tiny, tmp_path):
    root = tmp_path / "cache"
    assert workload_cache.lookup(tiny, root).outcome is Lookup.MISS
    splits, reference = generated(tiny)
    path = workload_cache.store(tiny, splits, reference, root)
    assert sorted(p.name for p in path.iterdir()) == ["manifest.msgpack", "reference.arrow", "splits.arrow"]
    other_mode = with_overrides(
        tiny,
        checkpointing=replace(tiny.checkpointing, interval_ms=999, mode=CheckpointingMode.AT_LEAST_ONCE),
        faults=as_faults([{"type": "crash_task", "task": "source#0", "at_ms": 50}]),
    )
    found = workload_cache.lookup(other_mode, root)
    assert found.outcome is Lookup.HIT and found.path == path
    assert list(found.splits) == list(splits)
    assert all(a.equals(b) for name in splits for a, b in zip(found.splits[name], splits[name], strict=True))
    assert found.reference.equals(reference)


def test_a_changed_seed_workload_parallelism_or_generator_misses(tiny, tmp_path, monkeypatch):
    root = tmp_path / "cache"
    workload_cache.store(tiny, *generated(tiny), root)
    changed = [
        replace(tiny, seed=tiny.seed + 1),
        with_overrides(tiny, workload=replace(tiny.workload, zipf_exponent=2.0)),
        with_overrides(tiny, workload=replace(tiny.workload, rate_per_source=1000)),
    ]
    two_sources = load_scenario(write(tmp_path, TWO_SOURCES, "two.toml"))
    keys = {workload_cache.cache_key(s) for s in [tiny, *changed, two_sources]}
    assert len(keys) == 5
    assert all(workload_cache.lookup(s, root).outcome is Lookup.MISS for s in changed)
    monkeypatch.setattr(workload_cache, "generator_version", lambda: "another generator")
    assert workload_cache.lookup(tiny, root).outcome is Lookup.MISS


@pytest.mark.parametrize(
    "damage, problem",
    [
        (
            lambda p: p.joinpath("splits.arrow").write_bytes(p.joinpath("splits.arrow").read_bytes()[:-10]),
            "splits.arrow: ",
        ),
        (lambda p: p.joinpath("reference.arrow").unlink(), "reference.arrow: unreadable"),
        (lambda p: p.joinpath("manifest.msgpack").write_bytes(b"\x93not a manifest"), "manifest.msgpack: "),
    ],
)
def test_a_corrupt_entry_is_reported_naming_its_file_and_a_new_entry_replaces_it(tiny, tmp_path, damage, problem):
    root = tmp_path / "cache"
    splits, reference = generated(tiny)
    path = workload_cache.store(tiny, splits, reference, root)
    damage(path)
    found = workload_cache.lookup(tiny, root)
    assert found.outcome is Lookup.CORRUPT and found.splits is None
    assert str(path) in found.problem and problem in found.problem and "\n" not in found.problem
    workload_cache.store(tiny, splits, reference, root)
    assert workload_cache.lookup(tiny, root).outcome is Lookup.HIT


def test_the_cache_directory_follows_the_variable_then_xdg_then_home(monkeypatch, tmp_path):
    monkeypatch.setenv("BARRIERSIM_CACHE_DIR", str(tmp_path / "mine"))
    assert workload_cache.cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("BARRIERSIM_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert workload_cache.cache_dir() == tmp_path / "xdg" / "barriersim"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert workload_cache.cache_dir() == tmp_path / "home" / ".cache" / "barriersim"
