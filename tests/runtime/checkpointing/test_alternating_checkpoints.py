"""Ports of Flink's ``AlternatingCheckpointsTest``: aligned checkpoints that time out and switch to unaligned (the
``ALIGNED_WITH_TIMEOUT`` mode, Flink's "alternating" ``SingleCheckpointBarrierHandler``). How Flink's harness maps
onto ours: docs/testing.md, "Ports of Flink's input-side tests".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from support_ported import ClockWithDelayedActions, RecordingChannelStateWriter, ValidatingCheckpointHandler, fan_out

from barriersim.runtime.checkpointing.api import CheckpointingMode, InputSide
from barriersim.runtime.checkpointing.barrier_handler import BlockConsumption, ResumeConsumption
from barriersim.runtime.events import (
    END_OF_PARTITION,
    AlignmentType,
    Buffer,
    CancelCheckpointMarker,
    CheckpointBarrier,
    CheckpointOptions,
    CheckpointType,
    EndOfPartition,
    EventAnnouncement,
    InputChannelInfo,
)

CHECKPOINT = CheckpointType.CHECKPOINT
SAVEPOINT = CheckpointType.SAVEPOINT
INTEGER_MAX_VALUE = 2**31 - 1


def aligned_no_timeout(t: CheckpointType) -> CheckpointOptions:
    return CheckpointOptions.aligned(t)


def aligned_with_timeout(t: CheckpointType, timeout_ms: int) -> CheckpointOptions:
    return CheckpointOptions.aligned_with_timeout(t, timeout_ms)


def unaligned(t: CheckpointType = CHECKPOINT) -> CheckpointOptions:
    return CheckpointOptions.unaligned(t)


class TestInputChannelEmulation:
    """Flink's ``TestInputChannel`` blocked flag: set by the test, cleared by ``resumeConsumption``."""

    __test__ = False

    def __init__(self) -> None:
        self.blocked = False

    def set_blocked(self, blocked: bool) -> None:
        self.blocked = blocked

    def is_blocked(self) -> bool:
        return self.blocked


class AltGate:
    """Flink's ``TestCheckpointedInputGateBuilder(...).build()`` with ``TestBarrierHandlerFactory``."""

    def __init__(
        self,
        kinds: Sequence[str],
        target: ValidatingCheckpointHandler,
        clock: ClockWithDelayedActions,
        *,
        sync_executor: bool,
        writer: RecordingChannelStateWriter | None = None,
    ):
        self.clock = clock
        self.target = target
        self.writer = writer if writer is not None else RecordingChannelStateWriter()
        self.sync_executor = sync_executor
        self.test_channels = {i: TestInputChannelEmulation() for i, k in enumerate(kinds) if k == "test"}
        self.side = InputSide(
            [["remote" if k == "remote" else "local" for k in kinds]],
            CheckpointingMode.ALIGNED_WITH_TIMEOUT,
            clock,
            clock,
            sink=fan_out(target, self.writer, self._emulate_test_channels),
        )

    def _emulate_test_channels(self, action: Any) -> None:
        if isinstance(action, BlockConsumption) and action.channel_info.channel_idx in self.test_channels:
            # Flink's TestInputChannel keeps delivering: undo the receiver-side block at once
            self.side.gate(0).resume_consumption(action.channel_info)
        elif isinstance(action, ResumeConsumption) and action.channel_info.channel_idx in self.test_channels:
            self.test_channels[action.channel_info.channel_idx].blocked = False

    @property
    def handler(self):
        return self.side.barrier_handler

    def channel(self, idx: int) -> TestInputChannelEmulation:
        return self.test_channels[idx]

    def is_blocked(self, idx: int) -> bool:
        """Flink's ``isBlocked`` of a test channel, or the real blocked state of a remote channel."""
        if idx in self.test_channels:
            return self.test_channels[idx].blocked
        return self.side.gate(0).is_blocked(InputChannelInfo(0, idx))

    # -- feeding ------------------------------------------------------------------------------------------------

    def on_element(self, channel: int, element, sequence_number: int | None = None, priority: bool | None = None):
        """Flink's ``RemoteInputChannel.onBuffer`` / ``TestInputChannel.read`` (no polling)."""
        backlog = 0 if isinstance(element, Buffer) else None
        self.side.on_element(InputChannelInfo(0, channel), element, sequence_number, backlog, priority)
        if self.sync_executor:
            self.side.process_priority_events()

    def send(self, element, channel: int, priority: bool | None = None) -> None:
        """Flink's ``send``: deliver, then ``while (gate.pollNext().isPresent()) {}``."""
        self.on_element(channel, element, priority=priority)
        self.side.poll_all()

    def send_data(self, size: int, channel: int) -> None:
        self.send(Buffer(("data",), size), channel)

    def send_barrier(self, barrier_id: int, creation_time: int, t: CheckpointType, channel: int) -> None:
        self.send(CheckpointBarrier(barrier_id, creation_time, aligned_no_timeout(t)), channel)

    def with_timeout(self, alignment_timeout: int, checkpoint_id: int = 1) -> CheckpointBarrier:
        return CheckpointBarrier(checkpoint_id, self.clock(), aligned_with_timeout(CHECKPOINT, alignment_timeout))

    # -- polling assertions ----------------------------------------------------------------------------------

    def assert_poll(self):
        boe = self.side.poll_next()
        assert boe is not None, "empty gate"
        return boe

    def assert_event(self, cls) -> None:
        boe = self.assert_poll()
        assert boe.is_event, f"expected event, got data buffer on {boe.channel_info}"
        assert type(boe.element) is cls, f"expected {cls.__name__}, got {boe.element!r} on {boe.channel_info}"

    def assert_announcement(self) -> None:
        self.assert_event(EventAnnouncement)

    def assert_barrier(self) -> None:
        self.assert_event(CheckpointBarrier)

    def assert_data(self) -> None:
        boe = self.assert_poll()
        assert boe.is_buffer, f"expected data, got {boe.element!r} on {boe.channel_info}"

    def close(self) -> None:
        self.side.close()


