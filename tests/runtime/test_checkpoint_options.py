"""Flink's ``CheckpointOptions.forConfig`` (Flink 2.3): which options a checkpoint of a configuration gets."""

import pytest

from barriersim.runtime.events import NO_ALIGNED_CHECKPOINT_TIME_OUT, AlignmentType, CheckpointOptions, CheckpointType


@pytest.mark.parametrize(
    "timeout, alignment, timeout_of_options",
    [
        (0, AlignmentType.UNALIGNED, NO_ALIGNED_CHECKPOINT_TIME_OUT),  # unaligned from the start
        (500, AlignmentType.ALIGNED, 500),  # aligned, switching to unaligned after 500 ms
        # Long.MAX_VALUE is Flink's "no timeout": forConfig treats it as 0, not as an alignment that never times out
        (NO_ALIGNED_CHECKPOINT_TIME_OUT, AlignmentType.UNALIGNED, NO_ALIGNED_CHECKPOINT_TIME_OUT),
    ],
)
def test_for_config_with_unaligned_checkpoints(timeout, alignment, timeout_of_options):
    options = CheckpointOptions.for_config(
        CheckpointType.CHECKPOINT, exactly_once=True, unaligned_enabled=True, aligned_checkpoint_timeout=timeout
    )
    assert options.alignment is alignment
    assert options.aligned_checkpoint_timeout == timeout_of_options
    assert options.is_timeoutable is (0 < timeout < NO_ALIGNED_CHECKPOINT_TIME_OUT)


def test_for_config_keeps_savepoints_aligned_and_at_least_once_unaligned_free():
    savepoint = CheckpointOptions.for_config(
        CheckpointType.SAVEPOINT, exactly_once=True, unaligned_enabled=True, aligned_checkpoint_timeout=0
    )
    assert savepoint.alignment is AlignmentType.ALIGNED and not savepoint.is_unaligned_checkpoint
    at_least_once = CheckpointOptions.for_config(
        CheckpointType.CHECKPOINT, exactly_once=False, unaligned_enabled=True, aligned_checkpoint_timeout=500
    )
    assert at_least_once.alignment is AlignmentType.AT_LEAST_ONCE
