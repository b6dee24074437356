"""Sweeps on the simulator without Spark: the run matrix, the directory layout, ``sweep.json`` and the ``sweep``
subcommand's functions (``register``, ``main_from_args``): help, exit statuses, one-line errors."""

from __future__ import annotations

import argparse
import contextlib
import json

import pytest

from barriersim import cli as barriersim_cli
from barriersim import sweep
from barriersim.scenarios.loader import ScenarioError, load_scenario
from tests.api.scenarios import TINY, TWO_POINT_SWEEP, write


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="barriersim")
    sweep.register(p.add_subparsers(dest="command", required=True))
    return p


def cli(argv: list[str]) -> int:
    """The ``barriersim`` console script's own entry point, so the subcommand's wiring is tested too."""
    return barriersim_cli.main(argv)


def test_point_labels_name_the_settings():
    assert (
        sweep.point_label({"workload.zipf_exponent": 0.5, "checkpointing.interval_ms": 100})
        == "zipf_exponent=0.5,interval_ms=100"
    )
    assert (
        sweep.point_label({"checkpointing.checkpoints_after_tasks_finish": False})
        == "checkpoints_after_tasks_finish=false"
    )
    assert sweep.point_label({}) == "base"


def test_a_sweep_runs_every_point_in_every_mode(tmp_path):
    # 5,000 records/s per source: the job runs 120 ms, so checkpoints every 25 ms trigger several times
    scenario = write(
        tmp_path,
        TWO_POINT_SWEEP.replace("rate_per_source = 20000", "rate_per_source = 5000")
        + '"checkpointing.interval_ms" = [10, 25]\n',
    )
    result = sweep.run_sweep(scenario, out=tmp_path / "out", modes=["aligned", "at-least-once"], aggregate=False)
    labels = [p["label"] for p in result.index["points"]]
    assert labels == [
        "zipf_exponent=0.0,interval_ms=10",
        "zipf_exponent=0.0,interval_ms=25",
        "zipf_exponent=2.0,interval_ms=10",
        "zipf_exponent=2.0,interval_ms=25",
    ]
    assert len(result.runs) == 8 and result.table is None
    index = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert index == json.loads(json.dumps(result.index))
    assert index["axes"] == {"workload.zipf_exponent": [0.0, 2.0], "checkpointing.interval_ms": [10, 25]}
    assert index["modes"] == ["aligned", "at-least-once"] and index["backend"] == "sim" and index["seed"] == 7
    for point in index["points"]:
        assert [r["mode"] for r in point["runs"]] == ["aligned", "at-least-once"]
        for r in point["runs"]:
            run_dir = tmp_path / "out" / r["dir"]
            summary = json.loads((run_dir / "summary.json").read_text())
            assert r["dir"] == f"{point['label']}/{r['mode']}"
            assert summary["mode"] == r["mode"] and summary["verification"]["verdict"] == r["verdict"]
            assert summary["workload"]["zipf_exponent"] == point["settings"]["workload.zipf_exponent"]
            assert r["checkpoints"]["completed"] == summary["checkpoints"]["completed"] >= 1
            assert (run_dir / "checkpoints.parquet").exists()

    # The point's setting reached the run: the checkpoint interval shows in the trigger timestamps (their median gap:
    # Flink triggers at a fixed rate, so a trigger that waited for the checkpoint before it to end comes less than an
    # interval before the next one).
    def median_gap(label):
        triggers = result.runs[(label, "aligned")].checkpoints.sort_values("id")["trigger_timestamp"]
        assert len(triggers) >= 3
        return triggers.diff().dropna().median()

    slow = result.runs[("zipf_exponent=0.0,interval_ms=25", "aligned")]
    assert slow.summary["checkpointing"]["interval_ms"] == 25 and median_gap("zipf_exponent=0.0,interval_ms=25") >= 25


def test_without_modes_each_point_runs_in_its_own_mode(tmp_path):
    text = TINY + '\n[sweep]\n"checkpointing.mode" = ["aligned", "unaligned"]\n'
    result = sweep.run_sweep(write(tmp_path, text), out=tmp_path / "out", aggregate=False)
    assert sorted(result.runs) == [("mode=aligned", "aligned"), ("mode=unaligned", "unaligned")]
    assert result.runs[("mode=unaligned", "unaligned")].summary["mode"] == "unaligned"