def data_buffer() -> Buffer:
    return Buffer(("data",), 100)


@pytest.fixture
def clock() -> ClockWithDelayedActions:
    return ClockWithDelayedActions()


def _assert_metrics(
    clock: ClockWithDelayedActions,
    target: ValidatingCheckpointHandler,
    handler,
    latest_checkpoint_id: int,
    alignment_duration_start_ms: int,
    alignment_duration_min_ms: int,
    start_delay_ms: int,
    bytes_processed_during_alignment: int,
) -> None:
    assert handler.get_latest_checkpoint_id() == latest_checkpoint_id
    alignment_duration = handler.get_alignment_duration_ms()
    expected_max = clock() - alignment_duration_start_ms
    assert alignment_duration >= alignment_duration_min_ms
    assert alignment_duration <= expected_max
    assert handler.get_checkpoint_start_delay_ms() >= start_delay_ms
    last_bytes = target.last_bytes_processed_during_alignment
    assert (-1 if last_bytes is None else last_bytes) == bytes_processed_during_alignment


# ------------------------------------------------------------------------------------------------------------
# tests
# ------------------------------------------------------------------------------------------------------------


def test_channel_reset_on_new_barrier(clock):
    """Port of Flink AlternatingCheckpointsTest.testChannelResetOnNewBarrier."""
    writer = RecordingChannelStateWriter()
    gate = AltGate(["remote", "remote"], ValidatingCheckpointHandler(), clock, sync_executor=False, writer=writer)
    # using AC because UC would require ordering in gate while polling
    gate.send(CheckpointBarrier(0, clock(), aligned_no_timeout(SAVEPOINT)), 0)
    gate.on_element(0, Buffer(("captured",), 1024), sequence_number=1)  # to be captured
    gate.send(CheckpointBarrier(1, clock(), unaligned(CHECKPOINT)), 1)
    assert writer.added_input, "the buffer queued on channel 0 was not captured"
    gate.close()


def test_switch_to_unaligned_by_upstream(clock):
    """Port of Flink AlternatingCheckpointsTest.testSwitchToUnalignedByUpstream."""
    target = ValidatingCheckpointHandler()
    gate = AltGate(["test", "test"], target, clock, sync_executor=True)
    aligned = CheckpointBarrier(1, clock(), aligned_with_timeout(CHECKPOINT, INTEGER_MAX_VALUE))
    gate.send(EventAnnouncement(aligned, 0), 0)  # process announcement but not the barrier
    assert target.triggered_checkpoint_counter == 0
    # pretend it came from upstream before the first (AC) barrier was picked up
    gate.send(aligned.as_unaligned(), 1)
    assert target.triggered_checkpoint_counter == 1
    gate.close()


def _test_barrier_handling(clock, checkpoint_type: CheckpointType) -> None:
    barrier_id = 123
    target = ValidatingCheckpointHandler()
    gate = AltGate(["test", "test"], target, clock, sync_executor=True)
    fast, slow = 0, 1
    if checkpoint_type.is_savepoint:
        gate.channel(fast).set_blocked(True)
        gate.channel(slow).set_blocked(True)
    options = aligned_no_timeout(checkpoint_type) if checkpoint_type.is_savepoint else unaligned(CHECKPOINT)
    barrier = CheckpointBarrier(barrier_id, 1, options)
    gate.send(barrier, fast)
    assert checkpoint_type.is_savepoint == (target.triggered_checkpoints == [])
    gate.send(barrier, slow)
    assert target.triggered_checkpoints == [barrier_id]
    if checkpoint_type.is_savepoint:
        for idx in (fast, slow):
            assert not gate.channel(idx).is_blocked(), f"channel {idx} should be resumed"
    gate.close()


def test_checkpoint_handling(clock):
    """Port of Flink AlternatingCheckpointsTest.testCheckpointHandling."""
    _test_barrier_handling(clock, CHECKPOINT)


def test_savepoint_handling(clock):
    """Port of Flink AlternatingCheckpointsTest.testSavepointHandling."""
    _test_barrier_handling(clock, SAVEPOINT)


