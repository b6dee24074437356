"""What a job's end leaves of its checkpoints, per externalized-checkpoint retention (Flink's
``execution.checkpointing.externalized-checkpoint-retention``), on the simulator's filesystem checkpoint storage:
a finished job keeps none under any setting; a job the restart strategy failed keeps its retained checkpoints
unless the retention is Flink's default ``NO_EXTERNALIZED_CHECKPOINTS`` (Flink's ``CheckpointProperties``:
every policy deletes on success, only ``NEVER_RETAIN_AFTER_TERMINATION`` deletes on failure)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from barriersim.runtime.coordinator.properties import CheckpointRetentionPolicy
from barriersim.runtime.coordinator.properties import ExternalizedCheckpointRetention as R
from barriersim.runtime.job.config import JobOutcome
from barriersim.runtime.sim.job_simulation import JobSimulation
from tests.runtime.storage.test_corruption_campaign import SPLITS, config

FAILING = (
    '[{"type":"damage_checkpoint","at_ms":1000,"damage":"flip_byte","target":"state_file"},'
    '{"type":"crash_task","task":"sum#0","at_ms":1010}]'
)  # each restore fails until the strategy gives up


def with_retention(config, retention):
    return replace(config, checkpointing=replace(config.checkpointing, externalized_checkpoint_retention=retention))


def checkpoint_dirs(root) -> list[str]:
    return sorted(p.name for p in root.glob("*/chk-*"))


def test_flink_derives_the_retention_policy_from_the_externalized_retention():
    assert R.NO_EXTERNALIZED_CHECKPOINTS.retention_policy is CheckpointRetentionPolicy.NEVER_RETAIN_AFTER_TERMINATION
    assert R.DELETE_ON_CANCELLATION.retention_policy is CheckpointRetentionPolicy.RETAIN_ON_FAILURE
    assert R.RETAIN_ON_CANCELLATION.retention_policy is CheckpointRetentionPolicy.RETAIN_ON_CANCELLATION
    assert (
        config().checkpointing.coordinator_configuration().retention_policy
        is CheckpointRetentionPolicy.NEVER_RETAIN_AFTER_TERMINATION
    )  # Flink's default


@pytest.mark.parametrize("retention", list(R))
def test_a_finished_job_keeps_no_checkpoint_under_any_retention(tmp_path, retention):
    job = JobSimulation(with_retention(config(), retention), SPLITS, seed=3, checkpoint_directory=tmp_path)
    result = job.run()
    assert result.outcome is JobOutcome.FINISHED and result.counts["completed"] >= 3
    assert checkpoint_dirs(tmp_path) == []


@pytest.mark.parametrize("retention", list(R))
def test_a_failed_job_keeps_its_retained_checkpoints_unless_never_retained(tmp_path, retention):
    job = JobSimulation(with_retention(config(FAILING), retention), SPLITS, seed=3, checkpoint_directory=tmp_path)
    result = job.run()
    assert result.outcome is JobOutcome.FAILED
    assert result.failure_reason.startswith("the restart strategy gave up")
    kept = checkpoint_dirs(tmp_path)
    if retention is R.NO_EXTERNALIZED_CHECKPOINTS:
        assert kept == []
    else:
        assert len(kept) == 3  # max_retained
