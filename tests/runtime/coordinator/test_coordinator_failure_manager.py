"""Ports of Flink's CheckpointFailureManagerTest."""

from __future__ import annotations

import pytest

from barriersim.runtime.coordinator.failure_manager import CheckpointFailureManager, FailureOutcome
from barriersim.runtime.coordinator.properties import CheckpointProperties
from barriersim.runtime.failure_reason import CheckpointException
from barriersim.runtime.failure_reason import CheckpointFailureReason as R
from barriersim.runtime.ids import ExecutionAttemptID

CHECKPOINT = CheckpointProperties.for_standard_checkpoint()


def job_level(fm: CheckpointFailureManager, reason: R, checkpoint_id: int) -> FailureOutcome:
    return fm.handle_job_level_checkpoint_exception(CHECKPOINT, CheckpointException(reason), checkpoint_id)


def test_ignores_past_checkpoints():
    """Port of Flink CheckpointFailureManagerTest.testIgnoresPastCheckpoints."""
    fm = CheckpointFailureManager(2)
    job_level(fm, R.CHECKPOINT_EXPIRED, 1)
    job_level(fm, R.CHECKPOINT_EXPIRED, 2)
    fm.handle_checkpoint_success(2)
    job_level(fm, R.CHECKPOINT_EXPIRED, 1)
    job_level(fm, R.CHECKPOINT_EXPIRED, 3)
    job_level(fm, R.CHECKPOINT_EXPIRED, 4)
    assert fm.fail_job_invocations == 0


def test_continuous_failure():
    """Port of Flink CheckpointFailureManagerTest.testContinuousFailure."""
    fm = CheckpointFailureManager(2)
    job_level(fm, R.CHECKPOINT_DECLINED, 1)
    job_level(fm, R.CHECKPOINT_DECLINED, 2)
    assert job_level(fm, R.JOB_FAILOVER_REGION, 3) is FailureOutcome.IGNORED
    assert job_level(fm, R.CHECKPOINT_DECLINED, 4) is FailureOutcome.FAIL_JOB
    assert fm.fail_job_invocations == 1


def test_break_continuous_failure():
    """Port of Flink CheckpointFailureManagerTest.testBreakContinuousFailure.

    Flink's generic ``EXCEPTION`` reason is not in our enum; ``IO_EXCEPTION`` (also counted) stands in."""
    fm = CheckpointFailureManager(2)
    job_level(fm, R.IO_EXCEPTION, 1)
    job_level(fm, R.CHECKPOINT_DECLINED, 2)
    job_level(fm, R.JOB_FAILOVER_REGION, 3)
    fm.handle_checkpoint_success(4)
    job_level(fm, R.CHECKPOINT_EXPIRED, 5)
    assert fm.fail_job_invocations == 0
    assert fm.continuous_failure_counter == 1


def test_total_count_value():
    """Port of Flink CheckpointFailureManagerTest.testTotalCountValue.

    With 0 tolerable failures every counted reason (for an unknown id) fails the job once; Flink's expected
    count (2) reflects its version's counted set, ours is ``counted_against_failure_threshold``."""
    fm = CheckpointFailureManager(0)
    for reason in R:
        job_level(fm, reason, -1)
    assert fm.fail_job_invocations == sum(1 for r in R if r.counted_against_failure_threshold)
    assert fm.fail_job_invocations == 5


def test_ignore_one_checkpoint_repeatedly_count_multi_times():
    """Port of Flink CheckpointFailureManagerTest.testIgnoreOneCheckpointRepeatedlyCountMultiTimes."""
    fm = CheckpointFailureManager(2)
    job_level(fm, R.CHECKPOINT_DECLINED, 1)
    job_level(fm, R.CHECKPOINT_DECLINED, 2)
    job_level(fm, R.JOB_FAILOVER_REGION, 3)
    job_level(fm, R.CHECKPOINT_DECLINED, 2)
    assert fm.fail_job_invocations == 0
    assert fm.continuous_failure_counter == 2


def test_undefined_tolerable_number_fails_on_first_counted_failure():
    fm = CheckpointFailureManager(-1)
    assert job_level(fm, R.CHECKPOINT_SUBSUMED, 1) is FailureOutcome.IGNORED
    assert job_level(fm, R.CHECKPOINT_EXPIRED, 2) is FailureOutcome.FAIL_JOB
    with pytest.raises(ValueError, match="-5"):
        CheckpointFailureManager(-5)


def test_savepoint_failures_on_the_coordinator_are_ignored_but_sync_savepoint_task_failures_fail_the_job():
    fm = CheckpointFailureManager(5)
    task = ExecutionAttemptID("map", 0)
    savepoint = CheckpointProperties.for_savepoint(True)
    sync = CheckpointProperties.for_sync_savepoint(True, False)
    exc = CheckpointException(R.CHECKPOINT_DECLINED)
    assert fm.handle_checkpoint_exception(savepoint, exc, 1, None) is FailureOutcome.IGNORED
    assert fm.handle_checkpoint_exception(savepoint, exc, 2, task) is FailureOutcome.COUNTED
    assert fm.handle_checkpoint_exception(sync, exc, 3, task) is FailureOutcome.FAIL_JOB
