"""Ports of Flink's ``UnalignedCheckpointsTest``: a ``CheckpointedInputGate`` over remote channels with the unaligned
``SingleCheckpointBarrierHandler``. How Flink's harness maps onto ours: docs/testing.md, "Ports of Flink's
input-side tests".
"""

from __future__ import annotations

import itertools
from typing import Any

from support_ported import (
    RecordingChannelStateWriter,
    ValidatingCheckpointHandler,
    ValidatingCheckpointInvokable,
    fan_out,
)

from barriersim.runtime.checkpointing.api import CheckpointingMode, InputSide, ManualClock
from barriersim.runtime.events import (
    END_OF_PARTITION,
    Buffer,
    CancelCheckpointMarker,
    CheckpointBarrier,
    CheckpointOptions,
    InputChannelInfo,
)
from barriersim.runtime.failure_reason import CheckpointFailureReason

DEFAULT_CHECKPOINT_ID = 0
START_MS = 1_000


class UnalignedHarness:
    """Flink's test fixture: the gate, the recording channel state writer, the sequence numbers, the output."""

    def __init__(self, num_channels: int, validator: ValidatingCheckpointHandler, enable_after_finished: bool = True):
        self.clock = ManualClock(START_MS)
        self.writer = RecordingChannelStateWriter()
        self.validator = validator
        self.side = InputSide(
            [num_channels],
            CheckpointingMode.UNALIGNED,
            self.clock,
            enable_checkpoint_after_tasks_finished=enable_after_finished,
            sink=fan_out(validator, self.writer),
        )
        self.output: list[Any] = []
        self._ids = itertools.count()

    # -- element factories (Flink's createBuffer / createBarrier / ...) -------------------------------------

    def buffer(self, channel: int, size: int = 1):
        return (channel, Buffer((next(self._ids),), size))

    def barrier(self, checkpoint_id: int, channel: int, timestamp: int | None = None):
        ts = self.clock() if timestamp is None else timestamp
        return (channel, CheckpointBarrier(checkpoint_id, ts, CheckpointOptions.unaligned()))

    @staticmethod
    def cancel(checkpoint_id: int, channel: int):
        return (channel, CancelCheckpointMarker(checkpoint_id))

    @staticmethod
    def end_of_partition(channel: int):
        return (channel, END_OF_PARTITION)

    # -- driving --------------------------------------------------------------------------------------------

    def add_sequence(self, *sequence):
        self.output = []
        for channel, element in sequence:
            backlog = 0 if isinstance(element, Buffer) else None
            self.side.on_element(InputChannelInfo(0, channel), element, backlog=backlog)
            self.output.extend(boe.element for boe in self.side.poll_all())
        return list(sequence)

    # -- assertions -----------------------------------------------------------------------------------------

    @staticmethod
    def ids(elements) -> list:
        out = []
        for e in elements:
            if isinstance(e, tuple):
                e = e[1]
            if isinstance(e, (CheckpointBarrier, CancelCheckpointMarker)):
                continue
            out.append(e.records[0] if isinstance(e, Buffer) else e)
        return out

    def assert_output(self, *expected) -> None:
        assert self.ids(self.output) == self.ids(expected), "unexpected output sequence"

    def assert_inflight_data(self, *expected) -> None:
        actual = [b for _, b in self.writer.added_input]
        self.writer.reset()
        assert self.ids(actual) == self.ids(expected), f"unexpected in-flight sequence: {actual}"

    def ensure_empty(self) -> None:
        assert self.side.poll_next() is None
        assert self.side.is_finished()
        self.side.close()


def _handler_side(num_channels: int, enable_after_finished: bool = True):
    """Flink's handler-only tests: ``createUnalignedCheckpointBarrierHandler`` over local channels."""
    validator = ValidatingCheckpointInvokable()
    side = InputSide(
        [["local"] * num_channels],
        CheckpointingMode.UNALIGNED,
        ManualClock(START_MS),
        enable_checkpoint_after_tasks_finished=enable_after_finished,
        sink=validator,
    )
    return side, side.barrier_handler, validator


