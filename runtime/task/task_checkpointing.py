"""A running task's side of checkpoints, Flink's ``CheckpointableTask`` as ``StreamTask`` implements it: the
coordinator's trigger (``triggerCheckpointAsync``), the barrier handler's actions (``triggerCheckpointOnBarrier``,
``abortCheckpointOnBarrier``, ...), the driver's completed asynchronous parts and the notices of completed and
aborted checkpoints, carried out by the ``SubtaskCheckpointCoordinator``; what of its actions leaves the task
(acknowledgements, declines, snapshot timings) goes to the task's outbox. The task keeps what concerns it as a whole
(a finished task declines, a failed one ignores, a failed savepoint fails it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from barriersim.runtime.checkpointing.barrier_handler import (
    AbortCheckpointOnBarrier,
    AllBarriersReceived,
    CheckpointMetrics,
    InitInputsCheckpoint,
    TriggerCheckpointOnBarrier,
)
from barriersim.runtime.events import CheckpointBarrier, CheckpointOptions
from barriersim.runtime.failure_reason import CheckpointFailureReason
from barriersim.runtime.network.input.channel_state_persister import AddInputData
from barriersim.runtime.operators.factory import SubtaskOperator
from barriersim.runtime.task.actions import (
    AcknowledgeCheckpoint,
    AsyncCheckpointStarted,
    AsyncPart,
    DeclineCheckpoint,
    SyncSnapshotTaken,
)
from barriersim.runtime.task.end_of_data import TaskEndOfData
from barriersim.runtime.task.network_input import StreamTaskNetworkInput
from barriersim.runtime.task.subtask_checkpoint_coordinator import SubtaskCheckpointCoordinator

_LEAVING_THE_TASK = (AcknowledgeCheckpoint, DeclineCheckpoint, SyncSnapshotTaken, AsyncCheckpointStarted)


class TaskCheckpointing:
    def __init__(
        self,
        checkpoints: SubtaskCheckpointCoordinator,
        end: TaskEndOfData,
        operator: SubtaskOperator,
        network_input: StreamTaskNetworkInput | None,
        task_name: str,
        clock: Callable[[], int],
        send: Callable[[Any], None],
        source_min_checkpoints: int,
    ) -> None:
        """``network_input``: a downstream task's input (None for a source); ``send``: the task's outbox;
        ``source_min_checkpoints``: the completed checkpoints a source's end of input waits for."""
        self._checkpoints = checkpoints
        self._end = end
        self._operator = operator
        self._network_input = network_input
        self._task_name = task_name
        self._clock = clock
        self._send = send
        self._source_min_checkpoints = source_min_checkpoints
        self.completed_checkpoints_notified = 0

    def trigger(self, checkpoint_id: int, timestamp: int, options: CheckpointOptions, *, task_finished: bool) -> bool:
        """A checkpoint triggered by the coordinator (Flink's ``triggerCheckpointAsync``): a source's, or, after
        its upstream tasks finished (FLIP-147), a downstream task's. Like Flink's
        ``triggerUnfinishedChannelsCheckpoint``, the barrier then enters the barrier handler on every channel
        whose end of partition was not consumed yet (True: an alignment may have started); with no such channel the
        task checkpoints at once, its inputs complete. A task that has finished declines, as Flink's
        ``Task.triggerCheckpointBarrier`` does for a task that is not running."""
        if task_finished:
            reason = CheckpointFailureReason.CHECKPOINT_DECLINED_TASK_NOT_READY
            self._send(DeclineCheckpoint(checkpoint_id, reason, f"{self._task_name} has finished"))
            return False
        # a checkpoint injected by the trigger RPC (a source's, or a task's whose inputs all finished) starts when
        # the RPC arrives and aligns nothing (Flink's StreamTask.triggerCheckpointAsyncInMailbox:
        # latestAsyncCheckpointStartDelayNanos)
        checkpoints = self._checkpoints
        metrics = CheckpointMetrics(checkpoint_id, checkpoint_start_delay_ms=max(0, self._clock() - timestamp))
        network_input = self._network_input
        if network_input is None:
            if options.checkpoint_type.is_synchronous:
                self._end.stop_source_for_savepoint(checkpoint_id, options.checkpoint_type.should_drain)
            self.carry_out(checkpoints.checkpoint_state(checkpoint_id, timestamp, options, metrics))
            return False
        if network_input.trigger_unfinished_channels_checkpoint(CheckpointBarrier(checkpoint_id, timestamp, options)):
            return True
        self.carry_out(checkpoints.init_inputs_checkpoint(checkpoint_id, options))
        recovering = network_input.is_recovering_rescaled_state
        self.carry_out(
            checkpoints.checkpoint_state(checkpoint_id, timestamp, options, metrics, is_running=not recovering)
        )
        self.carry_out(checkpoints.on_all_barriers_received(checkpoint_id, metrics))
        return False

    def on_input_action(self, action: Any) -> None:
        """What the barrier handler and the channel state persister ask of the task (its messages for upstream
        tasks go to the outbox directly)."""
        if isinstance(action, TriggerCheckpointOnBarrier):
            if action.options.checkpoint_type.is_synchronous:
                self._end.on_synchronous_savepoint(action.checkpoint_id)
            recovering = self._network_input is not None and self._network_input.is_recovering_rescaled_state
            self.carry_out(
                self._checkpoints.checkpoint_state(
                    action.checkpoint_id, action.timestamp, action.options, action.metrics, is_running=not recovering
                )
            )
        elif isinstance(action, InitInputsCheckpoint):
            self.carry_out(self._checkpoints.init_inputs_checkpoint(action.checkpoint_id, action.options))
        elif isinstance(action, AddInputData):
            if not self._checkpoints.channel_state_writer_is_aborted(action.checkpoint_id):
                self._checkpoints.channel_state_writer.add_input_data(
                    action.checkpoint_id, action.channel_info, -1, action.buffers
                )
        elif isinstance(action, AllBarriersReceived):
            self.carry_out(self._checkpoints.on_all_barriers_received(action.checkpoint_id, action.metrics))
        elif isinstance(action, AbortCheckpointOnBarrier):
            self.carry_out(self._checkpoints.abort_checkpoint_on_barrier(action.checkpoint_id, action.reason))
        # gate actions (block, resume, priority conversion) were applied by the input side already

    def complete_async_part(self, checkpoint_id: int, part: AsyncPart) -> None:
        self.carry_out(self._checkpoints.complete_async_part(checkpoint_id, part))

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.carry_out(self._checkpoints.notify_checkpoint_complete(checkpoint_id))
        self._operator.notify_checkpoint_complete(checkpoint_id)
        self.completed_checkpoints_notified += 1
        self._end.notify_checkpoint_complete(checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int, latest_completed_checkpoint_id: int) -> bool:
        """True if the aborted checkpoint is the synchronous savepoint the task stopped for (it must fail)."""
        self.carry_out(self._checkpoints.notify_checkpoint_aborted(checkpoint_id, latest_completed_checkpoint_id))
        self._operator.notify_checkpoint_aborted(checkpoint_id)
        return self._end.is_synchronous_savepoint(checkpoint_id)

    def notify_output_progress(self) -> None:
        """The partitions handed out something: a timeoutable aligned barrier that left its last partition
        finishes its checkpoint's output side (``SubtaskCheckpointCoordinator.notify_output_progress``)."""
        if self._checkpoints.waits_for_output:
            self.carry_out(self._checkpoints.notify_output_progress())

    def holds_source_end(self) -> bool:
        """Whether a source at the end of its splits still holds its end of input: it was notified of fewer
        completed checkpoints than ``source_min_checkpoints`` (Flink's ``UnalignedCheckpointTestBase.LongSource``)."""
        return self.completed_checkpoints_notified < self._source_min_checkpoints

    def carry_out(self, actions: list[Any]) -> None:
        """The checkpoint steps' actions: those for the driver go to the outbox. BroadcastEvent, CheckpointSkipped:
        the partitions already hold the event; the driver sends what they hand out."""
        for action in actions:
            if isinstance(action, _LEAVING_THE_TASK):
                self._send(action)
