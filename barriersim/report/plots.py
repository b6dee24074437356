"""The report's figures, drawn with matplotlib (Agg) from pandas DataFrames and saved as PNG and SVG.

How this works: every function takes the run tables ``barriersim.rundir.load_tables`` gives (one row per
checkpoint or per acknowledged subtask, with the run columns ``run, mode, scenario, seed, zipf_exponent`` in
front) and the path of its PNG, draws one figure ``WIDTH_PX`` pixels wide, saves it as PNG and as SVG beside it,
and returns a ``Figure`` record: the files and, per panel, its x-range and every series drawn (label, points,
line width, marker size, drawing order), which ``barriersim.report.html`` writes to ``figures.json`` and the tests
check. Nothing here reads run directories or starts Spark, so the figures are quick to test.

Three rules make the runs comparable by eye. One subtask order everywhere: the job graph's vertex order, then the
subtask index (``subtask_order``). The barrier timeline's panels (one per run) share their x-axis, in ms since
each one's checkpoint was triggered. Lines that coincide stay visible: runs are drawn widest first, each later one
narrower, with a smaller marker of another shape on top (``run_styles``), so two runs with the same numbers show
as a thin line inside a wide one. The barrier timeline derives each subtask's phases from Flink's per-subtask
statistics when the timeline columns (``first_barrier_timestamp``, ``alignment_end_timestamp``,
``snapshot_timestamp``) are absent: first barrier = trigger + ``start_delay``, alignment end = first barrier +
``alignment_duration``, snapshot end = alignment end + ``checkpoint_sync``, then the asynchronous part until
``ack_timestamp``. When the subtask rows say where each subtask ran (``taskmanager``, ``local_input_channels``,
``remote_input_channels``), the timeline labels each subtask with its TaskManager and how many of its input
channels are local and remote, and each panel's title counts the local ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from barriersim.runtime.checkpointing_mode import ALL_MODES  # noqa: E402

MODE_ORDER = ALL_MODES  # the one list of the modes
PLACEMENT_COLUMNS = ("taskmanager", "local_input_channels", "remote_input_channels")
DPI = 100
WIDTH_PX = 1440
WIDTH_IN = WIDTH_PX / DPI
PHASES = (
    ("start delay", "first_barrier", "#9e9e9e"),
    ("alignment", "alignment_end", "#e4572e"),
    ("sync snapshot", "snapshot_end", "#17bebb"),
    ("async until ack", "ack", "#4c6ef5"),
)
# Drawn in this order, each run narrower and on top of the ones before it.
LINE_WIDTHS = (7.0, 4.0, 1.8, 1.0)
MARKERS = ("o", "s", "^", "D", "v", "P")
MARKER_SIZES = (13.0, 9.0, 5.5, 3.5)


@dataclass
class Series:
    label: str
    points: int
    linewidth: float
    markersize: float
    zorder: float
    y: list = field(repr=False, default_factory=list)


@dataclass
class Panel:
    title: str
    xlim: tuple[float, float]
    series: list[Series] = field(default_factory=list)
    ytick_labels: list[str] = field(default_factory=list)


@dataclass
class Figure:
    png: Path
    svg: Path
    width_px: int
    height_px: int
    panels: list[Panel] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"png": self.png.name, "svg": self.svg.name, "width_px": self.width_px, "height_px": self.height_px,
                "panels": [{"title": p.title, "xlim": list(p.xlim), "ytick_labels": p.ytick_labels,
                            "series": [{"label": s.label, "points": s.points, "linewidth": s.linewidth,
                                        "markersize": s.markersize, "zorder": s.zorder, "y": s.y}
                                       for s in p.series]} for p in self.panels]}


def _modes(df: pd.DataFrame) -> list[str]:
    present = list(dict.fromkeys(df["mode"].astype(str)))
    return sorted(present, key=lambda m: (MODE_ORDER.index(m) if m in MODE_ORDER else len(MODE_ORDER), m))


def mode_colors(modes: list[str]) -> dict[str, str]:
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fixed = {m: palette[i] for i, m in enumerate(MODE_ORDER)}
    extra = iter(palette[len(MODE_ORDER):] * 4)
    return {m: fixed.get(m) or next(extra) for m in modes}


def _run_labels(df: pd.DataFrame) -> dict[str, str]:
    """A legend label per run: its mode, or mode and run when several runs share a mode."""
    runs = df[["run", "mode"]].drop_duplicates()
    shared = runs["mode"].duplicated(keep=False)
    return {r: (f"{m} ({r})" if s else m) for r, m, s in zip(runs["run"], runs["mode"], shared)}


def _run_title(run: str, mode: str) -> str:
    return mode if run in (".", mode) else f"{mode} ({run})"


def runs_in_order(df: pd.DataFrame) -> list[str]:
    """The runs, by mode (``MODE_ORDER``), then by their label."""
    runs = df[["run", "mode"]].drop_duplicates()
    modes = _modes(df)
    return [r for r, _ in sorted(zip(runs["run"], runs["mode"]), key=lambda rm: (modes.index(rm[1]), rm[0]))]


def run_styles(df: pd.DataFrame) -> dict[str, dict]:
    """Line style per run, in drawing order: the mode's colour; each later run narrower, with a smaller marker
    of another shape, on top of the earlier ones, so that runs with equal numbers all stay visible."""
    colors = mode_colors(_modes(df))
    labels = _run_labels(df)
    modes = dict(df[["run", "mode"]].drop_duplicates().itertuples(index=False))
    styles = {}
    for k, run in enumerate(runs_in_order(df)):
        styles[run] = {"color": colors[modes[run]], "marker": MARKERS[k % len(MARKERS)],
                       "linewidth": LINE_WIDTHS[min(k, len(LINE_WIDTHS) - 1)],
                       "markersize": MARKER_SIZES[min(k, len(MARKER_SIZES) - 1)],
                       "zorder": 2 + k, "label": labels[run], "alpha": 0.9}
    return styles


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


def _save(fig, out: Path, panels: list[Panel]) -> Figure:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png", dpi=DPI)
    svg = out.with_suffix(".svg")
    fig.savefig(svg, format="svg")
    width, height = (int(round(v)) for v in fig.get_size_inches() * DPI)
    plt.close(fig)
    return Figure(png=out, svg=svg, width_px=width, height_px=height, panels=panels)


def _panel(ax, title: str) -> Panel:
    return Panel(title=title, xlim=tuple(float(v) for v in ax.get_xlim()))


def _completed(checkpoints: pd.DataFrame) -> pd.DataFrame:
    return checkpoints[checkpoints["status"] == "COMPLETED"]


def _without_finished(subtasks: pd.DataFrame) -> pd.DataFrame:
    """The rows of subtasks that took part in their checkpoint and acknowledged it: not those of tasks that had
    finished before the trigger (``finished``, FLIP-147: Flink reports them acknowledged at the trigger, every
    figure 0), nor those of a cancelled task's closed asynchronous part (``aborted``: no acknowledgement)."""
    for column in ("finished", "aborted"):
        if column in subtasks:  # a run written before the column existed has none
            subtasks = subtasks[~subtasks[column].fillna(False).astype(bool)]
    return subtasks


