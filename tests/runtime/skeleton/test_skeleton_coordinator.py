"""The walking skeleton's coordinator: one pending checkpoint, completion, expiry, statistics."""

from barriersim.runtime.events import CheckpointOptions
from barriersim.runtime.failure_reason import CheckpointFailureReason
from barriersim.runtime.skeleton.coordinator import (
    AbortCheckpoint,
    CompleteCheckpoint,
    SkeletonCoordinator,
    TriggerCheckpoint,
)
from barriersim.runtime.skeleton.task import SubtaskCheckpointMetrics


def coordinator(timeout=1000):
    return SkeletonCoordinator(["a", "b"], CheckpointOptions.aligned(), timeout)


def test_trigger_ack_complete_with_flink_statistics():
    c = coordinator()
    [trigger] = c.on_periodic_trigger(100)
    assert isinstance(trigger, TriggerCheckpoint) and trigger.barrier.id == 1 and trigger.barrier.timestamp == 100
    assert c.on_periodic_trigger(150) == []  # max concurrent checkpoints 1
    assert c.on_acknowledge("a", 1, "h-a", 10, SubtaskCheckpointMetrics(1), 120) == []
    assert c.on_acknowledge("a", 1, "h-a", 10, SubtaskCheckpointMetrics(1), 121) == []  # duplicate ignored
    [done] = c.on_acknowledge("b", 1, "h-b", 5, SubtaskCheckpointMetrics(1, alignment_buffered=7), 130)
    assert isinstance(done, CompleteCheckpoint) and done.acknowledged == {"a": "h-a", "b": "h-b"}
    [stats] = c.checkpoint_stats
    assert stats["status"] == "COMPLETED" and stats["end_to_end_duration"] == 30
    assert stats["state_size"] == 15 and stats["alignment_buffered"] == 7 and stats["num_acknowledged_subtasks"] == 2
    assert c.completed == 1
    [t2] = c.on_periodic_trigger(200)
    assert t2.barrier.id == 2


def test_a_pending_checkpoint_past_its_timeout_expires():
    c = coordinator(timeout=50)
    c.on_periodic_trigger(0)
    actions = c.on_periodic_trigger(60)
    assert isinstance(actions[0], AbortCheckpoint) and actions[0].reason is CheckpointFailureReason.CHECKPOINT_EXPIRED
    assert isinstance(actions[1], TriggerCheckpoint) and actions[1].barrier.id == 2
    assert c.on_acknowledge("a", 1, "h", 1, SubtaskCheckpointMetrics(1), 61) == []  # late ack of an expired one
    assert c.failed == 1


def test_no_trigger_once_a_task_finished():
    c = coordinator()
    c.on_task_finished("a", 0)
    assert c.on_periodic_trigger(10) == []
    assert c.skipped == {"NOT_ALL_REQUIRED_TASKS_RUNNING": 1}
