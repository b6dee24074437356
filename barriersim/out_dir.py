"""The directory a run, replay or sweep writes to (``--out``): a new or empty one, or, with ``force``, a previous
run's, which is then replaced.

How this works: ``prepare_out_dir`` is called before anything starts. A directory that does not exist or is
empty is used as it is. A non-empty one is refused (``ArgumentError``, one line naming it, so the CLI exits with
status 2 and touches nothing) unless ``force`` is given; with ``force`` it must hold a barriersim run or sweep
and nothing else (``is_run_directory``: only the files and directories barriersim writes, mode subdirectories
holding runs, a sweep's point subdirectories named in its ``sweep.json``), and its contents are removed first,
so the new run never mixes with the old one. A directory holding anything else is never emptied.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from barriersim.errors import ArgumentError
from barriersim.runtime.checkpointing_mode import ALL_MODES

RUN_FILES = {
    "summary.json",
    "scenario.toml",
    "checkpoints.csv",
    "checkpoints.parquet",
    "subtasks.csv",
    "subtasks.parquet",
    "placement.csv",
    "placement.parquet",
    "sweep.json",
    "external_store.msgpack",
}
RUN_DIRS = {"checkpoints", "savepoints", "analytics", "report", "logs"}
MARKERS = ("summary.json", "scenario.toml", "sweep.json")


def _sweep_points(path: Path) -> set[str]:
    try:
        index = json.loads((path / "sweep.json").read_text())
        return {str(p["label"]) for p in index.get("points", [])}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return set()


def is_run_directory(path: Path, depth: int = 0) -> bool:
    """Whether ``path`` holds only what barriersim writes for a run, several modes' runs or a sweep."""
    if depth > 2 or not path.is_dir():
        return False
    points = _sweep_points(path) if depth == 0 else set()
    marked = any((path / name).is_file() for name in MARKERS)
    for entry in path.iterdir():
        if entry.is_file() or entry.is_symlink():
            if entry.name not in RUN_FILES and not (entry.name.startswith(".") and entry.name.endswith(".tmp")):
                return False
        elif entry.name in RUN_DIRS:
            continue
        elif entry.name in ALL_MODES or entry.name in points:
            if not is_run_directory(entry, depth + 1):
                return False
            marked = True
        else:
            return False
    return marked


def prepare_out_dir(out: Path, force: bool = False, flag: str = "--out") -> None:
    """Check ``out`` before a run starts; with ``force``, empty a previous run's directory."""
    out = Path(out)
    if not out.exists():
        return
    if not out.is_dir():
        raise ArgumentError(f"{flag}: {out} is a file, not a directory")
    entries = sorted(p.name for p in out.iterdir())
    if not entries:
        return
    if not force:
        shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
        raise ArgumentError(
            f"{flag}: {out} is not empty (it holds {shown}); pass --force to replace the run in it, "
            "or choose another directory"
        )
    if not is_run_directory(out):
        raise ArgumentError(
            f"{flag}: {out} is not empty and holds more than a barriersim run; --force replaces only "
            "a run directory, choose another directory"
        )
    for entry in out.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
