"""The checkpoint statistics through real Spark on Ray, against numbers computed by hand: ``barriersim
report`` on a Ray run directory without analytics starts Ray and Spark on Ray and computes them."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from barriersim.report import cli as report_cli
from barriersim.report.html import FIGURES
from barriersim.spark.analytics import read_analytics, written_at
from tests.report.rundirs import tiny_runs

pytestmark = [pytest.mark.ray, pytest.mark.spark]


def stats(summary, run, metric):
    rows = summary[(summary["run"] == run) & (summary["metric"] == metric)]
    assert len(rows) == 1, (run, metric)
    return rows.iloc[0]


def test_summary_percentiles_and_counts_match_hand_computation(tmp_path):
    root = tiny_runs(tmp_path / "runs")
    assert written_at(root) is None
    assert report_cli.main(["report", str(root)]) == 0
    result = read_analytics(root)
    assert result is not None

    # Flink's percentile (Commons Math): position p * (n + 1) of the sorted values, the last value from position n
    # on: for 10, 20, 30, 40, p50 is at 2.5 (25) and p90 at 4.5 (40).
    expected = {
        ("aligned", "end_to_end_duration"): (4, 10, 40, 25, 25, 40, 40, 40, 40),
        ("aligned", "state_size"): (4, 1000, 4000, 2500, 2500, 4000, 4000, 4000, 4000),
        ("aligned", "processed_data"): (4, 0, 300, 150, 150, 300, 300, 300, 300),
        ("aligned", "persisted_data"): (4, 0, 0, 0, 0, 0, 0, 0, 0),
        ("aligned", "alignment_duration"): (4, 1, 4, 2.5, 2.5, 4, 4, 4, 4),
        ("aligned", "start_delay"): (4, 10, 40, 25, 25, 40, 40, 40, 40),
        ("unaligned", "end_to_end_duration"): (2, 7, 9, 8, 8, 9, 9, 9, 9),
        ("unaligned", "persisted_data"): (2, 100, 300, 200, 200, 300, 300, 300, 300),
        ("unaligned", "alignment_duration"): (2, 0, 0, 0, 0, 0, 0, 0, 0),
    }
    columns = ("count", "min", "max", "avg", "p50", "p90", "p95", "p99", "p999")
    for (run, metric), values in expected.items():
        row = stats(result.summary, run, metric)
        assert tuple(row[list(columns)]) == pytest.approx(values), (run, metric)
    assert stats(result.summary, "aligned", "end_to_end_duration")["scope"] == "checkpoint"
    assert stats(result.summary, "aligned", "start_delay")["scope"] == "subtask"
    assert len(result.summary) == 2 * 7  # five checkpoint metrics and two subtask metrics per run

    keys = result.summary.drop_duplicates("run").set_index("run")
    assert keys.loc["unaligned", ["mode", "scenario", "seed", "zipf_exponent"]].tolist() == [
        "unaligned",
        "tiny",
        3,
        2.0,
    ]

    counts = result.counts.set_index("run")[["restored", "total", "in_progress", "completed", "failed"]]
    assert counts.loc["aligned"].tolist() == [2, 7, 1, 4, 2]  # a failed trigger without a row, from summary.json
    assert counts.loc["unaligned"].tolist() == [0, 2, 0, 2, 0]

    # Written in Spark's layout, one part file each, and read back unchanged.
    for name in ("summary.parquet", "counts.parquet"):
        assert len(list((root / "analytics" / name).glob("part-*.parquet"))) == 1
    assert pq.read_table(str(root / "analytics" / "summary.parquet")).num_rows == 14

    html = (root / "report" / "index.html").read_text()
    # the aligned run's end_to_end_duration row: count, min, max, avg, p50, p90, p95, p99, p999
    assert "<td>end_to_end_duration</td><td>4</td><td>10</td><td>40</td><td>25</td><td>25</td><td>40</td>" in html
    assert all((root / "report" / name).stat().st_size > 0 for name in FIGURES)
