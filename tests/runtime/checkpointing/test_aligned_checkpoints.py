"""Ports of Flink's ``AlignedCheckpointsTest``: the aligned ``SingleCheckpointBarrierHandler`` behind a
``CheckpointedInputGate`` over a mock gate that replays a fixed sequence (``testMetrics`` uses a real gate).

Flink checks timing with the wall clock (``validateAlignmentTime``: alignment duration <= elapsed); here a
manual clock makes the same checks exact."""

from barriersim.runtime.failure_reason import CheckpointFailureReason
from tests.runtime.checkpointing.checkpointing_testkit import (
    CheckpointingMode,
    InputSide,
    ManualClock,
    ValidatingCheckpointHandler,
    add_sequence,
    check,
    create_aligned_checkpointed_input_gate,
    create_barrier,
    create_buffer,
    create_cancellation_barrier,
    create_end_of_partition,
)

DECLINED_ON_CANCELLATION = CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER


def ensure_empty(input_gate):
    """Flink's ``@After ensureEmpty``."""
    assert input_gate.poll_next() is None
    assert input_gate.is_finished()
    input_gate.close()


def poll_and_check(input_gate, sequence, indexes):
    for i in indexes:
        check(sequence[i], input_gate.poll_next())


def test_single_channel_no_barriers():
    """Port of Flink AlignedCheckpointsTest.testSingleChannelNoBarriers."""
    sequence = [create_buffer(0), create_buffer(0), create_buffer(0), create_end_of_partition(0)]
    gate, _, _ = create_aligned_checkpointed_input_gate(1, sequence)
    for boe in sequence:
        assert gate.poll_next() == boe
    assert gate.get_alignment_duration_ms() == 0
    ensure_empty(gate)


def test_multi_channel_no_barriers():
    """Port of Flink AlignedCheckpointsTest.testMultiChannelNoBarriers."""
    sequence = [
        create_buffer(2),
        create_buffer(2),
        create_buffer(0),
        create_buffer(1),
        create_buffer(0),
        create_end_of_partition(0),
        create_buffer(3),
        create_buffer(1),
        create_end_of_partition(3),
        create_buffer(1),
        create_end_of_partition(1),
        create_buffer(2),
        create_end_of_partition(2),
    ]
    gate, _, _ = create_aligned_checkpointed_input_gate(4, sequence)
    for boe in sequence:
        assert gate.poll_next() == boe
    assert gate.get_alignment_duration_ms() == 0
    ensure_empty(gate)


def test_single_channel_with_barriers():
    """Port of Flink AlignedCheckpointsTest.testSingleChannelWithBarriers."""
    sequence = [
        create_buffer(0),
        create_buffer(0),
        create_buffer(0),
        create_barrier(1, 0),
        create_buffer(0),
        create_buffer(0),
        create_buffer(0),
        create_buffer(0),
        create_barrier(2, 0),
        create_barrier(3, 0),
        create_buffer(0),
        create_buffer(0),
        create_barrier(4, 0),
        create_barrier(5, 0),
        create_barrier(6, 0),
        create_buffer(0),
        create_end_of_partition(0),
    ]
    handler = ValidatingCheckpointHandler(1)
    gate, _, _ = create_aligned_checkpointed_input_gate(1, sequence, handler)
    for boe in sequence:
        assert gate.poll_next() == boe
    assert handler.triggered_checkpoints == [1, 2, 3, 4, 5, 6]
    ensure_empty(gate)


