"""The API, sweeps and campaigns with real Spark on Ray (RayDP), sharing one Ray and Spark for the module: the Spark
workload gives the simulator the very splits its local draws give; results as Spark DataFrames; a 2-point sweep
aggregated in Spark against statistics computed here (numpy, and Flink's percentile rule); the checkpoint statistics
of ``barriersim report``'s pandas path, and a sweep's table computed in pandas, equal Spark's; a campaign's verdict
table computed in Spark against its rows."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pyarrow.parquet as pq
import pytest

import barriersim
from barriersim import api, sweep
from barriersim.report.statistics import compute_locally
from barriersim.rundir import load_tables
from barriersim.runtime.storage.object_storage import object_store_filesystem
from barriersim.scenarios.loader import load_scenario, with_overrides
from barriersim.spark.analytics import (
    COUNT_COLUMNS,
    STAT_COLUMNS,
    SWEEP_STATS,
    compute_analytics,
    flink_percentile,
    read_sweep_analytics,
)
from barriersim.spark.session import RayAndSpark
from tests.api.scenarios import TINY, TWO_POINT_SWEEP, TWO_SOURCES, write
from tests.report.rundirs import tiny_runs

pytestmark = [pytest.mark.ray, pytest.mark.spark]


@pytest.fixture(scope="module")
def spark():
    # Module scope: ``barriersim report`` in tests/report starts its own Spark on Ray, and RayDP runs one at a time.
    with RayAndSpark(app_name="barriersim-tests-api") as cluster:
        yield cluster.spark


def test_spark_workload_gives_the_local_splits_and_the_same_run(spark, tmp_path, monkeypatch):
    generated_splits = []

    def spy(*args):
        generated_splits.append(spark_workload_splits(*args))
        return generated_splits[-1]

    spark_workload_splits = api.spark_workload_splits
    monkeypatch.setattr(api, "spark_workload_splits", spy)
    path = write(tmp_path, TWO_SOURCES)
    local = barriersim.run(path, out=tmp_path / "local").only
    generated = barriersim.run(path, out=tmp_path / "spark", workload="spark", spark=spark).only

    [from_spark] = generated_splits
    assert from_spark == api.local_workload_splits(load_scenario(path))  # the file's seed, 11
    assert [len(s) for s in from_spark["left"]] == [150, 150] and [len(s) for s in from_spark["right"]] == [100] * 3
    assert from_spark["right"][0][0][0] == 10**9  # record ids of the second source vertex start at 10**9
    assert generated.summary["workload"]["generated_by"] == "spark"
    assert json.loads((tmp_path / "spark" / "summary.json").read_text())["workload"]["generated_by"] == "spark"
    assert generated.summary["trace_sha256"] == local.summary["trace_sha256"]
    # a hot key (workload.hot_key_share) is drawn alike too
    scenario = load_scenario(path)
    hot = with_overrides(scenario, workload=replace(scenario.workload, hot_key_share=0.3))
    assert api.spark_workload_splits(spark, hot) == api.local_workload_splits(hot) != from_spark

    frames = generated.to_spark(spark)
    assert set(generated.checkpoints.columns) <= set(frames.checkpoints.columns)
    rows = frames.checkpoints.select("id", "status", "failure_reason").orderBy("id").collect()  # a null-typed column
    assert [(r.id, r.status, r.failure_reason) for r in rows] == list(
        generated.checkpoints.sort_values("id")[["id", "status", "failure_reason"]].itertuples(index=False, name=None)
    )
    assert set(generated.subtasks.columns) <= set(frames.subtasks.columns)


def test_two_point_sweep_aggregated_in_spark(spark, s3_server, tmp_path):
    scenario = write(tmp_path, TWO_POINT_SWEEP)
    storage = s3_server.bucket_uri("sweeps")
    result = sweep.run_sweep(
        scenario, out=tmp_path / "out", modes=["aligned", "unaligned"], spark=spark, checkpoint_storage=storage
    )
    table = result.table
    assert table is not None and table.equals(read_sweep_analytics(tmp_path / "out"))
    assert result.index["analytics_engine"] == "spark"  # the Spark that is up (run's rule)
    # with s3:// checkpoint storage the sweep's analytics also went to <storage>/<sweep>/analytics/, the same
    # tables in the same layout (each a directory with its part files and _SUCCESS)
    analytics_uri = json.loads((tmp_path / "out" / "sweep.json").read_text())["analytics_uri"]
    assert analytics_uri == storage.replace("/sweeps?", "/sweeps/out/analytics?")
    filesystem, base = object_store_filesystem(analytics_uri)
    for name in ("sweep.parquet", "summary.parquet", "counts.parquet"):
        assert filesystem.get_file_info(f"{base}/{name}/_SUCCESS").type.name == "File"
        remote = pq.read_table(f"{base}/{name}", filesystem=filesystem).to_pandas()
        local = pq.read_table(str(tmp_path / "out" / "analytics" / name)).to_pandas()
        assert len(local) and remote.equals(local), name
    assert list(zip(table["point"], table["mode"])) == [
        ("zipf_exponent=0.0", "aligned"),
        ("zipf_exponent=0.0", "unaligned"),
        ("zipf_exponent=2.0", "aligned"),
        ("zipf_exponent=2.0", "unaligned"),
    ]
    assert table["workload.zipf_exponent"].tolist() == [0.0, 0.0, 2.0, 2.0]
    assert set(table["verdict"]) == {"exactly-once"} and set(table["generated_by"]) == {"local"}
    assert json.loads((tmp_path / "out" / "sweep.json").read_text())["analytics"] == "analytics/sweep.parquet"

    for row in table.to_dict("records"):
        run = result.runs[(row["point"], row["mode"])]
        cps = run.checkpoints[run.checkpoints["status"] == "COMPLETED"]
        assert row["completed"] == len(cps) == run.summary["checkpoints"]["completed"]
        # the rows, and the triggers that failed before they had an id (the first task's RUNNING one: no row)
        without_id = run.summary["checkpoints"]["failed"] - int((run.checkpoints["status"] == "FAILED").sum())
        assert (
            without_id >= 1 and row["total"] == len(run.checkpoints) + without_id == run.summary["checkpoints"]["total"]
        )
        sts = run.subtasks[run.subtasks["id"].isin(cps["id"]) & ~run.subtasks["aborted"]]
        for metric, values in (
            ("end_to_end_duration", cps["end_to_end_duration"]),
            ("persisted_data", cps["persisted_data"]),
            ("alignment_duration", sts["alignment_duration"]),
        ):
            v = values.to_numpy(dtype=float)
            expected = dict(
                min=v.min(),
                max=v.max(),
                avg=v.mean(),
                **{
                    f"p{q}": flink_percentile(np.sort(v), float(f"0.{q}"))  # Flink's percentile
                    for q in ("50", "90", "95", "99", "999")
                },
            )
            got = {stat: row[f"{metric}_{stat}"] for stat in SWEEP_STATS}
            assert got == pytest.approx(expected), (row["run"], metric)
    # Unaligned checkpoints persist in-flight data; aligned ones persist none.
    assert (table.loc[table["mode"] == "aligned", "persisted_data_max"] == 0).all()


def test_a_small_sweep_aggregated_in_pandas_gives_sparks_table(spark, tmp_path):
    """The sweep's pandas path (``barriersim.sweep_table``, by ``barriersim run``'s rule) and its Spark path give
    the same table of the same runs: columns, types, counts, and statistics to the last bits of rounding."""
    scenario = write(tmp_path, TWO_POINT_SWEEP.replace("rate_per_source = 20000", "rate_per_source = 5000"))
    result = sweep.run_sweep(
        scenario, out=tmp_path / "out", modes="all", faults=[{"type": "crash_task", "task": "keyed-sum#1", "at_ms": 60}]
    )  # a restart: failed checkpoints, restored
    assert result.index["analytics_engine"] == "pandas"  # small runs and no Spark up: run's rule
    in_pandas = result.table
    axes = sweep.axis_types(load_scenario(scenario))
    in_spark, engine = sweep.aggregate_sweep(tmp_path / "out", result.index, axes, engine="spark", spark=lambda: spark)
    assert engine == "spark" and len(in_spark) == 6
    assert list(in_spark.columns) == list(in_pandas.columns) and list(in_spark.dtypes) == list(in_pandas.dtypes)
    assert (in_spark["restored"] >= 1).all() and (in_spark["failed"] >= 2).all()
    for column in in_spark.columns:
        if in_spark[column].dtype.kind == "f":
            expected = pytest.approx(in_pandas[column].tolist(), rel=1e-12, nan_ok=True)
            assert in_spark[column].tolist() == expected, column
        else:
            assert in_spark[column].tolist() == in_pandas[column].tolist(), column


def test_the_cached_reference_gives_the_spark_verification(spark, tmp_path):
    """``compare_with_reference`` (a run whose workload came from the cache) counts what ``verify``'s Spark SQL
    job counts: on outputs with lost, duplicated and wrong records, records of no workload, mismatched sums."""
    from barriersim.spark.reference import compare_with_reference, output_table, reference_table, verify
    from barriersim.spark.workload import generate_workload, hand_off

    scenario = load_scenario(write(tmp_path, TINY))
    workload = generate_workload(spark, scenario, scenario.seed)
    try:
        splits = hand_off(workload)
        reference = reference_table(spark, workload.df)
        records = sorted(
            (r, k, v)
            for tables in splits.values()
            for t in tables
            for r, k, v in zip(*(t.column(c).to_pylist() for c in ("record_id", "key", "value")))
        )
        sums: dict[int, int] = {}
        exact = []
        for r, k, v in records:
            sums[k] = sums.get(k, 0) + v
            exact.append((r, k, v, sums[k]))
        r0, k0, v0, s0 = exact[0]
        outputs = {
            "exact": exact,
            "lost": exact[5:],
            "duplicated": exact + exact[:3],
            "wrong value": [(r0, k0, v0 + 1, s0 + 1)] + exact[1:],
            "unknown record": exact + [(10**12, k0, 1, 10**6)],
            "wrong sum": exact[:-1] + [exact[-1][:3] + (exact[-1][3] + 7,)],
            "short sum": [row[:3] + (min(row[3], sums[k0] - 1),) if row[1] == k0 else row for row in exact],
            "empty": [],
        }
        for i, (name, rows) in enumerate(outputs.items()):
            table = output_table(rows)
            exactly_once = i % 2 == 0
            assert compare_with_reference(splits, reference, table, exactly_once) == verify(
                spark, workload.df, table, exactly_once
            ), name
        assert compare_with_reference(splits, reference, output_table(exact)).verdict.value == "exactly-once"
        counts = {name: compare_with_reference(splits, reference, output_table(rows)) for name, rows in outputs.items()}
        assert (
            counts["lost"].lost,
            counts["duplicated"].duplicated,
            counts["wrong value"].wrong,
            counts["unknown record"].wrong,
            counts["empty"].lost,
        ) == (5, 3, 1, 1, len(exact))
        assert (counts["wrong sum"].final_sum_mismatched_keys, counts["wrong sum"].wrong) == (1, 0)
        # a sum above the expected one is at-least-once's double counting; one below it violates at-least-once too
        assert counts["wrong sum"].final_sum_short_keys == 0
        assert (counts["short sum"].final_sum_mismatched_keys, counts["short sum"].final_sum_short_keys) == (1, 1)
        assert counts["empty"].final_sum_short_keys == len(sums)
        assert (
            compare_with_reference(splits, reference, output_table(outputs["wrong sum"]), False).verdict.value
            == "at-least-once"
        )
        assert (
            compare_with_reference(splits, reference, output_table(outputs["short sum"]), False).verdict.value
            == "violated"
        )
    finally:
        workload.df.unpersist()


def test_pandas_path_gives_the_spark_paths_numbers(spark, tmp_path):
    """The statistics of small simulator runs, computed in pandas (``barriersim.report.statistics``), equal Spark's
    for the same runs: hand-made runs with failed, in-progress and aborted rows, and real simulated runs."""

    tiny_runs(tmp_path / "hand")
    barriersim.run(write(tmp_path, TINY), out=tmp_path / "sim", mode="all", seed=3)
    in_spark = {root: compute_analytics(spark, tmp_path / root) for root in ("hand", "sim")}
    for root, spark_result in in_spark.items():
        local = compute_locally(tmp_path / root, load_tables(tmp_path / root))
        keys = ["run", "scope", "metric"]
        a = spark_result.summary.sort_values(keys).reset_index(drop=True)
        b = local.summary.sort_values(keys).reset_index(drop=True)
        assert a[keys].equals(b[keys]), root
        for column in STAT_COLUMNS:
            assert a[column].astype(float).tolist() == pytest.approx(b[column].astype(float).tolist(), nan_ok=True), (
                root,
                column,
            )
        ca = spark_result.counts.sort_values("run").reset_index(drop=True)
        cb = local.counts.sort_values("run").reset_index(drop=True)
        assert ca[["run", *COUNT_COLUMNS]].astype(str).equals(cb[["run", *COUNT_COLUMNS]].astype(str)), root


def test_a_campaigns_verdicts_aggregated_in_spark(spark, tmp_path):
    """The verdict table Spark computes from a campaign's rows: its counts per mode and in all, against the rows."""
    from barriersim import campaign
    from barriersim.spark.campaign_table import aggregate_verdicts, verdicts_path

    result = campaign.run_campaign("generated", range(0, 12), out=tmp_path / "out", parallelism=1, aggregate=False)
    rows = result.rows.to_pandas()
    table = aggregate_verdicts(tmp_path / "out", result.rows, spark=spark)
    assert table.equals(pq.read_table(str(verdicts_path(tmp_path / "out"))).to_pandas())
    assert table["mode"].tolist() == sorted(set(rows["mode"])) + ["all"]
    for row in table.to_dict("records"):
        mine = rows if row["mode"] == "all" else rows[rows["mode"] == row["mode"]]
        assert (row["cases"], row["passed"], row["violated"], row["errors"]) == (
            len(mine),
            int((mine["status"] == "passed").sum()),
            int((mine["status"] == "violated").sum()),
            int((mine["status"] == "error").sum()),
        )
        assert (row["exactly_once"], row["at_least_once"], row["faults"], row["restarted"]) == (
            int((mine["verdict"] == "exactly-once").sum()),
            int((mine["verdict"] == "at-least-once").sum()),
            int(mine["faults_count"].sum()),
            int((mine["restarts"] > 0).sum()),
        )
        assert row["virtual_seconds_avg"] == pytest.approx(mine["virtual_ms"].mean() / 1000)
        assert row["wall_seconds"] == pytest.approx(mine["wall_seconds"].sum())