def pick_checkpoint(checkpoints: pd.DataFrame, checkpoint_id: int | None = None) -> int | None:
    """The checkpoint to draw for one run: ``checkpoint_id`` if the run has it, else (when no id is asked
    for) the completed checkpoint with the longest end-to-end duration (the lowest id on ties)."""
    if checkpoint_id is not None:
        return checkpoint_id if (checkpoints["id"] == checkpoint_id).any() else None
    done = _completed(checkpoints)
    if done.empty:
        return None
    longest = done.sort_values(["end_to_end_duration", "id"], ascending=[False, True], kind="stable")
    return int(longest["id"].iloc[0])


def barrier_phases(subtasks: pd.DataFrame, trigger_timestamp: int, order: list[str] | None = None) -> pd.DataFrame:
    """Per subtask of one checkpoint: ``task`` and the ends of its phases in ms after the trigger
    (``first_barrier, alignment_end, snapshot_end, ack``), non-decreasing, in ``order`` (default:
    ``subtask_order`` of the subtasks)."""
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
    phases = pd.DataFrame({"task": subtasks["task"].astype(str), "first_barrier": first, "alignment_end": align,
                           "snapshot_end": snap, "ack": ack})
    for name in PLACEMENT_COLUMNS:  # where the subtask ran, when the run recorded it
        if name in subtasks and subtasks[name].notna().all():
            phases[name] = subtasks[name].astype(int).to_numpy()
    order = order or subtask_order(phases["task"], start_delays=subtasks[["task", "start_delay"]])
    rank = {task: i for i, task in enumerate(order)}
    phases = phases.assign(_rank=phases["task"].map(lambda t: rank.get(t, len(rank))))
    return phases.sort_values(["_rank", "task"], kind="stable").drop(columns="_rank").reset_index(drop=True)