def _unaligned_barrier(checkpoint_id: int) -> CheckpointBarrier:
    # Flink's buildCheckpointBarrier uses timestamp 0 (and its invokable does not check timestamps)
    return CheckpointBarrier(checkpoint_id, 0, CheckpointOptions.unaligned())


# ------------------------------------------------------------------------------------------------------------
# tests
# ------------------------------------------------------------------------------------------------------------


def test_single_channel_no_barriers():
    """Port of Flink UnalignedCheckpointsTest.testSingleChannelNoBarriers."""
    h = UnalignedHarness(1, ValidatingCheckpointHandler(1, reset_expected_on_abort=True))
    seq = h.add_sequence(h.buffer(0), h.buffer(0), h.buffer(0), h.end_of_partition(0))
    h.assert_output(*seq)
    h.assert_inflight_data()
    h.ensure_empty()


def test_multi_channel_no_barriers():
    """Port of Flink UnalignedCheckpointsTest.testMultiChannelNoBarriers."""
    h = UnalignedHarness(4, ValidatingCheckpointHandler(1, reset_expected_on_abort=True))
    seq = h.add_sequence(
        h.buffer(2),
        h.buffer(2),
        h.buffer(0),
        h.buffer(1),
        h.buffer(0),
        h.end_of_partition(0),
        h.buffer(3),
        h.buffer(1),
        h.end_of_partition(3),
        h.buffer(1),
        h.end_of_partition(1),
        h.buffer(2),
        h.end_of_partition(2),
    )
    h.assert_output(*seq)
    h.assert_inflight_data()
    h.ensure_empty()


def test_single_channel_with_barriers():
    """Port of Flink UnalignedCheckpointsTest.testSingleChannelWithBarriers."""
    handler = ValidatingCheckpointHandler(1, reset_expected_on_abort=True)
    h = UnalignedHarness(1, handler)
    seq = h.add_sequence(
        h.buffer(0),
        h.buffer(0),
        h.buffer(0),
        h.barrier(1, 0),
        h.buffer(0),
        h.buffer(0),
        h.buffer(0),
        h.buffer(0),
        h.barrier(2, 0),
        h.barrier(3, 0),
        h.buffer(0),
        h.buffer(0),
        h.barrier(4, 0),
        h.barrier(5, 0),
        h.barrier(6, 0),
        h.buffer(0),
        h.end_of_partition(0),
    )
    h.assert_output(*seq)
    # the validator checked that checkpoints 1..6 were triggered in order
    assert handler.triggered_checkpoints == [1, 2, 3, 4, 5, 6]
    h.ensure_empty()


def test_multi_channel_with_barriers():
    """Port of Flink UnalignedCheckpointsTest.testMultiChannelWithBarriers."""
    h = UnalignedHarness(3, ValidatingCheckpointHandler(1, reset_expected_on_abort=True))

    # checkpoint with in-flight data
    seq1 = h.add_sequence(
        h.buffer(0),
        h.buffer(2),
        h.buffer(0),
        h.barrier(1, 1),
        h.barrier(1, 2),
        h.buffer(2),
        h.buffer(1),
        h.buffer(0),  # last buffer = in-flight
        h.barrier(1, 0),
    )
    h.assert_output(*seq1)
    assert h.writer.last_started_checkpoint_id == 1
    h.assert_inflight_data(seq1[7])

    # checkpoint without in-flight data
    seq2 = h.add_sequence(
        h.buffer(0),
        h.buffer(0),
        h.buffer(1),
        h.buffer(1),
        h.buffer(2),
        h.barrier(2, 0),
        h.barrier(2, 1),
        h.barrier(2, 2),
    )
    h.assert_output(*seq2)
    assert h.writer.last_started_checkpoint_id == 2
    h.assert_inflight_data()

    # checkpoint with data only from one channel
    seq3 = h.add_sequence(
        h.buffer(2),
        h.buffer(2),
        h.barrier(3, 2),
        h.buffer(2),
        h.buffer(2),
        h.barrier(3, 0),
        h.barrier(3, 1),
    )
    h.assert_output(*seq3)
    assert h.writer.last_started_checkpoint_id == 3
    h.assert_inflight_data()

    # empty checkpoint
    h.add_sequence(h.barrier(4, 1), h.barrier(4, 2), h.barrier(4, 0))
    h.assert_output()
    assert h.writer.last_started_checkpoint_id == 4
    h.assert_inflight_data()

    # checkpoint with in-flight data in mixed order
    seq5 = h.add_sequence(
        h.buffer(0),
        h.buffer(2),
        h.buffer(0),
        h.barrier(5, 1),
        h.buffer(2),
        h.buffer(0),
        h.buffer(2),
        h.buffer(1),
        h.barrier(5, 2),
        h.buffer(1),
        h.buffer(0),
        h.buffer(2),
        h.buffer(1),
        h.barrier(5, 0),
    )
    h.assert_output(*seq5)
    assert h.writer.last_started_checkpoint_id == 5
    h.assert_inflight_data(seq5[4], seq5[5], seq5[6], seq5[10])

    # some trailing data
    seq6 = h.add_sequence(h.buffer(0), h.end_of_partition(0), h.end_of_partition(1), h.end_of_partition(2))
    h.assert_output(*seq6)
    h.assert_inflight_data()
    h.ensure_empty()


