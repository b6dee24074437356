"""A run that continues another: started from one of its savepoints or retained checkpoints (``--from PATH``),
continuing its external system. See docs/runs-and-workloads.md, "A run that continues another".
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyarrow.fs import FileType

from barriersim.errors import BarriersimError
from barriersim.runtime.operators.sinks import ExternalStore
from barriersim.runtime.storage.atomic_file import AtomicFileWriter
from barriersim.runtime.storage.errors import CheckpointStorageError
from barriersim.runtime.storage.fs_storage import local_path
from barriersim.runtime.storage.object_storage import (
    is_object_store_uri,
    object_store_filesystem,
    restore_storage_for,
    uri_for_messages,
)
from barriersim.runtime.verification.snapshot import pending_transactions
from barriersim.scenarios.loader import Scenario, ScenarioError, load_scenario, parse_scenario

EXTERNAL_STORE_FILE = "external_store.msgpack"
SCENARIO_FILE = "scenario.toml"
SUMMARY_FILE = "summary.json"
PUBLISHED_FILES = (SCENARIO_FILE, EXTERNAL_STORE_FILE, SUMMARY_FILE)  # summary.json last: the run is there
_SEARCH_DEPTH = 4  # savepoints/<dir>, checkpoints/<job>/chk-<n>, and a file inside them


class ExternalStoreFileError(BarriersimError):
    """A run directory's external store file cannot be read or does not hold one (names the file)."""


class RunPublishError(BarriersimError):
    """The run directory's files could not be written to the object store; the message names the URI."""


@dataclass(frozen=True)
class RunDirectory:
    """A run directory's files, read by name: a local directory, or a run published on an object store.
    ``where``: its path or URI, as messages name it."""

    where: str
    read_bytes: Callable[[str], bytes]
    is_file: Callable[[str], bool]

    def __truediv__(self, name: str) -> str:
        return f"{self.where}/{name}"

    def holds_a_run(self) -> bool:
        return self.is_file(SUMMARY_FILE) and self.is_file(EXTERNAL_STORE_FILE)

    @staticmethod
    def local(path: Path) -> RunDirectory:
        return RunDirectory(str(path), lambda name: (path / name).read_bytes(), lambda name: (path / name).is_file())

    @staticmethod
    def on_object_store(filesystem, path: str, scheme: str) -> RunDirectory:
        def read(name: str) -> bytes:
            with filesystem.open_input_stream(f"{path}/{name}") as stream:
                return stream.readall()

        def is_file(name: str) -> bool:
            try:
                return filesystem.get_file_info(f"{path}/{name}").type is FileType.File
            except OSError:
                return False

        return RunDirectory(f"{scheme}://{path}", read, is_file)


@dataclass(frozen=True)
class PreviousRun:
    """What a restored run continues: the earlier run's directory, its external system and next attempt number;
    and what that run committed after the restored snapshot (``OutputAfterSnapshot``), which the restored run
    commits again."""

    run_dir: RunDirectory
    store: ExternalStore
    next_attempt_number: int
    after_snapshot: OutputAfterSnapshot | None = None


def output_after_snapshot(previous: PreviousRun | None) -> dict | None:
    """``summary.json``'s ``restore.earlier_output_after_snapshot`` of a run that continues ``previous`` (None for
    a run that restores nothing, or whose snapshot's metadata could not be read)."""
    return previous.after_snapshot.to_plain() if previous is not None and previous.after_snapshot else None


@dataclass(frozen=True)
class OutputAfterSnapshot:
    """The transactions, and their records, the earlier run committed after those the restored snapshot's sinks
    had pre-committed (``ExternalStore.committed_after``): a restore of a snapshot older than the earlier run's
    last commit replays its sources from the snapshot's offsets and commits that output again, as Flink's restore
    of an older savepoint does (its exactly-once holds along one line of checkpoints, not across a rewind)."""

    transactions: int
    records: int

    def to_plain(self) -> dict:
        return {"transactions": self.transactions, "records": self.records}