def test_multi_channel_with_barriers():
    """Port of Flink AlignedCheckpointsTest.testMultiChannelWithBarriers.

    Adapted: the manual clock advances 7 ms during the alignment of checkpoint 1, which must be its
    alignment duration exactly (Flink only bounds it by the elapsed wall time)."""
    sequence = [
        # checkpoint with data from multi channels
        create_buffer(0),
        create_buffer(2),
        create_buffer(0),
        create_barrier(1, 1),
        create_barrier(1, 2),
        create_buffer(0),
        create_barrier(1, 0),
        # another checkpoint
        create_buffer(0),
        create_buffer(0),
        create_buffer(1),
        create_buffer(1),
        create_buffer(2),
        create_barrier(2, 0),
        create_barrier(2, 1),
        create_barrier(2, 2),
        # checkpoint with data only from one channel
        create_buffer(2),
        create_buffer(2),
        create_barrier(3, 2),
        create_buffer(0),
        create_buffer(0),
        create_barrier(3, 0),
        create_barrier(3, 1),
        # empty checkpoint
        create_barrier(4, 1),
        create_barrier(4, 2),
        create_barrier(4, 0),
        # some trailing data
        create_buffer(0),
        create_end_of_partition(0),
        create_end_of_partition(1),
        create_end_of_partition(2),
    ]
    clock = ManualClock(100)
    handler = ValidatingCheckpointHandler(1)
    gate, mock, _ = create_aligned_checkpointed_input_gate(3, sequence, handler, clock=clock)

    poll_and_check(gate, sequence, range(0, 3))
    assert handler.next_expected_checkpoint_id == 1

    # checkpoint 1 done
    poll_and_check(gate, sequence, [3])
    clock.advance(7)
    poll_and_check(gate, sequence, range(4, 7))
    assert handler.next_expected_checkpoint_id == 2
    assert gate.get_alignment_duration_ms() == 7
    assert handler.last_alignment_duration_ms == 7
    assert gate.get_checkpoint_start_delay_ms() == 100  # barriers were created at time 0
    assert mock.get_blocked_channels() == set()

    # pre checkpoint 2
    poll_and_check(gate, sequence, range(7, 12))
    assert handler.next_expected_checkpoint_id == 2

    # checkpoint 2 barriers come together
    poll_and_check(gate, sequence, range(12, 15))
    assert handler.next_expected_checkpoint_id == 3
    assert gate.get_alignment_duration_ms() == 0
    assert mock.get_blocked_channels() == set()

    poll_and_check(gate, sequence, range(15, 17))

    # checkpoint 3
    poll_and_check(gate, sequence, range(17, 22))
    assert handler.next_expected_checkpoint_id == 4
    assert mock.get_blocked_channels() == set()

    # checkpoint 4
    poll_and_check(gate, sequence, range(22, 25))
    assert handler.next_expected_checkpoint_id == 5
    assert mock.get_blocked_channels() == set()

    # remaining data
    poll_and_check(gate, sequence, range(25, 29))
    ensure_empty(gate)


def test_multi_channel_jumping_over_checkpoint():
    """Port of Flink AlignedCheckpointsTest.testMultiChannelJumpingOverCheckpoint."""
    sequence = [
        # checkpoint 1
        create_buffer(0),
        create_buffer(2),
        create_buffer(0),
        create_barrier(1, 1),
        create_barrier(1, 2),
        create_buffer(0),
        create_barrier(1, 0),
        create_buffer(1),
        create_buffer(0),
        # checkpoint 2 will not complete: pre-mature barrier from checkpoint 3
        create_barrier(2, 1),
        create_buffer(2),
        create_barrier(2, 0),
        create_buffer(2),
        create_barrier(3, 2),
        create_buffer(1),
        create_buffer(0),
        create_barrier(3, 0),
        create_barrier(4, 1),
        create_buffer(2),
        create_buffer(0),
        create_end_of_partition(0),
        create_buffer(2),
        create_end_of_partition(2),
        create_buffer(1),
        create_end_of_partition(1),
    ]
    handler = ValidatingCheckpointHandler(1)
    gate, mock, _ = create_aligned_checkpointed_input_gate(3, sequence, handler, False)

    poll_and_check(gate, sequence, range(0, 3))

    # checkpoint 1
    poll_and_check(gate, sequence, [3])
    assert gate.get_latest_checkpoint_id() == 1
    poll_and_check(gate, sequence, range(4, 7))
    assert mock.get_blocked_channels() == set()

    poll_and_check(gate, sequence, range(7, 9))

    # alignment of checkpoint 2
    poll_and_check(gate, sequence, [9])
    assert gate.get_latest_checkpoint_id() == 2
    poll_and_check(gate, sequence, range(10, 13))

    # checkpoint 2 aborted, checkpoint 3 started
    assert mock.get_blocked_channels() == {0, 1}
    poll_and_check(gate, sequence, [13])
    assert gate.get_latest_checkpoint_id() == 3
    assert mock.get_blocked_channels() == {2}
    poll_and_check(gate, sequence, range(14, 17))

    # checkpoint 3 aborted, checkpoint 4 started
    assert mock.get_blocked_channels() == {0, 2}
    poll_and_check(gate, sequence, [17])
    assert gate.get_latest_checkpoint_id() == 4
    assert mock.get_blocked_channels() == {1}
    poll_and_check(gate, sequence, range(18, 20))

    # checkpoint 4 aborted (due to end of partition)
    poll_and_check(gate, sequence, [20])
    assert mock.get_blocked_channels() == set()
    assert handler.failure_reason is CheckpointFailureReason.CHECKPOINT_DECLINED_INPUT_END_OF_STREAM
    poll_and_check(gate, sequence, range(21, 25))

    assert handler.triggered_checkpoint_counter == 1
    assert handler.aborted_checkpoint_counter == 3
    ensure_empty(gate)


