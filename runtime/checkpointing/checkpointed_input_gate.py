"""An input gate seen through a barrier handler: the operator polls it and gets only what it should see next, while
every checkpoint event is handed to the handler on the way; ``GateActionRouter`` applies the handler's gate actions
to the gates.

Mirrors Flink's ``CheckpointedInputGate`` and the ``CheckpointableInput`` interface. See docs/data-plane.md, "The
checkpointed input gate".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from barriersim.runtime.checkpointing.barrier_handler import (
    GATE_ACTION_TYPES,
    ActionSink,
    BlockConsumption,
    CheckpointBarrierHandler,
    CheckpointStarted,
    CheckpointStopped,
    ConvertToPriorityEvent,
    HandlerAction,
    ResumeConsumption,
)
from barriersim.runtime.events import (
    Buffer,
    CancelCheckpointMarker,
    CheckpointBarrier,
    EndOfPartition,
    EventAnnouncement,
    InputChannelInfo,
)
from barriersim.runtime.faults.mutations import PlantedBug, is_planted
from barriersim.runtime.network.input.input_channel import InputChannel
from barriersim.runtime.network.input.single_input_gate import BufferOrEvent, SingleInputGate


class CheckpointableInput(Protocol):
    gate_idx: int

    def poll_next(self) -> BufferOrEvent | None: ...

    def is_finished(self) -> bool: ...

    def has_priority_event(self) -> bool: ...

    @property
    def channel_infos(self) -> list[InputChannelInfo]: ...

    def block_consumption(self, channel_info: InputChannelInfo) -> None: ...

    def resume_consumption(self, channel_info: InputChannelInfo) -> None: ...

    def checkpoint_started(self, barrier: CheckpointBarrier) -> None: ...

    def checkpoint_stopped(self, checkpoint_id: int) -> None: ...

    def convert_to_priority_event(self, channel_idx: int, sequence_number: int) -> None: ...


class GateActionRouter:
    """Applies gate actions to the gates, then forwards every action to ``downstream``."""

    def __init__(self, gates: Sequence[CheckpointableInput], downstream: ActionSink) -> None:
        self._gates = {g.gate_idx: g for g in gates}
        self._downstream = downstream

    def __call__(self, action: HandlerAction) -> None:
        if type(action) not in GATE_ACTION_TYPES:  # the handler's other actions (the common case) pass on
            self._downstream(action)
            return
        if isinstance(action, BlockConsumption):
            self._gates[action.channel_info.gate_idx].block_consumption(action.channel_info)
        elif isinstance(action, ResumeConsumption):
            self._gates[action.channel_info.gate_idx].resume_consumption(action.channel_info)
        elif isinstance(action, ConvertToPriorityEvent):
            info = action.channel_info
            self._gates[info.gate_idx].convert_to_priority_event(info.channel_idx, action.sequence_number)
        elif isinstance(action, CheckpointStarted):
            if is_planted(PlantedBug.INFLIGHT_DATA_OF_WRONG_CHANNELS):
                self._start_with_gate_local_indexes(action.barrier)
            else:
                for gate in self._gates.values():
                    gate.checkpoint_started(action.barrier)
        elif isinstance(action, CheckpointStopped):
            for gate in self._gates.values():
                gate.checkpoint_stopped(action.checkpoint_id)
        self._downstream(action)

    def _start_with_gate_local_indexes(self, barrier: CheckpointBarrier) -> None:
        """The planted FLINK-18139 (Flink 1.11): whether a channel's queued in-flight buffers were spilled was asked
        by its index in its gate, of flags kept over the channels of every gate in order, so a channel of a later
        gate spilled by the flag of an earlier gate's channel (the buffers arriving after the start persist)."""
        gates = [g for _, g in sorted(self._gates.items()) if isinstance(g, SingleInputGate)]
        flattened = [g.get_channel(i) for g in gates for i in range(g.number_of_input_channels)]
        has_inflight = [ch.has_inflight_buffers() for ch in flattened]
        for gate in gates:
            for i in range(gate.number_of_input_channels):
                channel = gate.get_channel(i)
                if not channel.released:
                    channel.checkpoint_started(barrier, spill_inflight_buffers=has_inflight[i])


class CheckpointedInputGate:
    def __init__(self, input_gate: CheckpointableInput, barrier_handler: CheckpointBarrierHandler) -> None:
        self.input_gate = input_gate
        self.barrier_handler = barrier_handler
        self._finished = False

    def poll_next(self) -> BufferOrEvent | None:
        next_ = self.input_gate.poll_next()
        if next_ is None:
            if self.input_gate.is_finished():
                self._finished = True
            return None
        element = next_.element
        if type(element) is Buffer:
            # FLINK-19537: counted when handed out, not when the operator is done with it
            self.barrier_handler.add_processed_bytes(element.size)
        else:
            self._handle_event(next_)
        return next_

    def _handle_event(self, boe: BufferOrEvent) -> None:
        event = boe.element
        handler = self.barrier_handler
        if isinstance(event, CheckpointBarrier):
            handler.process_barrier(event, boe.channel_info, False)
        elif isinstance(event, CancelCheckpointMarker):
            handler.process_cancellation_barrier(event, boe.channel_info)
        elif isinstance(event, EndOfPartition):
            handler.process_end_of_partition(boe.channel_info)
        elif isinstance(event, EventAnnouncement):
            handler.process_barrier_announcement(event.announced_event, event.sequence_number, boe.channel_info)

    def process_priority_events(self) -> list[BufferOrEvent]:
        """Poll while a priority event is at the head of the gate (Flink's priority-event mail)."""
        polled: list[BufferOrEvent] = []
        while self.input_gate.has_priority_event():
            boe = self.poll_next()
            if boe is None:
                break
            polled.append(boe)
        return polled

    def is_finished(self) -> bool:
        return self._finished or self.input_gate.is_finished()

    # -- Flink's accessors ------------------------------------------------------------------------------------

    def get_latest_checkpoint_id(self) -> int:
        return self.barrier_handler.get_latest_checkpoint_id()

    def get_alignment_duration_ms(self) -> int:
        return self.barrier_handler.get_alignment_duration_ms()

    def get_checkpoint_start_delay_ms(self) -> int:
        return self.barrier_handler.get_checkpoint_start_delay_ms()

    def get_checkpoint_barrier_handler(self) -> CheckpointBarrierHandler:
        return self.barrier_handler

    def get_channel(self, channel_idx: int) -> InputChannel:
        channel: InputChannel = self.input_gate.get_channel(channel_idx)  # type: ignore[attr-defined]
        return channel

    def close(self) -> None:
        self.barrier_handler.close()
        close = getattr(self.input_gate, "close", None)
        if close is not None:
            close()
