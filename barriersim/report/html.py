"""The HTML report: one self-describing page per run directory, with its figures as PNG (and SVG) files beside
it, each at most a page in size (``figure``).

``build_report`` loads the run tables (``barriersim.rundir.load_tables``) unless given, finds the sweep axis
(``sweep_axis``), draws the figures (``timeline``, ``plots``) into the directory of the HTML file (by default
``RUN_DIR/report/``), writes what each shows to ``figures.json`` and writes ``index.html``: the sweep's points
(``analytics/sweep.parquet``), the runs, the figures, Flink's counts and summary statistics (computed by
``barriersim.spark.analytics`` or ``statistics``, passed in) and each run's ``verification``. A run
that restored a job also gets the restore page (``restore_page``). Tables scroll sideways in boxes as wide as the
page; everything is escaped; the page needs no scripts or network. Design notes: docs/report.md."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from html import escape
from pathlib import Path

import pandas as pd

from barriersim.report import figure, plots, restore_page, timeline
from barriersim.report.style import CSS
from barriersim.report.sweep_axis import SweepAxis, sweep_axis
from barriersim.rundir import RunTables, load_tables
from barriersim.scenarios.loader import ScenarioError, load_scenario
from barriersim.spark.analytics import COUNT_COLUMNS, STAT_COLUMNS, read_sweep_analytics

FIGURES = ("barrier_timeline.png", "alignment_and_start_delay.png", "end_to_end.png", "persisted_data.png")


@dataclass
class Report:
    html: Path
    figures: dict[str, figure.Figure | Path]  # the restore page's figure (written by restore_page) by its path


def _fmt(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "&mdash;"
    if isinstance(value, (int, float)):
        return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"
    return escape(str(value))


def _table(df: pd.DataFrame) -> str:
    head = "".join(f"<th>{escape(str(c))}</th>" for c in df.columns)
    rows = "".join(
        "<tr>" + "".join(f"<td>{_fmt(v.item() if hasattr(v, 'item') else v)}</td>" for v in row) + "</tr>"
        for row in df.itertuples(index=False)
    )
    return f'<div class="table"><table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>'


def _ordered_runs(tables: RunTables) -> list:
    """The runs in the figures' order: by mode, then by label."""
    if tables.checkpoints.empty:
        return list(tables.runs)
    rank = {label: i for i, label in enumerate(figure.runs_in_order(tables.checkpoints))}
    return sorted(tables.runs, key=lambda r: rank.get(r.label, len(rank)))