def write_external_store(out_dir: Path, store: ExternalStore | bytes) -> None:
    """``store`` into the run directory, atomically; given as bytes, they are ``ExternalStore.to_msgpack``'s (the
    external store actor's ``snapshot``) and are written as they are."""
    data = store if isinstance(store, bytes) else store.to_msgpack()
    AtomicFileWriter().write(Path(out_dir) / EXTERNAL_STORE_FILE, data)


def read_external_store(run_dir: Path | RunDirectory) -> ExternalStore:
    """The external system a run directory holds; ``ExternalStoreFileError`` naming the file if it cannot be read
    or does not hold one."""
    directory = run_dir if isinstance(run_dir, RunDirectory) else RunDirectory.local(Path(run_dir))
    try:
        return ExternalStore.from_msgpack(directory.read_bytes(EXTERNAL_STORE_FILE))
    except (OSError, ValueError, TypeError, AttributeError, KeyError) as err:
        reason = " ".join(str(err).split()) or type(err).__name__
        raise ExternalStoreFileError(
            f"{directory / EXTERNAL_STORE_FILE}: not a readable external store ({reason})"
        ) from None


def publish_run(out_dir: Path, uri: str) -> None:
    """Put the run directory's ``scenario.toml``, external store and ``summary.json`` (last) under ``uri``, the run's
    directory on its checkpoint storage, where its savepoints and checkpoints are: on an object store one PUT each,
    on a filesystem one atomic file each (nothing when ``uri`` is the run directory itself). Raises
    ``RunPublishError`` naming the URI."""
    try:
        if is_object_store_uri(uri):
            filesystem, path = object_store_filesystem(uri)
            for name in PUBLISHED_FILES:
                with filesystem.open_output_stream(f"{path}/{name}") as out:
                    out.write((Path(out_dir) / name).read_bytes())
        else:
            target = Path(local_path(uri)).resolve()
            if target != Path(out_dir).resolve():
                target.mkdir(parents=True, exist_ok=True)
                for name in PUBLISHED_FILES:
                    AtomicFileWriter().write(target / name, (Path(out_dir) / name).read_bytes())
    except (OSError, CheckpointStorageError) as err:
        reason = " ".join(str(err).split()) or type(err).__name__
        raise RunPublishError(
            f"{uri_for_messages(uri)}: writing the run's {', '.join(PUBLISHED_FILES)} beside its "
            f"checkpoints failed ({reason}); a restore from there will not find the run"
        ) from None


def run_dir_of(path: str | Path) -> RunDirectory | None:
    """The run directory holding ``path`` (the nearest ancestor with a ``summary.json`` and the external store):
    a local one, or, for an object store pointer, the run published beside it (``publish_run``)."""
    text = str(path)
    if is_object_store_uri(text):
        try:
            filesystem, base = object_store_filesystem(text)
        except CheckpointStorageError:
            return None
        scheme = text.split("://", 1)[0]
        parts = base.split("/")
        for depth in range(min(_SEARCH_DEPTH + 1, len(parts) - 1)):  # never the bucket itself
            candidate = RunDirectory.on_object_store(filesystem, "/".join(parts[: len(parts) - depth]), scheme)
            if candidate.holds_a_run():
                return candidate
        return None
    p = Path(local_path(text)).resolve()
    for directory in [p, *p.parents][: _SEARCH_DEPTH + 1]:
        if (directory / SUMMARY_FILE).is_file() and (directory / EXTERNAL_STORE_FILE).is_file():
            return RunDirectory.local(directory)
    return None