def test_metrics():
    """Port of Flink AlignedCheckpointsTest.testMetrics.

    Adapted: a real gate of remote channels (credit-based) through ``InputSide``; the two 10 ms sleeps
    are manual-clock advances, so start delay and alignment duration are asserted exactly."""
    clock = ManualClock(1_000)
    handler = ValidatingCheckpointHandler()
    side = InputSide([3], CheckpointingMode.ALIGNED, clock, sink=handler)
    output, sequence_numbers = [], {}
    buffer_size, checkpoint_id, sleep_time = 100, 1, 10
    checkpoint_barrier_creation = clock()
    clock.advance(sleep_time)

    add_sequence(
        side,
        output,
        sequence_numbers,
        create_buffer(0, buffer_size),
        create_buffer(1, buffer_size),
        create_buffer(2, buffer_size),
        create_barrier(checkpoint_id, 1, checkpoint_barrier_creation),
        create_buffer(0, buffer_size),
        create_buffer(2, buffer_size),
        create_barrier(checkpoint_id, 0, checkpoint_barrier_creation),
        create_buffer(2, buffer_size),
    )
    clock.advance(sleep_time)
    add_sequence(
        side,
        output,
        sequence_numbers,
        create_barrier(checkpoint_id, 2, checkpoint_barrier_creation),
        create_buffer(0, buffer_size),
        create_buffer(1, buffer_size),
        create_buffer(2, buffer_size),
        create_end_of_partition(0),
        create_end_of_partition(1),
        create_end_of_partition(2),
    )

    assert side.latest_checkpoint_id == checkpoint_id
    assert side.checkpoint_start_delay_ms() == sleep_time
    assert handler.last_alignment_duration_ms == sleep_time
    assert handler.last_bytes_processed_during_alignment == 3 * buffer_size
    metrics = side.metrics(checkpoint_id)
    assert (metrics.alignment_duration_ms, metrics.bytes_processed_during_alignment) == (sleep_time, 300)
    assert metrics.checkpoint_start_delay_ms == sleep_time and metrics.bytes_persisted_during_alignment == 0
    assert len(output) == 15
    assert side.poll_next() is None and side.is_finished()


def test_missing_cancellation_barriers():
    """Port of Flink AlignedCheckpointsTest.testMissingCancellationBarriers."""
    sequence = [
        create_barrier(1, 0),
        create_cancellation_barrier(3, 1),
        create_cancellation_barrier(2, 0),
        create_cancellation_barrier(3, 0),
        create_buffer(0),
    ]
    gate, mock, handler = create_aligned_checkpointed_input_gate(2, sequence)
    for boe in sequence:
        assert gate.poll_next() == boe
    assert mock.get_blocked_channels() == set()
    assert handler.aborted_checkpoints == [3]
    ensure_empty(gate)


