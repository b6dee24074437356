"""The simulator's paths import nothing from the extras: ``barriersim run --backend sim``, ``barriersim replay``
and ``barriersim.strategies`` run in a subprocess in which importing Ray, RayDP, PySpark or matplotlib raises
``ModuleNotFoundError`` (as in an install without extras; ``test_simulator_only_install`` checks a real one)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "scenarios" / "quickstart.toml"

BLOCKER = textwrap.dedent("""
    import sys

    BLOCKED = {"ray", "raydp", "pyspark", "py4j", "matplotlib"}

    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
            return None

    sys.meta_path.insert(0, Blocker())
""")


def _run_blocked(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_run_sim_and_replay_import_no_extra(tmp_path):
    proc = _run_blocked(
        f"""
        from barriersim.cli import main
        import barriersim.strategies
        for argv in (["run", {str(QUICKSTART)!r}, "--backend", "sim", "--out", "run"],
                     ["replay", {str(QUICKSTART)!r}, "--seed", "42", "--out", "replay"]):
            try:
                status = main(argv)
            except SystemExit as e:
                status = e.code
            assert status in (0, None), (argv, status)
    """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for run in ("run", "replay"):
        assert json.loads((tmp_path / run / "summary.json").read_text())["verification"]["verdict"] == "exactly-once"


def test_a_small_sweep_and_a_campaign_need_no_extra(tmp_path):
    """A small simulator sweep stays in this process and aggregates in pandas; a campaign runs in this process, and
    its verdict table, which needs Spark, is refused in one line unless skipped."""
    sweep_file = tmp_path / "sweep.toml"
    sweep_file.write_text(
        QUICKSTART.read_text().replace("records = 100000", "records = 2000")
        + '\n[sweep]\n"workload.zipf_exponent" = [0.0, 1.0]\n'
    )
    proc = _run_blocked(
        f"""
        from barriersim.cli import main
        assert main(["sweep", {str(sweep_file)!r}, "--out", "sweep"]) == 0
        assert main(["campaign", "generated", "--seeds", "0..3", "--out", "campaign", "--no-analytics"]) == 0
        assert main(["campaign", "generated", "--seeds", "4", "--out", "campaign"]) == 2
    """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert json.loads((tmp_path / "sweep" / "sweep.json").read_text())["analytics_engine"] == "pandas"
    assert "the verdict table is computed in Spark on Ray, which is not installed" in proc.stderr.splitlines()[-1]
