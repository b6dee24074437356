"""``barriersim report`` of simulator runs without Spark: small statistics are computed in pandas by the Spark
path's definitions (Flink's percentile rule checked by hand here; the equality with the Spark path is checked in
``test_report_analytics_spark.py``), written where Spark writes them, and reused by the next report."""

from __future__ import annotations

import pytest

import barriersim
from barriersim.report import cli as report_cli
from barriersim.report.statistics import SMALL_ROWS, all_simulated, compute_locally, is_small
from barriersim.rundir import load_tables
from barriersim.spark import session
from barriersim.spark.analytics import PERCENTILES, flink_percentile, read_analytics, written_at
from tests.api.scenarios import TINY, write


@pytest.fixture
def no_spark(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the report started Spark for a small simulator run")

    monkeypatch.setattr(session.RayAndSpark, "__enter__", refuse)
    monkeypatch.setattr(session.RayAndSpark, "start_ray", refuse)


@pytest.mark.parametrize(
    "values, expected",
    [
        ([10, 20, 30, 40], {"p50": 25.0, "p90": 40.0, "p95": 40.0, "p99": 40.0, "p999": 40.0}),
        ([5], {"p50": 5.0, "p90": 5.0, "p95": 5.0, "p99": 5.0, "p999": 5.0}),
        (list(range(1, 101)), {"p50": 50.5, "p90": 90.9, "p95": 95.95, "p99": 99.99, "p999": 100.0}),
        ([], {"p50": None, "p90": None, "p95": None, "p99": None, "p999": None}),
    ],
)
def test_flink_percentile_is_commons_maths_legacy_estimate(values, expected):
    got = {name: flink_percentile(sorted(values), q) for name, q in PERCENTILES}
    assert got == pytest.approx(expected)


def test_report_of_a_small_simulator_run_starts_no_spark_and_is_reused(tmp_path, no_spark, monkeypatch, capsys):
    result = barriersim.run(write(tmp_path, TINY), out=tmp_path / "run", mode="all")
    tables = load_tables(tmp_path / "run")
    assert all_simulated(tables.runs) and is_small(tables)
    capsys.readouterr()
    assert report_cli.main(["report", str(tmp_path / "run")]) == 0
    phases = capsys.readouterr().err.splitlines()  # each phase named as it starts, also on a pipe
    assert phases == ["computing the checkpoint statistics (pandas)", "drawing the figures"]

    stamp = written_at(tmp_path / "run")
    analytics = read_analytics(tmp_path / "run")
    assert stamp is not None and set(analytics.counts["run"]) == set(result)
    for mode, run in result.items():
        done = run.checkpoints[run.checkpoints["status"] == "COMPLETED"]
        row = analytics.summary[
            (analytics.summary["run"] == mode) & (analytics.summary["metric"] == "end_to_end_duration")
        ].iloc[0]
        values = sorted(done["end_to_end_duration"].astype(float))
        assert row["count"] == len(values) and row["max"] == values[-1]
        assert row["p90"] == pytest.approx(flink_percentile(values, 0.9))
        counts = analytics.counts.set_index("run").loc[mode]
        assert counts["completed"] == run.summary["checkpoints"]["completed"]
        assert counts["failed"] == run.summary["checkpoints"]["failed"]

    def refuse(*args, **kwargs):
        raise AssertionError("the second report recomputed the statistics")

    monkeypatch.setattr(report_cli, "compute_analytics", refuse)
    assert report_cli.main(["report", str(tmp_path / "run")]) == 0
    assert written_at(tmp_path / "run") == stamp
    assert capsys.readouterr().err.splitlines() == [
        "reusing the checkpoint statistics in analytics/",
        "drawing the figures",
    ]


def test_only_small_simulator_runs_are_computed_locally(tmp_path):
    barriersim.run(write(tmp_path, TINY), out=tmp_path / "run")
    tables = load_tables(tmp_path / "run")
    assert all_simulated(tables.runs)
    tables.runs[0].summary["backend"] = "ray"
    assert not all_simulated(tables.runs)
    assert len(tables.checkpoints) + len(tables.subtasks) < SMALL_ROWS
    analytics = compute_locally(tmp_path / "run", load_tables(tmp_path / "run"))
    assert list(analytics.counts["run"]) == ["."]
