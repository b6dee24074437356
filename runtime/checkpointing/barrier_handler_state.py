"""The states of ``SingleCheckpointBarrierHandler``: what happens on a barrier, an announcement, the alignment
timeout, end of partition and abort depends only on the state, and each reaction returns the next state. A state
talks to its handler only through ``Controller``.

Mirrors Flink's ``BarrierHandlerState`` and its implementations (``WaitingForFirstBarrier``,
``CollectingBarriers``, the ``Alternating*`` states) and ``ChannelState``. See docs/data-plane.md, "The states of
the exactly-once handler".
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Protocol

from barriersim.runtime.checkpointing.barrier_handler import (
    BlockConsumption,
    CheckpointStarted,
    CheckpointStopped,
    ConvertToPriorityEvent,
    GateAction,
    ResumeConsumption,
)
from barriersim.runtime.events import CheckpointBarrier, InputChannelInfo
from barriersim.runtime.faults.mutations import PlantedBug, is_planted


class IllegalBarrierHandlerStateError(Exception):
    """An event the current state cannot take (a Flink ``IllegalStateException``)."""


class Controller(Protocol):
    def trigger_global_checkpoint(self, barrier: CheckpointBarrier) -> None: ...

    def is_timed_out(self, barrier: CheckpointBarrier) -> bool: ...

    def all_barriers_received(self) -> bool: ...

    def get_pending_checkpoint_barrier(self) -> CheckpointBarrier | None: ...

    def init_inputs_checkpoint(self, barrier: CheckpointBarrier) -> None: ...


class ChannelState:
    """Blocked channels and seen announcements (channel -> sequence number) of the current checkpoint."""

    def __init__(self, emit: Callable[[GateAction], None]) -> None:
        self._emit = emit
        self.blocked_channels: set[InputChannelInfo] = set()
        self.sequence_number_in_announced_channels: dict[InputChannelInfo, int] = {}

    def block_channel(self, channel_info: InputChannelInfo) -> None:
        self._emit(BlockConsumption(channel_info))
        self.blocked_channels.add(channel_info)

    def channel_finished(self, channel_info: InputChannelInfo) -> None:
        self.blocked_channels.discard(channel_info)
        self.sequence_number_in_announced_channels.pop(channel_info, None)

    def prioritize_all_announcements(self) -> None:
        for info, seq in sorted(self.sequence_number_in_announced_channels.items()):
            self._emit(ConvertToPriorityEvent(info, seq))
        self.sequence_number_in_announced_channels.clear()

    def unblock_all_channels(self) -> None:
        for info in sorted(self.blocked_channels):
            self._emit(ResumeConsumption(info))
        self.blocked_channels.clear()

    def add_seen_announcement(self, channel_info: InputChannelInfo, sequence_number: int) -> None:
        self.sequence_number_in_announced_channels[channel_info] = sequence_number

    def remove_seen_announcement(self, channel_info: InputChannelInfo) -> None:
        self.sequence_number_in_announced_channels.pop(channel_info, None)

    def checkpoint_started(self, barrier: CheckpointBarrier) -> None:
        self._emit(CheckpointStarted(barrier))

    def checkpoint_stopped(self, checkpoint_id: int) -> None:
        self._emit(CheckpointStopped(checkpoint_id))

    def convert_to_priority_event(self, channel_info: InputChannelInfo, sequence_number: int) -> None:
        self._emit(ConvertToPriorityEvent(channel_info, sequence_number))

    def empty_state(self) -> ChannelState:
        """Flink's ``emptyState``: no channel may still be blocked; seen announcements are forgotten."""
        if self.blocked_channels:
            raise IllegalBarrierHandlerStateError(
                f"reset to an empty channel state with blocked channels {sorted(self.blocked_channels)}"
            )
        self.sequence_number_in_announced_channels.clear()
        return self