def test_start_alignment_with_closed_channels():
    """Port of Flink AlignedCheckpointsTest.testStartAlignmentWithClosedChannels."""
    sequence = [
        # close some channels immediately
        create_end_of_partition(2),
        create_end_of_partition(1),
        # checkpoint without blocked data
        create_buffer(0),
        create_buffer(0),
        create_buffer(3),
        create_barrier(2, 3),
        create_barrier(2, 0),
        # empty checkpoint
        create_barrier(3, 0),
        create_barrier(3, 3),
        # some data, one channel closes
        create_buffer(0),
        create_buffer(0),
        create_buffer(3),
        create_end_of_partition(0),
        # checkpoint on last remaining channel
        create_buffer(3),
        create_barrier(4, 3),
        create_buffer(3),
        create_end_of_partition(3),
    ]
    gate, mock, handler = create_aligned_checkpointed_input_gate(4, sequence)
    poll_and_check(gate, sequence, range(0, 5))
    poll_and_check(gate, sequence, range(5, 7))
    assert gate.get_latest_checkpoint_id() == 2
    assert mock.get_blocked_channels() == set()
    poll_and_check(gate, sequence, range(7, 9))
    assert gate.get_latest_checkpoint_id() == 3
    assert mock.get_blocked_channels() == set()
    poll_and_check(gate, sequence, range(9, 14))
    poll_and_check(gate, sequence, [14])
    assert gate.get_latest_checkpoint_id() == 4
    assert mock.get_blocked_channels() == set()
    poll_and_check(gate, sequence, range(15, 17))
    assert handler.triggered_checkpoints == [2, 3, 4]
    ensure_empty(gate)


def test_end_of_stream_while_checkpoint():
    """Port of Flink AlignedCheckpointsTest.testEndOfStreamWhileCheckpoint."""
    sequence = [
        # one checkpoint
        create_barrier(1, 0),
        create_barrier(1, 1),
        create_barrier(1, 2),
        # some buffers
        create_buffer(0),
        create_buffer(0),
        create_buffer(2),
        # start the checkpoint that will be incomplete
        create_barrier(2, 2),
        create_barrier(2, 0),
        create_buffer(1),
        # close one after the barrier one before the barrier
        create_end_of_partition(1),
        create_end_of_partition(2),
        create_buffer(0),
        # final end of stream
        create_end_of_partition(0),
    ]
    gate, mock, handler = create_aligned_checkpointed_input_gate(3, sequence)
    poll_and_check(gate, sequence, range(0, 3))
    assert mock.get_blocked_channels() == set()
    poll_and_check(gate, sequence, range(3, 6))
    assert gate.get_latest_checkpoint_id() == 1

    # alignment of second checkpoint
    poll_and_check(gate, sequence, [6])
    assert gate.get_latest_checkpoint_id() == 2
    poll_and_check(gate, sequence, range(7, 9))

    # first end of partition: with checkpoints after tasks finish it counts as the missing barrier
    poll_and_check(gate, sequence, [9])
    assert mock.get_blocked_channels() == set()
    poll_and_check(gate, sequence, range(10, 13))
    assert handler.triggered_checkpoints == [1, 2]
    ensure_empty(gate)


