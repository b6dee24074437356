"""Flink's ``PendingCheckpointStatsTest`` (with ``CompletedCheckpointStats.discard``) and
``CheckpointStatsCountsTest``, ported to the statistics tracker (``runtime.coordinator.stats_tracker``): a
checkpoint's record while in progress, reported subtasks (no overwrite), what it says once completed or failed, and
the job's counts."""

from __future__ import annotations

from barriersim.runtime.coordinator.stats_tracker import CheckpointStatsTracker
from barriersim.runtime.failure_reason import CheckpointFailureReason
from barriersim.runtime.task.actions import TaskCheckpointMetrics

MAX_INT = 2**31 - 1
TASK1, TASK2 = 3, 4  # subtasks of the two vertices


def subtask_metrics(checkpoint_id: int, index: int, unaligned: bool) -> TaskCheckpointMetrics:
    value = MAX_INT + index
    return TaskCheckpointMetrics(
        checkpoint_id,
        sync_duration_ms=value,
        async_duration_ms=value,
        alignment_duration_ms=value,
        checkpoint_start_delay_ms=value,
        bytes_processed_during_alignment=value,
        bytes_persisted_during_alignment=value,
        unaligned_checkpoint=unaligned,
    )


def report_all(stats: CheckpointStatsTracker, checkpoint_id: int, check=None) -> None:
    """``TASK1`` aligned subtasks of vertex ``a``, then ``TASK2`` unaligned ones of ``b``, as Flink's test reports."""
    for vertex, count, unaligned in (("a", TASK1, False), ("b", TASK2, True)):
        for i in range(count):
            ack, size = MAX_INT + i, MAX_INT + i
            assert stats.report_subtask_stats(
                checkpoint_id, f"{vertex}#{i}@0", ack, size, subtask_metrics(checkpoint_id, i, unaligned)
            )
            if check is not None:
                check(vertex, ack, unaligned)


def test_report_subtask_stats():
    checkpoint_id, trigger = MAX_INT + 1222, MAX_INT - 1239
    stats = CheckpointStatsTracker()
    stats.report_pending_checkpoint(checkpoint_id, trigger, False, "CHECKPOINT", TASK1 + TASK2)
    pending = stats.history[checkpoint_id]
    # the initial state
    assert pending["id"] == checkpoint_id and pending["trigger_timestamp"] == trigger
    assert pending["status"] == "IN_PROGRESS" and pending["num_acknowledged_subtasks"] == 0
    assert pending["state_size"] == 0 and pending["num_subtasks"] == TASK1 + TASK2
    assert pending["latest_ack_timestamp"] == -1 and pending["end_to_end_duration"] == -1
    # a report for a checkpoint the tracker does not know is not taken
    assert not stats.report_subtask_stats(checkpoint_id + 1, "a#0@0", MAX_INT, 1)

    state_size = 0

    def check(vertex, ack, unaligned):
        nonlocal state_size
        state_size += ack  # the subtask's state size is its ack value, as Flink's test builds it
        assert (pending["checkpoint_type"] == "UNALIGNED_CHECKPOINT") == (vertex == "b")
        assert pending["latest_ack_timestamp"] == ack and pending["end_to_end_duration"] == ack - trigger
        assert pending["state_size"] == state_size

    report_all(stats, checkpoint_id, check)
    # no overwrite: a subtask that reported once is not taken again
    assert not stats.report_subtask_stats(checkpoint_id, "a#0@0", MAX_INT + 99, 5)
    assert pending["num_acknowledged_subtasks"] == TASK1 + TASK2 and pending["state_size"] == state_size
    assert len(stats.subtask_stats[checkpoint_id]) == TASK1 + TASK2


def test_report_completed_checkpoint():
    stats = CheckpointStatsTracker()
    stats.report_pending_checkpoint(0, 1, False, "CHECKPOINT", TASK1 + TASK2)
    report_all(stats, 0)
    pending = dict(stats.history[0])
    stats.report_completed_checkpoint(0, MAX_INT + 10, "asdjkasdjkasd")
    completed = stats.history[0]
    assert completed["status"] == "COMPLETED" and completed["discarded"] is False
    stats.report_discarded_checkpoint(0)
    assert completed["discarded"] is True and completed["external_path"] == "asdjkasdjkasd"
    for field in ("id", "num_acknowledged_subtasks", "latest_ack_timestamp", "end_to_end_duration", "state_size"):
        assert completed[field] == pending[field], field
    assert completed["checkpoint_type"] == "UNALIGNED_CHECKPOINT"
    assert stats.counts == {"restored": 0, "total": 1, "in_progress": 0, "completed": 1, "failed": 0}
    # a completed checkpoint takes no more reports
    assert not stats.report_subtask_stats(0, "c#0@0", MAX_INT, 1)


def test_report_failed_checkpoint():
    trigger, failure = 123123, 112211137
    stats = CheckpointStatsTracker()
    stats.report_pending_checkpoint(0, trigger, False, "CHECKPOINT", TASK1 + TASK2)
    report_all(stats, 0)
    pending = dict(stats.history[0])
    stats.report_failed_checkpoint(0, failure, CheckpointFailureReason.CHECKPOINT_DECLINED, "test exception")
    failed = stats.history[0]
    assert failed["status"] == "FAILED" and failed["failure_timestamp"] == failure
    assert failed["failure_message"] == "test exception"
    for field in ("id", "num_acknowledged_subtasks", "latest_ack_timestamp", "state_size"):
        assert failed[field] == pending[field], field
    assert failed["end_to_end_duration"] == failure - trigger
    assert failed["checkpoint_type"] == "UNALIGNED_CHECKPOINT"
    assert "discarded" not in failed  # Flink's REST has it for completed checkpoints only
    assert stats.counts == {"restored": 0, "total": 1, "in_progress": 0, "completed": 0, "failed": 1}