class BarrierHandlerState(abc.ABC):
    """Flink's ``BarrierHandlerState``."""

    def __init__(self, state: ChannelState) -> None:
        self.state = state

    @property
    def name(self) -> str:
        return type(self).__name__

    @abc.abstractmethod
    def alignment_timeout(self, controller: Controller, barrier: CheckpointBarrier) -> BarrierHandlerState: ...

    @abc.abstractmethod
    def announcement_received(
        self, controller: Controller, channel_info: InputChannelInfo, sequence_number: int
    ) -> BarrierHandlerState: ...

    @abc.abstractmethod
    def barrier_received(
        self,
        controller: Controller,
        channel_info: InputChannelInfo,
        barrier: CheckpointBarrier,
        mark_channel_blocked: bool,
    ) -> BarrierHandlerState: ...

    @abc.abstractmethod
    def abort(self, cancelled_id: int) -> BarrierHandlerState: ...

    @abc.abstractmethod
    def end_of_partition_received(
        self, controller: Controller, channel_info: InputChannelInfo
    ) -> BarrierHandlerState: ...

    def __repr__(self) -> str:
        return self.name


# -- aligned ------------------------------------------------------------------------------------------------


class AbstractAlignedBarrierHandlerState(BarrierHandlerState):
    def alignment_timeout(self, controller: Controller, barrier: CheckpointBarrier) -> BarrierHandlerState:
        raise IllegalBarrierHandlerStateError(
            f"alignment timeout of checkpoint {barrier.id} in state {self.name}: aligned checkpoints never time out"
        )

    def announcement_received(
        self, controller: Controller, channel_info: InputChannelInfo, sequence_number: int
    ) -> BarrierHandlerState:
        return self

    def barrier_received(
        self,
        controller: Controller,
        channel_info: InputChannelInfo,
        barrier: CheckpointBarrier,
        mark_channel_blocked: bool,
    ) -> BarrierHandlerState:
        if barrier.options.is_unaligned_checkpoint:
            raise IllegalBarrierHandlerStateError(
                f"unaligned barrier of checkpoint {barrier.id} from {channel_info} in state {self.name}"
            )
        if mark_channel_blocked:
            self.state.block_channel(channel_info)
        if controller.all_barriers_received():
            return self._trigger_global_checkpoint(controller, barrier)
        return self._convert_after_barrier_received()

    def _trigger_global_checkpoint(self, controller: Controller, barrier: CheckpointBarrier) -> BarrierHandlerState:
        controller.trigger_global_checkpoint(barrier)
        self.state.unblock_all_channels()
        return WaitingForFirstBarrier(self.state.empty_state())

    def abort(self, cancelled_id: int) -> BarrierHandlerState:
        if not is_planted(PlantedBug.CHANNELS_NOT_UNBLOCKED_ON_CANCEL):
            self.state.unblock_all_channels()
        return WaitingForFirstBarrier(self.state.empty_state())

    @abc.abstractmethod
    def _convert_after_barrier_received(self) -> BarrierHandlerState: ...


def _pending_barrier(controller: Controller, state_name: str) -> CheckpointBarrier:
    pending = controller.get_pending_checkpoint_barrier()
    if pending is None:
        raise IllegalBarrierHandlerStateError(f"no pending checkpoint barrier in state {state_name}")
    return pending


class WaitingForFirstBarrier(AbstractAlignedBarrierHandlerState):
    def _convert_after_barrier_received(self) -> BarrierHandlerState:
        return CollectingBarriers(self.state)

    def end_of_partition_received(self, controller: Controller, channel_info: InputChannelInfo) -> BarrierHandlerState:
        self.state.channel_finished(channel_info)
        return self  # no pending checkpoint


class CollectingBarriers(AbstractAlignedBarrierHandlerState):
    def _convert_after_barrier_received(self) -> BarrierHandlerState:
        return self

    def end_of_partition_received(self, controller: Controller, channel_info: InputChannelInfo) -> BarrierHandlerState:
        self.state.channel_finished(channel_info)
        if controller.all_barriers_received():
            return self._trigger_global_checkpoint(controller, _pending_barrier(controller, self.name))
        return self


# -- aligned with timeout ("alternating") ------------------------------------------------------------------


