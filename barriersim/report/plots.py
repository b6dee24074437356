"""The report's statistics figures, drawn with matplotlib (Agg) from the run tables (``barriersim.rundir``):
alignment beside start delay per subtask, end-to-end duration, and persisted in-flight data. Each figure is drawn
by mode, or, for a sweep (``sweep_axis``), per sweep point along an axis labelled with the swept parameters; it is
saved as PNG and SVG and returned as a ``figure.Figure`` record, which ``html`` writes to ``figures.json``. The
barrier timeline is ``timeline``'s. Nothing here reads run directories or starts Spark. Design notes:
docs/report.md.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.patches import Patch

from barriersim.report import boxes
from barriersim.report.figure import (
    Figure,
    Series,
    acknowledged_subtasks,
    completed,
    mode_colors,
    modes_of,
    new_figure,
    panel,
    run_styles,
    runs_in_order,
    save,
)
from barriersim.report.sweep_axis import POINT, SweepAxis, with_points

SUBTASK_PANELS = (
    ("alignment_duration", "Barrier alignment per subtask"),
    ("start_delay", "Start delay per subtask (trigger to first barrier)"),
)


def differs_in_skew(checkpoints: pd.DataFrame) -> bool:
    return checkpoints["zipf_exponent"].dropna().nunique() > 1


def _mode_legend(fig, modes: list[str]) -> None:
    """The modes' colours, above the panels (outside the data)."""
    colors = mode_colors(modes)
    fig.legend(
        [Patch(color=colors[m], alpha=0.7) for m in modes],
        modes,
        loc="outside upper center",
        ncol=len(modes),
        fontsize=10,
        frameon=False,
    )


