"""The public driving API of a task's input side (``InputSide``): build it, feed it arriving elements, poll what the
operator consumes next, fire timers, and observe checkpoints, aborts, blocked channels, persisted in-flight data,
credit and metrics. Tests, the simulator and the Ray actors use only this (plus the action values of
``barrier_handler``) and never reach into private state.

Mirrors the wiring of Flink's ``InputProcessorUtil.createCheckpointedMultipleInputGate`` and ``StreamTask``'s
choice of barrier handler. See docs/data-plane.md, "The input side".
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from barriersim.runtime.checkpointing.barrier_handler import (
    AbortCheckpointOnBarrier,
    ActionSink,
    AllBarriersReceived,
    CheckpointBarrierHandler,
    CheckpointMetrics,
    Clock,
    InitInputsCheckpoint,
    TimerService,
    TriggerCheckpointOnBarrier,
)
from barriersim.runtime.checkpointing.checkpointed_input_gate import CheckpointedInputGate, GateActionRouter
from barriersim.runtime.checkpointing.single_checkpoint_barrier_handler import (
    ChannelListener,
    SingleCheckpointBarrierHandler,
)
from barriersim.runtime.checkpointing.tracker import CheckpointBarrierTracker
from barriersim.runtime.checkpointing_mode import CheckpointingMode
from barriersim.runtime.events import Buffer, ChannelElement, InputChannelInfo
from barriersim.runtime.network.input.buffer_debloater import BufferDebloatConfiguration
from barriersim.runtime.network.input.buffer_manager import (
    DEFAULT_EXCLUSIVE_BUFFERS_PER_CHANNEL,
    DEFAULT_FLOATING_BUFFERS_PER_GATE,
)
from barriersim.runtime.network.input.channel_state_persister import AddInputData
from barriersim.runtime.network.input.input_channel import AddCredit, InputChannel
from barriersim.runtime.network.input.single_input_gate import BufferOrEvent, SingleInputGate

# -- deterministic clock and timers (reference implementations; any TimerService works) -------------------


class ManualClock:
    """A clock that moves only when told; ``clock()`` returns the time in ms."""

    def __init__(self, now_ms: int = 0) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, delta_ms: int) -> int:
        if delta_ms < 0:
            raise ValueError(f"time cannot go back: advance({delta_ms})")
        self.now_ms += delta_ms
        return self.now_ms

    def set(self, now_ms: int) -> None:
        if now_ms < self.now_ms:
            raise ValueError(f"time cannot go back: {now_ms} < {self.now_ms}")
        self.now_ms = now_ms


@dataclass
class _TimerHandle:
    at_ms: int
    seq: int
    callback: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualTimerService:
    """Timers fire, in (time, registration) order, only from ``advance_to(now_ms)``."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, _TimerHandle]] = []
        self._seq = itertools.count()

    def register_timer(self, at_ms: int, callback: Callable[[], None]) -> _TimerHandle:
        handle = _TimerHandle(at_ms, next(self._seq), callback)
        heapq.heappush(self._heap, (at_ms, handle.seq, handle))
        return handle

    def advance_to(self, now_ms: int) -> int:
        """Run every live timer due at or before ``now_ms``; returns how many ran."""
        fired = 0
        while self._heap and self._heap[0][0] <= now_ms:
            _, _, handle = heapq.heappop(self._heap)
            if not handle.cancelled:
                fired += 1
                handle.callback()
        return fired

    def pending_timers(self) -> list[int]:
        return sorted(at for at, _, h in self._heap if not h.cancelled)


# -- the input side ------------------------------------------------------------------------------------------

GateSpec = int | Sequence[str]
"""A gate: its number of remote channels, or per channel ``"remote"`` / ``"local"``."""

HandlerFactory = Callable[[ActionSink, Clock, int, TimerService | None], CheckpointBarrierHandler]


