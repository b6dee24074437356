"""The barrier timeline: per run, one checkpoint's subtasks as horizontal bars (start delay, alignment, synchronous
snapshot, asynchronous part until the acknowledgement), in ms since its trigger.

The panels form a grid, one row per sweep point (else rows of up to ``MAX_COLUMNS`` runs), one column per mode,
all on one time axis and in one subtask order (the job graph's vertex order, then the subtask index); the first
column names the subtasks. Rows shrink, then spill onto further pages (``barrier_timeline_2.png``, ...), so that
no figure is taller than a page. Phases come from Flink's per-subtask statistics when the timeline columns are
absent (``barrier_phases``). Design notes: docs/report.md.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.collections import PolyCollection
from matplotlib.patches import Patch

from barriersim.report.figure import (
    DPI,
    MAX_HEIGHT_PX,
    Figure,
    completed,
    new_figure,
    panel,
    run_title,
    runs_in_order,
    save,
    without_finished,
)
from barriersim.report.sweep_axis import SweepAxis

PLACEMENT_COLUMNS = ("taskmanager", "local_input_channels", "remote_input_channels")
PHASES = (
    ("start delay", "first_barrier", "#9e9e9e"),
    ("alignment", "alignment_end", "#e4572e"),
    ("sync snapshot", "snapshot_end", "#17bebb"),
    ("async until ack", "ack", "#4c6ef5"),
)
MAX_COLUMNS = 4
BAR = 0.7  # a bar's height, of a subtask's row
ROW_IN, MIN_ROW_IN = 0.26, 0.14  # a subtask's row, in inches: as drawn, and the least before a new page
TITLE_IN, LEGEND_IN, XLABEL_IN = 0.75, 0.45, 0.55


def subtask_order(tasks, vertices: list[str] | None = None, start_delays: pd.DataFrame | None = None) -> list[str]:
    """``tasks`` (``vertex#index``) in the job graph's vertex order (``vertices``), then by subtask index. A vertex
    the graph does not name (no graph at hand) comes after the named ones, ordered by its subtasks' median
    ``start_delay`` when given (the barrier reaches upstream vertices first), then by name."""
    vertices = list(vertices or [])
    delays = {}
    if start_delays is not None and len(start_delays):
        per_vertex = start_delays.assign(vertex=start_delays["task"].astype(str).str.rpartition("#")[0])
        delays = per_vertex.groupby("vertex")["start_delay"].median().to_dict()

    def key(task: str):
        vertex, _, index = str(task).rpartition("#")
        if not vertex:
            vertex, index = str(task), "0"
        known = vertices.index(vertex) if vertex in vertices else len(vertices)
        return (known, delays.get(vertex, 0.0), vertex, int(index) if index.isdigit() else 0)

    return sorted(dict.fromkeys(str(t) for t in tasks), key=key)


def pick_checkpoint(checkpoints: pd.DataFrame, checkpoint_id: int | None = None) -> int | None:
    """The checkpoint to draw for one run: ``checkpoint_id`` if the run has it, else (when no id is asked
    for) the completed checkpoint with the longest end-to-end duration (the lowest id on ties)."""
    if checkpoint_id is not None:
        return checkpoint_id if (checkpoints["id"] == checkpoint_id).any() else None
    done = completed(checkpoints)
    if done.empty:
        return None
    longest = done.sort_values(["end_to_end_duration", "id"], ascending=[False, True], kind="stable")
    return int(longest["id"].iloc[0])


def barrier_phases(subtasks: pd.DataFrame, trigger_timestamp: int, order: list[str] | None = None) -> pd.DataFrame:
    """Per subtask of one checkpoint: ``task`` and the ends of its phases in ms after the trigger
    (``first_barrier, alignment_end, snapshot_end, ack``), non-decreasing, in ``order`` (default:
    ``subtask_order`` of the subtasks). Without the timeline columns: first barrier = trigger + ``start_delay``,
    alignment end = first barrier + ``alignment_duration``, snapshot end = alignment end + ``checkpoint_sync``."""

    def column(name: str, fallback: pd.Series) -> pd.Series:
        if name in subtasks and subtasks[name].notna().all():
            return subtasks[name].astype(float) - trigger_timestamp
        return fallback

    zero = pd.Series(0.0, index=subtasks.index)
    first = column("first_barrier_timestamp", subtasks["start_delay"].astype(float)).clip(lower=0)
    align = column("alignment_end_timestamp", first + subtasks["alignment_duration"].astype(float))
    align = np.maximum(align, first)
    sync = subtasks["checkpoint_sync"].astype(float) if "checkpoint_sync" in subtasks else zero
    snap = np.maximum(column("snapshot_timestamp", align + sync), align)
    ack = np.maximum(subtasks["ack_timestamp"].astype(float) - trigger_timestamp, snap)
    phases = pd.DataFrame(
        {
            "task": subtasks["task"].astype(str),
            "first_barrier": first,
            "alignment_end": align,
            "snapshot_end": snap,
            "ack": ack,
        }
    )
    for name in PLACEMENT_COLUMNS:  # where the subtask ran, when the run recorded it
        if name in subtasks and subtasks[name].notna().all():
            phases[name] = subtasks[name].astype(int).to_numpy()
    order = order or subtask_order(phases["task"], start_delays=subtasks[["task", "start_delay"]])
    rank = {task: i for i, task in enumerate(order)}
    phases = phases.assign(_rank=phases["task"].map(lambda t: rank.get(t, len(rank))))
    return phases.sort_values(["_rank", "task"], kind="stable").drop(columns="_rank").reset_index(drop=True)


def has_placement(phases: pd.DataFrame) -> bool:
    return all(name in phases for name in PLACEMENT_COLUMNS)


def subtask_label(row) -> str:
    """``keyed-sum#3`` or, with its placement, ``keyed-sum#3 · TM1 · in 2 local / 6 remote``."""
    if not all(name in row for name in PLACEMENT_COLUMNS):
        return str(row["task"])
    return (
        f"{row['task']} · TM{int(row['taskmanager'])} · in {int(row['local_input_channels'])} local / "
        f"{int(row['remote_input_channels'])} remote"
    )


class _Drawn:
    """One run's panel: its checkpoint row, its phases, and the label of each subtask as this run knows it."""

    def __init__(self, run: str, row, subtasks: pd.DataFrame, order: list[str], known: set[str]):
        self.run, self.row = run, row
        self.phases = barrier_phases(subtasks, int(row["trigger_timestamp"]), order) if len(subtasks) else None
        drawn = set(self.phases["task"]) if self.phases is not None else set()
        absent = "finished" if row["status"] == "COMPLETED" else "no acknowledgement"
        # the run's own subtasks that this checkpoint lacks (another point of a sweep may have other subtasks)
        self.absent = {task: absent for task in order if task in known and task not in drawn} if drawn else {}
        self.labels = {task: f"{task} · {why}" for task, why in self.absent.items()}
        if self.phases is not None and has_placement(self.phases):
            self.labels.update({p["task"]: subtask_label(p) for _, p in self.phases.iterrows()})

    def label(self, task: str) -> str:
        return self.labels.get(task, task)

    def title(self, point: str | None) -> str:
        r = self.row
        lines = [
            f"{point} · {r['mode']}" if point else run_title(self.run, r["mode"]),
            f"checkpoint {int(r['id'])}, {r['status']}, end-to-end {int(r['end_to_end_duration'])} ms",
        ]
        if self.phases is not None and has_placement(self.phases):
            local = int(self.phases["local_input_channels"].sum())
            remote = int(self.phases["remote_input_channels"].sum())
            lines.append(f"{local} of {local + remote} input channels local")
        return "\n".join(lines)


def _grid(picks: list[tuple[str, object]], axis: SweepAxis | None) -> list[tuple[str | None, list]]:
    """Rows of the grid: (the point's label or None, its runs' picks in mode order)."""
    if axis is None:
        return [(None, picks[i : i + MAX_COLUMNS]) for i in range(0, len(picks), MAX_COLUMNS)]
    rows: dict[int, list] = {}
    for pick in picks:
        rows.setdefault(axis.run_points.get(pick[0], len(axis)), []).append(pick)
    return [(axis.labels[p] if p < len(axis) else None, rows[p]) for p in sorted(rows)]


def _sizes(rows: int, subtasks: int) -> tuple[float, int, int]:
    """(a subtask row's height in inches, grid rows per page, label every k-th subtask)."""
    room = MAX_HEIGHT_PX / DPI - LEGEND_IN - XLABEL_IN
    height = ROW_IN
    if rows * (TITLE_IN + subtasks * height) > room:
        height = max(MIN_ROW_IN, (room / rows - TITLE_IN) / subtasks)
    per_page = max(1, int(room // (TITLE_IN + subtasks * height)))
    if per_page == 1 and TITLE_IN + subtasks * height > room:  # one run's subtasks alone fill a page
        height = (room - TITLE_IN) / subtasks
    step = max(1, math.ceil(MIN_ROW_IN / height)) if height < MIN_ROW_IN else 1
    return height, min(per_page, rows), step


def _page_path(out: Path, page: int) -> Path:
    return out if page == 0 else out.with_name(f"{out.stem}_{page + 1}{out.suffix}")


def _draw_panel(ax, drawn: _Drawn, order: list[str], shown: dict[str, str]) -> None:
    if drawn.phases is None:
        ax.text(0.5, 0.5, "no acknowledged subtasks", ha="center", va="center", transform=ax.transAxes)
        return
    ys = drawn.phases["task"].map(order.index).to_numpy(dtype=float)
    start = np.zeros(len(ys))
    for _, end_col, color in PHASES:  # one collection of bars per phase: quick to draw however many subtasks
        end = drawn.phases[end_col].to_numpy(dtype=float)
        bars = [
            [(a, y - BAR / 2), (a, y + BAR / 2), (b, y + BAR / 2), (b, y - BAR / 2)]
            for a, b, y in zip(start, end, ys)
            if b > a
        ]
        ax.add_collection(PolyCollection(bars, facecolors=color, edgecolors="none"))
        start = end
    for task, why in drawn.absent.items():  # a row without bars says why
        ax.text(0, order.index(task), f" {why}", va="center", ha="left", fontsize=8, color="#555555", style="italic")
    for task, end in zip(drawn.phases["task"], drawn.phases["ack"]):  # placed elsewhere than the label says
        own = drawn.label(task)
        if own != shown.get(task, task) and " · " in own:
            ax.text(end, order.index(task), "  " + own.split(" · ", 1)[1], va="center", fontsize=7, color="#555555")


def plot_barrier_timeline(
    checkpoints: pd.DataFrame,
    subtasks: pd.DataFrame,
    out: Path,
    checkpoint_id: int | None = None,
    vertices: list[str] | None = None,
    axis: SweepAxis | None = None,
) -> list[Figure]:
    """The timeline's pages (usually one): ``out``, then ``<stem>_2.png`` and on when a page is full."""
    picks = []
    for run in runs_in_order(checkpoints):
        cps = checkpoints[checkpoints["run"] == run]
        cid = pick_checkpoint(cps, checkpoint_id)
        if cid is not None:
            picks.append((run, cps[cps["id"] == cid].iloc[0]))
    if not picks:
        fig, axes = new_figure(1.5)
        axes[0][0].text(0.5, 0.5, "no completed checkpoint to draw", ha="center", va="center")
        axes[0][0].set_axis_off()
        return [save(fig, out, [panel(axes[0][0], "no completed checkpoint")])]
    chosen = {
        run: without_finished(subtasks[(subtasks["run"] == run) & (subtasks["id"] == row["id"])]) for run, row in picks
    }
    every = pd.concat(chosen.values())
    # every subtask of the runs, so that the panels share one order even when a subtask had finished (FLIP-147)
    # before the drawn checkpoint of one run: it keeps its row there, labelled, without bars
    seen = subtasks[subtasks["run"].isin(chosen)]["task"]
    order = subtask_order(
        pd.concat([every["task"], seen]), vertices, every[["task", "start_delay"]] if len(every) else None
    )
    drawn = {
        run: _Drawn(run, row, chosen[run], order, set(subtasks.loc[subtasks["run"] == run, "task"].astype(str)))
        for run, row in picks
    }
    xmax = max([1.0, *(d.phases["ack"].max() for d in drawn.values() if d.phases is not None)]) * 1.03
    shown: dict[str, str] = {}  # each subtask named as the first run that drew it knows it
    for d in drawn.values():
        if d.phases is not None:
            for task in d.phases["task"]:
                shown.setdefault(task, d.label(task))
    grid = _grid(picks, axis)
    columns = max(len(runs) for _, runs in grid)
    height, per_page, step = _sizes(len(grid), len(order))
    fontsize = max(5.0, min(9.0, height * 72 * 0.75))
    figures = []
    for page, first in enumerate(range(0, len(grid), per_page)):
        rows = grid[first : first + per_page]
        fig, axes = new_figure(
            LEGEND_IN + XLABEL_IN + len(rows) * (TITLE_IN + len(order) * height),
            len(rows),
            columns,
            sharex=True,
            sharey=True,
        )
        panels = []
        # one set of ticks for the shared y-axis
        labels = [shown.get(t, t) if i % step == 0 else "" for i, t in enumerate(order)]
        axes[0][0].set_yticks(range(len(order)), labels)
        for (point, runs), ax_row in zip(rows, axes):
            for ax in ax_row[len(runs) :]:
                ax.set_axis_off()
            for col, ((run, _), ax) in enumerate(zip(runs, ax_row)):
                d = drawn[run]
                ax.set_title(d.title(point), fontsize=9, loc="left")
                ax.tick_params(axis="y", labelleft=col == 0, labelsize=fontsize)
                ax.grid(axis="x", alpha=0.3)
                _draw_panel(ax, d, order, shown)
                p = panel(ax, f"{point} · {d.row['mode']}" if point else run_title(run, d.row["mode"]))
                p.ytick_labels = [d.label(t) for t in order]
                panels.append(p)
        axes[0][0].set_ylim(len(order) - 0.5, -0.5)
        axes[0][0].set_xlim(0, xmax)
        fig.supxlabel("ms since the checkpoint was triggered", fontsize=10)
        fig.legend(
            [Patch(color=c) for _, _, c in PHASES],
            [name for name, _, _ in PHASES],
            loc="outside upper center",
            ncol=len(PHASES),
            fontsize=10,
            frameon=False,
        )
        figures.append(save(fig, _page_path(Path(out), page), panels))
    return figures