def _has_placement(phases: pd.DataFrame) -> bool:
    return all(name in phases for name in PLACEMENT_COLUMNS)


def subtask_label(row) -> str:
    """``keyed-sum#3`` or, with its placement, ``keyed-sum#3 · TM1 · in 2 local / 6 remote``."""
    if not all(name in row for name in PLACEMENT_COLUMNS):
        return str(row["task"])
    return (f"{row['task']} · TM{int(row['taskmanager'])} · in {int(row['local_input_channels'])} local / "
            f"{int(row['remote_input_channels'])} remote")


def plot_barrier_timeline(checkpoints: pd.DataFrame, subtasks: pd.DataFrame, out: Path,
                          checkpoint_id: int | None = None, vertices: list[str] | None = None) -> Figure:
    """(1) Per run, one checkpoint's subtasks as horizontal bars: start delay, alignment, synchronous
    snapshot, asynchronous part until the acknowledgement; one x-axis for all runs, the subtasks in one order."""
    picks = []
    for run in runs_in_order(checkpoints):
        cps = checkpoints[checkpoints["run"] == run]
        cid = pick_checkpoint(cps, checkpoint_id)
        if cid is not None:
            picks.append((run, cps[cps["id"] == cid].iloc[0]))
    chosen = [_without_finished(subtasks[(subtasks["run"] == run) & (subtasks["id"] == row["id"])])
              for run, row in picks]
    every = pd.concat(chosen) if chosen else subtasks.iloc[0:0]
    # every subtask of the runs, so that the panels share one order even when a subtask had finished (FLIP-147)
    # before the drawn checkpoint of one run: it keeps its row there, labelled, without bars
    seen = subtasks[subtasks["run"].isin([run for run, _ in picks])]["task"]
    order = subtask_order(pd.concat([every["task"], seen]), vertices,
                          every[["task", "start_delay"]] if len(every) else None)
    height = max(1.5, 0.32 * max(len(order), 1) + 1.0)
    fig, axes = plt.subplots(max(len(picks), 1), 1, figsize=(WIDTH_IN, height * max(len(picks), 1) + 1.0),
                             squeeze=False, sharex=True, layout="constrained")
    panels = []
    if not picks:
        axes[0][0].text(0.5, 0.5, "no completed checkpoint to draw", ha="center", va="center")
        axes[0][0].set_axis_off()
        return _save(fig, out, [_panel(axes[0][0], "no completed checkpoint")])
    for ax, (run, row), sts in zip(axes[:, 0], picks, chosen):
        title = (f"{_run_title(run, row['mode'])}: checkpoint {int(row['id'])}, {row['status']}, "
                 f"end-to-end {int(row['end_to_end_duration'])} ms")
        ax.set_title(title, fontsize=11, loc="left")
        ax.set_yticks(range(len(order)), order, fontsize=9)
        ax.set_ylim(len(order) - 0.5, -0.5)
        ax.grid(axis="x", alpha=0.3)
        if sts.empty:
            ax.text(0.5, 0.5, "no acknowledged subtasks", ha="center", va="center", transform=ax.transAxes)
            continue
        phases = barrier_phases(sts, int(row["trigger_timestamp"]), order)
        absent = "finished" if row["status"] == "COMPLETED" else "no acknowledgement"
        drawn = set(phases["task"])
        labels = {task: f"{task} · {absent}" for task in order if task not in drawn}
        if _has_placement(phases):
            local, remote = int(phases["local_input_channels"].sum()), int(phases["remote_input_channels"].sum())
            ax.set_title(f"{title}; {local} of {local + remote} input channels local", fontsize=11, loc="left")
            labels.update({p["task"]: subtask_label(p) for _, p in phases.iterrows()})
        if labels:
            ax.set_yticks(range(len(order)), [labels.get(task, task) for task in order], fontsize=9)
        for _, p in phases.iterrows():
            y = order.index(p["task"])
            start = 0.0
            for label, end_col, color in PHASES:
                ax.barh(y, p[end_col] - start, left=start, color=color, height=0.7, label=label)
                start = p[end_col]
    axes[0][0].set_xlim(left=0)
    axes[-1][0].set_xlabel("ms since the checkpoint was triggered")
    handles, labels = axes[0][0].get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    fig.legend(unique.values(), unique.keys(), loc="outside upper center", ncol=4, fontsize=10, frameon=False)
    for ax, (run, row) in zip(axes[:, 0], picks):
        panel = _panel(ax, _run_title(run, row["mode"]))
        panel.ytick_labels = [t.get_text() for t in ax.get_yticklabels()]
        panels.append(panel)
    return _save(fig, out, panels)


