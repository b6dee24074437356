"""Checkpoint statistics with Flink's REST names: one record per checkpoint and the job's counts. Mirrors Flink's
``CheckpointStatsTracker`` / ``DefaultCheckpointStatsTracker`` and ``CheckpointStatsCounts``. See
docs/coordinator.md, "Checkpoint statistics". What the fields mean in Flink: docs/flink-facts.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from barriersim.runtime.failure_reason import CheckpointFailureReason


class CheckpointStatsTracker:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {"restored": 0, "total": 0, "in_progress": 0, "completed": 0, "failed": 0}
        self.history: dict[int, dict[str, Any]] = {}
        self.subtask_stats: dict[int, list[dict[str, Any]]] = {}
        self.latest_restored: dict[str, Any] | None = None
        self._reported: dict[int, set[str]] = {}  # per checkpoint in progress or failed: the subtasks that reported

    def report_pending_checkpoint(
        self, checkpoint_id: int, trigger_timestamp: int, is_savepoint: bool, checkpoint_type: str, num_subtasks: int
    ) -> dict[str, Any]:
        record = {
            "id": checkpoint_id,
            "status": "IN_PROGRESS",
            "is_savepoint": is_savepoint,
            "checkpoint_type": checkpoint_type,
            "trigger_timestamp": trigger_timestamp,
            # Flink's AbstractCheckpointStats: -1 for both until a subtask acknowledged (a failure then sets the
            # end-to-end duration to failure - trigger)
            "latest_ack_timestamp": -1,
            "end_to_end_duration": -1,
            "state_size": 0,
            "checkpointed_size": 0,
            "num_subtasks": num_subtasks,
            "num_acknowledged_subtasks": 0,
            "failure_timestamp": None,
            "failure_message": None,
            "failure_reason": None,
        }
        if is_savepoint:  # Flink's REST savepointFormat: the format a savepoint was written in
            record["savepointFormat"] = "CANONICAL"
        self.history[checkpoint_id] = record
        self.subtask_stats[checkpoint_id] = []
        self.counts["total"] += 1
        self.counts["in_progress"] += 1
        return record

    def report_subtask_stats(
        self,
        checkpoint_id: int,
        task: str,
        ack_timestamp: int,
        state_size: int,
        metrics: Any = None,
        checkpointed_size: int | None = None,
        finished: bool = False,
    ) -> bool:
        """Whether the report was taken: not for a checkpoint that is not in progress, nor a second time for one
        subtask (Flink's ``PendingCheckpointStats.reportSubtaskStats``: no overwrite). ``state_size``: all the state
        the acknowledgement refers to; ``checkpointed_size`` (default: the same):
        what this checkpoint wrote of it (an incremental snapshot's new uploads), as Flink's ``SubtaskStateStats``.
        ``finished``: a task that had finished before the trigger (FLIP-147), which Flink's
        ``CheckpointCoordinator.reportFinishedTasks`` reports at the trigger as acknowledged, with an acknowledgement
        at the trigger time and zero for every size and duration (``new SubtaskStateStats(index, now)``)."""
        if checkpointed_size is None:
            checkpointed_size = state_size
        return self._report(
            checkpoint_id,
            task,
            ack_timestamp,
            state_size,
            checkpointed_size,
            metrics,
            completed=True,
            finished=finished,
        )

    def report_incomplete_stats(
        self, checkpoint_id: int, task: str, timestamp: int, state_size: int, checkpointed_size: int, metrics: Any
    ) -> bool:
        """A subtask's figures without an acknowledgement (Flink's ``DefaultCheckpointStatsTracker.
        reportIncompleteStats``: a ``SubtaskStateStats`` that is not completed): a closed asynchronous part's, or a
        late acknowledgement's. Taken for the subtask's first report, by a checkpoint in progress or one that
        failed, not by a completed one; the checkpoint counts no acknowledgement and keeps its latest
        acknowledgement and end-to-end duration: only its sizes grow, and its unaligned flag with the subtask's. The
        subtask's row is ``aborted``."""
        return self._report(checkpoint_id, task, timestamp, state_size, checkpointed_size, metrics, completed=False)

    def _report(
        self,
        checkpoint_id: int,
        task: str,
        timestamp: int,
        state_size: int,
        checkpointed_size: int,
        metrics: Any,
        *,
        completed: bool,
        finished: bool = False,
    ) -> bool:
        """Flink's ``PendingCheckpointStats.reportSubtaskStats`` (``TaskStateStats``: a subtask's first report
        only); a ``completed`` one is an acknowledgement, of a checkpoint in progress. A report that is not
        completed is taken by a failed checkpoint too: Flink 2.3's ``reportIncompleteStats`` takes any
        ``PendingCheckpointStats``, and ``FailedCheckpointStats`` is one (a completed checkpoint's stats are not)."""
        record = self.history.get(checkpoint_id)
        if record is None or record["status"] not in (("IN_PROGRESS",) if completed else ("IN_PROGRESS", "FAILED")):
            return False
        reported = self._reported.setdefault(checkpoint_id, set())
        if task in reported:
            return False
        reported.add(task)
        if metrics is not None and metrics.unaligned_checkpoint and record["checkpoint_type"] == "CHECKPOINT":
            # Flink's PendingCheckpointStats: one subtask that checkpointed unaligned (persisted in-flight data,
            # also after its alignment timed out) makes the checkpoint unaligned; REST reports UNALIGNED_CHECKPOINT
            record["checkpoint_type"] = "UNALIGNED_CHECKPOINT"
        end_to_end = max(0, timestamp - record["trigger_timestamp"])
        if completed:
            record["num_acknowledged_subtasks"] += 1
            record["latest_ack_timestamp"] = timestamp
            record["end_to_end_duration"] = end_to_end
        record["state_size"] += state_size
        record["checkpointed_size"] += checkpointed_size
        entry = {
            "task": task,
            "ack_timestamp": timestamp,
            "state_size": state_size,
            "checkpointed_size": checkpointed_size,
            "end_to_end_duration": end_to_end,
            "metrics": metrics,
            "finished": finished,
        }
        if not completed:
            entry["aborted"] = True
        self.subtask_stats[checkpoint_id].append(entry)
        return True

    def report_completed_checkpoint(
        self, checkpoint_id: int, completion_timestamp: int, external_path: str | None = None
    ) -> None:
        record = self.history[checkpoint_id]
        if record["status"] != "IN_PROGRESS":
            return
        record["status"] = "COMPLETED"
        self._reported.pop(checkpoint_id, None)
        # Flink's AbstractCheckpointStats.getEndToEndDuration: trigger to the latest acknowledgement; the
        # finalization after it (the metadata write) is not part of it, unlike a failure's (failure - trigger)
        record["external_path"] = external_path
        record["discarded"] = False
        self.counts["in_progress"] -= 1
        self.counts["completed"] += 1

    def report_discarded_checkpoint(self, checkpoint_id: int) -> None:
        """A completed checkpoint of this tracker's was discarded (subsumed, or at the job's end by its retention):
        Flink's ``CompletedCheckpoint.markAsDiscarded`` → ``CompletedCheckpointStats.discard``, REST ``discarded``.
        A checkpoint this tracker did not complete (one a previous JobManager completed) has no record here."""
        record = self.history.get(checkpoint_id)
        if record is not None and record["status"] == "COMPLETED":
            record["discarded"] = True

    def report_failed_checkpoint(
        self, checkpoint_id: int, failure_timestamp: int, reason: CheckpointFailureReason, message: str = ""
    ) -> None:
        record = self.history.get(checkpoint_id)
        if record is None or record["status"] != "IN_PROGRESS":
            return
        record["status"] = "FAILED"  # its reported subtasks stay known: it takes reports that are not completed
        record["failure_timestamp"] = failure_timestamp
        record["failure_reason"] = reason.name
        record["failure_message"] = message or reason.message
        record["end_to_end_duration"] = max(0, failure_timestamp - record["trigger_timestamp"])
        self.counts["in_progress"] -= 1
        self.counts["failed"] += 1

    def report_failed_checkpoint_without_in_progress(self) -> None:
        self.counts["total"] += 1
        self.counts["failed"] += 1

    def report_restored_checkpoint(
        self, checkpoint_id: int, restore_timestamp: int, external_path: str | None, is_savepoint: bool
    ) -> None:
        self.counts["restored"] += 1
        self.latest_restored = {
            "id": checkpoint_id,
            "restore_timestamp": restore_timestamp,
            "is_savepoint": is_savepoint,
            "external_path": external_path,
        }

    def latest_completed(self) -> dict[str, Any] | None:
        done = [r for r in self.history.values() if r["status"] == "COMPLETED"]
        return max(done, key=lambda r: r["id"]) if done else None


def subtask_row(checkpoint_id: int, entry: dict[str, Any]) -> dict[str, Any]:
    """One acknowledgement as a row of the run's subtask statistics (Flink's ``SubtaskStateStats`` as its REST API
    shows it, ``SubtaskCheckpointStatistics``: the end-to-end duration from the checkpoint's trigger to this
    acknowledgement, sync and async durations, alignment, start delay; ``alignment_buffered`` is 0 since Flink
    1.11), and barriersim's ``finished``: True for a task that had finished before the trigger (FLIP-147;
    acknowledged at the trigger, every figure 0, as Flink reports it). A report without an acknowledgement
    (``report_incomplete_stats``) is ``aborted``, as Flink's REST marks a subtask's stats that are not completed,
    with -1 for what it did not know (``checkpoint_async``, ``alignment_persisted``, maybe ``alignment_processed``)."""
    metrics = entry["metrics"]
    task = entry["task"].partition("@")[0]  # ExecutionAttemptID: vertex#index@attempt
    if entry.get("finished"):
        return {
            "id": checkpoint_id,
            "task": task,
            "ack_timestamp": entry["ack_timestamp"],
            "end_to_end_duration": entry["end_to_end_duration"],
            "state_size": 0,
            "checkpointed_size": 0,
            "checkpoint_sync": 0,
            "checkpoint_async": 0,
            "alignment_buffered": 0,
            "alignment_processed": 0,
            "alignment_persisted": 0,
            "alignment_duration": 0,
            "start_delay": 0,
            "unaligned_checkpoint": False,
            "aborted": False,
            "finished": True,
        }
    return {
        "id": checkpoint_id,
        "task": task,
        "ack_timestamp": entry["ack_timestamp"],
        "end_to_end_duration": entry["end_to_end_duration"],
        "state_size": entry["state_size"],
        "checkpointed_size": entry["checkpointed_size"],
        "checkpoint_sync": metrics.sync_duration_ms,
        "checkpoint_async": metrics.async_duration_ms,
        "alignment_buffered": 0,
        "alignment_processed": metrics.bytes_processed_during_alignment or 0,
        "alignment_persisted": metrics.bytes_persisted_during_alignment + metrics.persisted_output_bytes,
        "alignment_duration": metrics.alignment_duration_ms or 0,
        "start_delay": metrics.checkpoint_start_delay_ms,
        "unaligned_checkpoint": metrics.unaligned_checkpoint,
        "aborted": entry.get("aborted", False),
        "finished": False,
    }


def job_statistics(
    trackers: Sequence[CheckpointStatsTracker],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]:
    """A run's statistics over all its coordinators, in order: ``(checkpoints, subtasks, counts)``.

    ``checkpoints``: every checkpoint's record by id, with Flink's per-checkpoint sums of its subtasks' figures
    (``alignment_buffered``, ``processed_data``, ``persisted_data``); ``subtasks``: a row per acknowledgement that
    reached a pending checkpoint, one per task that had finished before the trigger (FLIP-147: Flink reports
    them as acknowledged at the trigger, every figure 0; ``finished`` True), and one per closed asynchronous part
    or late acknowledgement whose figures reached it while pending or failed (``aborted`` True);
    ``counts``: Flink's counts, summed."""
    history: dict[int, dict[str, Any]] = {}
    subtasks: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    for tracker in trackers:
        history.update(tracker.history)
        for checkpoint_id in sorted(tracker.subtask_stats):
            subtasks.extend(
                subtask_row(checkpoint_id, entry)
                for entry in tracker.subtask_stats[checkpoint_id]
                if entry["metrics"] is not None or entry.get("finished")
            )
        for name, n in tracker.counts.items():
            counts[name] = counts.get(name, 0) + n
    sums: dict[int, dict[str, int]] = {}
    for row in subtasks:
        acc = sums.setdefault(row["id"], {"alignment_buffered": 0, "processed_data": 0, "persisted_data": 0})
        # Flink's PendingCheckpointStats adds a subtask's processed and persisted data only when positive (an
        # aborted row's unknown figures are -1)
        acc["alignment_buffered"] += row["alignment_buffered"]
        acc["processed_data"] += max(0, row["alignment_processed"])
        acc["persisted_data"] += max(0, row["alignment_persisted"])
    empty = {"alignment_buffered": 0, "processed_data": 0, "persisted_data": 0}
    checkpoints = [{**record, **sums.get(cid, empty)} for cid, record in sorted(history.items())]
    return checkpoints, subtasks, counts
