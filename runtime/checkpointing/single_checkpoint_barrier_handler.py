"""The exactly-once barrier handler of a task's input: aligned, unaligned, or aligned with a timeout.

How it works: docs/module-notes.md, section ``runtime/checkpointing/single_checkpoint_barrier_handler.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from barriersim.runtime.checkpointing.barrier_alignment_util import AlignmentTimer
from barriersim.runtime.checkpointing.barrier_handler import (
    ActionSink,
    CheckpointBarrierHandler,
    Clock,
    InitInputsCheckpoint,
    ResumeConsumption,
    TimerService,
)
from barriersim.runtime.checkpointing.barrier_handler_state import (
    AlternatingWaitingForFirstBarrier,
    AlternatingWaitingForFirstBarrierUnaligned,
    BarrierHandlerState,
    ChannelState,
    WaitingForFirstBarrier,
)
from barriersim.runtime.events import CancelCheckpointMarker, CheckpointBarrier, InputChannelInfo
from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason
from barriersim.runtime.faults.mutations import PlantedBug, is_planted


class ChannelListener(Protocol):
    """Told after the handler took a barrier or cancellation marker of ``checkpoint_id`` from ``channel_info``, or
    (``checkpoint_id`` None) the channel's end of partition; e.g. ``runtime.sim.alignment_liveness``."""

    def channel_event_taken(self, channel_info: InputChannelInfo, checkpoint_id: int | None) -> None: ...