def test_metrics():
    """Port of Flink UnalignedCheckpointsTest.testMetrics.

    Adapted: Flink sleeps on the wall clock and checks bounds; here a manual clock advances by the same
    10 ms, so the bounds become exact values (start delay 10 ms, alignment 10 ms)."""
    handler = ValidatingCheckpointHandler(1, reset_expected_on_abort=True)
    h = UnalignedHarness(3, handler)
    buffer_size = 100
    checkpoint_id = 1
    sleep_time = 10

    checkpoint_barrier_creation = h.clock()
    h.clock.advance(sleep_time)
    h.add_sequence(
        h.buffer(0, buffer_size),
        h.buffer(1, buffer_size),
        h.buffer(2, buffer_size),
        h.barrier(checkpoint_id, 1, checkpoint_barrier_creation),
        h.buffer(0, buffer_size),
        h.buffer(1, buffer_size),
        h.buffer(2, buffer_size),
        h.barrier(checkpoint_id, 0, checkpoint_barrier_creation),
        h.buffer(0, buffer_size),
        h.buffer(1, buffer_size),
        h.buffer(2, buffer_size),
    )
    start_delay = h.clock() - checkpoint_barrier_creation
    h.clock.advance(sleep_time)
    h.add_sequence(
        h.barrier(checkpoint_id, 2, checkpoint_barrier_creation),
        h.buffer(0, buffer_size),
        h.buffer(1, buffer_size),
        h.buffer(2, buffer_size),
        h.end_of_partition(0),
        h.end_of_partition(1),
        h.end_of_partition(2),
    )

    assert h.side.barrier_handler.get_latest_checkpoint_id() == checkpoint_id
    assert sleep_time <= h.side.checkpoint_start_delay_ms() <= start_delay
    assert h.side.checkpoint_start_delay_ms() == sleep_time
    assert handler.last_alignment_duration_ms is not None  # the future is done
    assert handler.last_alignment_duration_ms == sleep_time
    assert handler.last_bytes_processed_during_alignment is not None
    assert handler.last_bytes_processed_during_alignment == 6 * buffer_size
    h.ensure_empty()


def test_multi_channel_trailing_inflight_data():
    """Port of Flink UnalignedCheckpointsTest.testMultiChannelTrailingInflightData."""
    h = UnalignedHarness(3, ValidatingCheckpointHandler(1, reset_expected_on_abort=True), enable_after_finished=False)
    seq = h.add_sequence(
        h.buffer(0),
        h.buffer(1),
        h.buffer(2),
        h.barrier(1, 1),
        h.barrier(1, 2),
        h.barrier(1, 0),
        h.buffer(2),
        h.buffer(1),
        h.buffer(0),
        h.barrier(2, 1),
        h.buffer(1),
        h.buffer(1),
        h.end_of_partition(1),
        h.buffer(0),
        h.buffer(2),
        h.barrier(2, 2),
        h.buffer(2),
        h.end_of_partition(2),
        h.buffer(0),
        h.end_of_partition(0),
    )
    h.assert_output(*seq)
    assert h.writer.last_started_checkpoint_id == 2
    h.assert_inflight_data()
    h.ensure_empty()


