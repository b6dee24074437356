"""What every report figure shares: its record (``Figure``, ``Panel``, ``Series``), its page size, the runs'
order, colours and line styles, and ``save``, which writes PNG and SVG and measures where the legends and the
panels landed (so the tests can hold legends outside the data and figures to a page).

Every line or box of one panel gets its own colour: the mode's when the modes tell the lines apart, else one of a
qualitative palette per line. Runs that coincide stay visible: each later one is narrower and on top.
Design notes: docs/report.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib import colors as mcolors  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402

from barriersim.runtime.checkpointing_mode import ALL_MODES  # noqa: E402

MODE_ORDER = ALL_MODES  # the one list of the modes
DPI = 100
WIDTH_PX = 1440
WIDTH_IN = WIDTH_PX / DPI
MAX_WIDTH_PX = 1600  # a page: no figure is wider or taller than this
MAX_HEIGHT_PX = 2000
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
    color: str = ""


@dataclass
class Panel:
    title: str
    xlim: tuple[float, float]
    series: list[Series] = field(default_factory=list)
    ytick_labels: list[str] = field(default_factory=list)
    xlabel: str = ""
    xtick_labels: list[str] = field(default_factory=list)
    bbox: list[float] = field(default_factory=list)  # the axes in pixels: x0, y0, x1, y1 (y up)
    ax: Axes | None = field(default=None, repr=False, compare=False)


@dataclass
class Figure:
    png: Path
    svg: Path
    width_px: int
    height_px: int
    panels: list[Panel] = field(default_factory=list)
    legends: list[list[float]] = field(default_factory=list)  # each legend's box in pixels, as Panel.bbox

    def as_dict(self) -> dict:
        return {
            "png": self.png.name,
            "svg": self.svg.name,
            "width_px": self.width_px,
            "height_px": self.height_px,
            "legends": self.legends,
            "panels": [
                {
                    "title": p.title,
                    "xlim": list(p.xlim),
                    "xlabel": p.xlabel,
                    "xtick_labels": p.xtick_labels,
                    "ytick_labels": p.ytick_labels,
                    "bbox": p.bbox,
                    "series": [
                        {
                            "label": s.label,
                            "points": s.points,
                            "linewidth": s.linewidth,
                            "markersize": s.markersize,
                            "zorder": s.zorder,
                            "y": s.y,
                            "color": s.color,
                        }
                        for s in p.series
                    ],
                }
                for p in self.panels
            ],
        }


def new_figure(height_in: float, nrows: int = 1, ncols: int = 1, **kwargs):
    """A page-wide figure of ``nrows`` × ``ncols`` axes (constrained layout), at most a page tall."""
    height_in = min(height_in, MAX_HEIGHT_PX / DPI)
    return plt.subplots(
        nrows, ncols, figsize=(WIDTH_IN, height_in), dpi=DPI, squeeze=False, layout="constrained", **kwargs
    )


def panel(ax, title: str) -> Panel:
    return Panel(title=title, xlim=(0.0, 0.0), ax=ax)


def _box(extent) -> list[float]:
    return [round(float(v), 1) for v in (extent.x0, extent.y0, extent.x1, extent.y1)]


def save(fig, out: Path, panels: list[Panel]) -> Figure:
    """Write ``fig`` as PNG (``out``) and SVG beside it; record each panel's x-range, ticks and box and each
    legend's box, in pixels of the PNG."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png", dpi=DPI)  # lays the figure out: the boxes below are where the PNG has them
    renderer = fig.canvas.get_renderer()
    for p in panels:
        if p.ax is not None:
            ax = p.ax
            low, high = ax.get_xlim()
            p.xlim = (float(low), float(high))
            p.xlabel = p.xlabel or ax.get_xlabel()
            p.xtick_labels = p.xtick_labels or [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
            p.bbox = _box(ax.get_window_extent(renderer))
            p.ax = None
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
    boxes = [_box(legend.get_window_extent(renderer)) for legend in legends]
    fig.set_layout_engine("none")  # the SVG keeps the PNG's layout (and its time)
    svg = out.with_suffix(".svg")
    fig.savefig(svg, format="svg")
    width, height = (int(round(v)) for v in fig.get_size_inches() * DPI)
    plt.close(fig)
    return Figure(png=out, svg=svg, width_px=width, height_px=height, panels=panels, legends=boxes)


def modes_of(df: pd.DataFrame) -> list[str]:
    present = list(dict.fromkeys(df["mode"].astype(str)))
    return sorted(present, key=lambda m: (MODE_ORDER.index(m) if m in MODE_ORDER else len(MODE_ORDER), m))


def mode_colors(modes: list[str]) -> dict[str, str]:
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fixed = {m: palette[i] for i, m in enumerate(MODE_ORDER)}
    extra = iter(palette[len(MODE_ORDER) :] * 4)
    return {m: mcolors.to_hex(fixed.get(m) or next(extra)) for m in modes}


def distinct_colors(n: int) -> list[str]:
    """``n`` colours, no two alike: tab10, tab20, then evenly spaced hues."""
    if n <= 10:
        return [mcolors.to_hex(plt.get_cmap("tab10")(i)) for i in range(n)]  # an int: the i-th colour of the list
    if n <= 20:
        return [mcolors.to_hex(plt.get_cmap("tab20")(i)) for i in range(n)]
    return [mcolors.to_hex(plt.get_cmap("hsv")(i / n)) for i in range(n)]


def run_labels(df: pd.DataFrame) -> dict[str, str]:
    """A legend label per run: its mode, or mode and run when several runs share a mode."""
    runs = df[["run", "mode"]].drop_duplicates()
    shared = runs["mode"].duplicated(keep=False)
    return {r: (f"{m} ({r})" if s else m) for r, m, s in zip(runs["run"], runs["mode"], shared)}


def run_title(run: str, mode: str) -> str:
    return mode if run in (".", mode) else f"{mode} ({run})"


def runs_in_order(df: pd.DataFrame) -> list[str]:
    """The runs, by mode (``MODE_ORDER``), then by their label."""
    runs = df[["run", "mode"]].drop_duplicates()
    modes = modes_of(df)
    return [r for r, _ in sorted(zip(runs["run"], runs["mode"]), key=lambda rm: (modes.index(rm[1]), rm[0]))]


def run_styles(df: pd.DataFrame, labels: dict[str, str] | None = None) -> dict[str, dict]:
    """Line style per run, in drawing order: the mode's colour (a colour of its own per run when runs share a
    mode); each later run narrower, with a smaller marker of another shape, on top of the earlier ones, so that
    runs with equal numbers all stay visible. ``labels``: the legend's label per run (default ``run_labels``)."""
    order = runs_in_order(df)
    modes = dict(df[["run", "mode"]].drop_duplicates().itertuples(index=False))
    if len({modes[r] for r in order}) == len(order):
        by_mode = mode_colors(modes_of(df))
        colors = {r: by_mode[modes[r]] for r in order}
    else:
        colors = dict(zip(order, distinct_colors(len(order))))
    labels = labels or run_labels(df)
    styles = {}
    for k, run in enumerate(order):
        styles[run] = {
            "color": colors[run],
            "marker": MARKERS[k % len(MARKERS)],
            "linewidth": LINE_WIDTHS[min(k, len(LINE_WIDTHS) - 1)],
            "markersize": MARKER_SIZES[min(k, len(MARKER_SIZES) - 1)],
            "zorder": 2 + k,
            "label": labels[run],
            "alpha": 0.9,
        }
    return styles


def completed(checkpoints: pd.DataFrame) -> pd.DataFrame:
    return checkpoints[checkpoints["status"] == "COMPLETED"]


def without_finished(subtasks: pd.DataFrame) -> pd.DataFrame:
    """The rows of subtasks that took part in their checkpoint and acknowledged it: not those of tasks that had
    finished before the trigger (``finished``, FLIP-147: Flink reports them acknowledged at the trigger, every
    figure 0), nor those of a cancelled task's closed asynchronous part (``aborted``: no acknowledgement)."""
    for column in ("finished", "aborted"):
        if column in subtasks:  # a run written before the column existed has none
            subtasks = subtasks[~subtasks[column].fillna(False).astype(bool)]
    return subtasks


def acknowledged_subtasks(checkpoints: pd.DataFrame, subtasks: pd.DataFrame) -> pd.DataFrame:
    """The subtasks that took part in a completed checkpoint (``without_finished``)."""
    return without_finished(subtasks.merge(completed(checkpoints)[["run", "id"]], on=["run", "id"]))
