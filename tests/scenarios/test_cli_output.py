"""What the command line prints and writes, on the simulator (no Ray, no Spark): tables printed to a pipe keep every
value whole, an offered rate that was not reached is flagged, ``--out`` refuses a non-empty directory unless
``--force`` replaces a previous run, and every file a run and its report write is 0644."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from barriersim.summary import RATE_REACHED_FRACTION, source_rates

ROOT = Path(__file__).parents[2]
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"


def cli(*args, umask: int | None = None):
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run(
        [sys.executable, "-m", "barriersim.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env=env,
        preexec_fn=(lambda: os.umask(umask)) if umask is not None else None,
    )


def tree(path: Path) -> dict[str, tuple[int, bytes]]:
    return {
        str(p.relative_to(path)): (p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else b"")
        for p in sorted(path.rglob("*"))
    }


def test_tables_printed_to_a_pipe_keep_every_value_whole(tmp_path):
    proc = cli("run", str(QUICKSTART), "--backend", "sim", "--mode", "all", "--out", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr
    assert "…" not in proc.stdout
    for mode in ("aligned", "unaligned", "at-least-once"):
        summary = json.loads((tmp_path / "run" / mode / "summary.json").read_text())
        assert f"  trace_sha256: {summary['trace_sha256']}" in proc.stdout.splitlines()  # 64 hex digits, not cut
    table = [line for line in proc.stdout.splitlines() if line.startswith(("│", "┃"))]
    assert len({len(line) for line in table}) == 1 and len(table[0]) <= 120  # three modes side by side, readable
    for header in (
        "offered rate per source (records/s)",
        "records/s through the job (virtual clock)",
        "lost / duplicated / wrong (records)",
        "checkpoints completed / failed",
        "virtual time (s)",
        "alignment duration p50 / p99 (ms)",
        "start delay p50 / p99 (ms)",
        "persisted data p50 / p99",
    ):
        assert header in proc.stdout
    assert "aborted" not in proc.stdout


def _cells(stdout: str, label: str) -> list[str]:
    """The values of a table row (and of the lines it folds onto), one string per column."""
    lines = [line for line in stdout.splitlines() if line.startswith("│")]
    start = next(i for i, line in enumerate(lines) if line.split("│")[1].strip() == label.strip())
    cells = [[c.strip()] for c in lines[start].split("│")[2:-1]]
    for line in lines[start + 1 :]:
        parts = line.split("│")
        if parts[1].strip():
            break
        for column, c in zip(cells, parts[2:-1]):
            if c.strip():
                column.append(c.strip())
    return [" ".join(c) for c in cells]


def test_the_run_table_shows_the_checkpoint_statistics_the_report_computes(tmp_path):
    """The slow sink's backpressure: aligned checkpoints wait for the queued data, unaligned ones persist it. The
    table's p50 / p99 are the statistics ``barriersim report`` computes for the same runs (Flink's percentiles),
    its failures add up to Flink's count, with their reasons."""
    out = tmp_path / "run"
    proc = cli("run", "backpressure_slow_sink", "--backend", "sim", "--mode", "all", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert max(len(line) for line in proc.stdout.splitlines() if line.startswith(("│", "┃", "┏", "└"))) <= 120
    assert cli("report", str(out)).returncode == 0
    from barriersim.spark.analytics import read_analytics

    stats = read_analytics(out).summary
    modes = ("aligned", "unaligned", "at-least-once")

    def shown(value, unit):
        if unit == "ms":
            return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"
        for name in ("B", "KiB", "MiB"):
            if value < 1024:
                return f"{value:,.0f} B" if name == "B" else f"{value:,.1f} {name}"
            value /= 1024
        return f"{value:,.1f} GiB"

    for label, metric, unit in (
        ("end-to-end duration p50 / p99 (ms)", "end_to_end_duration", "ms"),
        ("alignment duration p50 / p99 (ms)", "alignment_duration", "ms"),
        ("start delay p50 / p99 (ms)", "start_delay", "ms"),
        ("persisted data p50 / p99", "persisted_data", "bytes"),
        ("processed data p50 / p99", "processed_data", "bytes"),
    ):
        expected = []
        for mode in modes:
            row = stats[(stats["run"] == mode) & (stats["metric"] == metric)].iloc[0]
            expected.append(f"{shown(row['p50'], unit)} / {shown(row['p99'], unit)}")
        assert _cells(proc.stdout, label) == expected, label
    e2e = {m: stats[(stats["run"] == m) & (stats["metric"] == "end_to_end_duration")].iloc[0] for m in modes}
    assert e2e["aligned"]["p99"] > 10 * e2e["unaligned"]["p99"]  # aligned checkpoints wait behind the backlog
    persisted = stats[(stats["run"] == "unaligned") & (stats["metric"] == "persisted_data")].iloc[0]
    assert persisted["p50"] > 0  # unaligned ones persist it
    for mode, failed in zip(modes, _cells(proc.stdout, "  failed because")):
        summary = json.loads((out / mode / "summary.json").read_text())
        counts = summary["checkpoints"]
        assert (
            _cells(proc.stdout, "checkpoints completed / failed")[modes.index(mode)]
            == f"{counts['completed']} / {counts['failed']}"
        )
        assert failed.startswith("1 before tasks ran")  # the first task's RUNNING: Flink counts it, with no row
        numbers = [int(word) for word in failed.split() if word.isdigit()]
        assert sum(numbers) == counts["failed"]


def test_an_offered_rate_that_was_not_reached_is_flagged(tmp_path):
    proc = cli(
        "run",
        str(QUICKSTART),
        "--backend",
        "sim",
        "--out",
        str(tmp_path / "run"),
        "--set",
        "workload.rate_per_source=2000000",
    )
    assert proc.returncode == 0, proc.stderr
    t = json.loads((tmp_path / "run" / "summary.json").read_text())["throughput"]
    assert t["offered_per_source_subtask"] == 2_000_000 and t["offered_rate_reached"] is False
    assert [r["task"] for r in t["sources"]] == ["source#0", "source#1"]
    for r in t["sources"]:
        assert r["records"] == 50_000 and r["reached"] is False
        assert r["achieved_per_second"] == pytest.approx(r["records"] / r["seconds"], rel=1e-3)
        assert r["achieved_per_second"] < RATE_REACHED_FRACTION * 2_000_000
    [line] = [line for line in proc.stdout.splitlines() if "offered rate not reached" in line]
    assert line.startswith("aligned: offered rate not reached: 2,000,000 records/s per source subtask offered")
    assert "(NOT REACHED)" in proc.stdout

    reached = cli("run", str(QUICKSTART), "--backend", "sim", "--out", str(tmp_path / "ok"))
    assert "offered rate not reached" not in reached.stdout and "NOT REACHED" not in reached.stdout
    assert json.loads((tmp_path / "ok" / "summary.json").read_text())["throughput"]["offered_rate_reached"] is True


def test_source_rates_flag_each_subtask_and_stay_silent_without_an_offered_rate():
    rates = source_rates(1000, {"src#1": (1000, 2000), "src#0": (1000, 1000), "src#2": (10, None)})
    assert [r["task"] for r in rates["sources"]] == ["src#0", "src#1", "src#2"]
    assert [r["achieved_per_second"] for r in rates["sources"]] == [1000.0, 500.0, None]
    assert [r["reached"] for r in rates["sources"]] == [True, False, None]
    assert rates["offered_rate_reached"] is False
    unlimited = source_rates(0, {"src#0": (1000, 10)})
    assert unlimited["offered_per_source_subtask"] is None and unlimited["offered_rate_reached"] is None
    assert unlimited["sources"][0]["reached"] is None


def test_out_refuses_a_non_empty_directory_and_touches_nothing(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    before = tree(out)
    for command in (["run", str(QUICKSTART), "--backend", "sim"], ["replay", str(QUICKSTART)]):
        proc = cli(*command, "--out", str(out))
        assert proc.returncode == 2, proc.stdout
        assert proc.stderr.splitlines() == [
            f"barriersim: --out: {out} is not empty (it holds notes.txt); pass --force to replace the run in it, "
            "or choose another directory"
        ]
        assert proc.stdout == ""
        assert tree(out) == before
    forced = cli("run", str(QUICKSTART), "--backend", "sim", "--out", str(out), "--force")
    assert forced.returncode == 2 and "holds more than a barriersim run" in forced.stderr
    assert tree(out) == before


def test_force_replaces_a_previous_run(tmp_path):
    out = tmp_path / "run"
    assert cli("run", str(QUICKSTART), "--backend", "sim", "--mode", "all", "--out", str(out)).returncode == 0
    assert cli("report", str(out)).returncode == 0
    proc = cli("run", str(QUICKSTART), "--backend", "sim", "--out", str(out), "--force", "--seed", "3")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "checkpoints.csv",
        "checkpoints.parquet",
        "external_store.msgpack",
        "placement.csv",
        "placement.parquet",
        "scenario.toml",
        "subtasks.csv",
        "subtasks.parquet",
        "summary.json",
    ]
    assert json.loads((out / "summary.json").read_text())["seed"] == 3


def test_every_file_of_a_run_and_its_report_is_0644(tmp_path):
    out = tmp_path / "run"
    assert (
        cli("run", str(QUICKSTART), "--backend", "sim", "--mode", "all", "--out", str(out), umask=0o022).returncode == 0
    )
    assert cli("report", str(out), umask=0o022).returncode == 0
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {
        "summary.json",
        "scenario.toml",
        "checkpoints.parquet",
        "subtasks.csv",
        "index.html",
        "figures.json",
        "end_to_end.png",
        "end_to_end.svg",
        "_SUCCESS",
    }
    modes = {str(p.relative_to(out)): oct(stat.S_IMODE(p.stat().st_mode)) for p in files}
    assert set(modes.values()) == {"0o644"}, modes