def test_single_channel_abort_checkpoint():
    """Port of Flink AlignedCheckpointsTest.testSingleChannelAbortCheckpoint."""
    sequence = [
        create_buffer(0),
        create_barrier(1, 0),
        create_buffer(0),
        create_barrier(2, 0),
        create_buffer(0),
        create_cancellation_barrier(4, 0),
        create_barrier(5, 0),
        create_buffer(0),
        create_cancellation_barrier(6, 0),
        create_buffer(0),
    ]
    to_notify = ValidatingCheckpointHandler()
    gate, mock, _ = create_aligned_checkpointed_input_gate(1, sequence, to_notify)

    to_notify.next_expected_checkpoint_id = 1
    poll_and_check(gate, sequence, range(0, 2))
    assert gate.get_alignment_duration_ms() == 0
    assert mock.get_blocked_channels() == set()

    to_notify.next_expected_checkpoint_id = 2
    poll_and_check(gate, sequence, range(2, 4))
    assert mock.get_blocked_channels() == set()

    to_notify.next_expected_checkpoint_id = 5
    poll_and_check(gate, sequence, range(4, 6))
    assert gate.get_latest_checkpoint_id() == 4
    assert to_notify.last_canceled_checkpoint_id == 4
    assert to_notify.failure_reason is DECLINED_ON_CANCELLATION
    assert gate.get_alignment_duration_ms() == 0
    poll_and_check(gate, sequence, [6])
    assert gate.get_latest_checkpoint_id() == 5
    assert to_notify.last_canceled_checkpoint_id == 4
    assert gate.get_alignment_duration_ms() == 0
    assert mock.get_blocked_channels() == set()

    poll_and_check(gate, sequence, range(7, 10))
    assert gate.get_latest_checkpoint_id() == 6
    assert to_notify.last_canceled_checkpoint_id == 6
    assert to_notify.failure_reason is DECLINED_ON_CANCELLATION
    assert gate.get_alignment_duration_ms() == 0

    assert to_notify.triggered_checkpoint_counter == 3
    assert to_notify.aborted_checkpoint_counter == 2
    ensure_empty(gate)


def test_multi_channel_abort_checkpoint():
    """Port of Flink AlignedCheckpointsTest.testMultiChannelAbortCheckpoint."""
    sequence = [
        # some buffers and a successful checkpoint
        create_buffer(0),
        create_buffer(2),
        create_buffer(0),
        create_barrier(1, 1),
        create_barrier(1, 2),
        create_buffer(0),
        create_barrier(1, 0),
        create_buffer(0),
        create_buffer(2),
        # aborted on last barrier
        create_barrier(2, 0),
        create_barrier(2, 2),
        create_buffer(1),
        create_cancellation_barrier(2, 1),
        # successful checkpoint
        create_buffer(2),
        create_buffer(1),
        create_barrier(3, 1),
        create_barrier(3, 2),
        create_barrier(3, 0),
        # abort on first barrier
        create_buffer(0),
        create_buffer(1),
        create_cancellation_barrier(4, 1),
        create_barrier(4, 2),
        create_buffer(2),
        create_barrier(4, 0),
        # another successful checkpoint
        create_buffer(0),
        create_buffer(1),
        create_buffer(2),
        create_barrier(5, 2),
        create_barrier(5, 1),
        create_barrier(5, 0),
        create_buffer(0),
        create_buffer(1),
        # abort multiple cancellations and a barrier after the cancellations
        create_cancellation_barrier(6, 1),
        create_cancellation_barrier(6, 2),
        create_barrier(6, 0),
        create_buffer(0),
    ]
    to_notify = ValidatingCheckpointHandler()
    gate, mock, _ = create_aligned_checkpointed_input_gate(3, sequence, to_notify)

    poll_and_check(gate, sequence, range(0, 3))

    # first successful checkpoint
    to_notify.next_expected_checkpoint_id = 1
    poll_and_check(gate, sequence, [3])
    assert mock.get_blocked_channels() == {1}
    poll_and_check(gate, sequence, [4])
    assert mock.get_blocked_channels() == {1, 2}
    poll_and_check(gate, sequence, range(5, 7))
    assert mock.get_blocked_channels() == set()
    poll_and_check(gate, sequence, range(7, 9))

    # alignment of second checkpoint
    poll_and_check(gate, sequence, [9])
    assert mock.get_blocked_channels() == {0}
    poll_and_check(gate, sequence, [10])
    assert mock.get_blocked_channels() == {0, 2}
    poll_and_check(gate, sequence, [11])

    # canceled checkpoint on last barrier
    poll_and_check(gate, sequence, [12])
    assert to_notify.last_canceled_checkpoint_id == 2
    assert mock.get_blocked_channels() == set()
    assert to_notify.failure_reason is DECLINED_ON_CANCELLATION
    poll_and_check(gate, sequence, range(13, 15))

    # one more successful checkpoint
    to_notify.next_expected_checkpoint_id = 3
    poll_and_check(gate, sequence, range(15, 18))
    assert mock.get_blocked_channels() == set()
    poll_and_check(gate, sequence, range(18, 20))

    # this checkpoint gets immediately canceled
    poll_and_check(gate, sequence, [20])
    assert to_notify.last_canceled_checkpoint_id == 4
    assert to_notify.failure_reason is DECLINED_ON_CANCELLATION
    assert gate.get_alignment_duration_ms() == 0
    poll_and_check(gate, sequence, [21])
    assert mock.get_blocked_channels() == set()
    poll_and_check(gate, sequence, range(22, 24))
    assert mock.get_blocked_channels() == set()

    poll_and_check(gate, sequence, range(24, 27))

    # a simple successful checkpoint
    to_notify.next_expected_checkpoint_id = 5
    poll_and_check(gate, sequence, range(27, 30))
    assert mock.get_blocked_channels() == set()
    poll_and_check(gate, sequence, range(30, 32))

    # this checkpoint gets immediately canceled
    poll_and_check(gate, sequence, range(32, 34))
    assert to_notify.last_canceled_checkpoint_id == 6
    assert to_notify.failure_reason is DECLINED_ON_CANCELLATION
    assert gate.get_alignment_duration_ms() == 0
    poll_and_check(gate, sequence, [34])
    assert mock.get_blocked_channels() == set()
    poll_and_check(gate, sequence, [35])

    assert to_notify.triggered_checkpoint_counter == 3
    assert to_notify.aborted_checkpoint_counter == 3
    ensure_empty(gate)


