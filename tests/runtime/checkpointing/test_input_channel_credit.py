"""Credit-based flow control on the receiving side: exclusive and floating buffers, credit announcements,
blocked channels, and the invariants (Hypothesis) that credit never goes negative and that the receiver
never announces more credit than it has free buffers."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barriersim.runtime.checkpointing.api import CheckpointingMode, InputSide, ManualClock
from barriersim.runtime.events import Buffer, CheckpointBarrier, CheckpointOptions, InputChannelInfo
from barriersim.runtime.network.input.buffer_manager import CreditViolationError
from barriersim.runtime.network.input.input_channel import (
    AddCredit,
    BufferReorderingException,
    ResumeConsumptionUpstream,
)

CH0, CH1 = InputChannelInfo(0, 0), InputChannelInfo(0, 1)


def credits(actions, info):
    return [a.credit for a in actions if isinstance(a, AddCredit) and a.channel_info == info]


def test_initial_credit_is_the_exclusive_buffers():
    side = InputSide([2], CheckpointingMode.ALIGNED, ManualClock())
    actions = side.drain_actions()
    assert credits(actions, CH0) == [2] and credits(actions, CH1) == [2]
    assert side.sender_credit(CH0) == 2


def test_consuming_a_buffer_returns_its_credit():
    side = InputSide([1], CheckpointingMode.ALIGNED, ManualClock(), floating_buffers_per_gate=0)
    side.drain_actions()
    side.on_element(CH0, Buffer(("a",), 10), backlog=0)
    assert side.sender_credit(CH0) == 1 and side.drain_actions() == []
    side.poll_next()
    # the task holds the buffer until it processed it (Flink's deserializer recycles it after its last record)
    assert credits(side.drain_actions(), CH0) == []
    side.release_processed()
    assert credits(side.drain_actions(), CH0) == [1]
    assert side.sender_credit(CH0) == 2
    side.release_processed()  # released once only
    assert side.drain_actions() == [] and side.sender_credit(CH0) == 2


def test_a_priority_event_handled_mid_buffer_does_not_recycle_the_buffer_the_task_reads():
    """Flink's priority-event mail runs between two records of the buffer the task is reading: handling an
    unaligned barrier then must not recycle that buffer (its credit returns once the task processed it)."""
    side = InputSide(
        [2], CheckpointingMode.UNALIGNED, ManualClock(), floating_buffers_per_gate=0, exclusive_buffers_per_channel=1
    )
    side.drain_actions()
    side.on_element(CH0, Buffer(("a",), 10), backlog=0)
    assert side.poll_next().element == Buffer(("a",), 10)  # the task reads CH0's buffer
    side.drain_actions()
    barrier = CheckpointBarrier(1, 0, CheckpointOptions.unaligned())
    side.on_element(CH1, barrier, backlog=0)
    assert [boe.element for boe in side.process_priority_events()] == [barrier]
    assert credits(side.drain_actions(), CH0) == []  # still the task's
    assert side.sender_credit(CH0) == 0
    side.release_processed()  # the task's next step: it processed the buffer
    assert credits(side.drain_actions(), CH0) == [1]


def test_backlog_zero_still_refills_to_the_initial_credit():
    """Flink requests floating buffers until ``backlog + initialCredit`` are free."""
    side = InputSide([1], CheckpointingMode.ALIGNED, ManualClock())
    side.drain_actions()
    side.on_element(CH0, Buffer(("a",), 10), backlog=0)
    assert credits(side.drain_actions(), CH0) == [1]
    assert side.get_channel(CH0).buffer_manager.num_floating_held == 1


def test_backlog_requests_floating_buffers_up_to_the_pool_size():
    side = InputSide([2], CheckpointingMode.ALIGNED, ManualClock(), floating_buffers_per_gate=8)
    side.drain_actions()
    side.on_element(CH0, Buffer(("a",), 10), backlog=20)
    # wants 20 + 2 buffers, has 1 exclusive left: takes all 8 floating buffers
    assert credits(side.drain_actions(), CH0) == [8]
    assert side.gate(0).floating_pool.num_available == 0
    # channel 1 must wait for a floating buffer
    side.on_element(CH1, Buffer(("b",), 10), backlog=5)
    assert credits(side.drain_actions(), CH1) == []
    assert side.get_channel(CH1).buffer_manager.is_waiting_for_floating_buffers


def test_recycled_floating_buffer_goes_to_a_waiting_channel():
    side = InputSide([2], CheckpointingMode.ALIGNED, ManualClock(), floating_buffers_per_gate=1)
    side.drain_actions()
    side.on_element(CH0, Buffer(("a",), 10), backlog=1)  # takes the exclusive, asks 3, gets the floating
    side.on_element(CH0, Buffer(("b",), 10), backlog=0)  # lands in the floating buffer
    side.on_element(CH1, Buffer(("c",), 10), backlog=2)  # waits for a floating buffer
    assert credits(side.drain_actions(), CH1) == []
    side.poll_next()  # CH0's first buffer (exclusive): CH0 has enough now, no new credit for more floating
    side.poll_next()  # CH1's buffer
    side.poll_next()  # CH0's floating buffer
    side.release_processed()  # processed: recycled to the pool, handed to the waiting CH1
    actions = side.drain_actions()
    assert sum(credits(actions, CH1)) == 1 + 1  # its exclusive back, plus the floating buffer
    assert side.get_channel(CH1).buffer_manager.num_floating_held == 1


def test_sending_without_credit_is_a_protocol_violation():
    side = InputSide([1], CheckpointingMode.ALIGNED, ManualClock(), floating_buffers_per_gate=0)
    side.on_element(CH0, Buffer((1,), 10), backlog=0)
    side.on_element(CH0, Buffer((2,), 10), backlog=0)
    with pytest.raises(CreditViolationError):
        side.on_element(CH0, Buffer((3,), 10), backlog=0)


def test_events_need_no_credit():
    side = InputSide([1], CheckpointingMode.ALIGNED, ManualClock(), floating_buffers_per_gate=0)
    side.on_element(CH0, Buffer((1,), 10))
    side.on_element(CH0, Buffer((2,), 10))
    side.on_element(CH0, CheckpointBarrier(1, 0, CheckpointOptions.aligned()))
    assert side.sender_credit(CH0) == 0


def test_sequence_numbers_are_checked():
    side = InputSide([1], CheckpointingMode.ALIGNED, ManualClock())
    side.on_element(CH0, Buffer((1,), 10), 0)
    with pytest.raises(BufferReorderingException):
        side.on_element(CH0, Buffer((2,), 10), 2)


def test_blocked_channel_stops_granting_credit():
    side = InputSide([2], CheckpointingMode.ALIGNED, ManualClock())
    # channel 0 delivers the barrier and is blocked
    side.on_element(CH0, CheckpointBarrier(1, 0, CheckpointOptions.aligned()))
    assert side.poll_next().element == CheckpointBarrier(1, 0, CheckpointOptions.aligned())
    assert side.blocked_channels() == [CH0]
    side.drain_actions()
    # data keeps arriving within the credit the sender holds: no floating buffers for the backlog while
    # blocked, nothing consumed, so no credit comes back and the sender runs dry
    side.on_element(CH0, Buffer((1,), 10), backlog=6)
    side.on_element(CH0, Buffer((2,), 10), backlog=6)
    assert side.poll_next() is None
    assert side.sender_credit(CH0) == 0 and credits(side.drain_actions(), CH0) == []
    with pytest.raises(CreditViolationError):
        side.on_element(CH0, Buffer((3,), 10))
    # the last barrier completes the alignment: channel 0 resumes, asks upstream to resume and gets
    # floating buffers for its backlog (6 + 2 wanted, 0 free: all 8 floating buffers)
    side.on_element(CH1, CheckpointBarrier(1, 0, CheckpointOptions.aligned()))
    side.poll_next()
    actions = side.drain_actions()
    assert ResumeConsumptionUpstream(CH0) in actions
    assert credits(actions, CH0) == [8]
    assert side.blocked_channels() == []
    assert [b.element.records for b in side.poll_all()] == [(1,), (2,)]
    # the recycled exclusive buffers replace floating ones (the channel has more than it needs): no credit
    assert credits(side.drain_actions(), CH0) == []
    assert side.sender_credit(CH0) == 8


# -- properties ------------------------------------------------------------------------------------------

OPS = st.lists(
    st.tuples(
        st.sampled_from(["send", "poll", "block", "resume"]),
        st.integers(min_value=0, max_value=2),
        st.integers(min_value=0, max_value=12),
    ),
    max_size=80,
)


@settings(max_examples=200, deadline=None)
@given(OPS, st.integers(min_value=0, max_value=4), st.integers(min_value=0, max_value=3))
def test_credit_never_negative_and_never_exceeds_free_buffers(ops, floating, exclusive):
    """Property: whatever a credit-honouring sender and the task do, every channel's sender credit is >= 0,
    announced + unannounced credit equals its free buffers, floating buffers are conserved, and a blocked
    channel grants no credit."""
    side = InputSide(
        [3],
        CheckpointingMode.ALIGNED,
        ManualClock(),
        floating_buffers_per_gate=floating,
        exclusive_buffers_per_channel=exclusive,
    )
    gate = side.gate(0)
    for op, ch, backlog in ops:
        info = InputChannelInfo(0, ch)
        channel = gate.get_channel(ch)
        side.drain_actions()
        if op == "send":
            if channel.sender_credit > 0:
                side.on_element(info, Buffer((ch,), 1), backlog=backlog)
            else:
                with pytest.raises(CreditViolationError):
                    side.on_element(info, Buffer((ch,), 1), backlog=backlog)
        elif op == "poll":
            side.poll_next()
        elif op == "block":
            side.release_processed()  # the task processed what it took before it reads a barrier and blocks
            side.drain_actions()
            gate.block_consumption(info)
        else:
            gate.resume_consumption(info)
        emitted = side.drain_actions()
        pool_held = 0
        for c in gate.remote_channels():
            bm = c.buffer_manager
            assert bm.sender_credit >= 0
            assert bm.sender_credit + bm.unannounced_credit == bm.num_available_buffers
            pool_held += bm.num_floating_held
            if c.blocked and op != "resume":
                assert credits(emitted, c.channel_info) == []
        assert pool_held + gate.floating_pool.num_available == floating