class InputSide:
    def __init__(
        self,
        gates: Sequence[GateSpec],
        mode: CheckpointingMode,
        clock: Clock,
        timer_service: TimerService | None = None,
        *,
        task_name: str = "task",
        enable_checkpoint_after_tasks_finished: bool = True,
        exclusive_buffers_per_channel: int = DEFAULT_EXCLUSIVE_BUFFERS_PER_CHANNEL,
        floating_buffers_per_gate: int = DEFAULT_FLOATING_BUFFERS_PER_GATE,
        sink: Callable[[Any], None] | None = None,
        barrier_handler_factory: HandlerFactory | None = None,
        buffer_debloat: BufferDebloatConfiguration | None = None,
        max_buffer_size: int = 32 * 1024,
        keep_history: bool = True,
    ) -> None:
        """``keep_history``: keep every action for ``actions``, ``triggered_checkpoints``, ``metrics`` and the other
        observing methods (tests); a task that takes its actions through ``sink`` alone passes False, so a long run
        holds no history."""
        self.mode = mode
        self._keep_history = keep_history or sink is None
        self.clock = clock
        self._sink = sink
        self._actions: list[Any] = []
        self._drained = 0
        self.triggered_checkpoints: list[TriggerCheckpointOnBarrier] = []
        self.aborted_checkpoints: list[AbortCheckpointOnBarrier] = []
        self.all_barriers_received: list[AllBarriersReceived] = []
        self.init_inputs_checkpoints: list[InitInputsCheckpoint] = []
        self._persisted: dict[int, dict[InputChannelInfo, list[Buffer]]] = {}
        self._granted_credit: dict[InputChannelInfo, int] = {}
        self.gates: list[SingleInputGate] = []
        for gate_idx, spec in enumerate(gates):
            kinds = ["remote"] * spec if isinstance(spec, int) else list(spec)
            self.gates.append(
                SingleInputGate(gate_idx, kinds, self._record, exclusive_buffers_per_channel, floating_buffers_per_gate)
            )
        if buffer_debloat is not None and buffer_debloat.enabled:
            for gate in self.gates:
                gate.enable_debloating(buffer_debloat, max_buffer_size, clock)
        num_channels = sum(g.number_of_input_channels for g in self.gates)
        router = GateActionRouter(self.gates, self._record)
        if barrier_handler_factory is not None:
            self.barrier_handler = barrier_handler_factory(router, clock, num_channels, timer_service)
        elif mode is CheckpointingMode.ALIGNED:
            self.barrier_handler = SingleCheckpointBarrierHandler.aligned(
                task_name, router, clock, num_channels, timer_service, enable_checkpoint_after_tasks_finished
            )
        elif mode is CheckpointingMode.UNALIGNED and timer_service is not None:
            # Flink's InputProcessorUtil: with unaligned checkpoints enabled the handler is the alternating one, so
            # that an aligned barrier (a savepoint's) is aligned while checkpoints' barriers overtake the data
            self.barrier_handler = SingleCheckpointBarrierHandler.alternating(
                task_name, router, clock, num_channels, timer_service, enable_checkpoint_after_tasks_finished
            )
        elif mode is CheckpointingMode.UNALIGNED:
            self.barrier_handler = SingleCheckpointBarrierHandler.unaligned(
                task_name, router, clock, num_channels, timer_service, enable_checkpoint_after_tasks_finished
            )
        elif mode is CheckpointingMode.ALIGNED_WITH_TIMEOUT:
            if timer_service is None:
                raise ValueError("ALIGNED_WITH_TIMEOUT needs a timer service for the alignment timeout")
            self.barrier_handler = SingleCheckpointBarrierHandler.alternating(
                task_name, router, clock, num_channels, timer_service, enable_checkpoint_after_tasks_finished
            )
        else:
            self.barrier_handler = CheckpointBarrierTracker(
                num_channels, router, clock, enable_checkpoint_after_tasks_finished
            )
        self.checkpointed_gates = [CheckpointedInputGate(g, self.barrier_handler) for g in self.gates]
        self._next_gate = 0
        for g in self.gates:
            g.setup()

    # -- recording ---------------------------------------------------------------------------------------

    def _record(self, action: Any) -> None:
        if not self._keep_history:
            assert self._sink is not None  # history is kept when there is no sink
            self._sink(action)
            return
        self._actions.append(action)
        if isinstance(action, TriggerCheckpointOnBarrier):
            self.triggered_checkpoints.append(action)
        elif isinstance(action, AbortCheckpointOnBarrier):
            self.aborted_checkpoints.append(action)
        elif isinstance(action, AllBarriersReceived):
            self.all_barriers_received.append(action)
        elif isinstance(action, InitInputsCheckpoint):
            self.init_inputs_checkpoints.append(action)
        elif isinstance(action, AddInputData):
            per_channel = self._persisted.setdefault(action.checkpoint_id, {})
            per_channel.setdefault(action.channel_info, []).extend(action.buffers)
        elif isinstance(action, AddCredit):
            self._granted_credit[action.channel_info] = self._granted_credit.get(action.channel_info, 0) + action.credit
        if self._sink is not None:
            self._sink(action)

    # -- driving ------------------------------------------------------------------------------------------

    def trigger_debloating(self) -> None:
        """Flink's ``StreamTask.debloat``: every gate recalculates its buffer size and announces a changed one."""
        for gate in self.gates:
            gate.trigger_debloating()

    def gate(self, gate_idx: int) -> SingleInputGate:
        return self.gates[gate_idx]

    def get_channel(self, channel_info: InputChannelInfo) -> InputChannel:
        return self.gates[channel_info.gate_idx].get_channel(channel_info.channel_idx)

    def on_element(
        self,
        channel_info: InputChannelInfo,
        element: ChannelElement,
        sequence_number: int | None = None,
        backlog: int | None = None,
        priority: bool | None = None,
    ) -> None:
        """An element arrived on ``channel_info`` (``sequence_number`` defaults to the expected one;
        ``backlog`` is the sender's backlog carried with a data buffer; ``priority`` overrides the default
        rule: unaligned barriers and announcements are priority elements)."""
        self.gates[channel_info.gate_idx].on_element(channel_info, element, sequence_number, backlog, priority)

    def release_processed(self) -> None:
        """The task processed the data buffers it polled: their channels recycle them
        (``SingleInputGate.release_processed``)."""
        for gate in self.gates:
            if gate.holding:
                gate.release_processed()

    def poll_next(self) -> BufferOrEvent | None:
        """What the operator consumes next (gates with a priority event first, else round robin)."""
        n = len(self.checkpointed_gates)
        if n == 1:  # one gate: its priority event, if any, is what it hands out first anyway
            return self.checkpointed_gates[0].poll_next()
        for cg in self.checkpointed_gates:
            if cg.input_gate.has_priority_event():
                boe = cg.poll_next()
                if boe is not None:
                    return boe
        for k in range(n):
            idx = (self._next_gate + k) % n
            boe = self.checkpointed_gates[idx].poll_next()
            if boe is not None:
                self._next_gate = (idx + 1) % n
                return boe
        return None

    def poll_all(self) -> list[BufferOrEvent]:
        """Everything available, polled as a task's steps poll it: each step processes what it polled, so the
        buffers polled before are released (``release_processed``) before the next poll, and after the last."""
        out: list[BufferOrEvent] = []
        while True:
            self.release_processed()
            boe = self.poll_next()
            if boe is None:
                return out
            out.append(boe)

    def process_priority_events(self, gate_idx: int | None = None) -> list[BufferOrEvent]:
        """Flink's priority-event mail: handle queued priority events now, even if the operator is busy
        (of every gate, or of gate ``gate_idx`` only)."""
        if gate_idx is not None:  # the common case, on every arrival: usually nothing to do
            cg = self.checkpointed_gates[gate_idx]
            return cg.process_priority_events() if cg.input_gate.has_priority_event() else []
        gates = self.checkpointed_gates
        out: list[BufferOrEvent] = []
        for cg in gates:
            if cg.input_gate.has_priority_event():
                out.extend(cg.process_priority_events())
        return out

    def drain_actions(self) -> list[Any]:
        """Every value emitted since the previous call, in order."""
        new = self._actions[self._drained :]
        self._drained = len(self._actions)
        return new

    def close(self) -> None:
        for cg in self.checkpointed_gates:
            cg.close()

    # -- observing ------------------------------------------------------------------------------------------

    @property
    def actions(self) -> list[Any]:
        return list(self._actions)

    @property
    def latest_checkpoint_id(self) -> int:
        return self.barrier_handler.get_latest_checkpoint_id()

    def is_checkpoint_pending(self) -> bool:
        return self.barrier_handler.is_checkpoint_pending()

    def alignment_checkpoint_id(self) -> int | None:
        """The checkpoint whose barriers arrived on some channels but not on all yet, else None."""
        return self.barrier_handler.alignment_checkpoint_id()

    def add_channel_listener(self, listener: ChannelListener) -> bool:
        """``listener`` hears of every barrier, cancellation marker and end of partition the exactly-once barrier
        handler takes; False (nothing to hear) with the at-least-once tracker, which aligns nothing."""
        if not isinstance(self.barrier_handler, SingleCheckpointBarrierHandler):
            return False
        self.barrier_handler.add_listener(listener)
        return True

    def is_finished(self) -> bool:
        return all(cg.is_finished() for cg in self.checkpointed_gates)

    def unfinished_channels(self) -> list[InputChannelInfo]:
        return [info for g in self.gates for info in g.unfinished_channels()]

    def blocked_channels(self) -> list[InputChannelInfo]:
        return [info for g in self.gates for info in g.blocked_channels]

    def channel_infos(self) -> list[InputChannelInfo]:
        return [info for g in self.gates for info in g.channel_infos]

    def persisted_input_data(self, checkpoint_id: int) -> dict[InputChannelInfo, tuple[Buffer, ...]]:
        return {info: tuple(bufs) for info, bufs in self._persisted.get(checkpoint_id, {}).items()}

    def persisted_bytes(self, checkpoint_id: int) -> int:
        return sum(b.size for bufs in self._persisted.get(checkpoint_id, {}).values() for b in bufs)

    def granted_credit(self, channel_info: InputChannelInfo) -> int:
        """Total credit announced to the sender of ``channel_info`` so far."""
        return self._granted_credit.get(channel_info, 0)

    def sender_credit(self, channel_info: InputChannelInfo) -> int | None:
        """Credit the sender currently holds (None for local channels)."""
        ch = self.get_channel(channel_info)
        return getattr(ch, "sender_credit", None)

    def alignment_duration_ms(self) -> int:
        return self.barrier_handler.get_alignment_duration_ms()

    def checkpoint_start_delay_ms(self) -> int:
        return self.barrier_handler.get_checkpoint_start_delay_ms()

    def metrics(self, checkpoint_id: int) -> CheckpointMetrics | None:
        """The input side's metrics of ``checkpoint_id``: final once all its barriers arrived (else as
        of the trigger), with the persisted in-flight bytes; None if it was never triggered."""
        base: CheckpointMetrics | None = None
        for a in self.all_barriers_received:
            if a.checkpoint_id == checkpoint_id:
                base = a.metrics
        if base is None:
            for t in self.triggered_checkpoints:
                if t.checkpoint_id == checkpoint_id:
                    base = t.metrics
        if base is None:
            return None
        return CheckpointMetrics(
            checkpoint_id,
            base.alignment_duration_ms,
            base.bytes_processed_during_alignment,
            base.checkpoint_start_delay_ms,
            self.persisted_bytes(checkpoint_id),
            base.unaligned,
        )
