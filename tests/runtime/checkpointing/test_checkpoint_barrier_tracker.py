"""Ports of Flink's CheckpointBarrierTrackerTest, and Hypothesis properties of the tracker.

Flink drives the tracker through a ``CheckpointedInputGate`` over a mock gate and checks that every
element comes out unchanged (the tracker never blocks). Here the harness feeds the same sequences straight
into the tracker, checks that it emits no gate action (it never blocks or holds data back), and records
the task-directed actions as Flink's ``CheckpointSequenceValidator`` / ``ValidatingCheckpointHandler`` do
(positive ids: triggers, negative ids: aborts). Time is a manual clock (Flink's ``ManualClock``; its
wall-clock metric tests use the manual clock too instead of sleeping).
"""

from hypothesis import given, settings
from hypothesis import strategies as st

from barriersim.runtime.checkpointing.barrier_handler import (
    AbortCheckpointOnBarrier,
    AllBarriersReceived,
    TriggerCheckpointOnBarrier,
)
from barriersim.runtime.checkpointing.tracker import MAX_CHECKPOINTS_TO_TRACK, CheckpointBarrierTracker
from barriersim.runtime.events import CancelCheckpointMarker, CheckpointBarrier, CheckpointOptions, InputChannelInfo
from barriersim.runtime.failure_reason import CheckpointFailureReason


class _Clock:
    def __init__(self, now=0):
        self.now = now

    def __call__(self):
        return self.now


def _ch(i):
    return InputChannelInfo(0, i)


def buf(ch, size=2):
    return ("D", ch, size)


def bar(cid, ch, ts=0):
    return ("B", cid, ch, ts)


def cancel(cid, ch):
    return ("X", cid, ch)


def eop(ch):
    return ("E", ch)


class _Harness:
    def __init__(self, channels, enable_after_finished=False, clock=None):
        self.actions = []
        self.clock = clock or _Clock()
        self.tracker = CheckpointBarrierTracker(channels, self.actions.append, self.clock, enable_after_finished)

    def feed(self, sequence, advance_ms=0):
        for item in sequence:
            kind = item[0]
            if kind == "D":
                self.tracker.add_processed_bytes(item[2])
            elif kind == "B":
                self.tracker.process_barrier(
                    CheckpointBarrier(item[1], item[3], CheckpointOptions.for_checkpoint_with_default_location()),
                    _ch(item[2]),
                )
            elif kind == "X":
                self.tracker.process_cancellation_barrier(CancelCheckpointMarker(item[1]), _ch(item[2]))
            elif kind == "E":
                self.tracker.process_end_of_partition(_ch(item[1]))
            self.clock.now += advance_ms
        allowed = (TriggerCheckpointOnBarrier, AbortCheckpointOnBarrier, AllBarriersReceived)
        assert all(isinstance(a, allowed) for a in self.actions), "the tracker must never block channels"
        return self

    @property
    def validated(self):
        """Flink's CheckpointSequenceValidator view: triggers positive, aborts negative, in order."""
        out = []
        for a in self.actions:
            if isinstance(a, TriggerCheckpointOnBarrier):
                out.append(a.checkpoint_id)
            elif isinstance(a, AbortCheckpointOnBarrier):
                out.append(-a.checkpoint_id)
        return out

    @property
    def triggered(self):
        return [a.checkpoint_id for a in self.actions if isinstance(a, TriggerCheckpointOnBarrier)]

    @property
    def aborted(self):
        return [a.checkpoint_id for a in self.actions if isinstance(a, AbortCheckpointOnBarrier)]

    def last_trigger(self):
        return [a for a in self.actions if isinstance(a, TriggerCheckpointOnBarrier)][-1]


def test_single_channel_no_barriers():
    """Port of Flink CheckpointBarrierTrackerTest.testSingleChannelNoBarriers."""
    h = _Harness(1).feed([buf(0), buf(0), buf(0)])
    assert h.actions == [] and not h.tracker.is_checkpoint_pending()


