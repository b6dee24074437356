"""Restores that fail, or that Flink lets through, on real Ray actors (the JobMaster in the job manager actor, the
checkpoints in files): a job started from a savepoint of another program with allow-non-restored-state goes on
through a failover before its first checkpoint (Flink's failover restore allows the unmatched state; it ended the run
with the job manager's traceback), and a JobManager failover that finds completed checkpoints but no
completed-checkpoint list ends the job FAILED with the reason (``runtime.job.restore_failure``)."""

from __future__ import annotations

import dataclasses

import pytest

from barriersim.actors.graph_runner import run_graph_on_ray
from barriersim.runtime.faults.experiment import RestoreSettings
from barriersim.scenarios.simulation_inputs import job_config, workload_splits
from tests.runtime.sim.test_restore_errors import program, savepoint  # noqa: F401 - the fixture

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_cluster")]


def run_on_ray(config, splits, tmp_path, name):
    return run_graph_on_ray(
        config,
        splits,
        str(tmp_path / "checkpoints"),
        name,
        timeout_seconds=300,
        savepoint_root=str(tmp_path / "savepoints"),
    )


def test_a_failover_before_the_first_checkpoint_restores_the_savepoint_of_another_program_on_ray(savepoint, tmp_path):  # noqa: F811
    job = program("total", faults=[{"type": "crash_task", "task": "total#0", "point": "during_restore"}])
    config = dataclasses.replace(job_config(job), restore=RestoreSettings(savepoint, allow_non_restored_state=True))
    result = run_on_ray(config, workload_splits(job), tmp_path, "unmatched-state")
    assert result.outcome == "finished", result.jobs[0]["failure_reason"]
    assert result.jobs[0]["restored_checkpoint_ids"] == [3, 3] and result.jobs[0]["restarts"] == 1


def test_a_jobmanager_failover_that_finds_completed_checkpoints_but_no_list_fails_the_job_on_ray(tmp_path):
    """The job's directory holds a completed checkpoint (its ``_metadata``) but no completed-checkpoint list (lost):
    the JobManager failover at 1 ms fails the job naming both, whatever the machine's load (a list deleted at a time
    would need a checkpoint completed by then)."""
    from barriersim.runtime.state.snapshot import CheckpointMetadata
    from barriersim.runtime.storage.fs_storage import FileSystemCheckpointStorage

    FileSystemCheckpointStorage(tmp_path / "checkpoints", "lost-list").persist_checkpoint(CheckpointMetadata(50, ()))
    job = program("sum", faults=[{"type": "crash_coordinator", "at_ms": 1}])
    result = run_on_ray(job_config(job), workload_splits(job), tmp_path, "lost-list")
    assert result.outcome == "failed"
    reason = result.jobs[0]["failure_reason"]
    assert (
        reason.startswith("JobManager failover: job lost-list: the completed-checkpoint list ")
        and (
            f"_completed_checkpoints is missing, but the storage holds completed checkpoint(s) 50 "
            f"({tmp_path / 'checkpoints' / 'lost-list' / 'chk-50' / '_metadata'})"
        )
        in reason
    ), reason
    assert result.jobs[0]["restored_checkpoint_ids"] == []
