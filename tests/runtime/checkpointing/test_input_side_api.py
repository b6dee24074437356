"""The public driving API (``InputSide``): modes, multiple gates, local channels, alignment timeout
through the injected timer service, observation of blocked channels, persisted data and metrics."""

import pytest

from barriersim.runtime.checkpointing.api import CheckpointingMode, InputSide, ManualClock, ManualTimerService
from barriersim.runtime.checkpointing.barrier_handler import AllBarriersReceived, InitInputsCheckpoint
from barriersim.runtime.events import (
    END_OF_PARTITION,
    Buffer,
    CheckpointBarrier,
    CheckpointOptions,
    CheckpointType,
    EventAnnouncement,
    InputChannelInfo,
)
from barriersim.runtime.failure_reason import CheckpointFailureReason

A0, A1, B0 = InputChannelInfo(0, 0), InputChannelInfo(0, 1), InputChannelInfo(1, 0)


def test_aligned_across_two_gates_blocks_until_the_last_barrier():
    clock = ManualClock(50)
    side = InputSide([["remote", "local"], ["remote"]], CheckpointingMode.ALIGNED, clock)
    barrier = CheckpointBarrier(1, 40, CheckpointOptions.aligned())
    side.on_element(A0, barrier)
    side.on_element(A0, Buffer(("after",), 5))
    side.on_element(A1, Buffer(("before",), 5))
    side.on_element(B0, Buffer(("before-b",), 5))
    polled = side.poll_all()
    assert [b.element for b in polled][0] == barrier
    assert ("after",) not in [b.element.records for b in polled if b.is_buffer]
    assert side.blocked_channels() == [A0]
    assert side.is_checkpoint_pending() and side.latest_checkpoint_id == 1
    clock.advance(5)
    side.on_element(A1, barrier)
    side.on_element(B0, barrier)
    rest = side.poll_all()
    assert side.triggered_checkpoints[0].checkpoint_id == 1
    assert not side.triggered_checkpoints[0].is_unaligned
    assert [b.element.records for b in rest if b.is_buffer] == [("after",)]
    m = side.metrics(1)
    assert (m.checkpoint_start_delay_ms, m.alignment_duration_ms, m.bytes_processed_during_alignment) == (10, 5, 10)
    assert side.blocked_channels() == [] and not side.is_checkpoint_pending()


def test_alignment_timeout_switches_to_unaligned_by_timer():
    """The active switch: the timer registered at barrier timestamp + timeout fires during alignment."""
    clock, timers = ManualClock(0), ManualTimerService()
    side = InputSide([2], CheckpointingMode.ALIGNED_WITH_TIMEOUT, clock, timers)
    barrier = CheckpointBarrier(7, 0, CheckpointOptions.aligned_with_timeout(CheckpointType.CHECKPOINT, 100))
    side.on_element(A0, barrier)
    side.on_element(A1, Buffer((1,), 10), backlog=0)
    side.on_element(A1, barrier)  # queued behind the buffer; its announcement goes ahead
    announcements = side.process_priority_events()  # each channel announced its barrier ahead of data
    assert [(b.channel_info, type(b.element)) for b in announcements] == [
        (A0, EventAnnouncement),
        (A1, EventAnnouncement),
    ]
    assert side.poll_next().element == barrier  # A0's barrier: blocks A0
    assert side.blocked_channels() == [A0]
    assert timers.pending_timers() == [100]
    clock.set(100)
    timers.advance_to(clock())
    (trigger,) = side.triggered_checkpoints
    assert trigger.checkpoint_id == 7 and trigger.is_unaligned
    assert InitInputsCheckpoint(7, barrier.options.to_unaligned()) in side.actions
    # A1's buffer was before its barrier: persisted as in-flight data
    assert [b.records for b in side.persisted_input_data(7)[A1]] == [(1,)]
    # the announced barrier now overtakes the buffer
    assert side.poll_next().element == barrier
    assert any(isinstance(a, AllBarriersReceived) and a.checkpoint_id == 7 for a in side.actions)
    assert side.metrics(7).bytes_persisted_during_alignment == 10 and side.metrics(7).unaligned
    assert side.blocked_channels() == []
    assert [b.element.records for b in side.poll_all()] == [(1,)]


