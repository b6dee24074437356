"""A run directory holds the effective scenario it ran (``scenario.toml``: overrides, sweep values, seed, mode and
faults applied) and ``summary.json`` the effective checkpointing and network settings; ``barriersim replay`` of
that file gives the same trace, for a plain run, an API run with overrides, and every point of a sweep."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

import barriersim
from barriersim import cli, sweep
from barriersim.scenarios.documents import dumps, scenario_document
from barriersim.scenarios.loader import load_scenario, parse_scenario
from barriersim.strategies import simulated_cases
from tests.api.scenarios import TINY, TWO_POINT_SWEEP, TWO_SOURCES, write

LIBRARY = sorted((Path(__file__).parents[2] / "scenarios").glob("*.toml"))


def replayed_trace(run_dir: Path, out: Path, capsys) -> str:
    """``barriersim replay`` of the printed command's file, in this process; the trace hash it printed."""
    summary = json.loads((run_dir / "summary.json").read_text())
    command = summary["replay"].split()
    assert command[:2] == ["barriersim", "replay"] and command[2] == str(run_dir / "scenario.toml")
    assert cli.main(["replay", command[2], "--out", str(out)]) == 0
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("trace_sha256: ")]
    assert printed == [f"trace_sha256: {json.loads((out / 'summary.json').read_text())['trace_sha256']}"]
    return printed[0].split()[1]


def test_a_plain_run_replays_from_its_directory(tmp_path, capsys):
    run = barriersim.run(write(tmp_path, TINY), out=tmp_path / "a").only
    assert replayed_trace(run.out_dir, tmp_path / "b", capsys) == run.summary["trace_sha256"]
    assert run.summary["checkpointing"]["mode"] == "aligned" and run.summary["checkpointing"]["interval_ms"] == 10
    assert run.summary["network"]["buffer_size"] == 32 * 1024


def test_an_api_run_with_overrides_replays_what_it_ran_not_the_file(tmp_path, capsys):
    path = write(tmp_path, TINY)
    crash = [{"type": "crash_task", "task": "keyed-sum#0", "at_ms": 5}]
    run = barriersim.run(
        path,
        out=tmp_path / "a",
        seed=3,
        mode="unaligned",
        faults=crash,
        overrides={"workload.records": 400, "checkpointing.interval_ms": 20, "network.buffer_size": 4096},
    ).only
    plain = barriersim.run(path, out=tmp_path / "plain").only
    assert run.summary["trace_sha256"] != plain.summary["trace_sha256"]
    ran = load_scenario(run.scenario_file)
    assert (ran.seed, ran.checkpointing.mode.value, ran.faults.to_plain()) == (3, "unaligned", crash)
    assert (ran.workload.records, ran.checkpointing.interval_ms, ran.network.buffer_size) == (400, 20, 4096)
    assert run.summary["checkpointing"]["interval_ms"] == 20 and run.summary["network"]["buffer_size"] == 4096
    assert replayed_trace(run.out_dir, tmp_path / "b", capsys) == run.summary["trace_sha256"]


def test_every_sweep_point_replays_with_its_values(tmp_path, capsys):
    result = sweep.run_sweep(write(tmp_path, TWO_POINT_SWEEP), out=tmp_path / "sweep", modes="all", aggregate=False)
    assert len(result.runs) == 6
    for (label, mode), run in result.runs.items():
        exponent = float(label.partition("=")[2])
        assert run.summary["workload"]["zipf_exponent"] == exponent and run.summary["mode"] == mode
        replay_dir = tmp_path / "replays" / label / mode
        assert replayed_trace(run.out_dir, replay_dir, capsys) == run.summary["trace_sha256"]


def test_replay_accepts_a_run_directory(tmp_path, capsys):
    run = barriersim.run(write(tmp_path, TWO_SOURCES), out=tmp_path / "a").only
    assert cli.main(["replay", str(run.out_dir), "--out", str(tmp_path / "b")]) == 0
    assert f"trace_sha256: {run.summary['trace_sha256']}" in capsys.readouterr().out


@pytest.mark.parametrize("path", LIBRARY, ids=[p.stem for p in LIBRARY])
def test_every_library_scenario_round_trips_through_its_document(path):
    scenario = load_scenario(path)
    again = parse_scenario(json.loads(json.dumps(scenario_document(scenario))), scenario.path)
    assert again == scenario
    assert parse_scenario(__import__("tomllib").loads(dumps(scenario_document(scenario))), scenario.path) == scenario


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(simulated_cases(jobmanager_faults=True))
def test_generated_cases_round_trip_through_their_document(case):
    scenario = case.scenario("<case>")
    assert parse_scenario(scenario_document(scenario), "<case>") == scenario