def _legend_right(ax) -> None:
    """The axes' legend beside it, to the right (outside the data)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False, borderaxespad=0)


def plot_alignment_and_start_delay(
    checkpoints: pd.DataFrame, subtasks: pd.DataFrame, out: Path, axis: SweepAxis | None = None
) -> Figure:
    """Two panels side by side: the subtasks' ``alignment_duration`` and their ``start_delay`` (trigger to first
    barrier), in ms, over completed checkpoints and the subtasks that took part (not those finished before the
    trigger, which received no barrier, nor aborted ones); per mode, or per sweep point and mode."""
    sts = acknowledged_subtasks(checkpoints, subtasks)
    modes = modes_of(checkpoints)
    fig, axes = new_figure(5.4 if axis is not None else 4.8, 1, 2)
    panels = []
    for ax, (column, title) in zip(axes[0], SUBTASK_PANELS):
        if axis is None:
            series = boxes.by_mode(ax, sts, column, modes)
            ax.set_title(f"{title}, by mode", fontsize=11)
        else:
            series = boxes.by_point(ax, with_points(sts, axis), column, modes, axis)
            ax.set_title(f"{title}, per sweep point", fontsize=11)
        ax.set_ylabel(f"{column} (ms)")
        ax.set_ylim(bottom=0)
        ax.grid(axis="y", alpha=0.3)
        p = panel(ax, f"{column} by {'mode' if axis is None else 'sweep point'}")
        p.series = series
        panels.append(p)
    if axis is not None:
        _mode_legend(fig, modes)
    return save(fig, out, panels)


def _lines_per_checkpoint(
    ax,
    done: pd.DataFrame,
    column: str,
    scale: float = 1.0,
    drawstyle: str = "default",
    labels: dict[str, str] | None = None,
) -> list[Series]:
    """A line per run over the checkpoint ids (each in its own colour, later ones narrower and on top)."""
    styles = run_styles(done, labels) if len(done) else {}
    series = []
    for run in runs_in_order(done):
        rows = done[done["run"] == run].sort_values("id")
        style = styles[run]
        y = (rows[column].astype(float) / scale).tolist()
        ax.plot(rows["id"], y, drawstyle=drawstyle, markerfacecolor="none" if style["linewidth"] > 2 else None, **style)
        series.append(
            Series(
                style["label"], len(rows), style["linewidth"], style["markersize"], style["zorder"], y, style["color"]
            )
        )
    return series


def plot_end_to_end(checkpoints: pd.DataFrame, out: Path, axis: SweepAxis | None = None) -> Figure:
    """``end_to_end_duration`` of completed checkpoints: per checkpoint id, a line per run; or, for a sweep, per
    sweep point and mode."""
    done = completed(checkpoints)
    fig, axes = new_figure(5.0)
    ax = axes[0][0]
    if axis is None:
        series = _lines_per_checkpoint(ax, done, "end_to_end_duration")
        ax.set_xlabel("checkpoint id")
        ax.set_title("Checkpoint end-to-end duration per checkpoint", fontsize=11)
        _legend_right(ax)
    else:
        modes = modes_of(checkpoints)
        series = boxes.by_point(ax, with_points(done, axis), "end_to_end_duration", modes, axis)
        ax.set_title("Checkpoint end-to-end duration per sweep point", fontsize=11)
        _mode_legend(fig, modes)
    ax.set_ylabel("end_to_end_duration (ms)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    p = panel(ax, "end_to_end_duration")
    p.series = series
    return save(fig, out, [p])


def _persisted_lines(ax, done: pd.DataFrame, labels: dict[str, str] | None = None) -> list[Series]:
    series = _lines_per_checkpoint(ax, done, "persisted_data", scale=1024, drawstyle="steps-mid", labels=labels)
    ax.set_xlabel("checkpoint id")
    ax.set_ylabel("persisted_data (KiB)")
    top = max([1.0, *(max(s.y) for s in series if s.y)])
    ax.set_ylim(-0.04 * top, top * 1.08)  # a line at 0 stays clear of the axis
    ax.grid(alpha=0.3)
    _legend_right(ax)
    return series


def plot_persisted(checkpoints: pd.DataFrame, out: Path, axis: SweepAxis | None = None) -> Figure:
    """``persisted_data`` (in-flight bytes written by unaligned checkpoints) of completed checkpoints, in KiB: per
    checkpoint id, a line per run; or, for a sweep, per sweep point and mode beside the runs that persisted any
    per checkpoint id (each its own colour)."""
    done = completed(checkpoints)
    if axis is None:
        fig, axes = new_figure(5.0)
        p = panel(axes[0][0], "persisted_data")
        p.series = _persisted_lines(axes[0][0], done)
        axes[0][0].set_title("In-flight data persisted per checkpoint, by mode", fontsize=11)
        return save(fig, out, [p])
    modes = modes_of(checkpoints)
    fig, axes = new_figure(5.4, 1, 2)
    left, right = axes[0]
    per_point = panel(left, "persisted_data by sweep point")
    per_point.series = boxes.by_point(left, with_points(done, axis), "persisted_data", modes, axis, scale=1024)
    left.set_ylabel("persisted_data (KiB)")
    left.set_ylim(bottom=0)
    left.grid(axis="y", alpha=0.3)
    left.set_title("In-flight data persisted, per sweep point", fontsize=11)
    _mode_legend(fig, modes)
    points = with_points(done, axis)
    persisting = points.groupby("run")["persisted_data"].max()
    runs = points[points["run"].isin(persisting[persisting > 0].index)]
    labels = {
        r: f"{m} · {axis.labels[p]}"
        for r, m, p in runs[["run", "mode", POINT]].drop_duplicates().itertuples(index=False)
    }
    per_run = panel(right, "persisted_data per checkpoint")
    per_run.series = _persisted_lines(right, runs, labels)
    none = [m for m in modes if m not in set(runs["mode"])]
    right.set_title(
        "Per checkpoint, the runs that persisted any" + (f" (none in {', '.join(none)})" if none else ""), fontsize=11
    )
    if runs.empty:
        right.text(
            0.5, 0.5, "no checkpoint persisted in-flight data", ha="center", va="center", transform=right.transAxes
        )
    return save(fig, out, [per_point, per_run])
