"""The report's figures, checked through what they record in ``figures.json`` and in the image files: at least
1,400 px wide, an SVG beside each PNG, one time axis for the barrier timelines of all modes, one subtask order
(the job graph's vertex order, then the subtask index) in every panel, and every line visible where runs
coincide (each later run drawn narrower, with a smaller marker, on top)."""

from __future__ import annotations

import json
import struct

import pytest

import barriersim
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
        assert figure["width_px"] >= 1400
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