def test_missing_cancellation_barriers():
    """Port of Flink UnalignedCheckpointsTest.testMissingCancellationBarriers."""
    handler = ValidatingCheckpointHandler(1, reset_expected_on_abort=True)
    h = UnalignedHarness(2, handler)
    seq = h.add_sequence(
        h.barrier(1, 0),
        h.cancel(2, 0),
        h.cancel(3, 0),
        h.cancel(3, 1),
        h.buffer(0),
        h.end_of_partition(0),
        h.end_of_partition(1),
    )
    h.assert_output(*seq)
    assert h.writer.last_started_checkpoint_id == 1
    assert handler.last_canceled_checkpoint_id == 3
    h.assert_inflight_data()
    h.ensure_empty()


def test_early_cleanup():
    """Port of Flink UnalignedCheckpointsTest.testEarlyCleanup."""
    h = UnalignedHarness(3, ValidatingCheckpointHandler(1, reset_expected_on_abort=True), enable_after_finished=False)

    seq1 = h.add_sequence(h.buffer(0), h.buffer(1), h.buffer(2), h.barrier(1, 1), h.barrier(1, 2), h.barrier(1, 0))
    h.assert_output(*seq1)
    assert h.writer.last_started_checkpoint_id == 1
    h.assert_inflight_data()

    seq2 = h.add_sequence(
        h.buffer(2),
        h.buffer(1),
        h.buffer(0),
        h.barrier(2, 1),
        h.buffer(1),
        h.buffer(1),
        h.end_of_partition(1),
        h.buffer(0),
        h.buffer(2),
        h.barrier(2, 2),
        h.buffer(2),
        h.end_of_partition(2),
        h.buffer(0),
        h.end_of_partition(0),
    )
    h.assert_output(*seq2)
    assert h.writer.last_started_checkpoint_id == 2
    h.assert_inflight_data()
    h.ensure_empty()


def test_start_alignment_with_closed_channels():
    """Port of Flink UnalignedCheckpointsTest.testStartAlignmentWithClosedChannels."""
    h = UnalignedHarness(4, ValidatingCheckpointHandler(2, reset_expected_on_abort=True))

    seq1 = h.add_sequence(
        # close some channels immediately
        h.end_of_partition(2),
        h.end_of_partition(1),
        # checkpoint without in-flight data
        h.buffer(0),
        h.buffer(0),
        h.buffer(3),
        h.barrier(2, 3),
        h.barrier(2, 0),
    )
    h.assert_output(*seq1)
    assert h.writer.last_started_checkpoint_id == 2
    h.assert_inflight_data()

    # checkpoint with in-flight data
    seq2 = h.add_sequence(h.buffer(3), h.buffer(0), h.barrier(3, 3), h.buffer(3), h.buffer(0), h.barrier(3, 0))
    h.assert_output(*seq2)
    assert h.writer.last_started_checkpoint_id == 3
    h.assert_inflight_data(seq2[4])

    # empty checkpoint
    seq3 = h.add_sequence(h.barrier(4, 0), h.barrier(4, 3))
    h.assert_output(*seq3)
    assert h.writer.last_started_checkpoint_id == 4
    h.assert_inflight_data()

    # some data, one channel closes
    seq4 = h.add_sequence(h.buffer(0), h.buffer(0), h.buffer(3), h.end_of_partition(0))
    h.assert_output(*seq4)
    assert h.writer.last_started_checkpoint_id == -1
    h.assert_inflight_data()

    # checkpoint on last remaining channel
    seq5 = h.add_sequence(h.buffer(3), h.barrier(5, 3), h.buffer(3), h.end_of_partition(3))
    h.assert_output(*seq5)
    assert h.writer.last_started_checkpoint_id == 5
    h.assert_inflight_data()
    h.ensure_empty()


