"""A sweep's report (simulated, every mode, with its sweep table) as headless Chromium shows it: every image
decodes whole (no missing or truncated PNG) at its recorded size, at most a page, shows ink and fits the window;
the page has no horizontal overflow at a laptop's width nor at a narrow one; a screenshot is not blank. A report
with a missing and a truncated image fails the same checks."""

from __future__ import annotations

import json
import shutil

import pytest
from PIL import Image

from barriersim import sweep
from barriersim.report.figure import MAX_HEIGHT_PX, MAX_WIDTH_PX
from barriersim.report.html import build_report
from tests.api.scenarios import TWO_POINT_SWEEP, write
from tests.report.chromium import measure, screenshot
from tests.report.rundirs import write_sweep_analytics


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("chromium")
    result = sweep.run_sweep(write(tmp, TWO_POINT_SWEEP), out=tmp / "out", modes="all", aggregate=False)
    write_sweep_analytics(tmp / "out", result.index)
    return build_report(tmp / "out")


def broken_images(measured: dict, figures: dict) -> list[str]:
    """The images that did not load whole: missing, not decoded, of another size than drawn, with pixels left
    transparent (a truncated file) or without ink."""
    broken = []
    for img in measured["images"]:
        drawn = figures.get(img["src"], {})
        pixels = img["width"] * img["height"]
        if (
            img["error"]
            or not img["complete"]
            or not pixels
            or img["opaque"] != pixels
            or img["ink"] < 0.005 * pixels
            or (img["width"], img["height"]) != (drawn.get("width_px"), drawn.get("height_px"))
        ):
            broken.append(img["src"])
    return broken


def test_every_image_loads_whole_and_fits_a_page_and_the_window(report):
    figures = json.loads((report.html.parent / "figures.json").read_text())
    measured = measure(report.html, width=1280)
    assert [img["src"] for img in measured["images"]] == list(figures)
    assert broken_images(measured, figures) == []
    for img in measured["images"]:
        assert img["width"] <= MAX_WIDTH_PX and img["height"] <= MAX_HEIGHT_PX, img["src"]
        assert img["shown"] <= measured["clientWidth"], img["src"]  # scaled into the window, not cut
    assert measured["scrollWidth"] <= measured["clientWidth"]


@pytest.mark.parametrize("width", [1600, 900])
def test_the_page_has_no_horizontal_overflow(report, width):
    measured = measure(report.html, width=width)
    assert measured["scrollWidth"] <= measured["clientWidth"], measured["scrollWidth"]


def test_a_screenshot_of_the_report_is_not_blank(report, tmp_path):
    shot = Image.open(screenshot(report.html, tmp_path / "report.png", width=1280, height=1600)).convert("RGB")
    assert shot.size == (1280, 1600)
    ink = sum(count for count, (r, g, b) in shot.getcolors(1280 * 1600) if min(r, g, b) < 200)
    assert ink > 0.01 * 1280 * 1600  # text and table rules, not an empty page
    assert len(shot.getcolors(1280 * 1600)) > 16


def test_a_missing_or_truncated_image_is_found(report, tmp_path):
    copy = tmp_path / "report"
    shutil.copytree(report.html.parent, copy)
    whole = (copy / "end_to_end.png").read_bytes()
    (copy / "end_to_end.png").write_bytes(whole[: len(whole) // 3])
    (copy / "persisted_data.png").unlink()
    figures = json.loads((copy / "figures.json").read_text())
    assert broken_images(measure(copy / report.html.name), figures) == ["end_to_end.png", "persisted_data.png"]
