"""Every command in the README runs as written: the shell code blocks are parsed and each command runs from a
copy of the repository's root (its entries linked, ``runs/`` its own), with the project's ``.venv/bin`` first on
``PATH`` as the README says, and must exit 0 and write what it says it wrote. The simulator's commands run in one
test, the Ray ones (``make run``, ``barriersim run`` on Ray with Spark on Ray) in another. The README itself: at
most 200 lines, and every relative link resolves."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"
# `make test` runs this suite, so running it here would recurse; it is the one README command left out.
NOT_RUN = {"make test"}
LOCAL = {"runs", "site", ".pytest_cache", ".hypothesis"}  # not linked: each test gets its own


def readme_commands() -> list[str]:
    """The commands of the README's ``sh`` blocks, in order (comments dropped, continuation lines joined)."""
    commands = []
    for block in re.findall(r"^```(?:sh|bash|shell)\n(.*?)^```", README.read_text(), re.S | re.M):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            command = line.split(" #")[0].strip()
            if command and not command.startswith("#"):
                commands.append(command)
    return commands


def on_ray(command: str) -> bool:
    words = shlex.split(command)
    return words[:2] == ["make", "run"] or (words[:2] == ["barriersim", "run"] and "sim" not in words)


def run_in_copy(tmp_path: Path, commands: list[str]) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in LOCAL:
            (root / entry.name).symlink_to(entry)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for command in commands:
        before = set((root / "runs").glob("*")) if (root / "runs").exists() else set()
        proc = subprocess.run(command, shell=True, cwd=root, env=env, capture_output=True, text=True, timeout=900)
        output = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"{command}: exit {proc.returncode}\n{output[-6000:]}"
        written = [root / w for w in re.findall(r"^wrote (\S+)", proc.stdout, re.M)]
        words = shlex.split(command)
        if words[:2] == ["barriersim", "scenarios"]:
            assert "alignment_latency" in proc.stdout and "quickstart" in proc.stdout, output
            continue
        assert written, f"{command}: says it wrote nothing\n{output[-3000:]}"
        for path in written:
            assert path.exists(), f"{command}: {path} missing"
        if words[:2] == ["barriersim", "report"]:
            assert (root / words[2] / "report" / "index.html").is_file()
            assert json.loads((root / words[2] / "report" / "figures.json").read_text())
        else:  # a run: every mode's summary, verified
            if "--out" in words:
                assert written == [root / words[words.index("--out") + 1]]
            else:  # make run: a new runs/<scenario>-<timestamp>
                assert set((root / "runs").glob("*")) - before == {written[0]}
            summaries = [json.loads(p.read_text()) for p in written[0].glob("**/summary.json")]
            assert summaries, f"{command}: no summary.json under {written[0]}"
            for summary in summaries:
                assert summary["job"]["outcome"] == "finished", summary["job"]
                assert summary["verification"]["verdict"] != "violated", summary["verification"]


def test_readme_is_short_and_its_links_resolve():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert "docs/architecture.md" in links
    for link in links:
        if "://" not in link:
            assert (ROOT / link).exists(), link
    commands = readme_commands()
    assert "make run" in commands and "make test" in commands
    assert any(c.startswith("barriersim report ") for c in commands)


def test_readme_simulator_commands(tmp_path):
    commands = [c for c in readme_commands() if c not in NOT_RUN and not on_ray(c)]
    assert any("--backend sim" in c for c in commands)
    run_in_copy(tmp_path, commands)


@pytest.mark.ray
@pytest.mark.spark
@pytest.mark.timeout(1800)
def test_readme_ray_commands(tmp_path):
    stale = subprocess.run(["make", "-q", ".venv/.installed"], cwd=ROOT, capture_output=True)
    if stale.returncode != 0:  # what `make run` would do first, done in the real root (not the linked copy)
        subprocess.run(["make", "setup"], cwd=ROOT, check=True, capture_output=True, timeout=900)
    commands = [c for c in readme_commands() if c not in NOT_RUN and on_ray(c)]
    assert "make run" in commands
    run_in_copy(tmp_path, commands)
