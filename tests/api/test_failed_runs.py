"""A run whose job ends FAILED (here: a JobManager failover meets a damaged checkpoint) says why in one line, in
summary.json (``job.failure_reason``) and on the command line, and the command exits with status 1."""

from __future__ import annotations

import json

from barriersim import cli

DAMAGED = """\
[scenario]
name = "damaged"
seed = 7

[workload]
records = 20000
keys = 40
rate_per_source = 10000

[job]
source_parallelism = 2
keyed_sum_parallelism = 2

[checkpointing]
mode = "aligned"
interval_ms = 100
max_retained = 3

[[faults]]
type = "damage_checkpoint"
at_ms = 600
damage = "truncate"

[[faults]]
type = "crash_coordinator"
at_ms = 600
"""


def test_a_failed_run_exits_1_and_its_summary_and_output_give_the_reason(tmp_path, capsys):
    scenario = tmp_path / "damaged.toml"
    scenario.write_text(DAMAGED)
    out = tmp_path / "run"
    assert cli.main(["run", str(scenario), "--backend", "sim", "--out", str(out)]) == cli.EXIT_VIOLATED
    job = json.loads((out / "summary.json").read_text())["job"]
    assert job["outcome"] == "failed"
    assert job["failure_reason"].startswith("JobManager failover: job sim-7: could not retrieve checkpoint ")
    assert "is not the file the completed-checkpoint list points to" in job["failure_reason"]
    printed = capsys.readouterr().out
    assert f"job failed: {job['failure_reason']}" in printed
    # the replay of the run directory ends the same way
    assert cli.main(["replay", str(out), "--out", str(tmp_path / "again")]) == cli.EXIT_VIOLATED


def test_a_finished_run_has_no_failure_reason(tmp_path):
    scenario = tmp_path / "fine.toml"
    scenario.write_text(DAMAGED.split("[[faults]]")[0])
    out = tmp_path / "run"
    assert cli.main(["run", str(scenario), "--backend", "sim", "--out", str(out)]) == 0
    job = json.loads((out / "summary.json").read_text())["job"]
    assert job["outcome"] == "finished" and job["failure_reason"] is None


def test_a_sweep_with_a_failed_run_exits_1_and_names_the_run_and_its_reason(tmp_path, capsys):
    scenario = tmp_path / "damaged_sweep.toml"
    scenario.write_text(DAMAGED + '\n[sweep]\n"checkpointing.interval_ms" = [100, 150]\n')
    out = tmp_path / "sweep"
    status = cli.main(["sweep", str(scenario), "--backend", "sim", "--out", str(out), "--no-analytics"])
    printed = capsys.readouterr().out
    failed_lines = [line for line in printed.splitlines() if line.startswith("failed: ")]
    assert status == cli.EXIT_VIOLATED
    assert failed_lines and all("JobManager failover: job " in line for line in failed_lines), printed
