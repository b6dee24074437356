"""A task's network input: Flink's ``StreamTaskNetworkInput`` (with ``RescalingStreamTaskNetworkInput``'s virtual
channels) over the task's input gates and barrier handler (``InputSide``). It takes the next buffer or event,
processes a buffer's records and watermarks through the ``OperatorChain``, handles recovered in-flight data before
new data, ``EndOfData`` and end of partition per channel, and the barriers of a checkpoint triggered on a task whose
upstream finished. See ``docs/architecture.md``, "The data plane".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from barriersim.runtime.buffer_content import segments
from barriersim.runtime.channel_state.reader import ChannelStateRestoreError
from barriersim.runtime.checkpointing.api import InputSide
from barriersim.runtime.events import (
    Buffer,
    ChannelElement,
    CheckpointBarrier,
    EndOfChannelStateEvent,
    EndOfData,
    EndOfPartition,
    InputChannelInfo,
    StopMode,
    SubtaskConnectionDescriptor,
)
from barriersim.runtime.network.input.input_channel import AcknowledgeAllRecordsProcessed
from barriersim.runtime.network.input.virtual_channels import DemultiplexingChannel
from barriersim.runtime.operators.watermarks import WatermarkValve
from barriersim.runtime.record_batch import RecordBatch
from barriersim.runtime.task.operator_chain import OperatorChain
from barriersim.runtime.task.step_result import StepOutcome, StepResult

_PROCESSED = StepResult(StepOutcome.PROCESSED)
_IDLE = StepResult(StepOutcome.IDLE)


class StreamTaskNetworkInput:
    def __init__(
        self,
        input_side: InputSide,
        chain: OperatorChain,
        *,
        task_name: str,
        input_of_gate: Sequence[int] | None,
        upstream: Callable[[Any], None],
        end_of_data: Callable[[], None],
        end_of_input: Callable[[], None],
    ) -> None:
        """``input_of_gate``: the logical input of each gate for a two-input operator, else None; ``upstream``
        takes the acknowledgement of an ``EndOfData`` for the upstream task; ``end_of_data`` is called once every
        channel's data ended (``EndOfData`` or end of partition on each), ``end_of_input`` once every channel
        ended (``END_OF_INPUT``)."""
        self.input_side = input_side
        self._chain = chain
        self._task_name = task_name
        self._input_of_gate = input_of_gate
        self._upstream = upstream
        self._end_of_data = end_of_data
        self._end_of_input = end_of_input
        self._valve = WatermarkValve(input_side.channel_infos())
        self._end_of_data_channels: dict[InputChannelInfo, StopMode] = {}  # how each channel's data ended
        self._data_ended = False  # every channel's data ended (``end_of_data`` was called)
        # recovered in-flight input, processed before any new data (Flink's RecoveredInputChannel); with a rescaled
        # restore, the virtual channels of each input channel that carries data of several old connections, and the
        # channels whose recovered data has not ended yet (until then the task declines checkpoints, as Flink's
        # RescalingStreamTaskNetworkInput does)
        self._recovered: list[tuple[InputChannelInfo, Any]] = []
        self._demux: dict[InputChannelInfo, DemultiplexingChannel] = {}
        self._awaiting_end_of_channel_state: set[InputChannelInfo] = set()
        # FLIP-147 barriers of RPC-triggered checkpoints, per unfinished channel, until the channel's data is consumed
        self._rpc_barriers: dict[InputChannelInfo, CheckpointBarrier] = {}

    # -- restore -------------------------------------------------------------------------------------

    def recover(
        self,
        recovered: list[tuple[InputChannelInfo, Any]],
        demux: dict[InputChannelInfo, DemultiplexingChannel],
        awaiting: set[InputChannelInfo],
    ) -> None:
        """The restore's recovered input (``(channel, element)`` in the order to process), the virtual channels of
        a rescaled restore, and the channels whose ``EndOfChannelStateEvent`` is still to come."""
        self._recovered = recovered
        self._demux = demux
        self._awaiting_end_of_channel_state = awaiting

    def channels_by_gate(self) -> list[list[InputChannelInfo]]:
        infos = self.input_side.channel_infos()
        return [[info for info in infos if info.gate_idx == g] for g in range(len(self.input_side.gates))]

    @property
    def is_recovering_rescaled_state(self) -> bool:
        """Whether recovered in-flight data of a rescaled edge is still to come on some input channel; meanwhile
        the task declines checkpoints (``CHECKPOINT_DECLINED_TASK_NOT_READY``)."""
        return bool(self._awaiting_end_of_channel_state)

    def _on_recovery_event(self, channel: InputChannelInfo, event: object) -> None:
        """A ``SubtaskConnectionDescriptor`` selects the virtual channel of the recovered buffers that follow; an
        ``EndOfChannelStateEvent`` ends the channel's recovered data."""
        demux = self._demux.get(channel)
        if type(event) is SubtaskConnectionDescriptor:
            if demux is None:
                raise ChannelStateRestoreError(
                    f"{self._task_name}: recovered data on {channel} names virtual "
                    f"channel {event}, but the channel has none"
                )
            demux.select(event)
        else:
            if demux is not None:
                demux.finish()
            self._awaiting_end_of_channel_state.discard(channel)

    # -- arrivals ------------------------------------------------------------------------------------

    def on_element(
        self, channel: InputChannelInfo, element: ChannelElement, sequence_number: int, backlog: int | None
    ) -> None:
        self.input_side.on_element(channel, element, sequence_number, backlog)
        if not self._recovered:
            # A priority event (an unaligned barrier, an announcement) is handled on arrival, also while the
            # task is backpressured or busy: Flink's gate notifies the mailbox (CheckpointedInputGate's
            # processPriorityEvents mail), which runs it ahead of, and independent of, input processing.
            self.input_side.process_priority_events(channel.gate_idx)
        if self._rpc_barriers and channel in self._rpc_barriers:
            self._deliver_rpc_barriers()

    # -- processing ----------------------------------------------------------------------------------

    def emit_next(self) -> StepResult:
        """The next recovered or arrived buffer or event, processed."""
        if self._recovered:
            channel, element = self._recovered.pop(0)
            if type(element) is SubtaskConnectionDescriptor:
                self._on_recovery_event(channel, element)
                return _PROCESSED
            result = self._process_buffer(channel, element)
            if self._rpc_barriers:
                self._deliver_rpc_barriers()
            return result
        boe = self.input_side.poll_next()
        if boe is None:
            return _IDLE
        if isinstance(boe.element, Buffer):
            result = self._process_buffer(boe.channel_info, boe.element)
            if self._rpc_barriers:
                self._deliver_rpc_barriers()  # this may have been the last buffer before an end of partition
            return result
        if self._rpc_barriers:
            self._deliver_rpc_barriers()
        if type(boe.element) in (SubtaskConnectionDescriptor, EndOfChannelStateEvent):
            self._on_recovery_event(boe.channel_info, boe.element)
        elif type(boe.element) is EndOfData:
            self._on_end_of_data(boe.channel_info, boe.element.mode)
        elif isinstance(boe.element, EndOfPartition):
            if not self._data_ended and self._end_of_data_channels.get(boe.channel_info) is None:
                # a channel that ends without EndOfData (an upstream without checkpoints after tasks finish) ended
                # drained, as if after its MAX_WATERMARK; once the task's data ended nothing more goes out, and after
                # EndOfData(NO_DRAIN) event time stays: Flink's StatusWatermarkValve never hears of an ended channel
                wm = self._valve.end_of_input(boe.channel_info)
                if wm is not None:
                    self._chain.process_watermark(wm)
            if self.input_side.is_finished():
                self._end_of_input()
        return _PROCESSED

    def _process_buffer(self, channel: InputChannelInfo, buffer: Buffer) -> StepResult:
        items = buffer.records
        if self._demux:
            demux = self._demux.get(channel)
            if demux is not None and demux.is_selecting:
                items = demux.demultiplex(items)
        side = self._input_of_gate[channel.gate_idx] if self._input_of_gate else 0
        chain = self._chain
        if type(items) is RecordBatch:  # the common case: records only, processed as one batch
            n = items.columns.shape[1]  # ``len(items)``
            if n:
                chain.process(items, side)
            return StepResult(StepOutcome.PROCESSED, n, chain.hot_records(items) if n and chain.hot_key >= 0 else 0)
        count = hot = 0
        for part in segments(items):  # records and watermarks in order; the batch is split at each watermark
            if type(part) is RecordBatch:
                if len(part):
                    chain.process(part, side)
                    count += len(part)
                    hot += chain.hot_records(part)
            else:
                combined = self._valve.input_watermark(channel, part)
                if combined is not None:
                    chain.process_watermark(combined)
        return StepResult(StepOutcome.PROCESSED, count, hot)

    # -- the end of the data -------------------------------------------------------------------------

    def _on_end_of_data(self, channel: InputChannelInfo, mode: StopMode) -> None:
        """``EndOfData`` arrived on ``channel``; once every channel has it (or has ended), the task's data ends."""
        self._end_of_data_channels[channel] = mode
        # every record before it was processed (Flink's CheckpointedInputGate acknowledges on EndOfData)
        self._upstream(AcknowledgeAllRecordsProcessed(channel))
        if not self._data_ended and all(
            info in self._end_of_data_channels or self.input_side.get_channel(info).end_of_partition_received
            for info in self.input_side.channel_infos()
        ):
            self._data_ended = True
            self._end_of_data()

    def end_mode(self) -> StopMode:
        """How the input's data ended: stopped if any channel's data was stopped without ``--drain``, else drained
        (Flink's ``SingleInputGate.hasReceivedEndOfData``: ``STOPPED`` or ``DRAINED``; a channel that ended
        without ``EndOfData`` came from an upstream that finished drained)."""
        return StopMode.NO_DRAIN if StopMode.NO_DRAIN in self._end_of_data_channels.values() else StopMode.DRAIN

    def advance_to_end_of_event_time(self) -> None:
        """Event time to its end over every input (the valve's watermark once all ended), through the operator."""
        watermark = self._valve.end_of_all_inputs()
        if watermark is not None:
            self._chain.process_watermark(watermark)

    def input_channels_ended(self) -> bool:
        """Every input channel ended (``END_OF_INPUT``)."""
        return self.input_side.is_finished()

    # -- checkpoints triggered by RPC on a task whose upstream finished (FLIP-147) ----------------------

    def trigger_unfinished_channels_checkpoint(self, barrier: CheckpointBarrier) -> bool:
        """Flink's ``triggerUnfinishedChannelsCheckpoint``: ``barrier`` enters the barrier handler on every channel
        whose end of partition was not consumed yet (``_deliver_rpc_barriers``); False if there is none."""
        unfinished = self.input_side.unfinished_channels()
        if not unfinished:
            return False
        for info in unfinished:
            self._rpc_barriers[info] = barrier
        self._deliver_rpc_barriers()
        return True

    def _deliver_rpc_barriers(self) -> None:
        """An RPC-triggered barrier enters the handler on a channel once everything the channel's finished
        upstream sent before its end of partition has been consumed, i.e. when the end of partition is next.
        Flink triggers such a checkpoint only after the upstream task finished, which it does only once its
        consumers processed all its records (``ResultPartition.getAllDataProcessedFuture``, FLIP-147), so there
        the channels hold nothing but the end of partition; our upstream task reports finished as soon as its
        final checkpoint completed, so the barrier waits here for the data still queued or in flight (else the
        snapshot would miss records of a finished upstream: not a consistent cut)."""
        if self._recovered:
            return
        for info, barrier in list(self._rpc_barriers.items()):
            if isinstance(self.input_side.get_channel(info).peek(), EndOfPartition):
                del self._rpc_barriers[info]
                self.input_side.barrier_handler.process_barrier(barrier, info, True)
