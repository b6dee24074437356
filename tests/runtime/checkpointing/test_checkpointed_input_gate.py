"""Ports of Flink's ``CheckpointedInputGateTest`` (persisting of in-flight data for unaligned
checkpoints through real remote channels, and a priority event racing with closing the gate).

Not ported: ``testUpstreamResumedUponEndOfRecovery`` (channel-state recovery and
``EndOfChannelStateEvent`` are outside this model)."""

import pytest

from barriersim.runtime.checkpointing.api import CheckpointingMode, InputSide, ManualClock, ManualTimerService
from barriersim.runtime.events import Buffer, CheckpointBarrier, CheckpointOptions, InputChannelInfo
from barriersim.runtime.network.input.single_input_gate import GateClosedError
from tests.runtime.checkpointing.checkpointing_testkit import ValidatingCheckpointHandler


def barrier(barrier_id):
    return CheckpointBarrier(barrier_id, barrier_id, CheckpointOptions.unaligned())


class _Enqueuer:
    """Flink's ``enqueue``: per channel sequence numbers from 0, zero backlog."""

    def __init__(self, side):
        self.side = side
        self.seq = {}
        self.count = 0

    def __call__(self, channel_idx, element):
        info = InputChannelInfo(0, channel_idx)
        seq = self.seq.get(info, 0)
        self.seq[info] = seq + 1
        self.side.on_element(info, element, seq, backlog=0 if isinstance(element, Buffer) else None)

    def some_buffer(self):
        self.count += 1
        return Buffer((self.count,), 10)


def added_input_size(side, checkpoint_id, channel_idx):
    return len(side.persisted_input_data(checkpoint_id).get(InputChannelInfo(0, channel_idx), ()))


def _test_persisting(drain_gate):
    number_of_channels = 3
    checkpoint_id, obsolete_checkpoint_id = 2, 1
    validating_handler = ValidatingCheckpointHandler(checkpoint_id)
    # Flink's test hands buffers to the channels without credit; here every channel gets enough exclusive
    # buffers (credit) for the buffers the test sends before it polls
    side = InputSide(
        [number_of_channels],
        CheckpointingMode.ALIGNED_WITH_TIMEOUT,
        ManualClock(),
        ManualTimerService(),
        exclusive_buffers_per_channel=4,
        sink=validating_handler,
    )
    enqueue = _Enqueuer(side)

    # the newer barrier is first, so the obsolete checkpoint is never triggered nor cancelled
    enqueue(0, enqueue.some_buffer())
    enqueue(0, barrier(checkpoint_id))
    enqueue(0, enqueue.some_buffer())
    enqueue(1, enqueue.some_buffer())
    enqueue(1, barrier(obsolete_checkpoint_id))
    enqueue(1, enqueue.some_buffer())
    enqueue(2, enqueue.some_buffer())

    assert validating_handler.triggered_checkpoint_counter == 0
    side.poll_next()  # trigger the checkpoint
    assert validating_handler.triggered_checkpoint_counter == 1
    assert side.triggered_checkpoints[0].is_unaligned

    assert [added_input_size(side, checkpoint_id, c) for c in range(3)] == [1, 2, 1]

    enqueue(0, enqueue.some_buffer())
    enqueue(1, enqueue.some_buffer())
    enqueue(2, enqueue.some_buffer())
    while drain_gate and side.poll_next() is not None:
        pass
    assert [added_input_size(side, checkpoint_id, c) for c in range(3)] == [1, 3, 2]

    enqueue(1, barrier(checkpoint_id))
    enqueue(1, enqueue.some_buffer())
    # another obsolete barrier that must be ignored
    enqueue(2, barrier(obsolete_checkpoint_id))
    enqueue(2, enqueue.some_buffer())
    while drain_gate and side.poll_next() is not None:
        pass
    assert [added_input_size(side, checkpoint_id, c) for c in range(3)] == [1, 3, 3]

    enqueue(2, barrier(checkpoint_id))
    enqueue(2, enqueue.some_buffer())
    while drain_gate and side.poll_next() is not None:
        pass
    assert [added_input_size(side, checkpoint_id, c) for c in range(3)] == [1, 3, 3]
    assert validating_handler.aborted_checkpoint_counter == 0
    if drain_gate:
        assert not side.is_checkpoint_pending()
        assert side.metrics(checkpoint_id).bytes_persisted_during_alignment == 7 * 10


def test_persisting():
    """Port of Flink CheckpointedInputGateTest.testPersisting.

    Adapted: channels get 4 exclusive buffers because Flink's test bypasses credit (see ``_test_persisting``)."""
    _test_persisting(False)


def test_persisting_with_draining_the_gate():
    """Port of Flink CheckpointedInputGateTest.testPersistingWithDrainingTheGate.

    Adapted as ``test_persisting``; also checks that the checkpoint completes and the persisted bytes."""
    _test_persisting(True)


@pytest.mark.parametrize("priority_first", [True, False])
def test_priority_before_close(priority_first):
    """Port of Flink CheckpointedInputGateTest.testPriorityBeforeClose.

    Adapted: Flink races a canceler thread against the mailbox's priority-event mail (100 repetitions) and
    accepts either outcome; here both orders are played deterministically: the priority event handled
    first triggers the checkpoint, closing first makes the mail fail (Flink's CancelTaskException)."""
    validating_handler = ValidatingCheckpointHandler(1)
    side = InputSide(
        [2], CheckpointingMode.ALIGNED_WITH_TIMEOUT, ManualClock(), ManualTimerService(), sink=validating_handler
    )
    side.on_element(InputChannelInfo(0, 0), barrier(1), 0)
    if priority_first:
        polled = side.process_priority_events()
        side.close()
        assert [b.element for b in polled] == [barrier(1)]
        assert validating_handler.triggered_checkpoint_counter == 1
    else:
        side.close()
        with pytest.raises(GateClosedError):
            side.process_priority_events()
        assert validating_handler.triggered_checkpoint_counter == 0
