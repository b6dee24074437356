"""A simulator-only install works: ``pip install barriersim`` without extras, into a fresh virtual environment,
with the repository's constraints, runs ``barriersim run --backend sim`` and ``barriersim replay`` on the
quickstart scenario to an exactly-once verdict, installs the scenario library as package data, and leaves
Ray, RayDP, PySpark and matplotlib out (importing any of them fails in that environment).

The source tree is copied first (pip builds a non-editable install inside the tree it is given, which would
leave ``build/`` and ``*.egg-info`` behind); pip's cache makes the install take seconds once warm."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.install

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "scenarios" / "quickstart.toml"
EXTRAS_ONLY = ("ray", "pyspark", "raydp", "matplotlib")
COPY_IGNORE = shutil.ignore_patterns(
    ".git",
    ".venv",
    "runs",
    "build",
    "*.egg-info",
    "__pycache__",
    ".pytest_cache",
    ".hypothesis",
    "spark-warehouse",
    "metastore_db",
    "derby.log",
)


def _env() -> dict[str, str]:
    """The caller's environment without anything that would point Python at another tree or environment."""
    env = dict(os.environ)
    for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_NO_CACHE_DIR", "PIP_REQUIRE_VIRTUALENV"):
        env.pop(name, None)
    return env


def _run(args: list, cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)


def _check(proc: subprocess.CompletedProcess, what: str) -> None:
    assert proc.returncode == 0, f"{what} exited {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"


@pytest.fixture(scope="module")
def sim_venv(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sim-only")
    source = root / "src"
    shutil.copytree(REPO, source, ignore=COPY_IGNORE)
    venv = root / "venv"
    _check(_run([sys.executable, "-m", "venv", venv], root, 120), "python -m venv")
    install = _run(
        [venv / "bin" / "python", "-m", "pip", "install", "-v", "-c", source / "constraints.txt", source], root, 600
    )
    _check(install, "pip install (no extras)")
    output = install.stdout + install.stderr
    assert "SetuptoolsDeprecationWarning" not in output and "SetuptoolsWarning" not in output, output[-4000:]
    return venv


def test_installs_no_extra(sim_venv):
    for module in EXTRAS_ONLY:
        proc = _run([sim_venv / "bin" / "python", "-c", f"import {module}"], sim_venv.parent, 60)
        assert proc.returncode != 0 and "ModuleNotFoundError" in proc.stderr, f"import {module} worked: {proc}"
    core = (
        "import barriersim.strategies, barriersim.sim_backend, msgpack, numpy, pandas, pyarrow, hypothesis, rich, "
        "tomli_w"
    )
    _check(_run([sim_venv / "bin" / "python", "-c", core], sim_venv.parent, 60), "importing the core")


def test_scenario_library_is_package_data(sim_venv):
    code = (
        "import importlib.resources as r; "
        "print('\\n'.join(sorted(p.name for p in r.files('barriersim.scenarios').iterdir() if "
        "p.name.endswith('.toml'))))"
    )
    proc = _run([sim_venv / "bin" / "python", "-c", code], sim_venv.parent, 60)
    _check(proc, "listing barriersim.scenarios")
    assert proc.stdout.split() == sorted(p.name for p in (REPO / "scenarios").glob("*.toml"))


def test_run_and_replay_on_the_simulator(sim_venv):
    barriersim = sim_venv / "bin" / "barriersim"
    work = sim_venv.parent
    run = _run([barriersim, "run", QUICKSTART, "--backend", "sim", "--out", work / "run"], work, 300)
    _check(run, "barriersim run --backend sim")
    summary = json.loads((work / "run" / "summary.json").read_text())
    assert summary["backend"] == "sim"
    assert summary["verification"]["verdict"] == "exactly-once"
    assert summary["versions"]["ray"] is None and summary["versions"]["pyspark"] is None

    replay = _run(
        [
            barriersim,
            "replay",
            QUICKSTART,
            "--seed",
            summary["seed"],
            "--mode",
            summary["mode"],
            "--out",
            work / "replay",
        ],
        work,
        300,
    )
    _check(replay, "barriersim replay")
    replayed = json.loads((work / "replay" / "summary.json").read_text())
    assert replayed["verification"]["verdict"] == "exactly-once"
    assert replayed["trace_sha256"] == summary["trace_sha256"]