class AbstractAlternatingAlignedBarrierHandlerState(BarrierHandlerState):
    def announcement_received(
        self, controller: Controller, channel_info: InputChannelInfo, sequence_number: int
    ) -> BarrierHandlerState:
        self.state.add_seen_announcement(channel_info, sequence_number)
        return self

    def barrier_received(
        self,
        controller: Controller,
        channel_info: InputChannelInfo,
        barrier: CheckpointBarrier,
        mark_channel_blocked: bool,
    ) -> BarrierHandlerState:
        if barrier.options.is_unaligned_checkpoint:
            unaligned_state = self.alignment_timeout(controller, barrier)
            return unaligned_state.barrier_received(controller, channel_info, barrier, mark_channel_blocked)
        self.state.remove_seen_announcement(channel_info)
        if mark_channel_blocked:
            self.state.block_channel(channel_info)
        if controller.all_barriers_received():
            controller.trigger_global_checkpoint(barrier)
            return self._finish_checkpoint()
        if controller.is_timed_out(barrier):
            # the passive switch: this barrier arrived after the alignment timeout
            return self.alignment_timeout(controller, barrier).barrier_received(
                controller, channel_info, barrier.as_unaligned(), mark_channel_blocked
            )
        return self._transition_after_barrier_received()

    def abort(self, cancelled_id: int) -> BarrierHandlerState:
        return self._finish_checkpoint()

    def _finish_checkpoint(self) -> BarrierHandlerState:
        self.state.unblock_all_channels()
        return AlternatingWaitingForFirstBarrier(self.state.empty_state())

    @abc.abstractmethod
    def _transition_after_barrier_received(self) -> BarrierHandlerState: ...


class AlternatingWaitingForFirstBarrier(AbstractAlternatingAlignedBarrierHandlerState):
    def alignment_timeout(self, controller: Controller, barrier: CheckpointBarrier) -> BarrierHandlerState:
        self.state.prioritize_all_announcements()
        return AlternatingWaitingForFirstBarrierUnaligned(True, self.state)

    def _transition_after_barrier_received(self) -> BarrierHandlerState:
        return AlternatingCollectingBarriers(self.state)

    def end_of_partition_received(self, controller: Controller, channel_info: InputChannelInfo) -> BarrierHandlerState:
        self.state.channel_finished(channel_info)
        return self  # no barrier collected yet


class AlternatingCollectingBarriers(AbstractAlternatingAlignedBarrierHandlerState):
    def alignment_timeout(self, controller: Controller, barrier: CheckpointBarrier) -> BarrierHandlerState:
        # the active switch: the timer fired while collecting aligned barriers
        self.state.prioritize_all_announcements()
        unaligned_barrier = barrier.as_unaligned()
        controller.init_inputs_checkpoint(unaligned_barrier)
        self.state.checkpoint_started(unaligned_barrier)
        controller.trigger_global_checkpoint(unaligned_barrier)
        return AlternatingCollectingBarriersUnaligned(True, self.state)

    def end_of_partition_received(self, controller: Controller, channel_info: InputChannelInfo) -> BarrierHandlerState:
        self.state.channel_finished(channel_info)
        pending = _pending_barrier(controller, self.name)
        if pending.options.is_unaligned_checkpoint:
            raise IllegalBarrierHandlerStateError(
                f"unaligned pending barrier of checkpoint {pending.id} in state {self.name}"
            )
        if controller.all_barriers_received():
            controller.trigger_global_checkpoint(pending)
            return self._finish_checkpoint()
        if controller.is_timed_out(pending):
            # the passive switch, on end of partition
            return self.alignment_timeout(controller, pending).end_of_partition_received(controller, channel_info)
        return self

    def _transition_after_barrier_received(self) -> BarrierHandlerState:
        return self


# -- unaligned ----------------------------------------------------------------------------------------------


