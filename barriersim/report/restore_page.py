"""The report's restore page: the checkpoints of a run's jobs before and after a restore (a savepoint's or a
retained checkpoint's, rescaled or not), from the ``jobs`` section of its ``summary.json`` and the ``job`` column
of its checkpoint table. ``has_restore`` tells whether any run restored a job; ``write_restore_page`` then writes
``restore.html`` beside ``index.html`` with, per run: the jobs (parallelism per vertex, final state, Flink's
``latest.restored``), the actions and what became of them, every checkpoint and savepoint of every job (Flink's
REST fields) and a page-wide figure (``restore_checkpoints.png``) of each checkpoint's end-to-end duration and
state size over its trigger time, by job, savepoints starred, a line where each restored job started.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

import pandas as pd

from barriersim.report import figure
from barriersim.report.style import CSS
from barriersim.rundir import RunTables

PAGE = "restore.html"
FIGURE = "restore_checkpoints.png"
CHECKPOINT_FIELDS = (
    "job",
    "id",
    "status",
    "checkpoint_type",
    "is_savepoint",
    "savepointFormat",
    "trigger_timestamp",
    "end_to_end_duration",
    "state_size",
    "persisted_data",
    "failure_reason",
    "external_path",
)


def has_restore(tables: RunTables) -> bool:
    """Whether some run of the report restored a job (a restore action, or ``--from``)."""
    return any(len(run.summary.get("jobs") or []) > 1 or run.summary.get("restore") for run in tables.runs)


def _jobs_frame(summary: dict) -> pd.DataFrame:
    rows = []
    for job in summary.get("jobs") or []:
        restored = job.get("latest_restored") or {}
        counts = job.get("checkpoints") or {}
        rows.append(
            {
                "job": job.get("job"),
                "job_id": job.get("job_id"),
                "final_state": job.get("final_state"),
                "parallelism": ", ".join(f"{v}={p}" for v, p in (job.get("parallelism") or {}).items()),
                "restored_from": restored.get("id"),
                "restored_is_savepoint": restored.get("is_savepoint"),
                "restored_path": restored.get("external_path"),
                "completed": counts.get("completed"),
                "failed": counts.get("failed"),
                "restarts": job.get("restarts"),
            }
        )
    return pd.DataFrame(rows)


def _actions_frame(summary: dict) -> pd.DataFrame:
    keys = ("type", "at_ms", "drain", "from", "parallelism", "job", "status", "checkpoint_id", "path", "failure")
    rows = []
    for action in summary.get("actions") or []:
        row = {k: action.get(k) for k in keys}
        if isinstance(row["parallelism"], dict):
            row["parallelism"] = ", ".join(f"{v}={p}" for v, p in row["parallelism"].items())
        rows.append(row)
    return pd.DataFrame(rows)


def _checkpoints_frame(checkpoints: pd.DataFrame) -> pd.DataFrame:
    cp = checkpoints.copy()
    if "job" not in cp.columns:
        cp["job"] = 0
    cp["job"] = cp["job"].fillna(0).astype(int)
    for column in CHECKPOINT_FIELDS:
        if column not in cp.columns:
            cp[column] = None
    return cp.sort_values(["job", "trigger_timestamp", "id"])[list(CHECKPOINT_FIELDS)]


def restore_times(summary: dict) -> list[tuple[int, int]]:
    """(job, the coordinator's time it restored) of every restored job of a run."""
    out = []
    for job in summary.get("jobs") or []:
        restored = job.get("latest_restored")
        if restored and restored.get("restore_timestamp") is not None:
            out.append((job.get("job"), int(restored["restore_timestamp"])))
    return out


def plot_restore_checkpoints(checkpoints: pd.DataFrame, summaries: dict[str, dict], out: Path) -> Path:
    """Per run: end-to-end duration and state size of each checkpoint over its trigger time, by job."""
    runs = list(dict.fromkeys(checkpoints["run"]))
    fig, axes = figure.new_figure(7.5, 2, max(1, len(runs)), sharex="col")
    palette = figure.distinct_colors(10)
    for col, run in enumerate(runs):
        cp = _checkpoints_frame(checkpoints[checkpoints["run"] == run])
        done = cp[cp["status"] == "COMPLETED"]
        for job, rows in done.groupby("job"):
            color = palette[int(job) % len(palette)]
            for row_axis, field in ((0, "end_to_end_duration"), (1, "state_size")):
                ax = axes[row_axis][col]
                ax.plot(rows["trigger_timestamp"], rows[field], marker="o", color=color, label=f"job {job}")
                sp = rows[rows["is_savepoint"].fillna(False).astype(bool)]
                if len(sp):
                    ax.scatter(
                        sp["trigger_timestamp"],
                        sp[field],
                        marker="*",
                        s=220,
                        color=color,
                        edgecolor="black",
                        zorder=3,
                        label=f"savepoint (job {job})",
                    )
        for job, at in restore_times(summaries.get(run, {})):
            for row_axis in (0, 1):
                axes[row_axis][col].axvline(at, color="black", linestyle="--", linewidth=1)
                axes[row_axis][col].annotate(
                    f"job {job} restored",
                    (at, 1),
                    xycoords=("data", "axes fraction"),
                    rotation=90,
                    va="top",
                    ha="right",
                    fontsize=8,
                )
        mode = checkpoints.loc[checkpoints["run"] == run, "mode"].iloc[0]
        axes[0][col].set_title(figure.run_title(str(run), str(mode)))
        axes[0][col].set_ylabel("end_to_end_duration (ms)")
        axes[1][col].set_ylabel("state_size (bytes)")
        axes[1][col].set_xlabel("trigger_timestamp (ms, the coordinator's clock)")
    legend: dict = {}  # one legend of the jobs, above the panels (outside the data)
    for ax in axes.flat:
        legend.update(zip(*reversed(ax.get_legend_handles_labels())))
    if legend:
        fig.legend(
            legend.values(),
            legend.keys(),
            loc="outside upper center",
            ncol=min(len(legend), 6),
            fontsize=9,
            frameon=False,
        )
    panels = [
        figure.panel(axes[row][col], axes[row][col].get_title() or axes[row][col].get_ylabel())
        for col in range(len(runs))
        for row in (0, 1)
    ]
    return figure.save(fig, out, panels).png


def _booleans_as_text(df: pd.DataFrame) -> pd.DataFrame:
    """true/false instead of the 1/0 a number format would show."""
    return df.apply(lambda col: col.map(lambda v: ("true" if v else "false") if isinstance(v, bool) else v))


def write_restore_page(tables: RunTables, out_dir: Path, table_html) -> Path:
    """Write ``restore.html`` and its figure into ``out_dir``; ``table_html`` renders a DataFrame."""
    out_dir = Path(out_dir)
    summaries = {run.label: run.summary for run in tables.runs}
    figure = plot_restore_checkpoints(tables.checkpoints, summaries, out_dir / FIGURE)
    parts = [
        "<h1>Restores: the checkpoints before and after</h1>",
        '<p class="note">Each job of a run, the savepoint or retained checkpoint it was restored from (Flink\'s '
        "<code>latest.restored</code>), and every checkpoint and savepoint of every job. Times in ms on the "
        "coordinator's clock, sizes in bytes.</p>",
        f'<figure><img src="{escape(figure.name)}" alt="checkpoints before and after the restore">'
        "<figcaption>End-to-end duration and state size of each completed checkpoint over its trigger time, "
        "by job; stars are savepoints, a dashed line marks where a restored job started.</figcaption></figure>",
    ]
    for run in tables.runs:
        if not (run.summary.get("jobs") or run.summary.get("restore")):
            continue
        parts.append(f"<h2>{escape(run.mode)} <small>({escape(run.label)})</small></h2>")
        if run.summary.get("restore"):
            parts.append(f"<p>Started from <code>{escape(str(run.summary['restore'].get('from')))}</code>.</p>")
            after = run.summary["restore"].get("earlier_output_after_snapshot") or {}
            if after.get("transactions"):
                parts.append(
                    f"<p>The run it continues had committed {after['records']:,} records in "
                    f"{after['transactions']:,} transactions after that snapshot; this run processed and "
                    f"committed them again (the verification counts them as duplicated).</p>"
                )
        parts.append("<h3>Jobs</h3>" + table_html(_booleans_as_text(_jobs_frame(run.summary))))
        actions = _actions_frame(run.summary)
        if not actions.empty:
            parts.append("<h3>Actions</h3>" + table_html(_booleans_as_text(actions)))
        cp = tables.checkpoints[tables.checkpoints["run"] == run.label]
        parts.append("<h3>Checkpoints and savepoints</h3>" + table_html(_booleans_as_text(_checkpoints_frame(cp))))
    html = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>barriersim restores</title>'
        f"<style>{CSS}</style></head><body>" + "".join(parts) + "</body></html>\n"
    )
    path = out_dir / PAGE
    path.write_text(html, encoding="utf-8")
    return path
