"""``barriersim report`` end to end on a constructed two-mode run directory (no Spark: the statistics are
given as already-written analytics, which the report reuses while they are newer than the run's files)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from barriersim.report import cli as report_cli
from barriersim.report.html import FIGURES, build_report
from barriersim.spark.analytics import SUMMARY_COLUMNS, Analytics
from tests.report.rundirs import two_mode_run_dir

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def hand_analytics() -> Analytics:
    rows = []
    for run, mode in (("aligned", "aligned"), ("unaligned", "unaligned")):
        keys = {"run": run, "mode": mode, "scenario": "tiny", "seed": 7, "zipf_exponent": 1.0}
        for scope, metric in (
            ("checkpoint", "end_to_end_duration"),
            ("checkpoint", "persisted_data"),
            ("subtask", "alignment_duration"),
        ):
            rows.append(
                {
                    **keys,
                    "scope": scope,
                    "metric": metric,
                    "count": 3,
                    "min": 1.0,
                    "max": 3.0,
                    "avg": 2.0,
                    "p50": 2.0,
                    "p90": 2.8,
                    "p95": 2.9,
                    "p99": 2.98,
                    "p999": 12345.5,
                }
            )
    counts = pd.DataFrame(
        [
            {
                "run": "aligned",
                "mode": "aligned",
                "scenario": "tiny",
                "seed": 7,
                "zipf_exponent": 1.0,
                "restored": 0,
                "total": 4,
                "in_progress": 0,
                "completed": 3,
                "failed": 1,
            },
            {
                "run": "unaligned",
                "mode": "unaligned",
                "scenario": "tiny",
                "seed": 7,
                "zipf_exponent": 1.0,
                "restored": 0,
                "total": 3,
                "in_progress": 0,
                "completed": 3,
                "failed": 0,
            },
        ]
    )
    return Analytics(summary=pd.DataFrame(rows)[list(SUMMARY_COLUMNS)], counts=counts)


def write_analytics_like_spark(root: Path, analytics: Analytics) -> None:
    for name, df in (("summary.parquet", analytics.summary), ("counts.parquet", analytics.counts)):
        out = root / "analytics" / name
        out.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), str(out / "part-00000.parquet"))
        (out / "_SUCCESS").write_bytes(b"")


def images_of(html: Path) -> list[str]:
    return re.findall(r'<img src="([^"]+)"', html.read_text())


def assert_pngs(html: Path) -> None:
    srcs = images_of(html)
    assert sorted(srcs) == sorted(FIGURES)
    for src in srcs:
        png = html.parent / src
        assert png.is_file(), src
        data = png.read_bytes()
        assert len(data) > len(PNG_SIGNATURE) and data.startswith(PNG_SIGNATURE), src


@pytest.fixture
def run_dir(tmp_path):
    root = two_mode_run_dir(tmp_path / "run")
    write_analytics_like_spark(root, hand_analytics())
    return root


@pytest.fixture
def no_spark(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the report started Spark although fresh analytics were there")

    monkeypatch.setattr(report_cli, "compute_analytics", refuse)


def test_report_writes_html_with_all_four_pngs(run_dir, no_spark, capsys):
    assert report_cli.main(["report", str(run_dir)]) == 0
    html = run_dir / "report" / "index.html"
    assert f"wrote {html}" in capsys.readouterr().out
    assert_pngs(html)
    text = html.read_text()
    # Flink's names in the summary table, the hand-made numbers, counts, and each run's verification block.
    for name in (
        "end_to_end_duration",
        "persisted_data",
        "alignment_duration",
        "p50",
        "p999",
        "restored",
        "in_progress",
        "completed",
        "failed",
    ):
        assert f"<th>{name}</th>" in text or f"<td>{name}</td>" in text, name
    assert "12,345.5" in text
    assert text.count("&quot;verdict&quot;: &quot;exactly-once&quot;") == 2
    assert "aligned" in text and "unaligned" in text


def test_report_out_file_puts_pngs_beside_it(run_dir, no_spark, tmp_path):
    out = tmp_path / "elsewhere" / "r.html"
    assert report_cli.main(["report", str(run_dir), "--out", str(out), "--checkpoint", "2"]) == 0
    assert_pngs(out)
    assert "checkpoint 2" in out.read_text()
    assert not (run_dir / "report").exists()


def test_report_recomputes_stale_analytics(run_dir, monkeypatch):
    calls = []

    def fake_compute(root, tables, address, console):
        calls.append((Path(root), sorted(r.label for r in tables.runs)))
        return hand_analytics()

    monkeypatch.setattr(report_cli, "compute_analytics", fake_compute)
    newer = os.stat(run_dir / "analytics" / "summary.parquet" / "_SUCCESS").st_mtime + 10
    os.utime(run_dir / "unaligned" / "checkpoints.parquet", (newer, newer))
    assert report_cli.main(["report", str(run_dir)]) == 0
    assert calls == [(run_dir, ["aligned", "unaligned"])]


def test_build_report_single_run_layout_without_statistics(tmp_path):
    root = two_mode_run_dir(tmp_path / "two") / "aligned"  # one run: summary.json at the top
    report = build_report(root)
    assert report.html == root / "report" / "index.html"
    assert_pngs(report.html)
    text = report.html.read_text()
    assert "Not computed." in text and text.count("exactly-once") == 2  # runs table + verification block
