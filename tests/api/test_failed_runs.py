"""A run whose job ends FAILED (here: a JobManager failover meets a damaged checkpoint) says why in one line, in
summary.json (``job.failure_reason``) and on the command line, and the command exits with status 1."""

from __future__ import annotations

import json

import pytest

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


RESTORE_FAILS = """\
[scenario]
name = "restore-fails"
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
memory_threshold_bytes = 0

[restart]
attempts = 1
delay_ms = 50

[[faults]]
type = "damage_checkpoint"
at_ms = 600
{damage}

[[faults]]
type = "{crash}"
at_ms = 600
{crash_target}
"""


@pytest.mark.parametrize(
    "phase, damage, crash, reason",
    [
        (
            "jobmanager recovery",
            'damage = "delete"\ntarget = "completed_list"',
            "crash_coordinator",
            "JobManager failover: job sim-7: the completed-checkpoint list ",
        ),
        (
            "failover",
            'damage = "flip_byte"\ntarget = "state_file"',
            "crash_task",
            "the restart strategy gave up after 2 failures (at most 1 restarts); the last: restore: could not restore "
            "checkpoint ",
        ),
    ],
)
def test_a_restore_that_fails_while_failing_over_ends_the_run_failed_with_its_reason_not_a_traceback(
    tmp_path, capsys, phase, damage, crash, reason
):
    """Every error raised while restoring or failing over ends the run FAILED, its reason in summary.json and on the
    command line, exit status 1, nothing on stderr (``runtime.job.restore_failure``): here a new JobManager that
    finds the completed-checkpoint list deleted beside completed checkpoints, and a task failover whose restore
    cannot read a damaged state file until the restart strategy gives up."""
    scenario = tmp_path / "restore_fails.toml"
    scenario.write_text(
        RESTORE_FAILS.format(
            damage=damage, crash=crash, crash_target='task = "keyed-sum#0"' if crash == "crash_task" else ""
        )
    )
    out = tmp_path / "run"
    assert (
        cli.main(["run", str(scenario), "--backend", "sim", "--out", str(out), "--checkpoint-files"])
        == cli.EXIT_VIOLATED
    )
    job = json.loads((out / "summary.json").read_text())["job"]
    assert job["outcome"] == "failed" and job["failure_reason"].startswith(reason), job["failure_reason"]
    captured = capsys.readouterr()
    assert f"job failed: {job['failure_reason']}" in captured.out
    assert captured.err == "", captured.err