@pytest.mark.parametrize("entry", [lambda argv: parser().parse_args(argv), barriersim_cli.main])
def test_sweep_help_lists_the_options(capsys, entry):
    with pytest.raises(SystemExit) as exit_info:
        entry(["sweep", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for option in (
        "--backend",
        "--mode",
        "--out",
        "--seed",
        "--workload",
        "--no-analytics",
        "--checkpoint-storage",
        "--analytics",
        "--parallelism",
    ):
        assert option in text


def test_sweep_command_runs_and_prints_the_matrix(tmp_path, capsys):
    scenario = write(tmp_path, TWO_POINT_SWEEP)
    assert (
        cli(["sweep", str(scenario), "--out", str(tmp_path / "out"), "--mode", "all", "--seed", "3", "--no-analytics"])
        == 0
    )
    captured = capsys.readouterr()
    out = captured.out
    assert "unaligned" in out and "exactly-once" in out and "sweep.json" in out
    index = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert index["seed"] == 3 and sum(len(p["runs"]) for p in index["points"]) == 6
    # each run is named once, by the point and the backend's phase
    phases = [line for line in captured.err.splitlines() if line]
    labels = [p["label"] for p in index["points"]]
    assert phases == [
        f"{label}: simulating tiny in {mode} mode"
        for label in labels
        for mode in ("aligned", "unaligned", "at-least-once")
    ]


@pytest.mark.parametrize(
    "text, words",
    [
        (TINY, "sweep: the scenario has no [sweep] table"),
        (TINY + '\n[sweep]\n"workload.nope" = [1]\n', "sweep.workload.nope"),
        (TINY + '\n[sweep]\n"workload.records" = [0, 10]\n', "sweep.workload.records"),
        (
            TINY + '\n[sweep]\n"checkpointing.mode" = ["unaligned"]\n"checkpointing.max_concurrent" = [2]\n',
            "checkpointing.max_concurrent",
        ),
    ],
)
def test_bad_sweeps_cost_one_line_and_exit_2(tmp_path, capsys, text, words):
    scenario = write(tmp_path, text)
    assert cli(["sweep", str(scenario), "--out", str(tmp_path / "out"), "--no-analytics"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"barriersim sweep: {scenario}") and words in err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "options, words",
    [
        (["--parallelism", "0"], "argument --parallelism: must be an integer >= 1, got '0'"),
        (["--analytics", "hive"], "argument --analytics: invalid choice: 'hive'"),
    ],
)
def test_bad_parallelism_or_analytics_costs_one_line_and_exit_2(tmp_path, capsys, options, words):
    scenario = write(tmp_path, TWO_POINT_SWEEP)
    with pytest.raises(SystemExit) if "argument" in words else contextlib.nullcontext() as exited:
        status = cli(["sweep", str(scenario), "--out", str(tmp_path / "out"), *options])
    status = exited.value.code if exited else status
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and words in err[-1] and not (tmp_path / "out").exists(), err


def test_a_small_sweep_runs_in_this_process_and_aggregates_in_pandas(tmp_path, capsys):
    """The first run says the rest would take well under ``RAY_WORTH_SECONDS``: no Ray, no Spark."""
    scenario = write(tmp_path, TWO_POINT_SWEEP)
    assert cli(["sweep", str(scenario), "--out", str(tmp_path / "out"), "--mode", "all"]) == 0
    captured = capsys.readouterr()
    assert "Ray" not in captured.err and "Spark" not in captured.err
    assert [line for line in captured.err.splitlines() if line][-1] == "aggregating the runs (pandas)"
    index = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert index["analytics_engine"] == "pandas" and index["analytics"] == "analytics/sweep.parquet"
    assert "p99 (ms)" in captured.out and "wrote" in captured.out


def test_a_missing_scenario_file_exits_2(tmp_path, capsys):
    assert cli(["sweep", str(tmp_path / "absent.toml"), "--no-analytics"]) == 2
    assert "absent.toml: no such scenario file" in capsys.readouterr().err


def test_run_sweep_raises_typed_errors(tmp_path):
    with pytest.raises(ScenarioError, match="mode: must be one of"):
        sweep.run_sweep(write(tmp_path, TWO_POINT_SWEEP), modes="sideways", out=tmp_path / "o", aggregate=False)
    assert not (tmp_path / "o").exists()
    assert [t for t in sweep.axis_types(load_scenario(write(tmp_path, TWO_POINT_SWEEP)))] == [
        ("workload.zipf_exponent", float)
    ]


@pytest.mark.parametrize(
    "backend, uri, message",
    [
        ("sim", "s3:///checkpoints", "not an object store URI"),
        ("ray", "hdfs://namenode/checkpoints", "unknown scheme 'hdfs'"),
    ],
)
def test_sweep_checks_the_checkpoint_storage_as_run_does_before_anything_starts(
    tmp_path, capsys, backend, uri, message
):
    scenario = write(tmp_path, TWO_POINT_SWEEP)
    out = tmp_path / "out"
    assert (
        cli(
            [
                "sweep",
                str(scenario),
                "--backend",
                backend,
                "--checkpoint-storage",
                uri,
                "--out",
                str(out),
                "--no-analytics",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.startswith("barriersim sweep: ") and message in err and uri.split("?")[0] in err, err
    assert len(err.splitlines()) == 1 and not out.exists()


def test_a_run_on_another_node_comes_back_as_files_the_driver_writes(tmp_path):
    """A Ray task on a node that is not the driver's sends its run directory back and removes its own copy; the
    driver writes the files where the sweep asked (here both sides are this process)."""
    from dataclasses import replace

    from barriersim import api
    from barriersim.ray_tasks import pack_files, remove_tree, unpack_files

    point = sweep.sweep_points(load_scenario(write(tmp_path, TWO_POINT_SWEEP)))[1]
    job = sweep.SweepJob(
        point, replace(api.plan(point.scenario, mode=["aligned"]), nest=True), tmp_path / "out" / point.label, None
    )
    here = sweep.run_job(job)
    written = pack_files(job.out)
    remove_tree(job.out)
    summaries, files = sweep._run_job_on(job, None, True, pack_files, remove_tree)
    assert not (job.out / "aligned").exists() and set(files) == set(written)
    assert "aligned/checkpoints.parquet" in files and "aligned/scenario.toml" in files
    unpack_files(job.out, files)
    assert summaries["aligned"]["trace_sha256"] == here["aligned"]["trace_sha256"]
    assert {n: d for n, d in pack_files(job.out).items() if not n.endswith("summary.json")} == {
        n: d for n, d in written.items() if not n.endswith("summary.json")
    }
    assert json.loads((job.out / "aligned" / "summary.json").read_text()) == summaries["aligned"]
