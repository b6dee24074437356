"""A thin checkpoint coordinator: periodic triggers, one pending checkpoint at a time, acknowledgements,
completion, expiry, and Flink-named statistics.

How this works: ``SkeletonCoordinator`` is sans-IO. The driver calls ``on_periodic_trigger(now)`` when its
interval timer fires, ``on_acknowledge(...)`` for every task acknowledgement and ``on_task_finished(task)``;
each returns actions (``TriggerCheckpoint`` to send to the source tasks, ``CompleteCheckpoint`` to persist
the metadata and notify every task, ``AbortCheckpoint``). As in Flink with the default max concurrent
checkpoints of 1, a trigger while a checkpoint is pending is skipped, and a checkpoint is only triggered
while every task is running (``NOT_ALL_REQUIRED_TASKS_RUNNING`` otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from barriersim.runtime.events import CheckpointBarrier, CheckpointOptions
from barriersim.runtime.failure_reason import CheckpointFailureReason
from barriersim.runtime.skeleton.task import SubtaskCheckpointMetrics


@dataclass(frozen=True)
class TriggerCheckpoint:
    barrier: CheckpointBarrier


@dataclass(frozen=True)
class CompleteCheckpoint:
    checkpoint_id: int
    acknowledged: dict  # task name -> the handle it acknowledged with


@dataclass(frozen=True)
class AbortCheckpoint:
    checkpoint_id: int
    reason: CheckpointFailureReason


@dataclass
class _Pending:
    checkpoint_id: int
    trigger_timestamp: int
    not_yet_acknowledged: set[str]
    acknowledged: dict[str, Any] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    subtasks: dict[str, dict] = field(default_factory=dict)
    latest_ack_timestamp: int = 0


class SkeletonCoordinator:
    def __init__(self, tasks: list[str], options: CheckpointOptions, timeout_ms: int):
        self.tasks = list(tasks)
        self.options = options
        self.timeout_ms = timeout_ms
        self._next_id = 1
        self._pending: _Pending | None = None
        self._finished: set[str] = set()
        self.checkpoint_stats: list[dict[str, Any]] = []
        self.subtask_stats: list[dict[str, Any]] = []
        self.completed = 0
        self.failed = 0
        self.skipped: dict[str, int] = {}

    def _skip(self, reason: CheckpointFailureReason) -> list:
        self.skipped[reason.name] = self.skipped.get(reason.name, 0) + 1
        return []

    def on_periodic_trigger(self, now: int) -> list:
        if self._pending is not None:
            if now - self._pending.trigger_timestamp >= self.timeout_ms:
                return self._abort(CheckpointFailureReason.CHECKPOINT_EXPIRED, now) + self.on_periodic_trigger(now)
            return self._skip(CheckpointFailureReason.TOO_MANY_CHECKPOINT_REQUESTS)
        if self._finished:
            return self._skip(CheckpointFailureReason.NOT_ALL_REQUIRED_TASKS_RUNNING)
        checkpoint_id = self._next_id
        self._next_id += 1
        self._pending = _Pending(checkpoint_id, now, set(self.tasks))
        return [TriggerCheckpoint(CheckpointBarrier(checkpoint_id, now, self.options))]

    def on_acknowledge(
        self, task: str, checkpoint_id: int, handle: Any, state_size: int, metrics: SubtaskCheckpointMetrics, now: int
    ) -> list:
        """``handle`` is whatever names the task's persisted state (a file and its size on the Ray backend)."""
        pending = self._pending
        if pending is None or pending.checkpoint_id != checkpoint_id or task not in pending.not_yet_acknowledged:
            return []  # late, duplicate or unknown acknowledgement: ignored, as Flink's UNKNOWN/DUPLICATE
        pending.not_yet_acknowledged.discard(task)
        pending.acknowledged[task] = handle
        pending.sizes[task] = state_size
        pending.latest_ack_timestamp = now
        pending.subtasks[task] = {
            "id": checkpoint_id,
            "task": task,
            "ack_timestamp": now,
            "end_to_end_duration": now - pending.trigger_timestamp,
            "state_size": state_size,
            "checkpointed_size": state_size,
            "checkpoint_sync": metrics.sync_duration,
            "checkpoint_async": metrics.async_duration,
            "alignment_buffered": metrics.alignment_buffered,
            "alignment_processed": metrics.alignment_processed,
            "alignment_persisted": metrics.alignment_persisted,
            "alignment_duration": metrics.alignment_duration,
            "start_delay": metrics.start_delay,
            "unaligned_checkpoint": self.options.is_unaligned_checkpoint,
            "aborted": False,
        }
        if pending.not_yet_acknowledged:
            return []
        self._pending = None
        self.completed += 1
        self._record(pending, "COMPLETED", None)
        return [CompleteCheckpoint(checkpoint_id, dict(pending.acknowledged))]

    def on_task_finished(self, task: str, now: int) -> list:
        self._finished.add(task)
        if self._pending is not None and task in self._pending.not_yet_acknowledged:
            # Checkpoints after tasks finish (FLIP-147) arrive with the task-side core; here a checkpoint
            # that can no longer complete is aborted.
            return self._abort(CheckpointFailureReason.CHECKPOINT_DECLINED_INPUT_END_OF_STREAM, now)
        return []

    def _abort(self, reason: CheckpointFailureReason, now: int) -> list:
        pending, self._pending = self._pending, None
        self.failed += 1
        pending.latest_ack_timestamp = pending.latest_ack_timestamp or now
        self._record(pending, "FAILED", reason)
        return [AbortCheckpoint(pending.checkpoint_id, reason)]

    def _record(self, pending: _Pending, status: str, reason: CheckpointFailureReason | None) -> None:
        sizes = list(pending.sizes.values())
        self.checkpoint_stats.append(
            {
                "id": pending.checkpoint_id,
                "status": status,
                "is_savepoint": False,
                "checkpoint_type": "UNALIGNED_CHECKPOINT" if self.options.is_unaligned_checkpoint else "CHECKPOINT",
                "trigger_timestamp": pending.trigger_timestamp,
                "latest_ack_timestamp": pending.latest_ack_timestamp,
                "end_to_end_duration": pending.latest_ack_timestamp - pending.trigger_timestamp,
                "state_size": sum(sizes),
                "checkpointed_size": sum(sizes),
                "alignment_buffered": sum(s["alignment_buffered"] for s in pending.subtasks.values()),
                "processed_data": sum(s["alignment_processed"] for s in pending.subtasks.values()),
                "persisted_data": sum(s["alignment_persisted"] for s in pending.subtasks.values()),
                "num_subtasks": len(self.tasks),
                "num_acknowledged_subtasks": len(pending.acknowledged),
                "failure_reason": reason.name if reason else None,
            }
        )
        self.subtask_stats.extend(pending.subtasks.values())