def test_multi_channel_no_barriers():
    """Port of Flink CheckpointBarrierTrackerTest.testMultiChannelNoBarriers."""
    h = _Harness(4).feed([buf(c) for c in (2, 2, 0, 1, 0, 3, 1, 1, 2)])
    assert h.actions == []


def test_single_channel_with_barriers():
    """Port of Flink CheckpointBarrierTrackerTest.testSingleChannelWithBarriers."""
    seq = [
        buf(0),
        buf(0),
        buf(0),
        bar(1, 0),
        buf(0),
        buf(0),
        buf(0),
        buf(0),
        bar(2, 0),
        bar(3, 0),
        buf(0),
        buf(0),
        bar(4, 0),
        bar(5, 0),
        bar(6, 0),
        buf(0),
    ]
    assert _Harness(1).feed(seq).validated == [1, 2, 3, 4, 5, 6]


def test_single_channel_with_skipped_barriers():
    """Port of Flink CheckpointBarrierTrackerTest.testSingleChannelWithSkippedBarriers."""
    seq = [
        buf(0),
        bar(1, 0),
        buf(0),
        buf(0),
        bar(3, 0),
        buf(0),
        bar(4, 0),
        bar(6, 0),
        buf(0),
        bar(7, 0),
        buf(0),
        bar(10, 0),
        buf(0),
    ]
    assert _Harness(1).feed(seq).validated == [1, 3, 4, 6, 7, 10]


def test_multi_channel_with_barriers():
    """Port of Flink CheckpointBarrierTrackerTest.testMultiChannelWithBarriers."""
    seq = [
        buf(0),
        buf(2),
        buf(0),
        bar(1, 1),
        bar(1, 2),
        buf(2),
        buf(1),
        bar(1, 0),
        buf(0),
        buf(0),
        buf(1),
        buf(1),
        buf(2),
        bar(2, 0),
        bar(2, 1),
        bar(2, 2),
        buf(2),
        buf(2),
        bar(3, 2),
        buf(2),
        buf(2),
        bar(3, 0),
        bar(3, 1),
        bar(4, 1),
        bar(4, 2),
        bar(4, 0),
        buf(0),
    ]
    assert _Harness(3).feed(seq).validated == [1, 2, 3, 4]


def test_multi_channel_skipping_checkpoints():
    """Port of Flink CheckpointBarrierTrackerTest.testMultiChannelSkippingCheckpoints."""
    seq = [
        buf(0),
        buf(2),
        buf(0),
        bar(1, 1),
        bar(1, 2),
        buf(2),
        buf(1),
        bar(1, 0),
        buf(0),
        buf(0),
        buf(1),
        buf(1),
        buf(2),
        bar(2, 0),
        bar(2, 1),
        bar(2, 2),
        buf(2),
        buf(2),
        bar(3, 2),
        buf(2),
        buf(2),
        bar(4, 0),
        buf(0),
        buf(1),
        buf(2),
        bar(4, 1),
        buf(1),
        bar(4, 2),
        buf(0),
    ]
    h = _Harness(3).feed(seq)
    assert h.validated == [1, 2, 4]
    assert not h.tracker.is_checkpoint_pending()  # 3 was subsumed by 4


def test_complete_checkpoints_on_late_barriers():
    """Port of Flink CheckpointBarrierTrackerTest.testCompleteCheckpointsOnLateBarriers."""
    seq = [
        buf(1),
        buf(1),
        buf(0),
        buf(2),
        bar(2, 1),
        bar(2, 0),
        bar(2, 2),
        buf(1),
        buf(0),
        bar(3, 1),
        bar(3, 2),
        buf(1),
        buf(0),
        bar(4, 2),
        bar(4, 1),
        buf(1),
        buf(2),
        bar(3, 0),
        buf(0),
        bar(4, 0),
        buf(1),
        buf(2),
        bar(5, 1),
        buf(0),
        bar(5, 0),
        buf(1),
        bar(5, 2),
        buf(1),
        bar(6, 1),
        buf(0),
        bar(6, 0),
        buf(1),
        bar(7, 1),
        buf(0),
        bar(7, 2),
        buf(2),
        bar(8, 2),
        buf(0),
        bar(8, 1),
        buf(1),
        bar(9, 1),
        bar(7, 0),
        buf(0),
        bar(9, 2),
        buf(2),
        bar(10, 2),
        bar(8, 0),
        buf(1),
        buf(2),
        bar(9, 0),
        buf(1),
        buf(0),
        buf(2),
        bar(10, 0),
        bar(10, 1),
    ]
    assert _Harness(3).feed(seq).validated == [2, 3, 4, 5, 7, 8, 9, 10]