def test_abort_on_canceled_barriers():
    """Port of Flink AlignedCheckpointsTest.testAbortOnCanceledBarriers."""
    sequence = [
        # starting a checkpoint
        create_buffer(1),
        create_barrier(1, 1),
        create_buffer(2),
        create_buffer(0),
        # cancel the initial checkpoint
        create_cancellation_barrier(1, 0),
        # receiving a buffer
        create_buffer(1),
        # starting a new checkpoint
        create_barrier(2, 1),
        # some more buffers
        create_buffer(2),
        create_buffer(0),
        # ignored barrier - already canceled and moved to next checkpoint
        create_barrier(1, 2),
        # some more buffers
        create_buffer(0),
        create_buffer(2),
        # complete next checkpoint regularly
        create_barrier(2, 0),
        create_barrier(2, 2),
        # some more buffers
        create_buffer(0),
        create_buffer(1),
        create_buffer(2),
    ]
    to_notify = ValidatingCheckpointHandler()
    gate, mock, _ = create_aligned_checkpointed_input_gate(3, sequence, to_notify)

    poll_and_check(gate, sequence, [0])
    poll_and_check(gate, sequence, range(1, 4))

    # cancelled by cancellation barrier
    poll_and_check(gate, sequence, range(4, 6))
    assert to_notify.last_canceled_checkpoint_id == 1
    assert to_notify.failure_reason is DECLINED_ON_CANCELLATION
    assert mock.get_blocked_channels() == set()

    # the next checkpoint alignment
    poll_and_check(gate, sequence, range(6, 9))

    # ignored barrier and unblock channel directly
    poll_and_check(gate, sequence, [9])
    assert mock.get_blocked_channels() == {1}
    poll_and_check(gate, sequence, range(10, 12))

    # checkpoint 2 done
    to_notify.next_expected_checkpoint_id = 2
    poll_and_check(gate, sequence, range(12, 14))
    assert mock.get_blocked_channels() == set()

    poll_and_check(gate, sequence, range(14, 17))
    assert to_notify.triggered_checkpoint_counter == 1
    assert to_notify.aborted_checkpoint_counter == 1
    ensure_empty(gate)


