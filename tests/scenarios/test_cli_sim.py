"""The simulator backend from the command line: side-by-side modes, and replay reproducing a run exactly."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from barriersim.runtime.coordinator.properties import ExternalizedCheckpointRetention
from barriersim.scenarios.loader import load_scenario

ROOT = Path(__file__).parents[2]
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "barriersim.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def test_run_sim_mode_all_writes_one_verified_run_per_mode(tmp_path):
    proc = cli("run", str(QUICKSTART), "--backend", "sim", "--mode", "all", "--out", str(tmp_path), "--seed", "5")
    assert proc.returncode == 0, proc.stderr
    for mode in ("aligned", "unaligned", "at-least-once"):
        summary = json.loads((tmp_path / mode / "summary.json").read_text())
        assert summary["backend"] == "sim" and summary["mode"] == mode and summary["seed"] == 5
        assert summary["verification"]["verdict"] == "exactly-once"
        assert summary["checkpoints"]["completed"] >= 2
        assert len(summary["trace_sha256"]) == 64
        assert (tmp_path / mode / "checkpoints.parquet").stat().st_size > 0
        assert f"{mode}: verdict: exactly-once" in proc.stdout


def test_replay_reproduces_a_faulty_run_byte_for_byte(tmp_path):
    faults = '[{"type":"crash_task","task":"keyed-sum#1","at_ms":700}]'
    first = cli(
        "replay",
        str(QUICKSTART),
        "--seed",
        "9",
        "--mode",
        "unaligned",
        "--faults",
        faults,
        "--out",
        str(tmp_path / "a"),
    )
    assert first.returncode == 0, first.stderr
    a = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert a["simulation"]["restarts"] == 1 and a["verification"]["verdict"] == "exactly-once"
    # the printed command re-runs the run's own scenario.toml, which holds the seed, mode and faults it ran with
    assert a["replay"] == f"barriersim replay {tmp_path / 'a' / 'scenario.toml'}"
    ran = load_scenario(tmp_path / "a" / "scenario.toml")
    assert (ran.seed, ran.checkpointing.mode.value, ran.faults.to_plain()) == (9, "unaligned", json.loads(faults))
    args = a["replay"].split(" ", 2)[2]  # the printed command, run again as printed
    import shlex

    again = cli("replay", *shlex.split(args), "--out", str(tmp_path / "b"))
    assert again.returncode == 0, again.stderr
    b = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert b["trace_sha256"] == a["trace_sha256"]
    assert f"trace_sha256: {a['trace_sha256']}" in again.stdout
    assert f"replay: trace identical to the original ({tmp_path / 'a'})" in again.stdout.splitlines()


def test_replay_names_the_first_difference_from_the_original(tmp_path):
    first = cli("run", str(QUICKSTART), "--backend", "sim", "--out", str(tmp_path / "a"))
    assert first.returncode == 0, first.stderr
    changed = cli("replay", str(tmp_path / "a"), "--set", "checkpointing.interval_ms=300", "--out", str(tmp_path / "b"))
    assert changed.returncode == 0, changed.stderr
    [line] = [line for line in changed.stdout.splitlines() if line.startswith("replay: ")]
    # checkpoint 1 is triggered when the tasks run (at 0), checkpoint 2 one interval later: the first row that differs
    assert line == (
        f"replay: trace differs from the original ({tmp_path / 'a'}) (the replay was given --set): first "
        "difference: checkpoints id 2: trigger_timestamp 300, the original 400"
    )
    plain = cli("replay", str(QUICKSTART), "--out", str(tmp_path / "c"))
    assert f"replay: no original run to compare with ({QUICKSTART} is not in a run directory)" in plain.stdout


def test_replay_rejects_a_malformed_fault_schedule_in_one_line():
    proc = cli("replay", str(QUICKSTART), "--seed", "1", "--faults", '[{"type":"crash_task"}]')
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("barriersim: faults[0].")
    assert "Traceback" not in proc.stderr


def test_every_command_has_help():
    for args in (["--help"], ["run", "--help"], ["replay", "--help"], ["report", "--help"]):
        proc = cli(*args)
        assert proc.returncode == 0 and "usage: barriersim" in proc.stdout


@pytest.mark.parametrize(
    "task, point, problem",
    [
        (
            "keyed-sum#7",
            "mid_alignment",
            "faults[0].task: the job has no subtask 'keyed-sum#7' (its subtasks: source#0, "
            "source#1, keyed-sum#0, keyed-sum#1, sink#0)",
        ),
        (
            "source#0",
            "mid_alignment",
            "faults[0].point: source#0 has 0 input channel(s), so it is never mid_alignment "
            "(only a task with two or more aligns barriers)",
        ),
    ],
)
def test_cli_refuses_faults_the_job_cannot_reach_before_starting_ray(tmp_path, task, point, problem):
    p = tmp_path / "f.toml"
    p.write_text(
        f'[scenario]\nname="f"\n[[faults]]\ntype="crash_task"\ntask="{task}"\npoint="{point}"\ncheckpoint_id=2\n'
    )
    proc = cli("run", str(p))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"barriersim: {p}: {problem}"
    assert "starting Ray" not in proc.stdout


def test_a_simulated_run_writes_its_checkpoints_when_asked_and_keeps_the_retention_in_its_scenario(tmp_path):
    faults = '[{"type":"crash_task","task":"keyed-sum#1","at_ms":700}]'
    plain = cli("replay", str(QUICKSTART), "--faults", faults, "--out", str(tmp_path / "memory"))
    files = cli(
        "replay",
        str(QUICKSTART),
        "--faults",
        faults,
        "--out",
        str(tmp_path / "files"),
        "--checkpoint-files",
        "--externalized-checkpoint-retention",
        "RETAIN_ON_CANCELLATION",
    )
    assert plain.returncode == 0 and files.returncode == 0, files.stderr
    a, b = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("memory", "files"))
    assert a["trace_sha256"] == b["trace_sha256"] and b["job"]["restarts"] == 1  # the same simulation
    assert not (tmp_path / "memory" / "checkpoints").exists()
    (job_dir,) = (tmp_path / "files" / "checkpoints").iterdir()
    assert (job_dir / "shared").is_dir() and not list(job_dir.glob("chk-*"))  # finished: discarded, as in Flink
    assert a["checkpointing"]["externalized_checkpoint_retention"] == "NO_EXTERNALIZED_CHECKPOINTS"
    assert b["checkpointing"]["externalized_checkpoint_retention"] == "RETAIN_ON_CANCELLATION"
    assert (
        load_scenario(tmp_path / "files" / "scenario.toml").checkpointing.externalized_checkpoint_retention
        is ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
    )


def test_an_unknown_retention_costs_one_line_and_exit_2(tmp_path):
    proc = cli(
        "run",
        str(QUICKSTART),
        "--backend",
        "sim",
        "--out",
        str(tmp_path / "run"),
        "--externalized-checkpoint-retention",
        "KEEP_ALL",
    )
    assert proc.returncode == 2 and not (tmp_path / "run").exists()
    assert proc.stderr.count("\n") == 1 and "checkpointing.externalized_checkpoint_retention" in proc.stderr
    assert "KEEP_ALL" in proc.stderr and "Traceback" not in proc.stderr