def test_late_barrier_switches_to_unaligned_passively():
    """The passive switch: a barrier that arrives after its timeout starts an unaligned checkpoint."""
    clock, timers = ManualClock(500), ManualTimerService()
    side = InputSide([2], CheckpointingMode.ALIGNED_WITH_TIMEOUT, clock, timers)
    barrier = CheckpointBarrier(3, 0, CheckpointOptions.aligned_with_timeout(CheckpointType.CHECKPOINT, 100))
    side.on_element(A1, Buffer((1,), 10), backlog=0)
    side.on_element(A0, barrier)
    side.process_priority_events()  # A0's announcement
    assert side.triggered_checkpoints == []
    side.poll_next()  # the buffer of A1 comes first in round robin
    side.poll_next()  # A0's barrier, 500 ms late
    assert side.triggered_checkpoints[0].is_unaligned
    assert timers.pending_timers() == [500]  # the (already due) active timer, now a no-op
    timers.advance_to(clock())
    assert len(side.triggered_checkpoints) == 1


def test_end_of_partition_aborts_without_checkpoints_after_tasks_finish():
    side = InputSide([2], CheckpointingMode.ALIGNED, ManualClock(), enable_checkpoint_after_tasks_finished=False)
    side.on_element(A0, CheckpointBarrier(1, 0))
    side.on_element(A1, END_OF_PARTITION)
    side.poll_all()
    assert [(a.checkpoint_id, a.reason) for a in side.aborted_checkpoints] == [
        (1, CheckpointFailureReason.CHECKPOINT_DECLINED_INPUT_END_OF_STREAM)
    ]
    assert side.blocked_channels() == []


def test_end_of_partition_counts_as_barrier_with_checkpoints_after_tasks_finish():
    side = InputSide([2], CheckpointingMode.ALIGNED, ManualClock())
    side.on_element(A0, CheckpointBarrier(1, 0))
    side.on_element(A1, END_OF_PARTITION)
    side.poll_all()
    assert [t.checkpoint_id for t in side.triggered_checkpoints] == [1]
    assert side.aborted_checkpoints == []
    side.on_element(A0, END_OF_PARTITION)
    side.poll_all()
    assert side.is_finished()


def test_drain_actions_returns_each_action_once():
    side = InputSide([1], CheckpointingMode.UNALIGNED, ManualClock())
    first = side.drain_actions()
    side.on_element(A0, CheckpointBarrier(1, 0, CheckpointOptions.unaligned()))
    side.poll_next()
    second = side.drain_actions()
    assert first and second and side.drain_actions() == []
    assert side.actions == first + second


def test_at_least_once_mode_uses_the_barrier_tracker():
    pytest.importorskip("barriersim.runtime.checkpointing.tracker")
    side = InputSide([2], CheckpointingMode.AT_LEAST_ONCE, ManualClock())
    barrier = CheckpointBarrier(1, 0, CheckpointOptions.not_exactly_once())
    side.on_element(A0, barrier)
    side.on_element(A0, Buffer((1,), 1), backlog=0)
    side.poll_all()
    assert side.blocked_channels() == []  # at-least-once never blocks
    side.on_element(A1, barrier)
    side.poll_all()
    assert [t.checkpoint_id for t in side.triggered_checkpoints] == [1]


def test_obsolete_aligned_barrier_resumes_its_sender():
    """The sender blocks itself after any aligned barrier; an obsolete one must still resume it."""
    side = InputSide([2], CheckpointingMode.ALIGNED, ManualClock())
    side.on_element(A0, CheckpointBarrier(2, 0))
    side.on_element(A1, CheckpointBarrier(2, 0))
    side.poll_all()
    side.drain_actions()
    side.on_element(A1, CheckpointBarrier(1, 0))  # obsolete: checkpoint 2 already completed
    side.poll_all()
    from barriersim.runtime.network.input.input_channel import ResumeConsumptionUpstream

    assert ResumeConsumptionUpstream(A1) in side.drain_actions()
    assert side.triggered_checkpoints[-1].checkpoint_id == 2 and side.blocked_channels() == []
