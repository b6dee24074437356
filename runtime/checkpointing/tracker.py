"""The at-least-once barrier handler: counts barriers per checkpoint and never blocks a channel.

Mirrors Flink's ``CheckpointBarrierTracker`` (with its inner ``CheckpointBarrierCount``). See docs/data-plane.md,
"The at-least-once tracker".
"""

from __future__ import annotations

from collections import deque

from barriersim.runtime.checkpointing.barrier_handler import ActionSink, CheckpointBarrierHandler, Clock
from barriersim.runtime.events import CancelCheckpointMarker, CheckpointBarrier, InputChannelInfo
from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason
from barriersim.runtime.faults.mutations import PlantedBug, is_planted

MAX_CHECKPOINTS_TO_TRACK = 50


class CheckpointBarrierCount:
    """A checkpoint id with the channels that delivered its barrier (Flink's inner class)."""

    def __init__(
        self,
        checkpoint_id: int,
        channel_info: InputChannelInfo,
        target_channel_count: int,
        pending_checkpoint: CheckpointBarrier | None,
    ) -> None:
        self.checkpoint_id = checkpoint_id
        self.target_channel_count = target_channel_count
        self.pending_checkpoint = pending_checkpoint  # None for a checkpoint first seen as a cancel marker
        self.aligned_channels: set[InputChannelInfo] = {channel_info}
        self.aborted = False

    def mark_channel_aligned(self, channel_info: InputChannelInfo) -> int:
        self.aligned_channels.add(channel_info)
        return len(self.aligned_channels)

    def mark_aborted(self) -> bool:
        """Marks the checkpoint aborted; True the first time."""
        first = not self.aborted
        self.aborted = True
        return first

    def __repr__(self) -> str:
        if self.aborted:
            return f"checkpointID={self.checkpoint_id} - ABORTED"
        return (
            f"checkpointID={self.checkpoint_id}, count={len(self.aligned_channels)}, "
            f"targetChannelCount={self.target_channel_count}"
        )


