"""The notebooks in examples/ run: each is executed top to bottom in a fresh Jupyter kernel (nbclient and
ipykernel, no Jupyter server) in a temporary working directory, so a change that breaks one fails here. They are
stored without outputs (what they show comes from running them, never from a stale copy)."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from PIL import Image

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NOTEBOOKS = sorted(EXAMPLES.glob("*.ipynb"))
MODES = ("aligned", "unaligned", "at-least-once")


def execute(path: Path, cwd: Path):
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(
        notebook, kernel_name="python3", timeout=600, startup_timeout=300, resources={"metadata": {"path": str(cwd)}}
    ).execute()
    return notebook


def tagged(notebook, tag: str):
    [cell] = [c for c in notebook.cells if tag in c.metadata.get("tags", [])]
    return cell


def test_examples_hold_notebooks_stored_without_outputs():
    assert [p.name for p in NOTEBOOKS] == ["alignment_vs_skew.ipynb"]
    for path in NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, (path.name, cell.id)


def test_the_alignment_notebook_runs_a_sweep_and_plots_alignment_against_skew(tmp_path):
    notebook = execute(EXAMPLES / "alignment_vs_skew.ipynb", tmp_path)
    # the sweep ran on the simulator into the working directory, every point in every mode
    assert sorted(p.name for p in (tmp_path / "runs" / "skew-sweep").iterdir() if p.name.startswith("zipf")) == [
        f"zipf_exponent={z}" for z in ("0.0", "0.5", "1.0", "1.5")
    ]
    # its tables, loaded with pandas: a row of alignment and start delay percentiles per point and mode
    [summary] = [o for o in tagged(notebook, "summary").outputs if o.output_type == "execute_result"]
    table = summary.data["text/html"]
    assert table.count("<tr>") - table.split("<tbody>")[0].count("<tr>") == 4 * len(MODES)
    for column in ("alignment_duration p99", "start_delay p99"):
        assert f"<th>{column}</th>" in table
    assert all(mode in table for mode in MODES)
    # the figure: a PNG of two panels, not blank
    [png] = [o.data["image/png"] for o in tagged(notebook, "plot").outputs if "image/png" in o.get("data", {})]
    image = Image.open(io.BytesIO(base64.b64decode(png))).convert("L")
    assert image.width > 800 and image.height > 300
    assert sum(image.histogram()[:200]) > 0.01 * image.width * image.height  # ink
    # and the report of the same directory
    assert (tmp_path / "runs" / "skew-sweep" / "report" / "index.html").is_file()
    assert re.search(r"alignment_and_start_delay\.png", str(notebook.cells[-1].outputs))