def test_end_of_stream_while_checkpoint():
    """Port of Flink UnalignedCheckpointsTest.testEndOfStreamWhileCheckpoint."""
    h = UnalignedHarness(3, ValidatingCheckpointHandler(1, reset_expected_on_abort=True))

    seq1 = h.add_sequence(h.barrier(1, 0), h.barrier(1, 1), h.barrier(1, 2))
    h.assert_output(*seq1)
    assert h.writer.last_started_checkpoint_id == 1
    h.assert_inflight_data()

    seq2 = h.add_sequence(
        # some buffers
        h.buffer(0),
        h.buffer(0),
        h.buffer(2),
        # start the checkpoint that will be incomplete
        h.barrier(2, 2),
        h.barrier(2, 0),
        h.buffer(0),
        h.buffer(2),
        h.buffer(1),
        # close one after the barrier one before the barrier
        h.end_of_partition(2),
        h.end_of_partition(1),
        h.buffer(0),
        # final end of stream
        h.end_of_partition(0),
    )
    h.assert_output(*seq2)
    assert h.writer.last_started_checkpoint_id == 2
    h.assert_inflight_data(seq2[7])
    h.ensure_empty()


def test_notify_abort_checkpoint_before_canelling_async_checkpoint():
    """Port of Flink UnalignedCheckpointsTest.testNotifyAbortCheckpointBeforeCanellingAsyncCheckpoint.

    Flink's ``ValidateAsyncFutureNotCompleted`` asserts, inside ``abortCheckpointOnBarrier``, that the
    gate's ``getAllBarriersReceivedFuture(id)`` is not done yet (the task is told about the abort before the
    async part of the checkpoint is cancelled). Our observable of that future is
    ``SingleCheckpointBarrierHandler.all_barriers_received(id)``."""
    handler = ValidatingCheckpointHandler(1, reset_expected_on_abort=True)
    h = UnalignedHarness(2, handler)
    seen: list[tuple[int, bool]] = []
    handler.on_abort = lambda cid: seen.append((cid, h.side.barrier_handler.all_barriers_received(cid)))
    h.add_sequence(h.barrier(1, 0), h.cancel(1, 1))
    h.add_sequence(h.end_of_partition(0), h.end_of_partition(1))
    assert seen == [(1, False)], f"all-barriers-received state at abort notification: {seen}"
    h.ensure_empty()


def test_single_channel_abort_checkpoint():
    """Port of Flink UnalignedCheckpointsTest.testSingleChannelAbortCheckpoint."""
    handler = ValidatingCheckpointHandler(1, reset_expected_on_abort=True)
    h = UnalignedHarness(1, handler)
    seq1 = h.add_sequence(h.buffer(0), h.barrier(1, 0), h.buffer(0), h.barrier(2, 0), h.cancel(4, 0))
    h.assert_output(*seq1)
    assert h.writer.last_started_checkpoint_id == 2
    assert handler.last_canceled_checkpoint_id == 4
    h.assert_inflight_data()

    seq2 = h.add_sequence(h.barrier(5, 0), h.buffer(0), h.cancel(6, 0), h.buffer(0), h.end_of_partition(0))
    h.assert_output(*seq2)
    assert h.writer.last_started_checkpoint_id == 5
    assert handler.last_canceled_checkpoint_id == 6
    h.assert_inflight_data()
    h.ensure_empty()


