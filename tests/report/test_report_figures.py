"""The report's figures, checked through what they record in ``figures.json`` and in the image files: at least
1,400 px wide and at most a page (1,600 × 2,000 px), an SVG beside each PNG, legends outside every panel, a colour
of its own for every line or box of a panel, start delay beside alignment, one time axis for the barrier timelines
of all modes, one subtask order (the job graph's vertex order, then the subtask index) in every panel, and every
line visible where runs coincide (each later run drawn narrower, with a smaller marker, on top)."""

from __future__ import annotations

import json
import struct

import pytest

import barriersim
from barriersim.report.figure import MAX_HEIGHT_PX, MAX_WIDTH_PX
from barriersim.report.html import FIGURES, build_report
from barriersim.scenarios.loader import load_scenario
from tests.api.scenarios import TINY, write


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("figures")
    barriersim.run(write(tmp, TINY), out=tmp / "run", mode="all")
    built = build_report(tmp / "run")
    return tmp / "run", json.loads((built.html.parent / "figures.json").read_text())


def test_every_figure_is_wide_and_has_an_svg(report):
    root, figures = report
    assert sorted(figures) == sorted(FIGURES)
    for name, figure in figures.items():
        png = root / "report" / name
        assert png_size(png) == (figure["width_px"], figure["height_px"])
        assert 1400 <= figure["width_px"] <= MAX_WIDTH_PX and figure["height_px"] <= MAX_HEIGHT_PX
        svg = root / "report" / figure["svg"]
        assert svg.read_text().lstrip().startswith("<?xml") and "<svg" in svg.read_text()[:2000]
    html = (root / "report" / "index.html").read_text()
    assert all(f'<img src="{name}"' in html and f'href="{name[:-4]}.svg"' in html for name in FIGURES)


def test_timelines_share_one_axis_and_one_subtask_order(report):
    root, figures = report
    panels = figures["barrier_timeline.png"]["panels"]
    assert [p["title"] for p in panels] == ["aligned", "unaligned", "at-least-once"]
    assert len({tuple(p["xlim"]) for p in panels}) == 1
    graph = load_scenario(root / "aligned" / "scenario.toml").job.graph
    expected = [f"{v.name}#{i}" for v in graph.vertices for i in range(v.parallelism)]
    for panel in panels:
        # each label starts with its subtask (then, where the run recorded it, its TaskManager and channel kinds)
        assert [label.split(" · ")[0] for label in panel["ytick_labels"]] == expected


def test_coinciding_lines_stay_visible(report):
    _, figures = report
    for name in ("end_to_end.png", "persisted_data.png"):
        series = figures[name]["panels"][0]["series"]
        assert [s["label"] for s in series] == ["aligned", "unaligned", "at-least-once"]
        for below, above in zip(series, series[1:]):  # drawn in this order
            assert above["zorder"] > below["zorder"]
            assert above["linewidth"] < below["linewidth"] and above["markersize"] < below["markersize"]
    persisted = {s["label"]: s["y"] for s in figures["persisted_data.png"]["panels"][0]["series"]}
    assert persisted["aligned"] == persisted["at-least-once"]  # they coincide (no in-flight data), both drawn
    assert max(persisted["unaligned"]) > 0


def overlaps(a, b) -> bool:
    """Whether two boxes (x0, y0, x1, y1) share more than an edge."""
    return a[0] < b[2] - 1 and b[0] < a[2] - 1 and a[1] < b[3] - 1 and b[1] < a[3] - 1


def assert_legends_outside_the_data(figures: dict) -> None:
    for name, figure in figures.items():
        assert all(p["bbox"] for p in figure["panels"]), name
        for legend in figure["legends"]:
            assert 0 <= legend[0] and legend[2] <= figure["width_px"] + 1, (name, legend)  # and on the page
            for p in figure["panels"]:
                assert not overlaps(legend, p["bbox"]), (name, p["title"], legend, p["bbox"])


def assert_a_colour_per_series(figures: dict) -> None:
    for name, figure in figures.items():
        for p in figure["panels"]:
            colours = [s["color"] for s in p["series"]]
            assert all(colours) and len(set(colours)) == len(colours), (name, p["title"], colours)


def test_legends_sit_outside_the_panels(report):
    _, figures = report
    assert any(f["legends"] for f in figures.values())  # the timeline's phases, the lines' runs
    assert_legends_outside_the_data(figures)


def test_every_line_and_box_of_a_panel_has_its_own_colour(report):
    _, figures = report
    assert sum(len(p["series"]) for f in figures.values() for p in f["panels"]) >= 12
    assert_a_colour_per_series(figures)


def test_start_delay_is_drawn_beside_alignment(report):
    _, figures = report
    alignment, start_delay = figures["alignment_and_start_delay.png"]["panels"]
    assert alignment["title"].startswith("alignment_duration") and start_delay["title"].startswith("start_delay")
    assert alignment["bbox"][2] <= start_delay["bbox"][0]  # side by side, on one row
    assert alignment["bbox"][1] == start_delay["bbox"][1]
    assert [s["label"] for s in start_delay["series"]] == ["aligned", "unaligned", "at-least-once"]
    assert all(s["points"] > 0 for s in start_delay["series"])
