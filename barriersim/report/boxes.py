"""Distributions as box plots, each value drawn as a point on its box: one box per mode (``by_mode``), or per
sweep point and mode (``by_point``: the points along x, labelled with the swept parameters and their values, a
box per mode side by side at each, each mode's medians joined across the points by a thin line, so the trend
along the sweep axis reads at a glance). Each returns one ``Series`` per mode: its colour, how many values, its
medians. At most ``MAX_DOTS`` values of a box are drawn as points (a fixed sample); the box holds them all.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from barriersim.report.figure import Series, mode_colors
from barriersim.report.sweep_axis import POINT, SweepAxis

MAX_DOTS = 400
BOX_ALPHA = 0.45


def _dots(ax, center: float, values: np.ndarray, spread: float, color: str, rng) -> None:
    if len(values) > MAX_DOTS:
        values = rng.choice(values, MAX_DOTS, replace=False)
    ax.scatter(
        center + rng.uniform(-spread, spread, len(values)), values, s=9, color=color, alpha=0.7, zorder=3, linewidths=0
    )


def _boxes(ax, data: list[np.ndarray], positions: list[float], width: float, color: str) -> None:
    box = ax.boxplot(
        data,
        positions=positions,
        widths=width,
        patch_artist=True,
        showfliers=False,
        manage_ticks=False,
        medianprops={"color": "#222222"},
    )
    for patch in box["boxes"]:
        patch.set_facecolor(color)
        patch.set_alpha(BOX_ALPHA)


def _empty(ax, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what}", ha="center", va="center", transform=ax.transAxes)


def by_mode(ax, frame: pd.DataFrame, column: str, modes: list[str], scale: float = 1.0) -> list[Series]:
    """A box of ``frame[column] / scale`` per mode that has values; the modes (and their counts) along x."""
    colors = mode_colors(modes)
    rng = np.random.default_rng(0)
    kept = [(m, frame.loc[frame["mode"] == m, column].astype(float).to_numpy() / scale) for m in modes]
    kept = [(m, d) for m, d in kept if len(d)]
    if not kept:
        _empty(ax, "values")
        return []
    series = []
    for i, (m, d) in enumerate(kept, start=1):
        _boxes(ax, [d], [i], 0.5, colors[m])
        _dots(ax, i, d, 0.18, colors[m], rng)
        series.append(Series(m, len(d), 0.0, 9.0, 3.0, [float(np.median(d))], colors[m]))
    ax.set_xticks(range(1, len(kept) + 1), [f"{m}\n(n={len(d)})" for m, d in kept])
    ax.set_xlim(0.4, len(kept) + 0.6)
    return series


def by_point(
    ax, frame: pd.DataFrame, column: str, modes: list[str], axis: SweepAxis, scale: float = 1.0
) -> list[Series]:
    """Per sweep point (``frame[POINT]``, see ``sweep_axis.with_points``) a box of ``frame[column] / scale`` per
    mode, side by side; each mode's medians joined across the points."""
    colors = mode_colors(modes)
    rng = np.random.default_rng(0)
    group = 0.8
    width = group / max(len(modes), 1)
    series = []
    for k, m in enumerate(modes):
        offset = -group / 2 + width * (k + 0.5)
        positions, data, medians = [], [], []
        for p in range(len(axis)):
            d = frame.loc[(frame["mode"] == m) & (frame[POINT] == p), column].astype(float).to_numpy() / scale
            medians.append(float(np.median(d)) if len(d) else None)
            if len(d):
                positions.append(p + offset)
                data.append(d)
        if not data:
            continue
        _boxes(ax, data, positions, width * 0.8, colors[m])
        for x, d in zip(positions, data):
            _dots(ax, x, d, width * 0.25, colors[m], rng)
        ax.plot(
            positions,
            [float(np.median(d)) for d in data],
            color=colors[m],
            linewidth=1.3,
            zorder=4,
            marker="_",
            markersize=10,
        )
        series.append(Series(m, sum(len(d) for d in data), 1.3, 10.0, 4.0, medians, colors[m]))
    if not series:
        _empty(ax, "values")
    ax.set_xticks(range(len(axis)), axis.ticks)
    ax.set_xlim(-0.5, len(axis) - 0.5)
    ax.set_xlabel(axis.name)
    return series
