"""What the coordinator's checkpoint RPCs do in a subtask: a trigger (a source's checkpoint, or FLIP-147's for a task
whose inputs finished), the driver's completion of an asynchronous part, and the notifications of a completed or
aborted checkpoint.

How this works: ``TaskCheckpointRpcs`` is the part of ``runtime.task.stream_task.StreamTask`` (a base class of it,
sharing its state: the operator, the input side, the checkpoint steps, the outgoing actions) that Flink's
``StreamTask.triggerCheckpointAsync`` / ``triggerCheckpointAsyncInMailbox``, ``notifyCheckpointCompleteAsync`` and
``notifyCheckpointAbortAsync`` are, with ``Task.triggerCheckpointBarrier``'s decline for a task that is not running.
A trigger on a source runs the checkpoint at once (its start delay is the RPC's arrival less the checkpoint's
timestamp); on a task whose upstream finished (``triggerUnfinishedChannelsCheckpoint``) the barrier enters the
barrier handler on every channel whose end of partition was not consumed yet, once the data before it was
consumed. A completed checkpoint's notice is what ends a synchronous savepoint or FLIP-147's final checkpoint; an
aborted synchronous savepoint fails the task.
"""

from __future__ import annotations

from barriersim.runtime.checkpointing.barrier_handler import CheckpointMetrics
from barriersim.runtime.events import CheckpointBarrier, CheckpointOptions
from barriersim.runtime.failure_reason import CheckpointFailureReason
from barriersim.runtime.task.actions import AsyncPart, DeclineCheckpoint, TaskFailed
from barriersim.runtime.task.crash_points import TaskCrashed


class TaskCheckpointRpcs:
    """The coordinator's checkpoint RPCs of ``StreamTask`` (a part of it, not used alone)."""

    def trigger_checkpoint(self, checkpoint_id: int, timestamp: int, options: CheckpointOptions) -> None:
        """A checkpoint triggered by the coordinator (Flink's ``triggerCheckpointAsync``): a source's, or, after
        its upstream tasks finished (FLIP-147), a downstream task's. Like Flink's
        ``triggerUnfinishedChannelsCheckpoint``, the barrier then enters the barrier handler on every channel
        whose end of partition was not consumed yet; with no such channel the task checkpoints at once, its
        inputs complete. A task that has finished declines, as Flink's ``Task.triggerCheckpointBarrier`` does for a
        task that is not running."""
        try:
            self._trigger_checkpoint(checkpoint_id, timestamp, options)
        except TaskCrashed as crash:
            self._crashed(crash)

    def _trigger_checkpoint(self, checkpoint_id: int, timestamp: int, options: CheckpointOptions) -> None:
        if self.finished:
            self._actions.append(DeclineCheckpoint(
                checkpoint_id, CheckpointFailureReason.CHECKPOINT_DECLINED_TASK_NOT_READY, f"{self.name} has finished"))
            return
        # a checkpoint injected by the trigger RPC (a source's, or a task's whose inputs all finished) starts when
        # the RPC arrives and aligns nothing (Flink's StreamTask.triggerCheckpointAsyncInMailbox:
        # latestAsyncCheckpointStartDelayNanos)
        metrics = CheckpointMetrics(checkpoint_id, checkpoint_start_delay_ms=max(0, self._clock() - timestamp))
        if self.input_side is None:
            if options.checkpoint_type.is_synchronous:
                self._end.stop_source_for_savepoint(checkpoint_id, options.checkpoint_type.should_drain)
            self._carry_out(self.checkpoints.checkpoint_state(checkpoint_id, timestamp, options, metrics))
            return
        if self._network_input.trigger_unfinished_channels_checkpoint(
                CheckpointBarrier(checkpoint_id, timestamp, options)):
            if self._crash_mid_alignment:
                self._check_mid_alignment()
            return
        self._carry_out(self.checkpoints.init_inputs_checkpoint(checkpoint_id, options))
        self._carry_out(self.checkpoints.checkpoint_state(checkpoint_id, timestamp, options, metrics,
                                                          is_running=not self._network_input.is_recovering_rescaled_state))
        self._carry_out(self.checkpoints.on_all_barriers_received(checkpoint_id, metrics))

    def complete_async_part(self, checkpoint_id: int, part: AsyncPart = AsyncPart.SNAPSHOT) -> None:
        """The driver finished ``part`` of ``checkpoint_id`` (an ``AsyncCheckpointStarted`` it was given): the
        acknowledgement may follow. Nothing happens for a task that failed meanwhile."""
        if self.failed:
            return
        self._carry_out(self.checkpoints.complete_async_part(checkpoint_id, part))

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        if self.failed:
            return
        self._carry_out(self.checkpoints.notify_checkpoint_complete(checkpoint_id))
        self.operator.notify_checkpoint_complete(checkpoint_id)
        self._completed_checkpoints_notified += 1
        self._end.notify_checkpoint_complete(checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int, latest_completed_checkpoint_id: int) -> None:
        if self.failed:
            return
        self._carry_out(self.checkpoints.notify_checkpoint_aborted(checkpoint_id, latest_completed_checkpoint_id))
        self.operator.notify_checkpoint_aborted(checkpoint_id)
        if self._end.is_synchronous_savepoint(checkpoint_id):
            # Flink's StreamTask: a task that stopped for a synchronous savepoint cannot go on without it
            self._actions.extend(self.fail())  # Flink's failing task closes its asynchronous parts too
            self._actions.append(TaskFailed(f"{self.name}: Stop-with-savepoint failed (savepoint {checkpoint_id} "
                                            f"was aborted)"))
