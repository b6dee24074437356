"""The report's figures, drawn with matplotlib (Agg) from pandas DataFrames and saved as PNG.

How this works: every function takes the run tables ``barriersim.rundir.load_tables`` gives (one row per
checkpoint or per acknowledged subtask, with the run columns ``run, mode, scenario, seed, zipf_exponent`` in
front) and a PNG path, draws one figure and returns the path. Nothing here reads run directories or starts Spark, so the
figures are quick to test. The barrier timeline derives each subtask's phases from Flink's per-subtask
statistics when the timeline columns (``first_barrier_timestamp``, ``alignment_end_timestamp``,
``snapshot_timestamp``) are absent: first barrier = trigger + ``start_delay``, alignment end = first barrier
+ ``alignment_duration``, snapshot end = alignment end + ``checkpoint_sync``, then the asynchronous part
until ``ack_timestamp``. When the subtask rows say where each subtask ran (``taskmanager``,
``local_input_channels``, ``remote_input_channels``), the timeline labels each subtask with its TaskManager and
how many of its input channels are local and remote, and its title counts the local ones.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from barriersim.runtime.checkpointing_mode import ALL_MODES  # noqa: E402

MODE_ORDER = ALL_MODES  # the one list of the modes
PLACEMENT_COLUMNS = ("taskmanager", "local_input_channels", "remote_input_channels")
PHASES = (
    ("start delay", "first_barrier", "#9e9e9e"),
    ("alignment", "alignment_end", "#e4572e"),
    ("sync snapshot", "snapshot_end", "#17bebb"),
    ("async until ack", "ack", "#4c6ef5"),
)


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


def _run_styles(df: pd.DataFrame) -> dict[str, dict]:
    """Line style per run: the mode's colour; runs sharing a mode differ in marker and dash."""
    colors = mode_colors(_modes(df))
    labels = _run_labels(df)
    markers, dashes = "osD^v<>P", ("-", "--", ":", "-.")
    styles, seen = {}, {}
    for run, mode in df[["run", "mode"]].drop_duplicates().itertuples(index=False):
        k = seen[mode] = seen.get(mode, -1) + 1
        styles[run] = {"color": colors[mode], "marker": markers[k % len(markers)],
                       "linestyle": dashes[k % len(dashes)], "label": labels[run]}
    return styles


def _save(fig, out: Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return out


def _completed(checkpoints: pd.DataFrame) -> pd.DataFrame:
    return checkpoints[checkpoints["status"] == "COMPLETED"]


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


def barrier_phases(subtasks: pd.DataFrame, trigger_timestamp: int) -> pd.DataFrame:
    """Per subtask of one checkpoint: ``task`` and the ends of its phases in ms after the trigger
    (``first_barrier, alignment_end, snapshot_end, ack``), non-decreasing, sorted by first barrier."""
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
            phases[name] = subtasks[name].astype(int)
    return phases.sort_values(["first_barrier", "task"], kind="stable").reset_index(drop=True)


def _has_placement(phases: pd.DataFrame) -> bool:
    return all(name in phases for name in PLACEMENT_COLUMNS)


def subtask_label(row) -> str:
    """``keyed-sum#3`` or, with its placement, ``keyed-sum#3 · TM1 · in 2 local / 6 remote``."""
    if not all(name in row for name in PLACEMENT_COLUMNS):
        return str(row["task"])
    return (f"{row['task']} · TM{int(row['taskmanager'])} · in {int(row['local_input_channels'])} local / "
            f"{int(row['remote_input_channels'])} remote")


def plot_barrier_timeline(checkpoints: pd.DataFrame, subtasks: pd.DataFrame, out: Path,
                          checkpoint_id: int | None = None) -> Path:
    """(1) Per run, one checkpoint's subtasks as horizontal bars: start delay, alignment, synchronous
    snapshot, asynchronous part until the acknowledgement."""
    runs = list(dict.fromkeys(checkpoints["run"]))
    picks = []
    for run in runs:
        cps = checkpoints[checkpoints["run"] == run]
        cid = pick_checkpoint(cps, checkpoint_id)
        if cid is not None:
            picks.append((run, cps[cps["id"] == cid].iloc[0]))
    sizes = [int(((subtasks["run"] == run) & (subtasks["id"] == row["id"])).sum()) for run, row in picks]
    heights = [max(1.2, 0.35 * max(n, 1) + 0.9) for n in sizes] or [1.5]
    fig, axes = plt.subplots(len(heights), 1, figsize=(9, sum(heights) + 0.8), squeeze=False,
                             gridspec_kw={"height_ratios": heights}, layout="constrained")
    if not picks:
        axes[0][0].text(0.5, 0.5, "no completed checkpoint to draw", ha="center", va="center")
        axes[0][0].set_axis_off()
    for ax, (run, row) in zip(axes[:, 0], picks):
        sts = subtasks[(subtasks["run"] == run) & (subtasks["id"] == row["id"])]
        title = (f"{_run_title(run, row['mode'])}: checkpoint {int(row['id'])}, {row['status']}, "
                 f"end-to-end {int(row['end_to_end_duration'])} ms")
        ax.set_title(title, fontsize=10, loc="left")
        if sts.empty:
            ax.text(0.5, 0.5, "no acknowledged subtasks", ha="center", va="center", transform=ax.transAxes)
            ax.set_yticks([])
            continue
        phases = barrier_phases(sts, int(row["trigger_timestamp"]))
        if _has_placement(phases):
            local, remote = int(phases["local_input_channels"].sum()), int(phases["remote_input_channels"].sum())
            ax.set_title(f"{title}; {local} of {local + remote} input channels local", fontsize=10, loc="left")
        for y, p in phases.iterrows():
            start = 0.0
            for label, end_col, color in PHASES:
                width = p[end_col] - start
                ax.barh(y, width, left=start, color=color, height=0.7, label=label if y == 0 else None)
                start = p[end_col]
        ax.set_yticks(range(len(phases)), [subtask_label(p) for _, p in phases.iterrows()], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(left=0)
        ax.grid(axis="x", alpha=0.3)
    axes[-1][0].set_xlabel("ms since the checkpoint was triggered")
    if picks:
        fig.legend(*axes[0][0].get_legend_handles_labels(), loc="outside upper center", ncol=4, fontsize=8,
                   frameon=False)
    return _save(fig, out)


def plot_alignment_distribution(checkpoints: pd.DataFrame, subtasks: pd.DataFrame, out: Path) -> Path:
    """(2) Box plot of the subtasks' ``alignment_duration`` per mode (completed checkpoints, acknowledged
    non-aborted subtasks); one box when the runs share one mode."""
    done = _completed(checkpoints)[["run", "id"]]
    sts = subtasks.merge(done, on=["run", "id"])
    if "aborted" in sts:
        sts = sts[~sts["aborted"].fillna(False).astype(bool)]
    modes = _modes(checkpoints)
    data = [sts.loc[sts["mode"] == m, "alignment_duration"].astype(float).to_numpy() for m in modes]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.6 * len(modes) + 2), 4))
    kept = [(m, d) for m, d in zip(modes, data) if len(d)]
    if kept:
        box = ax.boxplot([d for _, d in kept], patch_artist=True, widths=0.5)
        ax.set_xticks(range(1, len(kept) + 1), [f"{m}\n(n={len(d)})" for m, d in kept])
        colors = mode_colors(modes)
        for patch, (m, _) in zip(box["boxes"], kept):
            patch.set_facecolor(colors[m])
            patch.set_alpha(0.6)
    else:
        ax.text(0.5, 0.5, "no subtask statistics", ha="center", va="center", transform=ax.transAxes)
    ax.set_ylabel("alignment_duration (ms)")
    ax.set_title("Barrier alignment per subtask, by mode", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, out)