def test_next_first_checkpoint_barrier_overtakes_cancellation_barrier():
    """Port of Flink CheckpointBarrierTrackerTest.testNextFirstCheckpointBarrierOvertakesCancellationBarrier."""
    h = _Harness(2).feed([bar(1, 1), bar(2, 1), cancel(1, 0), bar(2, 0)], advance_ms=1000)
    assert h.last_trigger().checkpoint_id == 2
    assert h.last_trigger().metrics.alignment_duration_ms == 2000


def test_single_channel_abort_checkpoint():
    """Port of Flink CheckpointBarrierTrackerTest.testSingleChannelAbortCheckpoint."""
    seq = [buf(0), bar(1, 0), buf(0), bar(2, 0), cancel(4, 0), bar(5, 0), buf(0), cancel(6, 0), buf(0)]
    assert _Harness(1).feed(seq).validated == [1, 2, -4, 5, -6]


def test_multi_channel_abort_checkpoint():
    """Port of Flink CheckpointBarrierTrackerTest.testMultiChannelAbortCheckpoint."""
    seq = [
        buf(0),
        buf(2),
        buf(0),
        bar(1, 1),
        bar(1, 2),
        buf(2),
        buf(1),
        bar(1, 0),
        buf(0),
        buf(2),
        bar(2, 0),
        bar(2, 2),
        buf(0),
        buf(2),
        cancel(2, 1),
        buf(2),
        buf(1),
        bar(3, 1),
        bar(3, 2),
        bar(3, 0),
        buf(0),
        buf(1),
        cancel(4, 1),
        bar(4, 2),
        buf(0),
        bar(4, 0),
        buf(0),
        buf(1),
        buf(2),
        bar(5, 2),
        bar(5, 1),
        bar(5, 0),
        buf(0),
        buf(1),
        cancel(6, 1),
        cancel(6, 2),
        bar(6, 0),
        buf(0),
    ]
    h = _Harness(3).feed(seq)
    assert h.validated == [1, -2, 3, -4, 5, -6]
    assert all(
        a.reason is CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER
        for a in h.actions
        if isinstance(a, AbortCheckpointOnBarrier)
    )


def test_interleaved_cancellation_barriers():
    """Port of Flink CheckpointBarrierTrackerTest.testInterleavedCancellationBarriers."""
    seq = [bar(1, 0), cancel(2, 0), cancel(1, 1), cancel(2, 1), cancel(1, 2), cancel(2, 2), buf(0)]
    assert _Harness(3).feed(seq).validated == [-1, -2]


def test_metrics():
    """Port of Flink CheckpointBarrierTrackerTest.testMetrics.

    Adapted: a manual clock instead of sleeps."""
    clock = _Clock(1_000)
    h = _Harness(3, clock=clock)
    creation = 1_000
    clock.now = 1_010  # "sleep" 10 ms
    h.feed(
        [
            buf(0, 100),
            buf(1, 100),
            buf(2, 100),
            bar(1, 1, creation),
            buf(0, 100),
            buf(2, 100),
            bar(1, 0, creation),
            buf(2, 100),
        ]
    )
    clock.now = 1_020
    h.feed([bar(1, 2, creation), buf(0, 100), buf(1, 100), buf(2, 100), eop(0), eop(1), eop(2)])
    trigger = h.last_trigger()
    assert trigger.metrics.checkpoint_start_delay_ms == 10
    assert trigger.metrics.alignment_duration_ms == 10
    assert trigger.metrics.bytes_processed_during_alignment == 3 * 100


