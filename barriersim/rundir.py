"""Run directories: find the runs under a directory and load their checkpoint and subtask tables; bad input raises
``RunDirError``, one line naming the path. See docs/runs-and-workloads.md, "Finding runs and loading their tables".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

RUN_KEYS = ("run", "mode", "scenario", "seed", "zipf_exponent")

CHECKPOINT_COLUMNS = (
    "id",
    "status",
    "trigger_timestamp",
    "end_to_end_duration",
    "state_size",
    "checkpointed_size",
    "processed_data",
    "persisted_data",
)
SUBTASK_COLUMNS = (
    "id",
    "task",
    "ack_timestamp",
    "alignment_duration",
    "start_delay",
    "checkpoint_sync",
)
# Per-subtask timeline columns later runs add; derived from the others when absent.
TIMELINE_COLUMNS = ("first_barrier_timestamp", "alignment_end_timestamp", "snapshot_timestamp")

_SKIP_DIRS = {"checkpoints", "savepoints", "report", "analytics", "logs"}
_MAX_DEPTH = 2


class RunDirError(Exception):
    """A run directory that cannot be used; ``str()`` is the one-line message for the user."""


@dataclass(frozen=True)
class Run:
    path: Path
    label: str
    summary: dict = field(repr=False, compare=False)

    @property
    def mode(self) -> str:
        return str(self.summary.get("mode", "unknown"))

    @property
    def scenario(self) -> str:
        return str(self.summary.get("scenario", "unknown"))

    @property
    def seed(self) -> int | None:
        seed = self.summary.get("seed")
        return int(seed) if isinstance(seed, int) else None

    @property
    def zipf_exponent(self) -> float | None:
        value = (self.summary.get("workload") or {}).get("zipf_exponent")
        return float(value) if isinstance(value, (int, float)) else None

    @property
    def restored(self) -> int:
        value = (self.summary.get("checkpoints") or {}).get("restored", 0)
        return int(value) if isinstance(value, int) else 0

    @property
    def failed(self) -> int | None:
        """Flink's count of failed checkpoints from ``summary.json``: it includes the triggers that failed before
        they had an id (``reportFailedCheckpointsWithoutInProgress``, such as the one the first task's RUNNING sets
        off), which have no row in the checkpoint table. None when the summary has no count."""
        value = (self.summary.get("checkpoints") or {}).get("failed")
        return int(value) if isinstance(value, int) else None

    def keys(self) -> dict:
        return {
            "run": self.label,
            "mode": self.mode,
            "scenario": self.scenario,
            "seed": self.seed,
            "zipf_exponent": self.zipf_exponent,
        }


@dataclass
class RunTables:
    runs: list[Run]
    checkpoints: pd.DataFrame
    subtasks: pd.DataFrame
    root_summary: dict | None = None


def read_summary(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise RunDirError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None
    except OSError as e:
        raise RunDirError(f"{path}: cannot be read ({e.strerror})") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: must hold a JSON object, got {type(data).__name__}")
    return data


def _candidates(root: Path) -> list[Path]:
    found = [root]
    level = [root]
    for _ in range(_MAX_DEPTH):
        nxt = []
        for d in level:
            try:
                children = sorted(p for p in d.iterdir() if p.is_dir() and p.name not in _SKIP_DIRS)
            except OSError:
                continue
            nxt.extend(children)
        found.extend(nxt)
        level = nxt
    return found


def discover_runs(root: str | Path) -> list[Run]:
    """The runs under ``root`` (the directory itself and/or its subdirectories), in path order."""
    root = Path(root)
    if not root.exists():
        raise RunDirError(f"{root}: no such run directory")
    if not root.is_dir():
        raise RunDirError(f"{root}: not a directory")
    runs = []
    for d in _candidates(root):
        if (d / "summary.json").is_file() and (d / "checkpoints.parquet").exists():
            label = "." if d == root else d.relative_to(root).as_posix()
            runs.append(Run(path=d, label=label, summary=read_summary(d / "summary.json")))
    if not runs:
        if (root / "summary.json").is_file():
            read_summary(root / "summary.json")  # a broken summary is the better message
            raise RunDirError(f"{root / 'checkpoints.parquet'}: missing (the run has no checkpoint statistics)")
        raise RunDirError(f"{root}: holds no run (no summary.json with checkpoints.parquet, here or below)")
    return runs


def _read_parquet(path: Path, required: tuple[str, ...]) -> pd.DataFrame:
    try:
        table = pq.read_table(str(path))
    except (OSError, ValueError) as e:
        raise RunDirError(f"{path}: not a readable Parquet file ({str(e).splitlines()[0]})") from None
    missing = [c for c in required if c not in table.column_names]
    if missing:
        raise RunDirError(f"{path}: lacks column(s) {', '.join(missing)}")
    return table.to_pandas()


def _with_run_columns(df: pd.DataFrame, run: Run) -> pd.DataFrame:
    df = df.copy()
    for i, (key, value) in enumerate(run.keys().items()):
        df.insert(i, key, value)
    return df


def run_tables(runs: list[Run]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``runs``' checkpoints and subtasks as two pandas DataFrames (run columns first)."""
    checkpoints, subtasks = [], []
    for run in runs:
        checkpoints.append(_with_run_columns(_read_parquet(run.path / "checkpoints.parquet", CHECKPOINT_COLUMNS), run))
        st_path = run.path / "subtasks.parquet"
        if st_path.exists():
            subtasks.append(_with_run_columns(_read_parquet(st_path, SUBTASK_COLUMNS), run))
    cp = pd.concat(checkpoints, ignore_index=True)
    st = pd.concat(subtasks, ignore_index=True) if subtasks else pd.DataFrame(columns=[*RUN_KEYS, *SUBTASK_COLUMNS])
    return cp, st


def load_tables(root: str | Path) -> RunTables:
    """Every run's checkpoints and subtasks under ``root`` as two pandas DataFrames (run columns first)."""
    root = Path(root)
    runs = discover_runs(root)
    cp, st = run_tables(runs)
    root_summary = None
    if all(r.path != root for r in runs) and (root / "summary.json").is_file():
        root_summary = read_summary(root / "summary.json")
    return RunTables(runs=runs, checkpoints=cp, subtasks=st, root_summary=root_summary)


def input_files(runs: list[Run]) -> list[Path]:
    """The files a run's statistics come from, to tell whether derived results are stale: its statistics tables
    (a Ray run writes its ``summary.json``, with the time its statistics took, after them)."""
    files = []
    for run in runs:
        for name in ("checkpoints.parquet", "subtasks.parquet"):
            if (run.path / name).exists():
                files.append(run.path / name)
    return files
