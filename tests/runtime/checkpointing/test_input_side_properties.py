"""Hypothesis properties of the whole input side (real gates, remote channels with credit, a sender that
honours credit, random arrival/poll interleavings and, for the timeout mode, random clock ticks).

The snapshot property (the reason barriers exist): for every checkpoint that completed on the input side
(all barriers received, never aborted), the buffers the operator had consumed when the checkpoint was
triggered, plus the in-flight buffers persisted for it, are exactly the buffers that preceded that
checkpoint's barrier on every channel, with no buffer counted twice. Aligned checkpoints persist nothing;
unaligned ones persist exactly what the operator had not consumed yet."""

from hypothesis import given, settings
from hypothesis import strategies as st

from barriersim.runtime.checkpointing.api import CheckpointingMode, InputSide, ManualClock, ManualTimerService
from barriersim.runtime.checkpointing.barrier_handler import (
    AbortCheckpointOnBarrier,
    AllBarriersReceived,
    TriggerCheckpointOnBarrier,
)
from barriersim.runtime.events import Buffer, CheckpointBarrier, CheckpointOptions, CheckpointType, InputChannelInfo

NUM_CHANNELS = 3
NUM_CHECKPOINTS = 3


def options(mode, timeout_ms):
    if mode is CheckpointingMode.ALIGNED:
        return CheckpointOptions.aligned()
    if mode is CheckpointingMode.UNALIGNED:
        return CheckpointOptions.unaligned()
    return CheckpointOptions.aligned_with_timeout(CheckpointType.CHECKPOINT, timeout_ms)

scenario = st.tuples(
    # buffers before each barrier and after the last one, per channel
    st.lists(st.lists(st.integers(0, 4), min_size=NUM_CHECKPOINTS + 1, max_size=NUM_CHECKPOINTS + 1),
             min_size=NUM_CHANNELS, max_size=NUM_CHANNELS),
    # the driver's steps: deliver the next element of a channel, poll, or let time pass
    st.lists(st.one_of(st.tuples(st.just("arrive"), st.integers(0, NUM_CHANNELS - 1)),
                       st.tuples(st.just("poll"), st.just(0)),
                       st.tuples(st.just("tick"), st.integers(1, 4))), max_size=120),
)


def run(mode, counts, steps, timeout_ms=10):
    clock, timers = ManualClock(), ManualTimerService()
    consumed: set = set()
    at_trigger: dict[int, frozenset] = {}
    log: list = []

    def sink(action):
        log.append(action)
        if isinstance(action, TriggerCheckpointOnBarrier):
            at_trigger[action.checkpoint_id] = frozenset(consumed)

    side = InputSide([NUM_CHANNELS], mode, clock, timers, sink=sink, floating_buffers_per_gate=2)
    streams, pre_barrier, created = [], {n: set() for n in range(1, NUM_CHECKPOINTS + 1)}, {}
    for ch, per_segment in enumerate(counts):
        stream = []
        for seg, k in enumerate(per_segment):
            for i in range(k):
                rec = (ch, seg, i)
                stream.append(Buffer((rec,), 1))
                for n in range(seg + 1, NUM_CHECKPOINTS + 1):
                    pre_barrier[n].add(rec)
            if seg < NUM_CHECKPOINTS:
                stream.append(seg + 1)  # a barrier, built when sent (its timestamp is its creation time)
        streams.append(stream)

    def deliver(ch):
        stream = streams[ch]
        if not stream:
            return
        info = InputChannelInfo(0, ch)
        head = stream[0]
        if isinstance(head, Buffer):
            if side.sender_credit(info) <= 0:
                return  # the sender has no credit: it waits
            backlog = sum(isinstance(e, Buffer) for e in stream[1:])
            side.on_element(info, stream.pop(0), backlog=backlog)
        else:
            stream.pop(0)
            ts = created.setdefault(head, clock())
            side.on_element(info, CheckpointBarrier(head, ts, options(mode, timeout_ms)))

    def poll():
        boe = side.poll_next()
        if boe is not None and boe.is_buffer:
            consumed.update(boe.element.records)
        return boe

    for op, arg in steps:
        if op == "arrive":
            deliver(arg)
        elif op == "poll":
            poll()
        else:
            clock.advance(arg)
            timers.advance_to(clock())
    # drain: deliver and consume everything
    while True:
        for ch in range(NUM_CHANNELS):
            deliver(ch)
        polled = poll()
        clock.advance(1)
        timers.advance_to(clock())
        if polled is None and not any(streams):
            break
    return side, log, at_trigger, pre_barrier


def check_snapshot_property(mode, counts, steps, timeout_ms=10):
    side, log, at_trigger, pre_barrier = run(mode, counts, steps, timeout_ms)
    aborted = {a.checkpoint_id for a in log if isinstance(a, AbortCheckpointOnBarrier)}
    completed = {a.checkpoint_id for a in log if isinstance(a, AllBarriersReceived)} - aborted
    triggered = [a.checkpoint_id for a in log if isinstance(a, TriggerCheckpointOnBarrier)]
    assert triggered == sorted(set(triggered)), "each checkpoint triggers once, in order"
    assert NUM_CHECKPOINTS in completed, "the last checkpoint always completes"
    for n in completed:
        persisted = [b.records[0] for bufs in side.persisted_input_data(n).values() for b in bufs]
        assert len(persisted) == len(set(persisted)), "a buffer persisted twice"
        snapshot_input = at_trigger[n] & pre_barrier[n]
        assert not (set(persisted) & at_trigger[n]), "a buffer both consumed and persisted"
        assert at_trigger[n] <= pre_barrier[n], "data behind the barrier consumed before the checkpoint"
        assert snapshot_input | set(persisted) == pre_barrier[n]
        unaligned = any(t.checkpoint_id == n and t.is_unaligned for t in side.triggered_checkpoints)
        if not unaligned:
            assert persisted == []
    assert side.blocked_channels() == []
    assert not side.is_checkpoint_pending()
    return side


@settings(max_examples=150, deadline=None)
@given(scenario)
def test_snapshot_property_aligned(s):
    """Property: aligned checkpoints see exactly the pre-barrier data and persist nothing."""
    side = check_snapshot_property(CheckpointingMode.ALIGNED, *s)
    assert not side.aborted_checkpoints
    assert all(not t.is_unaligned for t in side.triggered_checkpoints)


@settings(max_examples=150, deadline=None)
@given(scenario)
def test_snapshot_property_unaligned(s):
    """Property: unaligned checkpoints: consumed-at-trigger plus persisted in-flight data is exactly the
    pre-barrier data."""
    side = check_snapshot_property(CheckpointingMode.UNALIGNED, *s)
    assert all(t.is_unaligned for t in side.triggered_checkpoints)


@settings(max_examples=200, deadline=None)
@given(scenario, st.sampled_from([1, 8, 30, 200]))
def test_snapshot_property_aligned_with_timeout(s, timeout_ms):
    """Property: with an alignment timeout, every checkpoint (aligned, or switched to unaligned by the
    timer or by a late barrier) still has the snapshot property."""
    check_snapshot_property(CheckpointingMode.ALIGNED_WITH_TIMEOUT, *s, timeout_ms=timeout_ms)