def test_alternation(clock):
    """Port of Flink AlternatingCheckpointsTest.testAlternation."""
    num_barriers = 123
    num_channels = 123
    target = ValidatingCheckpointHandler()
    gate = AltGate(["test"] * num_channels, target, clock, sync_executor=True)
    barriers = []
    for barrier in range(num_barriers):
        barriers.append(barrier)
        t = CHECKPOINT if barrier % 2 == 0 else SAVEPOINT
        for channel in range(num_channels):
            gate.send(CheckpointBarrier(barrier, clock(), aligned_no_timeout(t)), channel)
    assert target.triggered_checkpoints == barriers
    gate.close()


def test_aligned_after_timed_out(clock):
    """Port of Flink AlternatingCheckpointsTest.testAlignedAfterTimedOut."""
    target = ValidatingCheckpointHandler()
    alignment_time_out = 100
    gate = AltGate(["remote"], target, clock, sync_executor=False)

    barrier1 = CheckpointBarrier(1, clock(), aligned_with_timeout(CHECKPOINT, alignment_time_out))
    gate.on_element(0, barrier1, sequence_number=0)
    gate.assert_announcement()
    clock.advance_time(alignment_time_out + 1)
    gate.assert_barrier()
    assert target.triggered_checkpoint_counter == 1

    barrier2 = CheckpointBarrier(2, clock(), aligned_with_timeout(CHECKPOINT, alignment_time_out))
    gate.on_element(0, barrier2, sequence_number=1)
    gate.assert_announcement()
    gate.assert_barrier()
    assert target.triggered_checkpoint_counter == 2
    assert target.triggered_checkpoint_options == [
        unaligned(CHECKPOINT),
        aligned_with_timeout(CHECKPOINT, alignment_time_out),
    ]
    gate.close()


def test_aligned_never_timeoutable_checkpoint(clock):
    """Port of Flink AlternatingCheckpointsTest.testAlignedNeverTimeoutableCheckpoint."""
    target = ValidatingCheckpointHandler()
    gate = AltGate(["test", "test"], target, clock, sync_executor=True)
    never_timeoutable_checkpoint = gate.with_timeout(INTEGER_MAX_VALUE)
    gate.send(never_timeoutable_checkpoint, 0)
    gate.send_data(1000, 1)
    assert target.triggered_checkpoint_counter == 0
    gate.send(never_timeoutable_checkpoint, 1)
    assert target.triggered_checkpoint_counter == 1
    gate.close()


def _test_timeout_barrier_on_two_channels(clock, target, gate: AltGate, alignment_timeout: int) -> None:
    checkpoint_barrier = gate.with_timeout(alignment_timeout)
    gate.on_element(0, data_buffer(), 0)
    gate.on_element(0, data_buffer(), 1)
    gate.on_element(0, checkpoint_barrier, 2)
    gate.on_element(1, data_buffer(), 0)
    gate.on_element(1, checkpoint_barrier, 1)

    assert target.triggered_checkpoint_counter == 0
    gate.assert_announcement()
    clock.advance_time(alignment_timeout * 2)
    gate.assert_announcement()
    gate.assert_barrier()
    gate.assert_barrier()
    assert target.triggered_checkpoint_counter == 1
    assert target.triggered_checkpoint_options == [unaligned(CHECKPOINT)]
    # Followed by overtaken buffers
    gate.assert_data()
    gate.assert_data()
    gate.assert_data()


def test_timeout_alignment(clock):
    """Port of Flink AlternatingCheckpointsTest.testTimeoutAlignment."""
    target = ValidatingCheckpointHandler()
    gate = AltGate(["remote", "remote"], target, clock, sync_executor=False)
    _test_timeout_barrier_on_two_channels(clock, target, gate, 10)
    gate.close()


def test_timeout_alignment_after_processing_barrier(clock):
    """Port of Flink AlternatingCheckpointsTest.testTimeoutAlignmentAfterProcessingBarrier."""
    target = ValidatingCheckpointHandler()
    gate = AltGate(["remote"] * 3, target, clock, sync_executor=False)
    gate.send(CheckpointBarrier(1, clock(), aligned_with_timeout(CHECKPOINT, INTEGER_MAX_VALUE)), 2)
    assert target.triggered_checkpoint_counter == 0
    _test_timeout_barrier_on_two_channels(clock, target, gate, INTEGER_MAX_VALUE)
    gate.close()


def test_timeout_alignment_on_first_barrier(clock):
    """Port of Flink AlternatingCheckpointsTest.testTimeoutAlignmentOnFirstBarrier."""
    num_channels = 2
    target = ValidatingCheckpointHandler()
    gate = AltGate(["remote"] * num_channels, target, clock, sync_executor=False)
    alignment_timeout = 100
    checkpoint_barrier = gate.with_timeout(alignment_timeout)
    for i in range(num_channels):
        gate.on_element(i, checkpoint_barrier, 0)
    assert target.triggered_checkpoint_counter == 0
    for _ in range(num_channels):
        gate.assert_announcement()
    assert target.triggered_checkpoint_counter == 0
    clock.advance_time(alignment_timeout * 4)
    gate.assert_barrier()
    assert target.triggered_checkpoint_counter == 1