def differs_in_skew(checkpoints: pd.DataFrame) -> bool:
    return checkpoints["zipf_exponent"].dropna().nunique() > 1


def plot_end_to_end(checkpoints: pd.DataFrame, out: Path) -> Path:
    """(3) ``end_to_end_duration`` of completed checkpoints against the key skew (``workload.zipf_exponent``)
    when the runs differ in it, else over the checkpoint id."""
    done = _completed(checkpoints)
    colors = mode_colors(_modes(checkpoints))
    fig, ax = plt.subplots(figsize=(8, 4))
    if differs_in_skew(checkpoints):
        for mode, rows in done.groupby("mode", sort=False):
            ax.scatter(rows["zipf_exponent"], rows["end_to_end_duration"], s=14, alpha=0.5, color=colors[mode])
            medians = rows.groupby("zipf_exponent")["end_to_end_duration"].median()
            ax.plot(medians.index, medians.values, marker="o", color=colors[mode], label=f"{mode} (median)")
        ax.set_xlabel("key skew: workload.zipf_exponent")
        ax.set_title("Checkpoint end-to-end duration against key skew", fontsize=10)
    else:
        styles = _run_styles(checkpoints)
        for run, rows in done.groupby("run", sort=False):
            rows = rows.sort_values("id")
            ax.plot(rows["id"], rows["end_to_end_duration"], **styles[run])
        ax.set_xlabel("checkpoint id")
        ax.set_title("Checkpoint end-to-end duration per checkpoint", fontsize=10)
    ax.set_ylabel("end_to_end_duration (ms)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    return _save(fig, out)


def plot_persisted(checkpoints: pd.DataFrame, out: Path) -> Path:
    """(4) ``persisted_data`` (in-flight bytes written by unaligned checkpoints) per completed checkpoint,
    one line per run (labelled by mode)."""
    done = _completed(checkpoints)
    styles = _run_styles(checkpoints)
    fig, ax = plt.subplots(figsize=(8, 4))
    for run, rows in done.groupby("run", sort=False):
        rows = rows.sort_values("id")
        ax.plot(rows["id"], rows["persisted_data"].astype(float) / 1024, drawstyle="steps-mid", **styles[run])
    ax.set_xlabel("checkpoint id")
    ax.set_ylabel("persisted_data (KiB)")
    ax.set_ylim(0, max(1.0, ax.get_ylim()[1]))
    ax.set_title("In-flight data persisted per checkpoint, by mode", fontsize=10)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    return _save(fig, out)