def plot_alignment_distribution(checkpoints: pd.DataFrame, subtasks: pd.DataFrame, out: Path) -> Figure:
    """(2) Box plot of the subtasks' ``alignment_duration`` per mode (completed checkpoints, acknowledged
    non-aborted subtasks; not those that had finished before the trigger, which received no barrier), with every
    value drawn as a point; one box when the runs share one mode."""
    done = _completed(checkpoints)[["run", "id"]]
    sts = _without_finished(subtasks.merge(done, on=["run", "id"]))
    if "aborted" in sts:
        sts = sts[~sts["aborted"].fillna(False).astype(bool)]
    modes = _modes(checkpoints)
    data = [sts.loc[sts["mode"] == m, "alignment_duration"].astype(float).to_numpy() for m in modes]
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 4.8), layout="constrained")
    kept = [(m, d) for m, d in zip(modes, data) if len(d)]
    series = []
    if kept:
        box = ax.boxplot([d for _, d in kept], patch_artist=True, widths=0.5, showfliers=False)
        ax.set_xticks(range(1, len(kept) + 1), [f"{m}\n(n={len(d)})" for m, d in kept])
        colors = mode_colors(modes)
        rng = np.random.default_rng(0)
        for i, ((m, d), patch) in enumerate(zip(kept, box["boxes"]), start=1):
            patch.set_facecolor(colors[m])
            patch.set_alpha(0.45)
            ax.scatter(i + rng.uniform(-0.18, 0.18, len(d)), d, s=10, color=colors[m], alpha=0.7, zorder=3)
            series.append(Series(m, len(d), 0.0, 10.0, 3.0))
    else:
        ax.text(0.5, 0.5, "no subtask statistics", ha="center", va="center", transform=ax.transAxes)
    ax.set_ylabel("alignment_duration (ms)")
    ax.set_title("Barrier alignment per subtask, by mode", fontsize=11)
    ax.grid(axis="y", alpha=0.3)
    panel = _panel(ax, "alignment_duration by mode")
    panel.series = series
    return _save(fig, out, [panel])