def test_multi_channel_abort_checkpoint():
    """Port of Flink UnalignedCheckpointsTest.testMultiChannelAbortCheckpoint."""
    handler = ValidatingCheckpointHandler(1, reset_expected_on_abort=True)
    h = UnalignedHarness(3, handler)
    # some buffers and a successful checkpoint
    seq1 = h.add_sequence(
        h.buffer(0),
        h.buffer(2),
        h.buffer(0),
        h.barrier(1, 1),
        h.barrier(1, 2),
        h.buffer(2),
        h.buffer(1),
        h.barrier(1, 0),
        h.buffer(0),
        h.buffer(2),
    )
    h.assert_output(*seq1)
    assert h.writer.last_started_checkpoint_id == 1
    h.assert_inflight_data()

    # canceled checkpoint on last barrier
    seq2 = h.add_sequence(h.barrier(2, 0), h.barrier(2, 2), h.buffer(0), h.buffer(2), h.cancel(2, 1))
    h.assert_output(*seq2)
    assert h.writer.last_started_checkpoint_id == 2
    assert handler.last_canceled_checkpoint_id == 2
    h.assert_inflight_data()

    # one more successful checkpoint
    seq3 = h.add_sequence(h.buffer(2), h.buffer(1), h.barrier(3, 1), h.barrier(3, 2), h.barrier(3, 0))
    h.assert_output(*seq3)
    assert h.writer.last_started_checkpoint_id == 3
    h.assert_inflight_data()

    # this checkpoint gets immediately canceled, don't start a checkpoint at all
    seq4 = h.add_sequence(h.buffer(0), h.buffer(1), h.cancel(4, 1), h.barrier(4, 2), h.buffer(0), h.barrier(4, 0))
    h.assert_output(*seq4)
    assert h.writer.last_started_checkpoint_id == -1
    assert handler.last_canceled_checkpoint_id == 4
    h.assert_inflight_data()

    # a simple successful checkpoint
    seq5 = h.add_sequence(
        h.buffer(0),
        h.buffer(1),
        h.buffer(2),
        h.barrier(5, 2),
        h.barrier(5, 1),
        h.barrier(5, 0),
        h.buffer(0),
        h.buffer(1),
    )
    h.assert_output(*seq5)
    assert h.writer.last_started_checkpoint_id == 5
    h.assert_inflight_data()

    # abort multiple cancellations and a barrier after the cancellations, don't start a checkpoint at all
    seq6 = h.add_sequence(
        h.cancel(6, 1),
        h.cancel(6, 2),
        h.barrier(6, 0),
        h.buffer(0),
        h.end_of_partition(0),
        h.end_of_partition(1),
        h.end_of_partition(2),
    )
    h.assert_output(*seq6)
    assert h.writer.last_started_checkpoint_id == -1
    assert handler.last_canceled_checkpoint_id == 6
    h.assert_inflight_data()
    h.ensure_empty()


def _verify_triggered_checkpoint(handler, invokable: ValidatingCheckpointInvokable, current_checkpoint_id: int):
    assert not handler.is_checkpoint_pending()
    assert handler.get_latest_checkpoint_id() == current_checkpoint_id
    assert invokable.aborted_checkpoint_id == current_checkpoint_id


def _process_cancellation_barrier(handler, validator, cancelled_checkpoint_id: int) -> None:
    # should abort current checkpoint while processing CancelCheckpointMarker
    handler.process_cancellation_barrier(CancelCheckpointMarker(cancelled_checkpoint_id), InputChannelInfo(0, 0))
    _verify_triggered_checkpoint(handler, validator, cancelled_checkpoint_id)
    # should update current checkpoint id and abort notification while processing CancelCheckpointMarker
    next_cancelled = cancelled_checkpoint_id + 1
    handler.process_cancellation_barrier(CancelCheckpointMarker(next_cancelled), InputChannelInfo(0, 0))
    _verify_triggered_checkpoint(handler, validator, next_cancelled)


def test_process_cancellation_barrier_after_process_barrier():
    """Port of Flink UnalignedCheckpointsTest.testProcessCancellationBarrierAfterProcessBarrier.

    Flink picks the cancelled id with ``new Random().nextBoolean()``; both choices are run here."""
    for cancelled_id in (DEFAULT_CHECKPOINT_ID, DEFAULT_CHECKPOINT_ID + 1):
        side, handler, validator = _handler_side(2)
        # should trigger respective checkpoint
        handler.process_barrier(_unaligned_barrier(DEFAULT_CHECKPOINT_ID), InputChannelInfo(0, 0), False)
        assert handler.is_checkpoint_pending()
        assert handler.get_latest_checkpoint_id() == DEFAULT_CHECKPOINT_ID
        _process_cancellation_barrier(handler, validator, cancelled_id)