def test_timeout_alignment_before_first_barrier(clock):
    """Port of Flink AlternatingCheckpointsTest.testTimeoutAlignmentBeforeFirstBarrier."""
    # given: Local channels.
    target = ValidatingCheckpointHandler()
    gate = AltGate(["test", "test"], target, clock, sync_executor=False)
    aligned_checkpoint_timeout = 100
    # when: Aligned checkpoint timeout expired before the first barrier received.
    checkpoint_barrier = gate.with_timeout(aligned_checkpoint_timeout, 1)
    clock.advance_time(aligned_checkpoint_timeout + 1)
    gate.on_element(0, checkpoint_barrier)
    # then: The UC is triggered as soon as the first barrier is received.
    gate.assert_barrier()
    assert target.triggered_checkpoint_counter == 1


def test_timeout_alignment_when_local_barrier_first(clock):
    """Port of Flink AlternatingCheckpointsTest.testTimeoutAlignmentWhenLocalBarrierFirst: the local channel
    does not announce its barrier, so the alignment timeout starts only when that barrier is read."""
    # given: Gate with remote and local channels.
    target = ValidatingCheckpointHandler()
    gate = AltGate(["test", "remote", "remote"], target, clock, sync_executor=False)
    alignment_timeout = 100
    checkpoint_barrier = gate.with_timeout(alignment_timeout, 1)

    # when: Execute the first checkpoint when announcement received first.
    gate.on_element(0, checkpoint_barrier)
    gate.on_element(1, checkpoint_barrier, 0)
    gate.on_element(2, checkpoint_barrier, 0)
    gate.assert_announcement()
    gate.assert_announcement()
    gate.assert_barrier()
    gate.assert_barrier()
    gate.assert_barrier()
    # then: The checkpoint executed successfully.
    assert target.triggered_checkpoint_counter == 1

    # given: The time in the future.
    clock.advance_time(alignment_timeout + 1)
    checkpoint_barrier = gate.with_timeout(alignment_timeout, 2)

    # when: Execute the second checkpoint when barrier from local channel without announcement received first.
    gate.on_element(0, checkpoint_barrier)
    gate.assert_barrier()
    # then: Nothing happens because the alignment timeout should only start after this barrier.
    assert target.triggered_checkpoint_counter == 1

    # when: Receiving the barrier from second channel(with/without) announcement after time more than
    # alignment timeout.
    clock.advance_time(alignment_timeout + 1)
    gate.on_element(1, checkpoint_barrier, 1)
    gate.assert_announcement()
    gate.assert_barrier()
    # then: The checkpoint should started as unaligned.
    assert target.triggered_checkpoint_counter == 2
    assert target.triggered_checkpoint_options[-1].alignment is AlignmentType.UNALIGNED


def test_active_timeout_after_local_barrier_passive_timeout(clock):
    """Port of Flink AlternatingCheckpointsTest.testActiveTimeoutAfterLocalBarrierPassiveTimeout."""
    target = ValidatingCheckpointHandler()
    gate = AltGate(["test", "remote"], target, clock, sync_executor=False)
    alignment_timeout = 10
    checkpoint_barrier = gate.with_timeout(alignment_timeout)

    gate.on_element(0, checkpoint_barrier)
    gate.on_element(0, data_buffer())
    gate.assert_barrier()

    gate.on_element(1, data_buffer(), 0)
    gate.on_element(1, checkpoint_barrier, 1)

    assert target.triggered_checkpoint_counter == 0
    clock.advance_time_without_running_callables(alignment_timeout + 1)
    # the announcement should passively time out causing the barriers to overtake the data buffers
    gate.assert_announcement()
    # we simulate active time out firing after the passive one
    clock.execute_callables()
    gate.assert_barrier()
    assert target.triggered_checkpoint_counter == 1
    assert target.triggered_checkpoint_options == [unaligned(CHECKPOINT)]
    # Followed by overtaken buffers
    gate.assert_data()
    gate.assert_data()
    gate.close()


def _perform_first_checkpoint(num_channels: int, target, gate: AltGate, alignment_timeout: int) -> None:
    checkpoint_barrier = gate.with_timeout(alignment_timeout, 1)
    for i in range(num_channels):
        gate.on_element(i, checkpoint_barrier, 0)
    assert target.triggered_checkpoint_counter == 0
    for _ in range(num_channels):
        gate.assert_announcement()
    for _ in range(num_channels):
        gate.assert_barrier()


def test_timeout_alignment_on_announcement_for_second_checkpoint(clock):
    """Port of Flink AlternatingCheckpointsTest.testTimeoutAlignmentOnAnnouncementForSecondCheckpoint."""
    num_channels = 2
    target = ValidatingCheckpointHandler()
    gate = AltGate(["remote"] * num_channels, target, clock, sync_executor=False)
    alignment_timeout = 100
    _perform_first_checkpoint(num_channels, target, gate, alignment_timeout)
    assert target.triggered_checkpoint_counter == 1

    checkpoint_barrier = gate.with_timeout(alignment_timeout, 2)
    for i in range(num_channels):
        gate.on_element(i, data_buffer(), 1)
        gate.on_element(i, checkpoint_barrier, 2)
    assert target.triggered_checkpoint_counter == 1
    for _ in range(num_channels):
        gate.assert_announcement()
    assert target.triggered_checkpoint_counter == 1

    clock.advance_time(alignment_timeout * 4)
    # the barrier should overtake the data buffers
    gate.assert_barrier()
    assert target.triggered_checkpoint_counter == 2


