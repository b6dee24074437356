"""Whether a replay reproduced the run it replays: its trace against the original's, and where they part.

How this works: the original is the run directory holding the replayed ``scenario.toml`` (a simulated run's, with
its ``summary.json``). ``compare`` gives one line: the trace is identical (the same ``trace_sha256``), or it
differs, and then the first difference in what both runs wrote: the checkpoint table (by checkpoint id, then its
columns), the subtask table (by checkpoint and subtask), then ``summary.json`` (its keys in order, leaving out what
differs between any two runs: wall-clock times, versions, the replay command). Options that change the run
(``--seed``, ``--mode``, ``--faults``, ``--actions``, ``--set``) are named with a difference.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from barriersim.backends import Backend, ran_on

VOLATILE = {"wall_seconds", "versions", "replay", "trace_sha256", "simulation.events_per_second"}


def original_run(scenario_file: Path) -> Path | None:
    """The run directory ``scenario_file`` belongs to, or None (a scenario file of its own)."""
    directory = Path(scenario_file).parent
    return directory if (directory / "summary.json").is_file() else None


def _rows(path: Path, keys: tuple[str, ...]) -> dict[tuple, dict]:
    if not path.exists():
        return {}
    return {tuple(row.get(k) for k in keys): row for row in pq.read_table(str(path)).to_pylist()}


def _order(key: tuple) -> tuple:
    """Numbers in numeric order (checkpoint 2 before 10), then names; None (no job column) first."""
    return tuple(
        (0, 0, "") if v is None else (1, v, "") if isinstance(v, (int, float)) else (2, 0, str(v)) for v in key
    )


def _table_difference(name: str, keys: tuple[str, ...], original: Path, replay: Path) -> str | None:
    mine, theirs = _rows(replay / f"{name}.parquet", keys), _rows(original / f"{name}.parquet", keys)
    for key in sorted(set(mine) | set(theirs), key=_order):
        what = f"{name} " + ", ".join(f"{k} {v}" for k, v in zip(keys, key) if v is not None)
        if key not in theirs:
            return f"{what}: only in the replay"
        if key not in mine:
            return f"{what}: only in the original"
        for column in mine[key]:
            if column in theirs[key] and mine[key][column] != theirs[key][column]:
                return f"{what}: {column} {mine[key][column]!r}, the original {theirs[key][column]!r}"
    return None


def _flat(value, prefix: str = "") -> dict:
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: value}


def _summary_difference(original: dict, replay: dict) -> str | None:
    mine, theirs = _flat(replay), _flat(original)
    for key in list(mine) + [k for k in theirs if k not in mine]:
        if key in VOLATILE or key.split(".")[0] in VOLATILE:
            continue
        if mine.get(key) != theirs.get(key):
            return f"summary.json {key}: {mine.get(key)!r}, the original {theirs.get(key)!r}"
    return None


def compare(original: Path, replay: Path, replay_summary: dict, changed: list[str]) -> str:
    """One line: whether the replay in ``replay`` reproduced the run in ``original``."""
    try:
        summary = json.loads((original / "summary.json").read_text())
    except (OSError, ValueError) as err:
        return f"not compared with the original: {original / 'summary.json'} cannot be read ({err})"
    if ran_on(summary) is not Backend.SIM or "trace_sha256" not in summary:
        return f"not compared with the original: {original} ran on {summary.get('backend')}, which keeps no trace"
    if summary["trace_sha256"] == replay_summary["trace_sha256"]:
        return f"trace identical to the original ({original})"
    first = (
        _table_difference("checkpoints", ("job", "id"), original, replay)
        or _table_difference("subtasks", ("job", "id", "task"), original, replay)
        or _summary_difference(summary, replay_summary)
        or "none in the statistics tables or summary.json"
    )
    note = f" (the replay was given {', '.join(changed)})" if changed else ""
    return f"trace differs from the original ({original}){note}: first difference: {first}"