def test_single_channel_metrics():
    """Port of Flink CheckpointBarrierTrackerTest.testSingleChannelMetrics."""
    clock = _Clock(500)
    h = _Harness(1, clock=clock)
    clock.now = 510
    h.feed([buf(0, 100), bar(1, 0, 500), buf(0, 100), eop(0)])
    trigger = h.last_trigger()
    assert trigger.metrics.checkpoint_start_delay_ms == 10
    assert trigger.metrics.alignment_duration_ms == 0
    assert trigger.metrics.bytes_processed_during_alignment == 0


def test_trigger_checkpoints_with_end_of_partition():
    """Port of Flink CheckpointBarrierTrackerTest.testTriggerCheckpointsWithEndOfPartition."""
    seq = [bar(1, 0), bar(2, 0), bar(2, 1), bar(3, 0), bar(4, 0), bar(4, 1), bar(5, 1), eop(2)]
    h = _Harness(3, enable_after_finished=True).feed(seq)
    assert h.triggered == [4]
    assert h.aborted == []
    assert h.tracker.get_pending_checkpoint_ids() == [5]
    assert h.tracker.get_num_open_channels() == 2


def test_deduplicate_channels_with_both_barrier_and_end_of_partition():
    """Port of Flink CheckpointBarrierTrackerTest.testDeduplicateChannelsWithBothBarrierAndEndOfPartition."""
    h = _Harness(3, enable_after_finished=True).feed([bar(2, 0), bar(2, 1), eop(1)])
    assert h.triggered == [] and h.aborted == []
    h.feed([bar(2, 2)])
    assert h.triggered == [2]


def test_trigger_checkpoints_after_received_end_of_partition():
    """Port of Flink CheckpointBarrierTrackerTest.testTriggerCheckpointsAfterReceivedEndOfPartition."""
    seq = [eop(2), bar(5, 0), bar(6, 0), bar(6, 1), eop(1), bar(7, 0)]
    h = _Harness(3, enable_after_finished=True).feed(seq)
    assert h.triggered == [6, 7]
    assert h.aborted == []


def test_no_fast_path_with_channel_finished_during_checkpoints():
    """Port of Flink CheckpointBarrierTrackerTest.testNoFastPathWithChannelFinishedDuringCheckpoints."""
    h = _Harness(2, enable_after_finished=True).feed([bar(1, 0), eop(0), bar(1, 1)])
    assert h.triggered == [1]
    assert not h.tracker.is_checkpoint_pending()


def test_complete_and_remove_aborted_checkpoint_with_end_of_partition():
    """Port of Flink CheckpointBarrierTrackerTest.testCompleteAndRemoveAbortedCheckpointWithEndOfPartition."""
    h = _Harness(3, enable_after_finished=True).feed([cancel(4, 0), bar(4, 1), bar(5, 1), eop(2)])
    assert h.aborted == [4]
    assert h.triggered == []
    assert h.tracker.get_pending_checkpoint_ids() == [5]
    assert h.tracker.get_num_open_channels() == 2


def test_abort_checkpoints_after_end_of_partition_received():
    """Port of Flink CheckpointBarrierTrackerTest.testAbortCheckpointsAfterEndOfPartitionReceived."""
    seq = [eop(2), bar(5, 0), bar(6, 0), cancel(6, 1), eop(1), cancel(7, 0)]
    h = _Harness(3, enable_after_finished=True).feed(seq)
    assert h.aborted == [5, 6, 7]
    assert h.triggered == []


def test_no_fast_path_with_channel_finished_during_checkpoints_cancel():
    """Port of Flink CheckpointBarrierTrackerTest.testNoFastPathWithChannelFinishedDuringCheckpointsCancel."""
    h = _Harness(2, enable_after_finished=True).feed([bar(1, 0, 0), eop(0), cancel(1, 1)])
    assert h.aborted[-1] == 1
    assert not h.tracker.is_checkpoint_pending()


