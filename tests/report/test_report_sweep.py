"""The report of a sweep's directory (no Spark: the sweep runs on the simulator without aggregation, and its
table is written here in Spark's layout): a Sweep section with a row per point and mode in each of its tables
(start delay's beside alignment's), beside every run."""

from __future__ import annotations

from barriersim import sweep
from barriersim.report.html import build_report
from barriersim.spark.analytics import read_sweep_analytics
from tests.api.scenarios import TWO_POINT_SWEEP, write
from tests.report.rundirs import write_sweep_analytics


def test_report_of_a_sweep_shows_its_points(tmp_path):
    result = sweep.run_sweep(write(tmp_path, TWO_POINT_SWEEP), out=tmp_path / "out", modes="all", aggregate=False)
    write_sweep_analytics(tmp_path / "out", result.index)
    assert len(read_sweep_analytics(tmp_path / "out")) == 6

    report = build_report(tmp_path / "out")
    html = report.html.read_text()
    assert "<h2>Sweep</h2>" in html
    assert "<th>workload.zipf_exponent</th>" in html and "<th>end_to_end_duration_p99</th>" in html
    # one table of the points and one per statistic (none wider than the page), a row per point and mode in each
    tables = html.split("<h2>Sweep</h2>")[1].split("<h2>")[0].count("<table>")
    assert tables == 5
    assert "<h3>start_delay (ms)</h3>" in html and "<th>start_delay_p99</th>" in html  # beside alignment
    assert html.count("<td>zipf_exponent=2.0</td>") == 3 * tables
    assert "<td>506</td>" in html  # the last row's end_to_end_duration_p99 (row 5, stat index 6)
    # Every run of the sweep is in the report's runs table.
    for point in result.index["points"]:
        for r in point["runs"]:
            assert f"<td>{r['dir']}</td>" in html


def test_a_run_directory_without_a_sweep_has_no_sweep_section(tmp_path):
    from barriersim.report.html import _sweep_section

    assert read_sweep_analytics(tmp_path) is None
    assert _sweep_section(None) == ""