def test_ignore_cancel_barrier_if_checkpoint_subsumed():
    """Port of Flink AlignedCheckpointsTest.testIgnoreCancelBarrierIfCheckpointSubsumed."""
    sequence = [
        # starting a checkpoint
        create_buffer(2),
        create_barrier(3, 1),
        create_barrier(3, 0),
        create_buffer(2),
        # newer checkpoint barrier cancels/subsumes pending checkpoint
        create_barrier(5, 2),
        # some queued buffers
        create_buffer(1),
        create_buffer(0),
        # cancel barrier the initial checkpoint /it is already canceled)
        create_cancellation_barrier(3, 0),
        # some more buffers
        create_buffer(0),
        create_buffer(1),
        # complete next checkpoint regularly
        create_barrier(5, 0),
        create_barrier(5, 1),
        # some more buffers
        create_buffer(0),
        create_buffer(1),
        create_buffer(2),
    ]
    to_notify = ValidatingCheckpointHandler()
    gate, mock, _ = create_aligned_checkpointed_input_gate(3, sequence, to_notify)

    poll_and_check(gate, sequence, [0])
    poll_and_check(gate, sequence, range(1, 4))

    # future barrier aborts checkpoint
    assert mock.get_blocked_channels() == {0, 1}
    poll_and_check(gate, sequence, [4])
    assert to_notify.last_canceled_checkpoint_id == 3
    assert to_notify.failure_reason is CheckpointFailureReason.CHECKPOINT_DECLINED_SUBSUMED
    assert mock.get_blocked_channels() == {2}
    poll_and_check(gate, sequence, range(5, 7))

    # alignment of next checkpoint
    poll_and_check(gate, sequence, range(7, 10))

    # checkpoint finished
    to_notify.next_expected_checkpoint_id = 5
    poll_and_check(gate, sequence, range(10, 12))
    assert mock.get_blocked_channels() == set()

    poll_and_check(gate, sequence, range(12, 15))
    assert to_notify.triggered_checkpoint_counter == 1
    assert to_notify.aborted_checkpoint_counter == 1
    ensure_empty(gate)


def test_trigger_checkpoints_with_end_of_partition():
    """Port of Flink AlignedCheckpointsTest.testTriggerCheckpointsWithEndOfPartition."""
    sequence = [create_barrier(1, 0), create_barrier(1, 1), create_end_of_partition(2)]
    validator = ValidatingCheckpointHandler(-1)
    gate, _, _ = create_aligned_checkpointed_input_gate(3, sequence, validator)
    for boe in sequence:
        check(boe, gate.poll_next())
    assert validator.triggered_checkpoints == [1]
    assert validator.aborted_checkpoint_counter == 0
    assert not gate.get_checkpoint_barrier_handler().is_checkpoint_pending()
    ensure_empty(gate)


def test_deduplicate_channels_with_both_barrier_and_end_of_partition():
    """Port of Flink AlignedCheckpointsTest.testDeduplicateChannelsWithBothBarrierAndEndOfPartition."""
    sequence = [create_barrier(2, 0), create_barrier(2, 1), create_end_of_partition(1), create_barrier(2, 2)]
    validator = ValidatingCheckpointHandler(-1)
    gate, _, _ = create_aligned_checkpointed_input_gate(3, sequence, validator)
    poll_and_check(gate, sequence, range(0, 3))
    # here the checkpoint must not be triggered
    assert validator.triggered_checkpoint_counter == 0
    assert validator.aborted_checkpoint_counter == 0
    # the last barrier aligns the pending checkpoint 2
    assert gate.poll_next() == sequence[3]
    assert validator.triggered_checkpoints == [2]
    assert not gate.get_checkpoint_barrier_handler().is_checkpoint_pending()
    ensure_empty(gate)


def test_trigger_checkpoints_after_received_end_of_partition():
    """Port of Flink AlignedCheckpointsTest.testTriggerCheckpointsAfterReceivedEndOfPartition."""
    sequence = [
        create_end_of_partition(2),
        create_barrier(6, 0),
        create_barrier(6, 1),
        create_end_of_partition(1),
        create_barrier(7, 0),
    ]
    validator = ValidatingCheckpointHandler(-1)
    gate, _, _ = create_aligned_checkpointed_input_gate(3, sequence, validator)
    for boe in sequence:
        check(boe, gate.poll_next())
    assert validator.triggered_checkpoints == [6, 7]
    assert validator.aborted_checkpoint_counter == 0
    assert not gate.get_checkpoint_barrier_handler().is_checkpoint_pending()
    ensure_empty(gate)
