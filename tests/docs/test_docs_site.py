"""The documentation site builds: ``mkdocs build --strict`` (Material, mkdocstrings, the pages docs/hooks.py
generates) exits 0, so a broken link, a docs page left out of the nav or a docstring mkdocstrings cannot render
fails the suite; and the generated references cover the schema's every key and the parser's every command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from barriersim.cli import _parser
from barriersim.scenarios.schema import EDGE_FIELDS, SCHEMA, VERTEX_FIELDS

ROOT = Path(__file__).parents[2]


def test_site_builds_strict(tmp_path):
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # Material's banner about MkDocs 2.0, not a problem of ours
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (ROOT / "docs" / "reference" / "scenario.md").exists()  # generated pages stay out of docs/

    scenario = (site / "reference" / "scenario" / "index.html").read_text()
    for section, fields in SCHEMA.items():
        assert f"<code>[{section}]</code>" in scenario, section
        for key in fields:
            assert f"<code>{key}</code>" in scenario, f"{section}.{key}"
    for key in (*VERTEX_FIELDS, *EDGE_FIELDS):
        assert f"<code>{key}</code>" in scenario, key

    cli = (site / "reference" / "cli" / "index.html").read_text()
    commands = next(a for a in _parser()._actions if a.dest == "command").choices
    for name, sub in commands.items():
        assert f"<code>barriersim {name}</code>" in cli, name
        for action in sub._actions:
            for option in action.option_strings:
                assert option in cli, f"barriersim {name} {option}"

    api = (site / "reference" / "api" / "index.html").read_text()
    for name in (
        "barriersim.api.run",
        "barriersim.api.RunResult",
        "barriersim.api.ModeRun",
        "barriersim.sweep.run_sweep",
        "barriersim.strategies.simulated_cases",
    ):
        assert f'id="{name}"' in api, name
    assert 'class="mermaid"' in (site / "concepts" / "index.html").read_text()