class CheckpointBarrierTracker(CheckpointBarrierHandler):
    def __init__(
        self,
        total_number_of_input_channels: int,
        sink: ActionSink,
        clock: Clock,
        enable_checkpoint_after_tasks_finished: bool = True,
    ) -> None:
        super().__init__(sink, clock, enable_checkpoint_after_tasks_finished)
        if total_number_of_input_channels <= 0:
            raise ValueError(
                f"a barrier tracker needs at least one input channel, got {total_number_of_input_channels}"
            )
        self._num_open_channels = total_number_of_input_channels
        self._pending: deque[CheckpointBarrierCount] = deque()
        self._latest_pending_checkpoint_id = -1

    # -- barriers ------------------------------------------------------------------------------------

    def process_barrier(
        self, barrier: CheckpointBarrier, channel_info: InputChannelInfo, is_rpc_trigger: bool = False
    ) -> None:
        barrier_id = barrier.id
        # fast path for a single open channel, only for new checkpoints (a pending one may wait for a
        # channel that finished meanwhile, and must be completed by the general path)
        single = self._num_open_channels == 1 or is_planted(PlantedBug.TRACKER_TRIGGERS_ON_FIRST_BARRIER)
        if barrier_id > self._latest_pending_checkpoint_id and single:
            self.mark_alignment_start_and_end(barrier_id, barrier.timestamp)
            self._notify(barrier)
            return

        pos, count = self._find(barrier_id)
        if count is not None:
            if count.mark_channel_aligned(channel_info) == count.target_channel_count:
                for _ in range(pos + 1):  # this one and every older (subsumed) one
                    self._pending.popleft()
                if not count.aborted:
                    self._trigger_checkpoint_on_aligned(count)
        elif barrier_id > self._latest_pending_checkpoint_id:
            # first barrier of a newer checkpoint; an older unknown one can never complete anyway
            self.mark_alignment_start(barrier_id, barrier.timestamp)
            self._latest_pending_checkpoint_id = barrier_id
            self._pending.append(CheckpointBarrierCount(barrier_id, channel_info, self._num_open_channels, barrier))
            if len(self._pending) > MAX_CHECKPOINTS_TO_TRACK:
                self._pending.popleft()

    def process_barrier_announcement(
        self, announced_barrier: CheckpointBarrier, sequence_number: int, channel_info: InputChannelInfo
    ) -> None:
        """Announcements are ignored: the tracker never switches to unaligned."""

    def _find(self, checkpoint_id: int) -> tuple[int, CheckpointBarrierCount | None]:
        for pos, count in enumerate(self._pending):
            if count.checkpoint_id == checkpoint_id:
                return pos, count
        return -1, None

    def _trigger_checkpoint_on_aligned(self, count: CheckpointBarrierCount) -> None:
        # only one alignment time is measured at a time: the newest checkpoint's
        if count.checkpoint_id == self._latest_pending_checkpoint_id:
            self.mark_alignment_end()
        if count.pending_checkpoint is None:
            raise AssertionError(f"checkpoint {count.checkpoint_id}: a non-aborted pending checkpoint has no barrier")
        self._notify(count.pending_checkpoint)

    def _notify(self, barrier: CheckpointBarrier) -> None:
        self.notify_checkpoint(barrier)
        self.notify_all_barriers_received(barrier.id, barrier.options.is_unaligned_checkpoint)

    # -- cancel markers -----------------------------------------------------------------------------

    def process_cancellation_barrier(self, marker: CancelCheckpointMarker, channel_info: InputChannelInfo) -> None:
        checkpoint_id = marker.checkpoint_id
        if checkpoint_id > self._latest_pending_checkpoint_id and self._num_open_channels == 1:
            self.reset_alignment()
            self.notify_abort_on_cancellation_barrier(checkpoint_id)
            return

        # abort (once) and drop every pending checkpoint older than this one
        while self._pending and self._pending[0].checkpoint_id < checkpoint_id:
            older = self._pending.popleft()
            if older.mark_aborted():
                self.notify_abort_on_cancellation_barrier(older.checkpoint_id)

        head = self._pending[0] if self._pending else None
        if head is not None and head.checkpoint_id == checkpoint_id:
            if head.mark_aborted():
                self.notify_abort_on_cancellation_barrier(checkpoint_id)
            # keep counting so the entry goes once all its barriers (or markers) were seen
            if head.mark_channel_aligned(channel_info) == head.target_channel_count:
                self._pending.popleft()
        elif checkpoint_id > self._latest_pending_checkpoint_id:
            self.notify_abort_on_cancellation_barrier(checkpoint_id)
            self._latest_pending_checkpoint_id = checkpoint_id
            marker_count = CheckpointBarrierCount(checkpoint_id, channel_info, self._num_open_channels, None)
            marker_count.mark_aborted()
            self._pending.appendleft(marker_count)
        # else: a trailing marker of a checkpoint already aborted or completed

    # -- end of partition ---------------------------------------------------------------------------

    def process_end_of_partition(self, channel_info: InputChannelInfo) -> None:
        self._num_open_channels -= 1
        if not self.is_checkpoint_after_tasks_finished_enabled:
            while self._pending:
                count = self._pending.popleft()
                if count.mark_aborted():
                    self.notify_abort(
                        count.checkpoint_id,
                        CheckpointException(CheckpointFailureReason.CHECKPOINT_DECLINED_INPUT_END_OF_STREAM),
                    )
            self.reset_alignment()
            return
        # the newest pending checkpoint that waited only for this channel completes
        completed_pos, completed = -1, None
        for pos in range(len(self._pending) - 1, -1, -1):
            count = self._pending[pos]
            if count.mark_channel_aligned(channel_info) == count.target_channel_count:
                completed_pos, completed = pos, count
                break
        if completed is not None:
            for _ in range(completed_pos + 1):
                self._pending.popleft()
            if not completed.aborted:
                self._trigger_checkpoint_on_aligned(completed)

    # -- queries ------------------------------------------------------------------------------------

    def get_latest_checkpoint_id(self) -> int:
        return self._pending[-1].checkpoint_id if self._pending else -1

    def is_checkpoint_pending(self) -> bool:
        return bool(self._pending)

    def get_num_open_channels(self) -> int:
        return self._num_open_channels

    def get_pending_checkpoint_ids(self) -> list[int]:
        return [c.checkpoint_id for c in self._pending]