class SingleCheckpointBarrierHandler(CheckpointBarrierHandler):
    def __init__(
        self,
        task_name: str,
        sink: ActionSink,
        clock: Clock,
        num_open_channels: int,
        initial_state_factory: Callable[[ChannelState], BarrierHandlerState],
        alternating: bool,
        timer_service: TimerService | None = None,
        enable_checkpoint_after_tasks_finished: bool = True,
    ) -> None:
        super().__init__(sink, clock, enable_checkpoint_after_tasks_finished)
        self.task_name = task_name
        self.num_open_channels = num_open_channels
        # Flink's field `alternating`; named apart from the factory method `alternating()`
        self._alternating = alternating
        self._alignment_timer = AlignmentTimer(clock, timer_service)
        self.current_state: BarrierHandlerState = initial_state_factory(ChannelState(self.emit))
        self._controller = _ControllerImpl(self)
        self.aligned_channels: set[InputChannelInfo] = set()
        self.target_channel_count = 0
        self.current_checkpoint_id = -1
        self.last_cancelled_or_completed_checkpoint_id = -1
        self.pending_checkpoint_barrier: CheckpointBarrier | None = None
        self._all_barriers_received_id = -1
        # Flink's allBarriersReceivedFuture of the current checkpoint: done when all barriers arrived, or
        # (after the task was notified) when the checkpoint was aborted
        self._all_barriers_future_done = True
        self._triggered_unaligned: set[int] = set()
        self._listeners: list[ChannelListener] = []

    # -- factories (Flink's static methods) -------------------------------------------------------------

    @classmethod
    def aligned(
        cls,
        task_name: str,
        sink: ActionSink,
        clock: Clock,
        num_open_channels: int,
        timer_service: TimerService | None = None,
        enable_checkpoint_after_tasks_finished: bool = True,
    ) -> SingleCheckpointBarrierHandler:
        return cls(
            task_name,
            sink,
            clock,
            num_open_channels,
            WaitingForFirstBarrier,
            False,
            timer_service,
            enable_checkpoint_after_tasks_finished,
        )

    @classmethod
    def unaligned(
        cls,
        task_name: str,
        sink: ActionSink,
        clock: Clock,
        num_open_channels: int,
        timer_service: TimerService | None = None,
        enable_checkpoint_after_tasks_finished: bool = True,
    ) -> SingleCheckpointBarrierHandler:
        return cls(
            task_name,
            sink,
            clock,
            num_open_channels,
            lambda cs: AlternatingWaitingForFirstBarrierUnaligned(False, cs),
            False,
            timer_service,
            enable_checkpoint_after_tasks_finished,
        )

    @classmethod
    def alternating(
        cls,
        task_name: str,
        sink: ActionSink,
        clock: Clock,
        num_open_channels: int,
        timer_service: TimerService,
        enable_checkpoint_after_tasks_finished: bool = True,
    ) -> SingleCheckpointBarrierHandler:
        return cls(
            task_name,
            sink,
            clock,
            num_open_channels,
            AlternatingWaitingForFirstBarrier,
            True,
            timer_service,
            enable_checkpoint_after_tasks_finished,
        )

    # -- barriers ------------------------------------------------------------------------------------------

    def process_barrier(
        self, barrier: CheckpointBarrier, channel_info: InputChannelInfo, is_rpc_trigger: bool = False
    ) -> None:
        barrier_id = barrier.id
        if self.current_checkpoint_id > barrier_id or (
            self.current_checkpoint_id == barrier_id and not self.is_checkpoint_pending()
        ):
            # obsolete barrier: its channel was blocked upstream after sending it
            if not barrier.options.is_unaligned_checkpoint:
                self.emit_resume(channel_info)
        else:
            self._check_new_checkpoint(barrier)
            assert self.current_checkpoint_id == barrier_id
            self._mark_checkpoint_aligned_and_transform_state(
                channel_info,
                barrier,
                lambda state: state.barrier_received(self._controller, channel_info, barrier, not is_rpc_trigger),
            )
        self._tell_listeners(channel_info, barrier_id)

    def add_listener(self, listener: ChannelListener) -> None:
        """``listener`` hears of every barrier, cancellation marker and end of partition the handler takes."""
        self._listeners.append(listener)

    def _tell_listeners(self, channel_info: InputChannelInfo, checkpoint_id: int | None) -> None:
        for listener in self._listeners:
            listener.channel_event_taken(channel_info, checkpoint_id)

    def emit_resume(self, channel_info: InputChannelInfo) -> None:
        self.emit(ResumeConsumption(channel_info))

    def _mark_checkpoint_aligned_and_transform_state(
        self,
        aligned_channel: InputChannelInfo,
        barrier: CheckpointBarrier,
        transformer: Callable[[BarrierHandlerState], BarrierHandlerState],
    ) -> None:
        self.aligned_channels.add(aligned_channel)
        if len(self.aligned_channels) == 1:
            if self.target_channel_count == 1:
                self.mark_alignment_start_and_end(barrier.id, barrier.timestamp)
            else:
                self.mark_alignment_start(barrier.id, barrier.timestamp)
        # mark the alignment end before the state may trigger the checkpoint
        if len(self.aligned_channels) == self.target_channel_count and self.target_channel_count > 1:
            self.mark_alignment_end()
        try:
            self.current_state = transformer(self.current_state)
        except CheckpointException as e:
            self._abort_internal(self.current_checkpoint_id, e)
        if self.target_channel_count and len(self.aligned_channels) == self.target_channel_count:
            self.aligned_channels.clear()
            self.last_cancelled_or_completed_checkpoint_id = self.current_checkpoint_id
            self._alignment_timer.reset()
            self._complete_all_barriers_received(self.current_checkpoint_id)

    def _complete_all_barriers_received(self, checkpoint_id: int) -> None:
        self._all_barriers_future_done = True
        if self._all_barriers_received_id < checkpoint_id:
            self._all_barriers_received_id = checkpoint_id
            self.notify_all_barriers_received(checkpoint_id, checkpoint_id in self._triggered_unaligned)

    def trigger_checkpoint(self, barrier: CheckpointBarrier) -> None:
        if barrier.options.is_unaligned_checkpoint:
            self._triggered_unaligned.add(barrier.id)
        self.notify_checkpoint(barrier)

    def process_barrier_announcement(
        self, announced_barrier: CheckpointBarrier, sequence_number: int, channel_info: InputChannelInfo
    ) -> None:
        self._check_new_checkpoint(announced_barrier)
        barrier_id = announced_barrier.id
        if self.current_checkpoint_id > barrier_id or (
            self.current_checkpoint_id == barrier_id and not self.is_checkpoint_pending()
        ):
            return  # obsolete announcement
        self.current_state = self.current_state.announcement_received(self._controller, channel_info, sequence_number)

    def _check_new_checkpoint(self, barrier: CheckpointBarrier) -> None:
        barrier_id = barrier.id
        if self.current_checkpoint_id >= barrier_id:
            return  # not the first barrier of this checkpoint
        if self.is_checkpoint_pending():
            self._abort_internal(
                self.current_checkpoint_id, CheckpointException(CheckpointFailureReason.CHECKPOINT_DECLINED_SUBSUMED)
            )
        self.current_checkpoint_id = barrier_id
        self.pending_checkpoint_barrier = barrier
        self.aligned_channels.clear()
        self.target_channel_count = self.num_open_channels
        self._all_barriers_future_done = False
        self._triggered_unaligned = {i for i in self._triggered_unaligned if i >= barrier_id}
        if self._alternating and barrier.options.is_timeoutable:
            self._register_alignment_timer(barrier)

    def _register_alignment_timer(self, announced_barrier: CheckpointBarrier) -> None:
        def on_timeout() -> None:
            barrier_id = announced_barrier.id
            try:
                if self.current_checkpoint_id == barrier_id and not self._all_barriers_future_done:
                    self.current_state = self.current_state.alignment_timeout(self._controller, announced_barrier)
            except CheckpointException as e:
                self._abort_internal(barrier_id, e)

        self._alignment_timer.register(announced_barrier, on_timeout)

    # -- cancellation and end of partition ---------------------------------------------------------------

    def process_cancellation_barrier(self, marker: CancelCheckpointMarker, channel_info: InputChannelInfo) -> None:
        cancelled_id = marker.checkpoint_id
        # with the tester's bug CANCEL_MARKER_IGNORED the alignment goes on until a newer barrier ends it
        if not is_planted(PlantedBug.CANCEL_MARKER_IGNORED) and (
            cancelled_id > self.current_checkpoint_id
            or (cancelled_id == self.current_checkpoint_id and len(self.aligned_channels) > 0)
        ):
            self._abort_internal(
                cancelled_id, CheckpointException(CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER)
            )
        self._tell_listeners(channel_info, cancelled_id)

    def _abort_internal(self, cancelled_id: int, exception: CheckpointException) -> None:
        # with current id = cancelled id and no aligned channels, no barrier of it can start an alignment
        self.current_checkpoint_id = max(cancelled_id, self.current_checkpoint_id)
        self.last_cancelled_or_completed_checkpoint_id = max(
            self.last_cancelled_or_completed_checkpoint_id, cancelled_id
        )
        self.pending_checkpoint_barrier = None
        self.aligned_channels.clear()
        self.target_channel_count = 0
        self._alignment_timer.reset()
        self.current_state = self.current_state.abort(cancelled_id)
        if cancelled_id == self.current_checkpoint_id:
            self.reset_alignment()
        self.notify_abort(cancelled_id, exception)
        self._all_barriers_future_done = True  # completed exceptionally, after the task was told

    def process_end_of_partition(self, channel_info: InputChannelInfo) -> None:
        self.num_open_channels -= 1
        if not self.is_checkpoint_after_tasks_finished_enabled:
            if self.is_checkpoint_pending():
                self._abort_internal(
                    self.current_checkpoint_id,
                    CheckpointException(CheckpointFailureReason.CHECKPOINT_DECLINED_INPUT_END_OF_STREAM),
                )
        elif self.is_checkpoint_pending():
            pending = self.pending_checkpoint_barrier
            if pending is None:
                raise RuntimeError(
                    f"{self.task_name}: checkpoint {self.current_checkpoint_id} pending without a barrier"
                )
            self._mark_checkpoint_aligned_and_transform_state(
                channel_info, pending, lambda state: state.end_of_partition_received(self._controller, channel_info)
            )
        self._tell_listeners(channel_info, None)

    # -- queries --------------------------------------------------------------------------------------------

    def get_latest_checkpoint_id(self) -> int:
        return self.current_checkpoint_id

    def is_checkpoint_pending(self) -> bool:
        return (
            self.current_checkpoint_id != self.last_cancelled_or_completed_checkpoint_id
            and self.current_checkpoint_id >= 0
        )

    def all_barriers_received(self, checkpoint_id: int) -> bool:
        """Flink's ``getAllBarriersReceivedFuture(id).isDone()`` (True also after an abort of that id)."""
        if checkpoint_id < self.current_checkpoint_id or self.num_open_channels == 0:
            return True
        if checkpoint_id > self.current_checkpoint_id:
            raise ValueError(f"{self.task_name}: checkpoint {checkpoint_id} has not been started at all")
        return self._all_barriers_future_done

    def close(self) -> None:
        self._alignment_timer.reset()
        self._all_barriers_future_done = True  # Flink cancels the future: a late timer does nothing

    def __repr__(self) -> str:
        return (
            f"{self.task_name}: current checkpoint: {self.current_checkpoint_id}, current aligned channels: "
            f"{len(self.aligned_channels)}, target channel count: {self.target_channel_count}, "
            f"state: {self.current_state!r}"
        )


class _ControllerImpl:
    def __init__(self, handler: SingleCheckpointBarrierHandler):
        self._h = handler

    def trigger_global_checkpoint(self, barrier: CheckpointBarrier) -> None:
        self._h.trigger_checkpoint(barrier)

    def is_timed_out(self, barrier: CheckpointBarrier) -> bool:
        h = self._h
        return (
            barrier.options.is_timeoutable
            and barrier.id <= h.current_checkpoint_id
            and barrier.options.aligned_checkpoint_timeout < (h.clock() - barrier.timestamp)
        )

    def all_barriers_received(self) -> bool:
        return len(self._h.aligned_channels) == self._h.target_channel_count

    def get_pending_checkpoint_barrier(self) -> CheckpointBarrier | None:
        return self._h.pending_checkpoint_barrier

    def init_inputs_checkpoint(self, barrier: CheckpointBarrier) -> None:
        self._h.emit(InitInputsCheckpoint(barrier.id, barrier.options))