def test_two_last_barriers_one_by_one():
    """Port of Flink CheckpointBarrierTrackerTest.testTwoLastBarriersOneByOne."""
    h = _Harness(2).feed([bar(1, 1), bar(2, 1), bar(1, 0), bar(2, 0)], advance_ms=1000)
    assert h.triggered == [1, 2]
    assert h.last_trigger().metrics.alignment_duration_ms == 2000


# -- our own checks ---------------------------------------------------------------------------------


def test_end_of_partition_without_checkpoints_after_finish_aborts_pending():
    h = _Harness(3, enable_after_finished=False).feed([bar(1, 0), bar(2, 0), eop(1)])
    assert h.aborted == [1, 2]
    assert {a.reason for a in h.actions if isinstance(a, AbortCheckpointOnBarrier)} == {
        CheckpointFailureReason.CHECKPOINT_DECLINED_INPUT_END_OF_STREAM
    }
    assert not h.tracker.is_checkpoint_pending()


def test_tracks_at_most_max_checkpoints():
    h = _Harness(2).feed([bar(i, 0) for i in range(1, MAX_CHECKPOINTS_TO_TRACK + 6)])
    assert len(h.tracker.get_pending_checkpoint_ids()) == MAX_CHECKPOINTS_TO_TRACK
    assert h.tracker.get_pending_checkpoint_ids()[0] == 6
    h.feed([bar(3, 1)])  # evicted: never triggers
    assert h.triggered == []


def test_every_trigger_is_followed_by_all_barriers_received():
    h = _Harness(2).feed([bar(1, 0), bar(1, 1)])
    assert [type(a) for a in h.actions] == [TriggerCheckpointOnBarrier, AllBarriersReceived]
    assert h.actions[1].checkpoint_id == 1


# -- properties ---------------------------------------------------------------------------------------


@st.composite
def _interleavings(draw):
    n_channels = draw(st.integers(1, 4))
    max_id = draw(st.integers(1, 8))
    per_channel = []
    for _ in range(n_channels):
        ids = draw(st.lists(st.integers(1, max_id), unique=True, max_size=max_id))
        per_channel.append(sorted(ids))  # each channel delivers its barriers in order
    order = draw(st.permutations([c for c, ids in enumerate(per_channel) for _ in ids]))
    return n_channels, per_channel, order


@settings(max_examples=300, deadline=None)
@given(_interleavings())
def test_tracker_triggers_each_fully_arrived_checkpoint_once_unless_subsumed(case):
    n_channels, per_channel, order = case
    h = _Harness(n_channels)
    cursor = [0] * n_channels
    arrived: dict[int, set[int]] = {}
    trigger_at: dict[int, int] = {}  # checkpoint -> step it triggered at
    completed_at: dict[int, int] = {}  # checkpoint -> step its last barrier arrived at
    for step, ch in enumerate(order):
        cid = per_channel[ch][cursor[ch]]
        cursor[ch] += 1
        before = len(h.actions)
        h.feed([bar(cid, ch)])
        arrived.setdefault(cid, set()).add(ch)
        if len(arrived[cid]) == n_channels:
            completed_at[cid] = step
        for a in h.actions[before:]:
            if isinstance(a, TriggerCheckpointOnBarrier):
                assert a.checkpoint_id not in trigger_at, "triggered twice"
                assert len(arrived[a.checkpoint_id]) == n_channels, "triggered before all barriers arrived"
                trigger_at[a.checkpoint_id] = step
    triggered = h.triggered
    assert triggered == sorted(set(triggered))
    assert [type(a) for a in h.actions] == [TriggerCheckpointOnBarrier, AllBarriersReceived] * len(triggered)
    for cid, step in completed_at.items():
        subsumed = any(other > cid and t < step for other, t in trigger_at.items())
        assert cid in trigger_at or subsumed, f"checkpoint {cid} completed on all channels but never triggered"
