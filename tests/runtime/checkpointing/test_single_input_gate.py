"""The single input gate on its own: round-robin polling over channels with data, priority events first,
blocked channels skipped until resumed, end of partition per channel, sequence numbers, and the
in-flight data a channel hands to an unaligned checkpoint."""

import pytest

from barriersim.runtime.checkpointing.barrier_handler import AddInputData
from barriersim.runtime.events import (
    END_OF_PARTITION,
    Buffer,
    CheckpointBarrier,
    CheckpointOptions,
    CheckpointType,
    EventAnnouncement,
    InputChannelInfo,
)
from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason
from barriersim.runtime.network.input.input_channel import AddCredit, ChannelStateError
from barriersim.runtime.network.input.single_input_gate import GateClosedError, SingleInputGate


def make_gate(n=3, kinds=None):
    out = []
    gate = SingleInputGate(0, kinds or ["local"] * n, out.append)
    gate.setup()
    return gate, out


def buf(tag, size=1):
    return Buffer((tag,), size)


def records(gate):
    result = []
    while (boe := gate.poll_next()) is not None:
        result.append(boe.element.records[0] if boe.is_buffer else type(boe.element).__name__)
    return result


def test_round_robin_over_channels_with_data():
    gate, _ = make_gate()
    for tag in ("a1", "a2"):
        gate.on_element(0, buf(tag))
    gate.on_element(1, buf("b1"))
    gate.on_element(2, buf("c1"))
    gate.on_element(1, buf("b2"))
    assert records(gate) == ["a1", "b1", "c1", "a2", "b2"]


def test_priority_events_overtake_data_within_and_across_channels():
    gate, _ = make_gate()
    gate.on_element(0, buf("a1"))
    gate.on_element(1, buf("b1"))
    gate.on_element(1, buf("b2"))
    unaligned = CheckpointBarrier(1, 0, CheckpointOptions.unaligned())
    gate.on_element(1, unaligned)
    assert gate.has_priority_event()
    assert gate.poll_next().element == unaligned
    assert records(gate) == ["a1", "b1", "b2"]


def test_blocked_channel_is_skipped_until_resumed():
    gate, _ = make_gate(2)
    gate.on_element(0, buf("a1"))
    gate.on_element(1, buf("b1"))
    gate.block_consumption(InputChannelInfo(0, 0))
    assert records(gate) == ["b1"]
    gate.resume_consumption(InputChannelInfo(0, 0))
    assert records(gate) == ["a1"]


def test_end_of_partition_per_channel_and_gate_finish():
    gate, _ = make_gate(2)
    gate.on_element(0, END_OF_PARTITION)
    assert records(gate) == ["EndOfPartition"] and not gate.is_finished()
    with pytest.raises(ChannelStateError):
        gate.on_element(0, buf("late"))
    gate.on_element(1, END_OF_PARTITION)
    records(gate)
    assert gate.is_finished()
    gate.close()
    with pytest.raises(GateClosedError):
        gate.poll_next()


def test_a_remote_channel_announces_a_timeoutable_barrier_that_can_then_be_prioritized():
    """Flink's ``RemoteInputChannel.onBuffer``: the announcement goes ahead of the data the barrier is behind."""
    gate, _ = make_gate(1, ["remote"])
    barrier = CheckpointBarrier(4, 0, CheckpointOptions.aligned_with_timeout(CheckpointType.CHECKPOINT, 10))
    gate.on_element(0, buf("x"), backlog=0)
    gate.on_element(0, barrier)
    ann = gate.poll_next()
    assert ann.element == EventAnnouncement(barrier, 1)
    gate.convert_to_priority_event(0, 1)
    assert gate.poll_next().element == barrier
    assert records(gate) == ["x"]


def test_checkpoint_started_persists_data_before_the_barrier_only():
    gate, out = make_gate(2, ["remote", "local"])
    unaligned = CheckpointBarrier(3, 0, CheckpointOptions.unaligned())
    gate.on_element(0, buf("before", 4), backlog=0)
    gate.on_element(0, unaligned)  # priority: overtakes "before"
    gate.on_element(0, buf("after", 4), backlog=0)
    gate.on_element(1, buf("other-before", 4))
    gate.checkpoint_started(unaligned)
    gate.on_element(1, buf("other-late", 4))  # still before channel 1's barrier: persisted too
    gate.on_element(1, unaligned)
    gate.on_element(1, buf("other-after", 4))
    persisted = [
        (a.channel_info.channel_idx, b.records[0]) for a in out if isinstance(a, AddInputData) for b in a.buffers
    ]
    assert persisted == [(0, "before"), (1, "other-before"), (1, "other-late")]
    gate.checkpoint_stopped(3)


def test_checkpoint_started_for_an_overwritten_checkpoint_is_subsumed():
    gate, _ = make_gate(1)
    gate.on_element(0, CheckpointBarrier(5, 0, CheckpointOptions.unaligned()))
    with pytest.raises(CheckpointException) as e:
        gate.checkpoint_started(CheckpointBarrier(4, 0, CheckpointOptions.unaligned()))
    assert e.value.reason is CheckpointFailureReason.CHECKPOINT_SUBSUMED


def test_a_local_channel_announces_nothing_and_hands_out_the_barrier_in_order():
    """Flink's ``LocalInputChannel`` reads the producer's subpartition: a timeoutable barrier comes in order,
    unannounced, and the channel has no buffers of its own: it holds at most two of the producer's (the one the
    task reads and the next), and gives one back, asking for the next, once the task processed it."""
    gate, out = make_gate(1, ["local"])
    assert [a.credit for a in out if isinstance(a, AddCredit)] == [2]  # the request for the first buffers
    barrier = CheckpointBarrier(4, 0, CheckpointOptions.aligned_with_timeout(CheckpointType.CHECKPOINT, 10))
    gate.on_element(0, buf("x"))
    gate.on_element(0, barrier)
    assert gate.poll_next().element == buf("x")
    assert [a.credit for a in out if isinstance(a, AddCredit)] == [2]  # the task still reads "x"
    gate.release_processed()  # the task processed "x" (StreamTask releases at the start of its next step)
    assert gate.poll_next().element == barrier
    assert [a.credit for a in out if isinstance(a, AddCredit)] == [2, 1]
    gate.release_processed()  # an event holds no buffer: nothing more to give back
    assert [a.credit for a in out if isinstance(a, AddCredit)] == [2, 1]
