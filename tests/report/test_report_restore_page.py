"""The report's restore page of a run with a savepoint, a stop-with-savepoint and a rescaled restore (the
library's rescale.toml on the simulator): restore.html beside index.html, linked from it, with its figure drawn,
a page in size."""

from __future__ import annotations

import re
import struct
from pathlib import Path

from barriersim import api
from barriersim.report.figure import MAX_HEIGHT_PX, MAX_WIDTH_PX
from barriersim.report.html import build_report
from barriersim.report.restore_page import FIGURE, PAGE

RESCALE = Path(__file__).resolve().parents[2] / "scenarios" / "rescale.toml"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_the_restore_page_of_a_rescaled_run_shows_its_jobs_and_its_figure(tmp_path):
    out = tmp_path / "run"
    api.run(RESCALE, backend="sim", mode="unaligned", out=out)
    report = build_report(out)  # without statistics: no Spark
    assert f'href="{PAGE}"' in report.html.read_text()
    page = report.html.parent / PAGE
    text = page.read_text()
    assert re.findall(r'<img src="([^"]+)"', text) == [FIGURE]
    png = (page.parent / FIGURE).read_bytes()
    assert png.startswith(PNG_SIGNATURE) and len(png) > 1000
    width, height = struct.unpack(">II", png[16:24])
    assert width <= MAX_WIDTH_PX and height <= MAX_HEIGHT_PX  # a page, however many runs
    assert "<h3>Jobs</h3>" in text and "<h3>Checkpoints and savepoints</h3>" in text