def test_process_cancellation_barrier_before_process_and_receive_barrier():
    """Port of Flink UnalignedCheckpointsTest.testProcessCancellationBarrierBeforeProcessAndReceiveBarrier."""
    side, handler, validator = _handler_side(1)
    handler.process_cancellation_barrier(CancelCheckpointMarker(DEFAULT_CHECKPOINT_ID), InputChannelInfo(0, 0))
    _verify_triggered_checkpoint(handler, validator, DEFAULT_CHECKPOINT_ID)
    # it would not trigger checkpoint since the respective cancellation barrier already happened before
    handler.process_barrier(_unaligned_barrier(DEFAULT_CHECKPOINT_ID), InputChannelInfo(0, 0), False)
    _verify_triggered_checkpoint(handler, validator, DEFAULT_CHECKPOINT_ID)
    assert validator.total_triggered_checkpoints == 0


def test_end_of_stream_with_pending_checkpoint():
    """Port of Flink UnalignedCheckpointsTest.testEndOfStreamWithPendingCheckpoint."""
    number_of_channels = 2
    side, handler, validator = _handler_side(number_of_channels, enable_after_finished=False)
    # should trigger respective checkpoint
    handler.process_barrier(_unaligned_barrier(DEFAULT_CHECKPOINT_ID), InputChannelInfo(0, 0), False)
    assert handler.is_checkpoint_pending()
    assert handler.get_latest_checkpoint_id() == DEFAULT_CHECKPOINT_ID
    assert handler.num_open_channels == number_of_channels

    # should abort current checkpoint while processing eof
    handler.process_end_of_partition(InputChannelInfo(0, 0))
    assert not handler.is_checkpoint_pending()
    assert handler.get_latest_checkpoint_id() == DEFAULT_CHECKPOINT_ID
    assert handler.num_open_channels == number_of_channels - 1
    assert validator.aborted_checkpoint_id == DEFAULT_CHECKPOINT_ID
    assert validator.abort_reasons == [CheckpointFailureReason.CHECKPOINT_DECLINED_INPUT_END_OF_STREAM]


def test_trigger_checkpoints_with_end_of_partition():
    """Port of Flink UnalignedCheckpointsTest.testTriggerCheckpointsWithEndOfPartition."""
    validator = ValidatingCheckpointHandler(-1, reset_expected_on_abort=True)
    h = UnalignedHarness(3, validator)
    seq = h.add_sequence(
        h.barrier(1, 1),  # 0
        h.buffer(0),  # 1
        h.barrier(1, 0),  # 2
        h.buffer(1),  # 3
        h.end_of_partition(2),  # 4
        h.end_of_partition(0),  # 5
        h.end_of_partition(1),  # 6
    )
    h.assert_output(*seq)
    assert validator.triggered_checkpoints == [1]
    assert validator.aborted_checkpoint_counter == 0
    h.assert_inflight_data(seq[1])
    h.ensure_empty()


def test_trigger_checkpoints_after_received_end_of_partition():
    """Port of Flink UnalignedCheckpointsTest.testTriggerCheckpointsAfterReceivedEndOfPartition."""
    validator = ValidatingCheckpointHandler(-1, reset_expected_on_abort=True)
    h = UnalignedHarness(3, validator)
    seq1 = h.add_sequence(
        h.end_of_partition(0),  # 0
        h.barrier(3, 1),  # 1
        h.buffer(1),  # 2
        h.buffer(2),  # 3
        h.end_of_partition(1),  # 4
        h.barrier(3, 2),  # 5
    )
    h.assert_output(*seq1)
    h.assert_inflight_data(seq1[3])
    assert validator.triggered_checkpoints == [3]
    assert validator.aborted_checkpoint_counter == 0

    seq2 = h.add_sequence(h.buffer(2), h.barrier(4, 2), h.end_of_partition(2))
    h.assert_output(*seq2)
    h.assert_inflight_data()
    assert validator.triggered_checkpoints == [3, 4]
    assert validator.aborted_checkpoint_counter == 0
    h.ensure_empty()