def test_passive_timeout_alignment_on_announcement(clock):
    """Port of Flink AlternatingCheckpointsTest.testPassiveTimeoutAlignmentOnAnnouncement."""
    target = ValidatingCheckpointHandler()
    gate = AltGate(["remote", "remote"], target, clock, sync_executor=False)
    alignment_timeout = 100
    checkpoint_barrier = gate.with_timeout(alignment_timeout)

    gate.on_element(0, checkpoint_barrier, 0)
    assert target.triggered_checkpoint_counter == 0
    gate.assert_announcement()
    gate.assert_barrier()
    clock.advance_time_without_running_callables(alignment_timeout * 4)
    gate.on_element(1, checkpoint_barrier, 0)
    gate.assert_announcement()
    gate.assert_barrier()
    assert target.triggered_checkpoint_counter == 1


def test_active_timeout_alignment_on_first_barrier(clock):
    """Port of Flink AlternatingCheckpointsTest.testActiveTimeoutAlignmentOnFirstBarrier."""
    target = ValidatingCheckpointHandler()
    gate = AltGate(["remote", "remote"], target, clock, sync_executor=True)
    alignment_timeout = 100
    checkpoint_barrier = gate.with_timeout(alignment_timeout)
    gate.send(checkpoint_barrier, 0)
    clock.advance_time(alignment_timeout + 1)
    assert target.triggered_checkpoint_options == [unaligned(CHECKPOINT)]


def test_all_channels_unblocked_after_alignment_timeout(clock):
    """Port of Flink AlternatingCheckpointsTest.testAllChannelsUnblockedAfterAlignmentTimeout."""
    target = ValidatingCheckpointHandler()
    gate = AltGate(["test", "test"], target, clock, sync_executor=True)
    alignment_timeout = 100
    checkpoint_barrier = CheckpointBarrier(1, clock(), aligned_with_timeout(CHECKPOINT, alignment_timeout))

    # we set timer on announcement and test channels do not produce announcements by themselves
    gate.send(EventAnnouncement(checkpoint_barrier, 1), 0, priority=True)
    # emulate blocking channels on aligned barriers
    gate.channel(0).set_blocked(True)
    gate.send(checkpoint_barrier, 0)

    clock.advance_time(alignment_timeout + 1)
    gate.send(EventAnnouncement(checkpoint_barrier, 1), 1, priority=True)
    # emulate blocking channels on aligned barriers
    gate.channel(1).set_blocked(True)
    gate.send(checkpoint_barrier, 1)

    assert len(target.triggered_checkpoint_options) == 1
    assert target.triggered_checkpoint_options == [unaligned(CHECKPOINT)]
    assert not gate.channel(0).is_blocked()
    assert not gate.channel(1).is_blocked()


def test_no_active_timeout_alignment_after_last_barrier(clock):
    """Port of Flink AlternatingCheckpointsTest.testNoActiveTimeoutAlignmentAfterLastBarrier."""
    target = ValidatingCheckpointHandler()
    gate = AltGate(["test", "test"], target, clock, sync_executor=True)
    alignment_timeout = 100
    checkpoint_barrier = gate.with_timeout(alignment_timeout)
    gate.send(checkpoint_barrier, 0)
    gate.send(checkpoint_barrier, 1)
    clock.advance_time(alignment_timeout + 1)
    assert target.triggered_checkpoint_options != [unaligned(CHECKPOINT)]


def test_no_active_timeout_alignment_after_abort(clock):
    """Port of Flink AlternatingCheckpointsTest.testNoActiveTimeoutAlignmentAfterAbort."""
    target = ValidatingCheckpointHandler()
    gate = AltGate(["test", "test"], target, clock, sync_executor=True)
    alignment_timeout = 100
    checkpoint_barrier = gate.with_timeout(alignment_timeout)
    gate.send(checkpoint_barrier, 0)
    gate.send(CancelCheckpointMarker(1), 0, priority=True)
    gate.send(CancelCheckpointMarker(1), 1, priority=True)
    clock.advance_time(alignment_timeout + 1)
    assert len(target.triggered_checkpoint_options) == 0


def test_no_active_timeout_alignment_after_close():
    """Port of Flink AlternatingCheckpointsTest.testNoActiveTimeoutAlignmentAfterClose."""
    clock_with_delayed_actions = ClockWithDelayedActions(cancellable=False)  # do not unregister timers on cancel
    target = ValidatingCheckpointHandler()
    gate = AltGate(["remote", "remote"], target, clock_with_delayed_actions, sync_executor=True)
    alignment_timeout = 100
    checkpoint_barrier = gate.with_timeout(alignment_timeout)
    gate.send(checkpoint_barrier, 0)
    gate.close()
    clock_with_delayed_actions.advance_time(alignment_timeout + 1)
    assert len(target.triggered_checkpoint_options) == 0


