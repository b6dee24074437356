"""A sweep's figures: its points along x, labelled with the swept parameter and its values (alignment beside start
delay, end-to-end duration, persisted data), the barrier timeline as a grid of one row per point and one column per
mode on one time axis, split into pages when a page is full; legends outside the panels and a colour per line."""

from __future__ import annotations

import json
import re

import pytest

from barriersim import sweep
from barriersim.report.figure import MAX_HEIGHT_PX, MAX_WIDTH_PX
from barriersim.report.html import FIGURES, build_report
from tests.api.scenarios import TWO_POINT_SWEEP, write
from tests.report.rundirs import MODES, sweep_run_dir
from tests.report.test_report_figures import assert_a_colour_per_series, assert_legends_outside_the_data, png_size

# flushes every millisecond, so that the unaligned barriers overtake data in flight and persist it (with the 100 ms
# default the tiny job's flushers, all in step, hand their buffers over between the checkpoints)
PERSISTING_SWEEP = TWO_POINT_SWEEP + "\n[network]\nbuffer_timeout_ms = 1\n"


def figures_of(report) -> dict:
    return json.loads((report.html.parent / "figures.json").read_text())


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """A sweep of two skews, every mode, on the simulator."""
    tmp = tmp_path_factory.mktemp("sweep")
    sweep.run_sweep(write(tmp, PERSISTING_SWEEP), out=tmp / "out", modes="all", aggregate=False)
    report = build_report(tmp / "out")
    return report, figures_of(report)


def test_alignment_and_start_delay_are_drawn_per_sweep_point(simulated):
    _, figures = simulated
    panels = figures["alignment_and_start_delay.png"]["panels"]
    assert [p["title"] for p in panels] == ["alignment_duration by sweep point", "start_delay by sweep point"]
    for p in panels:
        assert p["xlabel"] == "workload.zipf_exponent" and p["xtick_labels"] == ["0.0", "2.0"]
        assert [s["label"] for s in p["series"]] == list(MODES)
        assert all(len(s["y"]) == 2 and None not in s["y"] for s in p["series"])  # a median per point and mode
    start_delays = panels[1]["series"]
    assert all(s["points"] > 0 for s in start_delays)


def test_end_to_end_and_persisted_data_are_drawn_per_sweep_point(simulated):
    _, figures = simulated
    [e2e] = figures["end_to_end.png"]["panels"]
    assert e2e["xlabel"] == "workload.zipf_exponent" and e2e["xtick_labels"] == ["0.0", "2.0"]
    per_point, per_checkpoint = figures["persisted_data.png"]["panels"]
    assert per_point["xtick_labels"] == ["0.0", "2.0"]
    unaligned = {s["label"]: s for s in per_point["series"]}["unaligned"]
    assert max(unaligned["y"]) > 0
    # beside it, per checkpoint, every unaligned run of the sweep that persisted data, each in its own colour
    assert [s["label"] for s in per_checkpoint["series"]] == [
        "unaligned · zipf_exponent=0.0",
        "unaligned · zipf_exponent=2.0",
    ]


def test_the_timeline_of_a_sweep_is_a_grid_of_points_by_modes(simulated):
    report, figures = simulated
    panels = figures["barrier_timeline.png"]["panels"]
    assert [p["title"] for p in panels] == [f"zipf_exponent={z} · {m}" for z in ("0.0", "2.0") for m in MODES]
    assert len({tuple(p["xlim"]) for p in panels}) == 1
    rows = sorted({p["bbox"][1] for p in panels}, reverse=True)
    assert len(rows) == 2 and all(sum(p["bbox"][1] == y for p in panels) == 3 for y in rows)
    html = report.html.read_text()
    assert "per sweep point (workload.zipf_exponent) and mode" in html


def test_a_sweeps_figures_fit_a_page_with_legends_outside_and_a_colour_per_line(simulated):
    report, figures = simulated
    assert set(FIGURES) <= set(figures)
    for name, figure in figures.items():
        assert png_size(report.html.parent / name) == (figure["width_px"], figure["height_px"])
        assert figure["width_px"] <= MAX_WIDTH_PX and figure["height_px"] <= MAX_HEIGHT_PX
    assert_legends_outside_the_data(figures)
    assert_a_colour_per_series(figures)


def test_the_axis_comes_from_sweep_json_whatever_the_parameter(tmp_path):
    root = sweep_run_dir(tmp_path / "out", "checkpointing.interval_ms", [100, 200, 400])
    figures = figures_of(build_report(root))
    for name in ("alignment_and_start_delay.png", "end_to_end.png"):
        assert figures[name]["panels"][0]["xlabel"] == "checkpointing.interval_ms"
        assert figures[name]["panels"][0]["xtick_labels"] == ["100", "200", "400"]
    e2e = {s["label"]: s["y"] for s in figures["end_to_end.png"]["panels"][0]["series"]}
    assert e2e["aligned"] == [22.0, 32.0, 42.0]  # the medians of each point's checkpoints (20 + 10 i + 1..3)
    persisted = figures["persisted_data.png"]["panels"][1]["series"]
    assert [s["label"] for s in persisted] == [f"unaligned · interval_ms={v}" for v in (100, 200, 400)]
    assert_a_colour_per_series(figures)


def test_a_large_sweeps_timeline_spills_onto_pages_of_one_time_axis(tmp_path):
    tasks = tuple(f"map#{i}" for i in range(40))
    values = [round(0.1 * i, 1) for i in range(5)]
    root = sweep_run_dir(tmp_path / "out", "workload.zipf_exponent", values, tasks=tasks)
    report = build_report(root)
    figures = figures_of(report)
    pages = [name for name in figures if name.startswith("barrier_timeline")]
    assert pages[0] == "barrier_timeline.png" and len(pages) > 1
    assert pages[1:] == [f"barrier_timeline_{k}.png" for k in range(2, len(pages) + 1)]
    panels = [p for name in pages for p in figures[name]["panels"]]
    assert [p["title"] for p in panels] == [f"zipf_exponent={v} · {m}" for v in values for m in MODES]
    assert len({tuple(p["xlim"]) for p in panels}) == 1
    for name in pages:
        assert png_size(report.html.parent / name) == (figures[name]["width_px"], figures[name]["height_px"])
        assert figures[name]["height_px"] <= MAX_HEIGHT_PX
        assert all(len(p["ytick_labels"]) == 40 for p in figures[name]["panels"])
    assert re.findall(r'<img src="(barrier_timeline[^"]*)"', report.html.read_text()) == pages