def test_counts():
    """Flink's ``CheckpointStatsCountsTest.testCounts`` through the tracker's reports: a restore counts apart, a
    checkpoint counts in progress until it completes or fails, a failure before a checkpoint existed counts as one
    more, failed; completing or failing what is not in progress never makes the in-progress count negative
    (``testCompleteOrFailWithoutInProgressCheckpoint``)."""
    stats = CheckpointStatsTracker()

    def counts():
        c = stats.counts
        return c["restored"], c["total"], c["in_progress"], c["completed"], c["failed"]

    assert counts() == (0, 0, 0, 0, 0)
    stats.report_restored_checkpoint(7, 0, None, False)
    assert counts() == (1, 0, 0, 0, 0)
    stats.report_pending_checkpoint(1, 0, False, "CHECKPOINT", 1)
    assert counts() == (1, 1, 1, 0, 0)
    stats.report_completed_checkpoint(1, 5)
    assert counts() == (1, 1, 0, 1, 0)
    stats.report_pending_checkpoint(2, 10, False, "CHECKPOINT", 1)
    assert counts() == (1, 2, 1, 1, 0)
    stats.report_failed_checkpoint(2, 15, CheckpointFailureReason.CHECKPOINT_EXPIRED)
    assert counts() == (1, 2, 0, 1, 1)
    stats.report_failed_checkpoint_without_in_progress()
    assert counts() == (1, 3, 0, 1, 2)
    stats.report_completed_checkpoint(2, 20)  # not in progress any more: nothing changes
    stats.report_failed_checkpoint(1, 20, CheckpointFailureReason.CHECKPOINT_EXPIRED)
    assert counts() == (1, 3, 0, 1, 2)


def test_report_incomplete_stats():
    """Flink's ``DefaultCheckpointStatsTracker.reportIncompleteStats`` -> ``PendingCheckpointStats.
    reportSubtaskStats`` with a ``SubtaskStateStats`` that is not completed: taken while the checkpoint is pending
    or after it failed, not once completed, and for a subtask's first report only; it adds its sizes but is no
    acknowledgement (the count and the latest acknowledgement stay), and the row says ``aborted``; its unknown
    figures (-1) add nothing to the checkpoint's processed and persisted data."""
    from barriersim.runtime.coordinator.stats_tracker import job_statistics
    from barriersim.runtime.task.actions import UNSET

    stats = CheckpointStatsTracker()
    stats.report_pending_checkpoint(7, 100, False, "CHECKPOINT", 3)
    pending = stats.history[7]
    assert stats.report_subtask_stats(7, "a#0@0", 130, 40, subtask_metrics(7, 0, False))
    incomplete = TaskCheckpointMetrics(
        7,
        sync_duration_ms=2,
        async_duration_ms=UNSET,
        checkpoint_start_delay_ms=9,
        bytes_processed_during_alignment=300,
        bytes_persisted_during_alignment=UNSET,
    )
    assert stats.report_incomplete_stats(7, "a#1@0", 150, 25, 20, incomplete)
    assert pending["num_acknowledged_subtasks"] == 1 and pending["latest_ack_timestamp"] == 130
    assert pending["end_to_end_duration"] == 30 and pending["checkpoint_type"] == "CHECKPOINT"
    assert (pending["state_size"], pending["checkpointed_size"]) == (65, 60)
    # a subtask reports once: neither a second incomplete report nor a late acknowledgement is taken
    assert not stats.report_incomplete_stats(7, "a#1@0", 160, 5, 5, incomplete)
    assert not stats.report_subtask_stats(7, "a#1@0", 170, 5, subtask_metrics(7, 1, False))
    stats.report_failed_checkpoint(7, 200, CheckpointFailureReason.JOB_FAILOVER_REGION)
    # a failed checkpoint still takes a subtask's first report that is not completed (FailedCheckpointStats is a
    # PendingCheckpointStats), but no acknowledgement, and its end-to-end duration stays the failure's
    assert not stats.report_subtask_stats(7, "a#2@0", 205, 5, subtask_metrics(7, 2, False))
    assert stats.report_incomplete_stats(7, "a#2@0", 210, 5, 5, incomplete)
    assert not stats.report_incomplete_stats(7, "a#2@0", 220, 5, 5, incomplete)
    assert pending["status"] == "FAILED" and pending["num_acknowledged_subtasks"] == 1
    assert pending["end_to_end_duration"] == 100 and pending["state_size"] == 70
    checkpoints, rows, _ = job_statistics([stats])
    (row,) = [r for r in rows if r["task"] == "a#1"]
    assert row["aborted"] and not row["finished"] and row["end_to_end_duration"] == 50
    assert (row["checkpoint_async"], row["alignment_persisted"], row["alignment_processed"]) == (UNSET, UNSET, 300)
    assert [r["aborted"] for r in rows] == [False, True, True]
    (checkpoint,) = checkpoints
    assert checkpoint["processed_data"] == subtask_metrics(7, 0, False).bytes_processed_during_alignment + 2 * 300
    assert checkpoint["persisted_data"] == subtask_metrics(7, 0, False).bytes_persisted_during_alignment
    # a completed checkpoint takes none
    stats.report_pending_checkpoint(8, 300, False, "CHECKPOINT", 1)
    assert stats.report_subtask_stats(8, "a#0@0", 310, 1, subtask_metrics(8, 0, False))
    stats.report_completed_checkpoint(8, 320)
    assert not stats.report_incomplete_stats(8, "a#1@0", 330, 5, 5, incomplete)