def test_active_timeout_alignment_on_announcement(clock):
    """Port of Flink AlternatingCheckpointsTest.testActiveTimeoutAlignmentOnAnnouncement."""
    target = ValidatingCheckpointHandler()
    gate = AltGate(["remote", "remote"], target, clock, sync_executor=False)
    alignment_timeout = 10
    checkpoint_barrier = gate.with_timeout(alignment_timeout)

    gate.on_element(0, data_buffer(), 0)
    gate.on_element(0, data_buffer(), 1)
    gate.on_element(0, checkpoint_barrier, 2)
    gate.on_element(1, data_buffer(), 0)
    gate.on_element(1, checkpoint_barrier, 1)

    assert target.triggered_checkpoint_counter == 0
    gate.assert_announcement()
    gate.assert_announcement()
    # the announcement should time out causing the barriers to overtake the data buffers
    clock.advance_time(alignment_timeout + 1)
    gate.assert_barrier()
    gate.assert_barrier()
    assert target.triggered_checkpoint_counter == 1
    assert target.triggered_checkpoint_options == [unaligned(CHECKPOINT)]
    # Followed by overtaken buffers
    gate.assert_data()
    gate.assert_data()
    gate.assert_data()
    gate.close()


def test_active_timeout_after_announcement_passive_timeout(clock):
    """Port of Flink AlternatingCheckpointsTest.testActiveTimeoutAfterAnnouncementPassiveTimeout."""
    target = ValidatingCheckpointHandler()
    gate = AltGate(["remote", "remote"], target, clock, sync_executor=False)
    alignment_timeout = 10
    checkpoint_barrier = gate.with_timeout(alignment_timeout)

    gate.on_element(0, data_buffer(), 0)
    gate.on_element(0, data_buffer(), 1)
    gate.on_element(0, checkpoint_barrier, 2)
    gate.on_element(1, data_buffer(), 0)
    gate.on_element(1, checkpoint_barrier, 1)

    assert target.triggered_checkpoint_counter == 0
    gate.assert_announcement()
    clock.advance_time_without_running_callables(alignment_timeout + 1)
    # the announcement should passively time out causing the barriers to overtake the data buffers
    gate.assert_announcement()
    # we simulate active time out firing after the passive one
    clock.execute_callables()
    gate.assert_barrier()
    gate.assert_barrier()
    assert target.triggered_checkpoint_counter == 1
    assert target.triggered_checkpoint_options == [unaligned(CHECKPOINT)]
    # Followed by overtaken buffers
    gate.assert_data()
    gate.assert_data()
    gate.assert_data()
    gate.close()


def test_active_timeout_before_first_announcement_passive_timeout(clock):
    """Port of Flink AlternatingCheckpointsTest.testActiveTimeoutBeforeFirstAnnouncementPassiveTimeout."""
    # given: Two barriers from two channels.
    target = ValidatingCheckpointHandler()
    gate = AltGate(["remote", "remote"], target, clock, sync_executor=False)
    alignment_checkpoint_timeout = 10
    checkpoint_barrier = gate.with_timeout(alignment_checkpoint_timeout)

    gate.on_element(0, data_buffer(), 0)
    gate.on_element(0, checkpoint_barrier, 1)
    gate.on_element(1, data_buffer(), 0)
    gate.on_element(1, checkpoint_barrier, 1)
    assert target.triggered_checkpoint_counter == 0

    # when: The receiving of the first announcement is delayed on more than alignment checkpoint timeout.
    clock.advance_time_without_running_callables(alignment_checkpoint_timeout + 1)
    gate.assert_announcement()
    # we simulate active time out firing after the passive one
    clock.execute_callables()

    # then: Barriers should be reprioritized and the UC should be triggered.
    gate.assert_announcement()
    gate.assert_barrier()
    gate.assert_barrier()
    assert target.triggered_checkpoint_counter == 1
    assert target.triggered_checkpoint_options == [unaligned(CHECKPOINT)]
    # Followed by overtaken buffers
    gate.assert_data()
    gate.assert_data()
    gate.close()


def test_active_timeout_after_barrier_passive_timeout(clock):
    """Port of Flink AlternatingCheckpointsTest.testActiveTimeoutAfterBarrierPassiveTimeout."""
    target = ValidatingCheckpointHandler()
    gate = AltGate(["remote", "remote"], target, clock, sync_executor=False)
    alignment_timeout = 10
    checkpoint_barrier = gate.with_timeout(alignment_timeout)

    gate.on_element(0, data_buffer(), 0)
    gate.on_element(0, data_buffer(), 1)
    gate.on_element(0, checkpoint_barrier, 2)

    assert target.triggered_checkpoint_counter == 0
    gate.assert_announcement()
    # we simulate active time out firing after the passive one
    gate.assert_data()
    gate.assert_data()
    clock.advance_time_without_running_callables(alignment_timeout + 1)
    # the first barrier should passively time out causing the second barrier to overtake the remaining data
    gate.assert_barrier()
    clock.execute_callables()

    gate.on_element(1, data_buffer(), 0)
    gate.on_element(1, checkpoint_barrier, 1)
    gate.assert_announcement()
    gate.assert_barrier()

    assert target.triggered_checkpoint_counter == 1
    assert target.triggered_checkpoint_options == [unaligned(CHECKPOINT)]
    # Followed by overtaken buffers
    gate.assert_data()
    gate.close()