def _earlier_scenario(run_dir: RunDirectory) -> Scenario:
    """The scenario the run in ``run_dir`` ran (its ``scenario.toml``); ``ScenarioError`` naming the file."""
    where = run_dir / SCENARIO_FILE
    if not is_object_store_uri(where):
        return load_scenario(where)
    try:
        text = run_dir.read_bytes(SCENARIO_FILE).decode("utf-8")
        return parse_scenario(tomllib.loads(text), where)
    except OSError as err:
        raise ScenarioError(where, None, f"cannot be read ({' '.join(str(err).split())})") from None
    except UnicodeDecodeError:
        raise ScenarioError(where, None, "not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(where, None, f"not valid TOML: {e}") from None


def _job_shape(scenario: Scenario) -> list:
    graph = scenario.job.graph
    return [
        [
            (v.name, v.operator.value, v.max_parallelism, sorted((k, str(x)) for k, x in v.params.items()))
            for v in graph.vertices
        ],
        [(e.source, e.target, e.partitioner.value, e.target_input) for e in graph.edges],
    ]


def _same_source_parallelism(a: Scenario, b: Scenario) -> bool:
    return [(v.name, v.parallelism) for v in a.job.graph.sources] == [
        (v.name, v.parallelism) for v in b.job.graph.sources
    ]


def check_restore(scenario: Scenario) -> None:
    """The scenario's ``[restore]`` names a readable snapshot of a run of the same scenario (``ScenarioError``)."""
    restore = scenario.restore
    if restore is None:
        return
    path = restore.path

    def bad(problem: str) -> ScenarioError:
        return ScenarioError(scenario.path, "restore.from", f"{path}: {problem}")

    try:
        restore_storage_for(path).load_checkpoint_metadata(path)
    except CheckpointStorageError as err:
        raise bad(f"not a readable savepoint or checkpoint ({err})") from None
    run_dir = run_dir_of(path)
    if run_dir is None:
        raise bad(
            f"not inside a barriersim run directory (its {EXTERNAL_STORE_FILE} holds what the sinks wrote "
            "before the snapshot, without which the restored run cannot be verified; on an object store, the "
            "run's files beside its checkpoints)"
        )
    try:
        earlier = _earlier_scenario(run_dir)
    except ScenarioError as err:
        raise bad(f"the run that wrote it has no readable scenario.toml ({err})") from None
    if (
        (earlier.seed, earlier.workload) != (scenario.seed, scenario.workload)
        or _job_shape(earlier) != _job_shape(scenario)
        or not _same_source_parallelism(earlier, scenario)
    ):
        raise bad(
            f"it was written by a run of another scenario ({run_dir / SCENARIO_FILE}: its seed, workload or "
            "job differ; only the parallelism may change, and only through restore.parallelism)"
        )


def previous_run(scenario: Scenario) -> PreviousRun | None:
    """What the scenario's restored run continues (None without ``[restore]``)."""
    if scenario.restore is None:
        return None
    run_dir = run_dir_of(scenario.restore.path)
    if run_dir is None:
        raise ScenarioError(
            scenario.path, "restore.from", f"{scenario.restore.path}: not inside a barriersim run directory"
        )
    summary = json.loads(run_dir.read_bytes(SUMMARY_FILE))
    try:
        store = read_external_store(run_dir)
    except ExternalStoreFileError as err:
        raise ScenarioError(scenario.path, "restore.from", str(err)) from None
    return PreviousRun(
        run_dir,
        store,
        int(summary.get("job", {}).get("next_attempt_number", 0)),
        _output_after_snapshot(store, scenario.restore.path),
    )


def _output_after_snapshot(store: ExternalStore, path: str) -> OutputAfterSnapshot | None:
    """What ``store`` committed after the snapshot at ``path`` (None if its metadata cannot be read: the restore
    itself then fails and says why)."""
    try:
        metadata = restore_storage_for(path).load_checkpoint_metadata(path)
    except CheckpointStorageError:
        return None
    after = store.committed_after(pending_transactions(metadata))
    return OutputAfterSnapshot(len(after), sum(len(store.committed[tid]) for tid in after))