def _by_run_order(df: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    rank = {label: i for i, label in enumerate(order)}
    return (
        df.assign(_rank=df["run"].map(lambda r: rank.get(r, len(rank))))
        .sort_values("_rank", kind="stable")
        .drop(columns="_rank")
    )


def _runs_section(tables: RunTables) -> str:
    rows = []
    for run in _ordered_runs(tables):
        v = run.summary.get("verification") or {}
        c = run.summary.get("checkpoints") or {}
        rows.append(
            {
                "run": run.label,
                "mode": run.mode,
                "scenario": run.scenario,
                "seed": run.seed,
                "zipf_exponent": run.zipf_exponent,
                "completed": c.get("completed"),
                "failed": c.get("failed"),
                "verdict": v.get("verdict"),
            }
        )
    return "<h2>Runs</h2>" + _table(pd.DataFrame(rows))


def _statistics_section(analytics, order: list[str]) -> str:
    if analytics is None:
        return "<h2>Checkpoint statistics</h2><p>Not computed.</p>"
    parts = [
        "<h2>Checkpoint counts</h2>",
        _table(_by_run_order(analytics.counts, order)[["run", "mode", *COUNT_COLUMNS]]),
    ]
    parts.append("<h2>Checkpoint statistics summary</h2>")
    parts.append(
        '<p class="note">As Flink\'s REST API names them. Scope <em>checkpoint</em>: over completed checkpoints; '
        "scope <em>subtask</em>: over the acknowledged subtasks of completed checkpoints. Times in ms, sizes in "
        "bytes. Percentiles as Flink computes them (Apache Commons Math's estimator: position p&middot;(n+1) of "
        "the sorted values, linear interpolation between neighbours); computed in Spark, or in pandas by the same "
        "rule for small simulator runs.</p>"
    )
    for run, rows in _by_run_order(analytics.summary, order).groupby("run", sort=False):
        mode = rows["mode"].iloc[0]
        parts.append(_run_heading(str(mode), str(run)))
        parts.append(_table(rows[["scope", "metric", *STAT_COLUMNS]]))
    return "".join(parts)


SWEEP_FIGURES = (
    ("end_to_end_duration", ("p50", "p99")),
    ("alignment_duration", ("p50", "p99")),
    ("start_delay", ("p50", "p99")),
    ("persisted_data", ("p50", "p99")),
)


def _sweep_section(sweep: pd.DataFrame | None) -> str:
    """The sweep's points: one table of the axis values, mode, verdict and counts, then one table per statistic
    (p50 and p99 per mode), so that no table is wider than the page."""
    if sweep is None or sweep.empty:
        return ""
    rank = {m: i for i, m in enumerate(figure.MODE_ORDER)}
    sweep = (
        sweep.assign(_rank=sweep["mode"].map(lambda m: rank.get(m, len(rank))))
        .sort_values(["point_index", "_rank"], kind="stable")
        .drop(columns="_rank")
    )
    axes = list(sweep.columns[sweep.columns.get_loc("mode") + 1 : sweep.columns.get_loc("backend")])
    parts = [
        "<h2>Sweep</h2>",
        '<p class="note">One row per sweep point and mode, aggregated in Spark (all statistics in '
        "<code>analytics/sweep.parquet</code>). Times in ms, sizes in bytes.</p>",
        _table(sweep[["point", *axes, "mode", "verdict", "completed", "failed"]]),
    ]
    for metric, stats in SWEEP_FIGURES:
        columns = [f"{metric}_{q}" for q in stats if f"{metric}_{q}" in sweep.columns]
        if columns:
            unit = "bytes" if metric.endswith("_data") else "ms"
            parts.append(f"<h3>{escape(metric)} ({unit})</h3>")
            parts.append(_table(sweep[["point", "mode", *columns]]))
    return "".join(parts)


def _run_heading(mode: str, label: str) -> str:
    """A run's heading: its mode, and its label when that says more (a sweep point's ``point/mode``)."""
    if label in (mode, "."):
        return f"<h3>{escape(mode)}</h3>"
    return f"<h3>{escape(mode)} <small>({escape(label)})</small></h3>"


def _verification_section(tables: RunTables) -> str:
    parts = ["<h2>Verification</h2>"]
    blocks = [(run.label, run.mode, run.summary.get("verification")) for run in _ordered_runs(tables)]
    if tables.root_summary and tables.root_summary.get("verification") is not None:
        blocks.insert(0, ("all runs", str(tables.root_summary.get("mode", "")), tables.root_summary["verification"]))
    for label, mode, block in blocks:
        parts.append(_run_heading(mode, label))
        parts.append(f"<pre>{escape(json.dumps(block, indent=2))}</pre>")
    return "".join(parts)


def _figure(name: str, caption: str) -> str:
    svg = Path(name).with_suffix(".svg").name
    return (
        f'<figure><img src="{escape(name)}" alt="{escape(caption)}"><figcaption>{escape(caption)} '
        f'(<a href="{escape(svg)}">SVG</a>)</figcaption></figure>'
    )


def vertex_order(tables: RunTables) -> list[str]:
    """The job graph's vertices in order, from the first run's ``scenario.toml`` (none when it has none)."""
    for run in tables.runs:
        path = run.path / "scenario.toml"
        if path.is_file():
            try:
                return [v.name for v in load_scenario(path).job.graph.vertices]
            except (ScenarioError, OSError, ValueError):
                continue
    return []


def draw_figures(
    tables: RunTables, out_dir: Path, checkpoint_id: int | None = None, axis: SweepAxis | None = None
) -> dict[str, figure.Figure]:
    """Every figure of the report into ``out_dir``, by file name, in the page's order (the barrier timeline may
    take several pages: ``barrier_timeline_2.png`` and on); also ``figures.json``."""
    cp, st = tables.checkpoints, tables.subtasks
    for stale in [*out_dir.glob("barrier_timeline_*.png"), *out_dir.glob("barrier_timeline_*.svg")]:
        stale.unlink()  # pages of an earlier report of more points
    pages = timeline.plot_barrier_timeline(cp, st, out_dir / FIGURES[0], checkpoint_id, vertex_order(tables), axis)
    figures = {f.png.name: f for f in pages}
    figures[FIGURES[1]] = plots.plot_alignment_and_start_delay(cp, st, out_dir / FIGURES[1], axis)
    figures[FIGURES[2]] = plots.plot_end_to_end(cp, out_dir / FIGURES[2], axis)
    figures[FIGURES[3]] = plots.plot_persisted(cp, out_dir / FIGURES[3], axis)
    (out_dir / "figures.json").write_text(json.dumps({name: f.as_dict() for name, f in figures.items()}, indent=1))
    return figures


def captions(names: list[str], checkpoint_id: int | None, axis: SweepAxis | None) -> dict[str, str]:
    """What each figure shows, by file name."""
    which = (
        f"checkpoint {checkpoint_id}"
        if checkpoint_id is not None
        else "the completed checkpoint with the longest end-to-end duration"
    )
    grid = f"one row per sweep point ({axis.name}), one column per mode" if axis is not None else "one panel per run"
    per = "per mode" if axis is None else f"per sweep point ({axis.name}) and mode, each mode's medians joined"
    pages = [n for n in names if n.startswith("barrier_timeline")]
    out = {}
    for k, name in enumerate(pages, start=1):
        page = f", page {k} of {len(pages)}" if len(pages) > 1 else ""
        out[name] = (
            f"(1{page}) Barrier timeline of {which}, {grid}, on one time axis: per subtask (in the job "
            "graph's order), start delay (trigger to first barrier), alignment, synchronous snapshot, "
            "asynchronous part until the acknowledgement."
        )
    out[FIGURES[1]] = (
        f"(2) The subtasks' alignment_duration beside their start_delay (from the trigger to the "
        f"first barrier), {per}; every value a point. Time a barrier waits behind queued data "
        "before it reaches a subtask is start delay, not alignment."
    )
    out[FIGURES[2]] = (
        "(3) Checkpoint end_to_end_duration per checkpoint id; runs with equal values show as a thin "
        "line inside a wide one."
        if axis is None
        else f"(3) Checkpoint end_to_end_duration {per}."
    )
    out[FIGURES[3]] = (
        "(4) In-flight data persisted (persisted_data) per completed checkpoint, per run; runs with "
        "equal values show as a thin line inside a wide one."
        if axis is None
        else f"(4) In-flight data persisted (persisted_data) {per}; beside it, per checkpoint id, each "
        "run that persisted any, in a colour of its own."
    )
    return out


def render_html(
    title: str,
    tables: RunTables,
    analytics,
    figures: dict[str, str],
    sweep: pd.DataFrame | None = None,
    restore_page: str | None = None,
) -> str:
    """The page; ``figures``: caption by file name, in order."""
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{CSS}</style></head><body><h1>{escape(title)}</h1>"
        + _sweep_section(sweep)
        + (
            f'<p>A job was restored: <a href="{escape(restore_page)}">the checkpoints before and after the '
            "restore</a>.</p>"
            if restore_page
            else ""
        )
        + _runs_section(tables)
        + "<h2>Figures</h2>"
        + "".join(_figure(name, caption) for name, caption in figures.items())
        + _statistics_section(analytics, [r.label for r in _ordered_runs(tables)])
        + _verification_section(tables)
        + "</body></html>\n"
    )