def test_timeout_alignment_on_unaligned_checkpoint(clock):
    """Port of Flink AlternatingCheckpointsTest.testTimeoutAlignmentOnUnalignedCheckpoint."""
    target = ValidatingCheckpointHandler()
    channel_state_writer = RecordingChannelStateWriter()
    gate = AltGate(["remote"] * 3, target, clock, sync_executor=False, writer=channel_state_writer)

    gate.on_element(0, gate.with_timeout(INTEGER_MAX_VALUE), 0)
    gate.assert_announcement()
    gate.assert_barrier()

    gate.on_element(1, data_buffer(), 0)
    gate.on_element(1, data_buffer(), 1)
    gate.on_element(1, CheckpointBarrier(1, clock(), unaligned(CHECKPOINT)), 2)
    gate.assert_barrier()

    assert len(channel_state_writer.added_input_of(InputChannelInfo(0, 1))) == 2
    assert target.triggered_checkpoint_counter == 1


def test_timeout_alignment_after_received_end_of_partition(clock):
    """Port of Flink AlternatingCheckpointsTest.testTimeoutAlignmentAfterReceivedEndOfPartition."""
    target = ValidatingCheckpointHandler()
    alignment_time_out = 100
    gate = AltGate(["remote"] * 3, target, clock, sync_executor=False)

    gate.on_element(0, CheckpointBarrier(1, clock(), aligned_with_timeout(CHECKPOINT, alignment_time_out)), 0)
    gate.assert_announcement()
    gate.assert_barrier()

    # Advances time but do not execute the registered callable which would turns into unaligned checkpoint.
    clock.advance_time_without_running_callables(alignment_time_out + 1)

    # The EndOfPartition should convert the checkpoint into unaligned.
    gate.on_element(1, data_buffer(), 0)
    gate.on_element(1, END_OF_PARTITION, 1)
    gate.assert_data()
    gate.assert_event(EndOfPartition)

    gate.on_element(2, data_buffer(), 0)
    gate.on_element(2, END_OF_PARTITION, 1)
    gate.assert_data()
    gate.assert_event(EndOfPartition)

    assert target.triggered_checkpoint_counter == 1
    assert target.triggered_checkpoint_options == [unaligned(CHECKPOINT)]
    gate.close()


def test_start_new_checkpoint_via_announcement(clock):
    """Port of Flink AlternatingCheckpointsTest.testStartNewCheckpointViaAnnouncement."""
    target = ValidatingCheckpointHandler()
    alignment_time_out = 10000
    gate = AltGate(["remote"] * 3, target, clock, sync_executor=False)

    gate.on_element(0, CheckpointBarrier(1, clock(), aligned_with_timeout(CHECKPOINT, alignment_time_out)), 0)
    gate.on_element(1, END_OF_PARTITION, 0)

    # The barrier announcement would start the checkpoint.
    gate.assert_announcement()
    # When received the EndOfPartition from channel 1 markAlignmentStart should be called.
    gate.assert_event(EndOfPartition)
    assert gate.handler.is_during_alignment()
    # Received barrier from channel 0.
    gate.assert_barrier()

    # The last barrier from channel 2 finalize the checkpoint.
    gate.on_element(2, CheckpointBarrier(1, clock(), aligned_with_timeout(CHECKPOINT, alignment_time_out)), 0)
    gate.assert_announcement()
    gate.assert_barrier()
    assert target.triggered_checkpoints == [1]
    gate.close()


def test_metrics_alternation(clock):
    """Port of Flink AlternatingCheckpointsTest.testMetricsAlternation."""
    buffer_size = 1000
    target = ValidatingCheckpointHandler()
    gate = AltGate(["test", "test"], target, clock, sync_executor=True)
    handler = gate.handler

    start = clock()
    checkpoint1_creation_time = clock() - 10
    gate.send_barrier(1, checkpoint1_creation_time, CHECKPOINT, 0)
    gate.send_data(buffer_size, 0)
    gate.send_data(buffer_size, 1)

    clock.advance_time(6)
    gate.send_barrier(1, checkpoint1_creation_time, CHECKPOINT, 1)
    gate.send_data(buffer_size, 0)
    _assert_metrics(clock, target, handler, 1, start, 6, 10, buffer_size * 2)

    start = clock()
    checkpoint2_creation_time = clock() - 5
    gate.send_barrier(2, checkpoint2_creation_time, SAVEPOINT, 0)
    gate.send_data(buffer_size, 1)
    _assert_metrics(clock, target, handler, 2, start, 0, 5, buffer_size * 2)
    clock.advance_time(5)
    gate.send_barrier(2, checkpoint2_creation_time, SAVEPOINT, 1)
    gate.send_data(buffer_size, 0)
    _assert_metrics(clock, target, handler, 2, start, 5, 5, buffer_size)

    start = clock()
    checkpoint3_creation_time = clock() - 7
    gate.send(CheckpointBarrier(3, checkpoint3_creation_time, unaligned(CHECKPOINT)), 0)
    gate.send_data(buffer_size, 0)
    gate.send_data(buffer_size, 1)
    _assert_metrics(clock, target, handler, 3, start, 0, 7, -1)
    clock.advance_time(10)
    gate.send(CheckpointBarrier(3, checkpoint2_creation_time, unaligned(CHECKPOINT)), 1)
    _assert_metrics(clock, target, handler, 3, start, 10, 7, buffer_size * 2)


