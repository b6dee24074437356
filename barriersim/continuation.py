"""A run that continues another: started from one of its savepoints or retained checkpoints (``--from PATH``).

How this works: a savepoint or retained checkpoint a run wrote lives in its run directory (``savepoints/`` or
``checkpoints/<job-id>/``); the run directory also holds what the run's sinks wrote to the external system
(``external_store.msgpack``, msgpack: committed transactions in order, pending ones, direct writes) and, in its
``summary.json``, the next execution attempt number no attempt of it used. A run restored from there continues
that external system (as a Kafka topic outlives the job), so its output is verified together with the earlier
output, and its attempts start above the earlier ones (a transaction id is never reused). ``check_restore`` checks
a scenario's ``[restore]`` before anything starts: the path must name a readable savepoint or checkpoint inside a
run directory of the same scenario (workload, seed and job up to parallelism), else a ``ScenarioError`` names
``restore.from`` and the problem in one line. ``previous_run`` gives what the restored run continues.
``write_external_store`` / ``read_external_store`` keep the external system in a run directory, atomically.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import msgpack

from barriersim.runtime.operators.sinks import ExternalStore
from barriersim.runtime.storage.atomic_file import AtomicFileWriter
from barriersim.runtime.storage.errors import CheckpointStorageError
from barriersim.runtime.storage.fs_storage import FileSystemCheckpointStorage
from barriersim.scenarios.loader import Scenario, ScenarioError, load_scenario

EXTERNAL_STORE_FILE = "external_store.msgpack"
_SEARCH_DEPTH = 4  # savepoints/<dir>, checkpoints/<job>/chk-<n>, and a file inside them


@dataclass(frozen=True)
class PreviousRun:
    """What a restored run continues: the earlier run's directory, its external system and next attempt number."""

    run_dir: Path
    store: ExternalStore
    next_attempt_number: int


def write_external_store(out_dir: Path, store: ExternalStore) -> None:
    AtomicFileWriter().write(Path(out_dir) / EXTERNAL_STORE_FILE, msgpack.packb(store.snapshot(), use_bin_type=True))


def read_external_store(run_dir: Path) -> ExternalStore:
    data = (Path(run_dir) / EXTERNAL_STORE_FILE).read_bytes()
    return ExternalStore.from_snapshot(msgpack.unpackb(data, raw=False, strict_map_key=False))


def run_dir_of(path: str | Path) -> Path | None:
    """The run directory holding ``path`` (the nearest ancestor with a ``summary.json`` and the external store)."""
    p = Path(str(path)[len("file://"):] if str(path).startswith("file://") else str(path)).resolve()
    for candidate in [p, *p.parents][:_SEARCH_DEPTH + 1]:
        if (candidate / "summary.json").is_file() and (candidate / EXTERNAL_STORE_FILE).is_file():
            return candidate
    return None


def _job_shape(scenario: Scenario) -> list:
    graph = scenario.job.graph
    return [[(v.name, v.operator.value, v.max_parallelism, sorted((k, str(x)) for k, x in v.params.items()))
             for v in graph.vertices],
            [(e.source, e.target, e.partitioner.value, e.target_input) for e in graph.edges]]


def _same_source_parallelism(a: Scenario, b: Scenario) -> bool:
    return [(v.name, v.parallelism) for v in a.job.graph.sources] == [(v.name, v.parallelism) for v in b.job.graph.sources]


def check_restore(scenario: Scenario) -> None:
    """The scenario's ``[restore]`` names a readable snapshot of a run of the same scenario (``ScenarioError``)."""
    restore = scenario.restore
    if restore is None:
        return
    path = restore.path

    def bad(problem: str) -> ScenarioError:
        return ScenarioError(scenario.path, "restore.from", f"{path}: {problem}")

    try:
        FileSystemCheckpointStorage(".", "restore").load_checkpoint_metadata(path)
    except CheckpointStorageError as err:
        raise bad(f"not a readable savepoint or checkpoint ({err})") from None
    run_dir = run_dir_of(path)
    if run_dir is None:
        raise bad(f"not inside a barriersim run directory (its {EXTERNAL_STORE_FILE} holds what the sinks wrote "
                  "before the snapshot, without which the restored run cannot be verified)")
    try:
        earlier = load_scenario(run_dir / "scenario.toml")
    except ScenarioError as err:
        raise bad(f"the run that wrote it has no readable scenario.toml ({err})") from None
    if (earlier.seed, earlier.workload) != (scenario.seed, scenario.workload) or _job_shape(earlier) != _job_shape(scenario) \
            or not _same_source_parallelism(earlier, scenario):
        raise bad(f"it was written by a run of another scenario ({run_dir / 'scenario.toml'}: its seed, workload or "
                  "job differ; only the parallelism may change, and only through restore.parallelism)")


def previous_run(scenario: Scenario) -> PreviousRun | None:
    """What the scenario's restored run continues (None without ``[restore]``)."""
    if scenario.restore is None:
        return None
    run_dir = run_dir_of(scenario.restore.path)
    if run_dir is None:
        raise ScenarioError(scenario.path, "restore.from", f"{scenario.restore.path}: not inside a barriersim run directory")
    summary = json.loads((run_dir / "summary.json").read_text())
    return PreviousRun(run_dir, read_external_store(run_dir), int(summary.get("job", {}).get("next_attempt_number", 0)))