def build_report(
    root: str | Path,
    out_html: str | Path | None = None,
    checkpoint_id: int | None = None,
    analytics=None,
    tables: RunTables | None = None,
) -> Report:
    """Write the report of the run(s) under ``root``: ``out_html`` (default ``root/report/index.html``) and
    the PNGs beside it. ``analytics`` is a ``barriersim.spark.analytics.Analytics`` (or None)."""
    root = Path(root)
    tables = tables if tables is not None else load_tables(root)
    html_path = Path(out_html) if out_html else root / "report" / "index.html"
    html_path.parent.mkdir(parents=True, exist_ok=True)
    axis = sweep_axis(root, tables.runs)
    figures: dict[str, figure.Figure | Path] = dict(draw_figures(tables, html_path.parent, checkpoint_id, axis))
    title = f"barriersim report: {root.resolve().name}"
    sweep = read_sweep_analytics(root)
    page = None
    if restore_page.has_restore(tables):
        page = restore_page.write_restore_page(tables, html_path.parent, _table)
        figures[restore_page.FIGURE] = html_path.parent / restore_page.FIGURE
    shown = captions([n for n in figures if n.endswith(".png") and n != restore_page.FIGURE], checkpoint_id, axis)
    html_path.write_text(
        render_html(title, tables, analytics, shown, sweep, page.name if page else None), encoding="utf-8"
    )
    return Report(html=html_path, figures=figures)