def test_metrics_single_channel(clock):
    """Port of Flink AlternatingCheckpointsTest.testMetricsSingleChannel."""
    target = ValidatingCheckpointHandler()
    gate = AltGate(["test"], target, clock, sync_executor=True)
    handler = gate.handler

    checkpoint1_creation_time = clock() - 10
    start = clock()
    gate.send_data(1000, 0)
    gate.send_barrier(1, checkpoint1_creation_time, CHECKPOINT, 0)
    gate.send_data(1000, 0)
    clock.advance_time(6)
    _assert_metrics(clock, target, handler, 1, start, 0, 10, 0)

    checkpoint2_creation_time = clock() - 5
    start = clock()
    gate.send_data(1000, 0)
    gate.send_barrier(2, checkpoint2_creation_time, SAVEPOINT, 0)
    gate.send_data(1000, 0)
    clock.advance_time(5)
    _assert_metrics(clock, target, handler, 2, start, 0, 5, 0)


def test_previous_handler_reset(clock):
    """Port of Flink AlternatingCheckpointsTest.testPreviousHandlerReset."""
    target = ValidatingCheckpointHandler()
    gate = AltGate(["test", "test"], target, clock, sync_executor=False)
    handler = gate.handler
    channels = [gate.channel(0), gate.channel(1)]
    for i in range(4):
        channel = i % 2
        t = SAVEPOINT if channel == 0 else CHECKPOINT
        target.next_expected_checkpoint_id = -1
        if t.is_savepoint:
            channels[channel].set_blocked(True)
        handler.process_barrier(
            CheckpointBarrier(i, clock(), CheckpointOptions.aligned(t)), InputChannelInfo(0, channel), False
        )
        if t.is_savepoint:
            assert channels[channel].is_blocked()
            assert not channels[(channel + 1) % 2].is_blocked()
        else:
            assert not channels[0].is_blocked()
            assert not channels[1].is_blocked()
        assert handler.is_checkpoint_pending()
        assert not handler.all_barriers_received(i)
        channels[0].set_blocked(False)
        channels[1].set_blocked(False)


def test_has_inflight_data_before_process_barrier(clock):
    """Port of Flink AlternatingCheckpointsTest.testHasInflightDataBeforeProcessBarrier."""
    target = ValidatingCheckpointHandler()
    gate = AltGate(["test", "test"], target, clock, sync_executor=False)
    handler = gate.handler
    checkpoint_id = 1
    handler.process_barrier(
        CheckpointBarrier(checkpoint_id, clock(), CheckpointOptions.aligned(CHECKPOINT)), InputChannelInfo(0, 0), False
    )
    assert not handler.all_barriers_received(checkpoint_id)


def test_out_of_order_barrier(clock):
    """Port of Flink AlternatingCheckpointsTest.testOutOfOrderBarrier."""
    target = ValidatingCheckpointHandler()
    gate = AltGate(["test", "test"], target, clock, sync_executor=False)
    handler = gate.handler
    second_channel = gate.channel(1)
    checkpoint_id = 10
    out_of_order_savepoint_id = 5

    handler.process_barrier(
        CheckpointBarrier(checkpoint_id, clock(), CheckpointOptions.aligned(CHECKPOINT)), InputChannelInfo(0, 0), False
    )
    second_channel.set_blocked(True)
    handler.process_barrier(
        CheckpointBarrier(out_of_order_savepoint_id, clock(), CheckpointOptions.aligned(SAVEPOINT)),
        InputChannelInfo(0, 1),
        False,
    )
    assert handler.get_latest_checkpoint_id() == checkpoint_id
    assert not second_channel.is_blocked()


def test_next_first_checkpoint_barrier_overtakes_cancellation_barrier(clock):
    """Port of Flink AlternatingCheckpointsTest.testNextFirstCheckpointBarrierOvertakesCancellationBarrier."""
    target = ValidatingCheckpointHandler()
    gate = AltGate(["test", "test"], target, clock, sync_executor=True)
    alignment_timeout = 10000
    checkpoint_barrier = gate.with_timeout(alignment_timeout)

    gate.send(checkpoint_barrier, 0)
    clock.advance_time(1000)
    gate.send(gate.with_timeout(alignment_timeout, 2), 0)
    clock.advance_time(1000)
    gate.send(CancelCheckpointMarker(1), 1, priority=True)
    clock.advance_time(1000)
    gate.send(gate.with_timeout(alignment_timeout, 2), 1)
    clock.advance_time(1000)
    assert target.last_alignment_duration_ms == 2000