class AlternatingWaitingForFirstBarrierUnaligned(BarrierHandlerState):
    def __init__(self, alternating: bool, state: ChannelState) -> None:
        super().__init__(state)
        self.alternating = alternating

    def alignment_timeout(self, controller: Controller, barrier: CheckpointBarrier) -> BarrierHandlerState:
        return self

    def announcement_received(
        self, controller: Controller, channel_info: InputChannelInfo, sequence_number: int
    ) -> BarrierHandlerState:
        self.state.convert_to_priority_event(channel_info, sequence_number)
        return self

    def barrier_received(
        self,
        controller: Controller,
        channel_info: InputChannelInfo,
        barrier: CheckpointBarrier,
        mark_channel_blocked: bool,
    ) -> BarrierHandlerState:
        # an out-of-order aligned barrier: its channel is blocked upstream (credit), book-keep it as blocked
        if mark_channel_blocked and not barrier.options.is_unaligned_checkpoint:
            self.state.block_channel(channel_info)
        unaligned_barrier = barrier.as_unaligned()
        controller.init_inputs_checkpoint(unaligned_barrier)
        self.state.checkpoint_started(unaligned_barrier)
        controller.trigger_global_checkpoint(unaligned_barrier)
        if controller.all_barriers_received():
            self.state.checkpoint_stopped(unaligned_barrier.id)
            return self._stop_checkpoint()
        return AlternatingCollectingBarriersUnaligned(self.alternating, self.state)

    def abort(self, cancelled_id: int) -> BarrierHandlerState:
        return self._stop_checkpoint()

    def end_of_partition_received(self, controller: Controller, channel_info: InputChannelInfo) -> BarrierHandlerState:
        self.state.channel_finished(channel_info)
        return self  # no pending checkpoint

    def _stop_checkpoint(self) -> BarrierHandlerState:
        self.state.unblock_all_channels()
        if self.alternating:
            return AlternatingWaitingForFirstBarrier(self.state.empty_state())
        return AlternatingWaitingForFirstBarrierUnaligned(False, self.state.empty_state())

    def __repr__(self) -> str:
        return f"{self.name}(alternating={self.alternating})"


class AlternatingCollectingBarriersUnaligned(BarrierHandlerState):
    def __init__(self, alternating: bool, state: ChannelState) -> None:
        super().__init__(state)
        self.alternating = alternating

    def alignment_timeout(self, controller: Controller, barrier: CheckpointBarrier) -> BarrierHandlerState:
        return self

    def announcement_received(
        self, controller: Controller, channel_info: InputChannelInfo, sequence_number: int
    ) -> BarrierHandlerState:
        self.state.convert_to_priority_event(channel_info, sequence_number)
        return self

    def barrier_received(
        self,
        controller: Controller,
        channel_info: InputChannelInfo,
        barrier: CheckpointBarrier,
        mark_channel_blocked: bool,
    ) -> BarrierHandlerState:
        if mark_channel_blocked and not barrier.options.is_unaligned_checkpoint:
            self.state.block_channel(channel_info)
        if controller.all_barriers_received():
            return self._finish_checkpoint(barrier.id)
        return self

    def abort(self, cancelled_id: int) -> BarrierHandlerState:
        return self._finish_checkpoint(cancelled_id)

    def end_of_partition_received(self, controller: Controller, channel_info: InputChannelInfo) -> BarrierHandlerState:
        self.state.channel_finished(channel_info)
        if controller.all_barriers_received():
            pending = controller.get_pending_checkpoint_barrier()
            if pending is None:
                raise IllegalBarrierHandlerStateError(
                    f"end of partition on {channel_info} completed alignment in state {self.name} without a pending "
                    "barrier"
                )
            return self._finish_checkpoint(pending.id)
        return self

    def _finish_checkpoint(self, checkpoint_id: int) -> BarrierHandlerState:
        self.state.checkpoint_stopped(checkpoint_id)
        self.state.unblock_all_channels()
        if self.alternating:
            return AlternatingWaitingForFirstBarrier(self.state.empty_state())
        return AlternatingWaitingForFirstBarrierUnaligned(False, self.state.empty_state())

    def __repr__(self) -> str:
        return f"{self.name}(alternating={self.alternating})"
