"""One checkpoint of a subtask from the end of its synchronous part to its acknowledgement: Flink's
``AsyncCheckpointRunnable``. It holds the snapshot, the channel state's write result and the figures measured so far,
and builds the ``AcknowledgeCheckpoint`` (or ``DeclineCheckpoint``) once its parts are done, or the report of a part
a cancelled task closed (``runtime.task.incomplete_stats``).
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass

from barriersim.runtime.channel_state.writer import ChannelStateWriteResult
from barriersim.runtime.checkpoint_cost import CostCharger
from barriersim.runtime.checkpointing.barrier_handler import CheckpointMetrics
from barriersim.runtime.events import CheckpointOptions
from barriersim.runtime.failure_reason import CheckpointFailureReason
from barriersim.runtime.faults.mutations import PlantedBug, is_planted
from barriersim.runtime.ids import OperatorID
from barriersim.runtime.state.snapshot import OperatorSubtaskState, TaskStateSnapshot
from barriersim.runtime.task.actions import (
    AcknowledgeCheckpoint,
    AsyncCheckpointStarted,
    AsyncPart,
    DeclineCheckpoint,
    ReportIncompleteSnapshotStats,
    TaskCheckpointMetrics,
)
from barriersim.runtime.task.incomplete_stats import build_incomplete


class ChannelStateWrite(enum.Enum):
    """Where a pending checkpoint's channel-state write stands (DRIVER mode)."""

    NONE = "NONE"  # nothing to write, or not known yet
    RUNNING = "RUNNING"  # handed to the driver, which completes it
    DONE = "DONE"


@dataclass
class AsyncCheckpointRunnable:
    checkpoint_id: int
    options: CheckpointOptions
    operator_state: OperatorSubtaskState
    channel_state: ChannelStateWriteResult | None
    input_metrics: CheckpointMetrics | None
    sync_duration_ms: float
    async_start_ms: float
    is_task_finished: bool
    waiting_for_output: bool = False  # a timeoutable barrier of it is still queued in a partition
    async_done: bool = False
    channel_state_write: ChannelStateWrite = ChannelStateWrite.NONE

    def start_channel_state_write(self, cost: CostCharger, memory_threshold: int) -> AsyncCheckpointStarted | None:
        """Once the channel state is complete, hand its write to the driver (the channel-state writer's thread
        writes it while the asynchronous part uploads the snapshot), if the checkpoint persisted in-flight data (a
        subtask whose channels held nothing, or an aligned one whose alignment never timed out, writes nothing)."""
        result = self.channel_state
        if result is None or not result.is_done() or self.channel_state_write is not ChannelStateWrite.NONE:
            return None
        if (
            result.input_channel_state_handles.is_completed_exceptionally()
            or result.result_subpartition_state_handles.is_completed_exceptionally()
        ):
            return None
        persisted = result.persisted_input_bytes + result.persisted_output_bytes
        if persisted == 0:  # nothing in flight was persisted: the writer has nothing to write
            self.channel_state_write = ChannelStateWrite.DONE
            return None
        self.channel_state_write = ChannelStateWrite.RUNNING
        files = 1 if persisted >= memory_threshold and persisted > 0 else 0
        delay = cost.channel_state_ms(persisted, files)
        return AsyncCheckpointStarted(self.checkpoint_id, persisted, AsyncPart.CHANNEL_STATE, delay)

    def complete_part(self, part: AsyncPart) -> None:
        """The driver finished ``part`` (an ``AsyncCheckpointStarted`` it was given)."""
        if part is AsyncPart.SNAPSHOT:
            self.async_done = True
        elif self.channel_state_write is ChannelStateWrite.RUNNING:
            self.channel_state_write = ChannelStateWrite.DONE

    @property
    def is_done(self) -> bool:
        """The asynchronous part, the channel state and its write are done: it may acknowledge."""
        result = self.channel_state
        return (
            self.async_done
            and (result is None or result.is_done())
            and self.channel_state_write is not ChannelStateWrite.RUNNING
        )

    def failure(self) -> DeclineCheckpoint | None:
        """The decline of a done checkpoint whose channel state could not be written, else None."""
        result = self.channel_state
        if result is not None and (
            result.input_channel_state_handles.is_completed_exceptionally()
            or result.result_subpartition_state_handles.is_completed_exceptionally()
        ):
            error = result.input_channel_state_handles.exception or result.result_subpartition_state_handles.exception
            return DeclineCheckpoint(
                self.checkpoint_id, CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION, repr(error)
            )
        return None

    def acknowledgement(
        self, operator_id: OperatorID, final_input_metrics: CheckpointMetrics | None, now_ms: float
    ) -> AcknowledgeCheckpoint:
        """The acknowledgement of a done checkpoint: the operator state with the channel state handles, and the
        metrics (the alignment's final figures if every barrier arrived after the trigger)."""
        result = self.channel_state
        state = self.operator_state
        if result is not None:
            state = dataclasses.replace(
                state,
                input_channel_state=state.input_channel_state + result.input_channel_state_handles.result(),
                result_subpartition_state=state.result_subpartition_state
                + result.result_subpartition_state_handles.result(),
            )
        snapshot = TaskStateSnapshot({operator_id: state}, is_task_finished=self.is_task_finished)
        m = final_input_metrics or self.input_metrics
        persisted_input = result.persisted_input_bytes if result else 0
        persisted_output = result.persisted_output_bytes if result else 0
        metrics = TaskCheckpointMetrics(
            self.checkpoint_id,
            sync_duration_ms=round(self.sync_duration_ms),
            async_duration_ms=max(0, round(now_ms - self.async_start_ms)),
            alignment_duration_ms=(m.alignment_duration_ms or 0) if m else 0,
            checkpoint_start_delay_ms=m.checkpoint_start_delay_ms if m else 0,
            bytes_processed_during_alignment=(m.bytes_processed_during_alignment or 0) if m else 0,
            bytes_persisted_during_alignment=persisted_input,
            persisted_output_bytes=persisted_output,
            total_bytes_persisted=state.state_size,
            # Flink's CheckpointMetricsBuilder.build (FLINK-31588, since 1.16): unaligned if the subtask persisted
            # in-flight data, its input channels' and output subpartitions' state together (AsyncCheckpointRunnable.
            # finalizeNonFinishedSnapshots), whatever the options: an unaligned checkpoint with nothing in flight
            # reports false, a timeoutable one whose barrier timed out in the output reports true
            unaligned_checkpoint=(
                self.options.is_unaligned_checkpoint  # planted: FLINK-31588's type from the options
                if is_planted(PlantedBug.UNALIGNED_FLAG_FROM_OPTIONS)
                else persisted_input + persisted_output > 0
            ),
        )
        return AcknowledgeCheckpoint(self.checkpoint_id, snapshot, metrics)

    def report_incomplete(self, final_input_metrics: CheckpointMetrics | None) -> ReportIncompleteSnapshotStats:
        """What it reports when its task's cancellation closes it (``AsyncCheckpointRunnable.close``)."""
        return build_incomplete(
            self.checkpoint_id,
            self.sync_duration_ms,
            final_input_metrics or self.input_metrics,
            self.operator_state if self.async_done else None,
        )