def differs_in_skew(checkpoints: pd.DataFrame) -> bool:
    return checkpoints["zipf_exponent"].dropna().nunique() > 1


def _lines_per_checkpoint(ax, done: pd.DataFrame, checkpoints: pd.DataFrame, column: str, scale: float = 1.0,
                          drawstyle: str = "default") -> list[Series]:
    styles = run_styles(checkpoints)
    series = []
    for run in runs_in_order(checkpoints):
        rows = done[done["run"] == run].sort_values("id")
        if rows.empty:
            continue
        style = styles[run]
        y = (rows[column].astype(float) / scale).tolist()
        ax.plot(rows["id"], y, drawstyle=drawstyle, markerfacecolor="none" if style["linewidth"] > 2 else None,
                **style)
        series.append(Series(style["label"], len(rows), style["linewidth"], style["markersize"], style["zorder"], y))
    return series


def plot_end_to_end(checkpoints: pd.DataFrame, out: Path) -> Figure:
    """(3) ``end_to_end_duration`` of completed checkpoints against the key skew (``workload.zipf_exponent``)
    when the runs differ in it, else over the checkpoint id."""
    done = _completed(checkpoints)
    colors = mode_colors(_modes(checkpoints))
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 5.0), layout="constrained")
    series = []
    if differs_in_skew(checkpoints):
        for k, mode in enumerate(_modes(done)):
            rows = done[done["mode"] == mode]
            ax.scatter(rows["zipf_exponent"], rows["end_to_end_duration"], s=14, alpha=0.5, color=colors[mode])
            medians = rows.groupby("zipf_exponent")["end_to_end_duration"].median()
            width = LINE_WIDTHS[min(k, len(LINE_WIDTHS) - 1)]
            size = MARKER_SIZES[min(k, len(MARKER_SIZES) - 1)]
            ax.plot(medians.index, medians.values, marker=MARKERS[k % len(MARKERS)], color=colors[mode],
                    linewidth=width, markersize=size, zorder=2 + k, alpha=0.9, label=f"{mode} (median)")
            series.append(Series(f"{mode} (median)", len(medians), width, size, 2 + k, medians.tolist()))
        ax.set_xlabel("key skew: workload.zipf_exponent")
        ax.set_title("Checkpoint end-to-end duration against key skew", fontsize=11)
    else:
        series = _lines_per_checkpoint(ax, done, checkpoints, "end_to_end_duration")
        ax.set_xlabel("checkpoint id")
        ax.set_title("Checkpoint end-to-end duration per checkpoint", fontsize=11)
    ax.set_ylabel("end_to_end_duration (ms)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=10)
    panel = _panel(ax, "end_to_end_duration")
    panel.series = series
    return _save(fig, out, [panel])


def plot_persisted(checkpoints: pd.DataFrame, out: Path) -> Figure:
    """(4) ``persisted_data`` (in-flight bytes written by unaligned checkpoints) per completed checkpoint,
    one line per run (labelled by mode)."""
    done = _completed(checkpoints)
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 5.0), layout="constrained")
    series = _lines_per_checkpoint(ax, done, checkpoints, "persisted_data", scale=1024, drawstyle="steps-mid")
    ax.set_xlabel("checkpoint id")
    ax.set_ylabel("persisted_data (KiB)")
    top = max([1.0, *(max(s.y) for s in series if s.y)])
    ax.set_ylim(-0.04 * top, top * 1.08)  # a line at 0 stays clear of the axis
    ax.set_title("In-flight data persisted per checkpoint, by mode", fontsize=11)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=10)
    panel = _panel(ax, "persisted_data")
    panel.series = series
    return _save(fig, out, [panel])
