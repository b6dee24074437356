"""Port of Flink's ``UnalignedCheckpointsCancellationTest``: the parameter table of cancel markers and
unaligned barriers fed straight into an unaligned ``SingleCheckpointBarrierHandler`` over local channels,
and whether a checkpoint was triggered and/or aborted."""

import pytest

from barriersim.runtime.checkpointing.barrier_handler import AbortCheckpointOnBarrier, TriggerCheckpointOnBarrier
from barriersim.runtime.events import CancelCheckpointMarker, CheckpointBarrier, CheckpointOptions, InputChannelInfo
from tests.runtime.checkpointing.checkpointing_testkit import CheckpointingMode, InputSide, ManualClock


def checkpoint(checkpoint_id):
    return CheckpointBarrier(checkpoint_id, 1, CheckpointOptions.for_checkpoint_with_default_location().to_unaligned())


def cancel(checkpoint_id):
    return CancelCheckpointMarker(checkpoint_id)


PARAMETERS = [
    # (expect trigger, expect abort, events, num channels, channel)
    (False, True, [cancel(10), cancel(20)], 1, 0),
    (False, True, [cancel(20), cancel(10)], 1, 0),
    (False, True, [cancel(10), checkpoint(10)], 1, 0),
    (True, True, [cancel(10), checkpoint(20)], 1, 0),
    (False, True, [cancel(20), checkpoint(10)], 1, 0),
    (True, False, [checkpoint(10), checkpoint(10)], 1, 0),
    (True, False, [checkpoint(10), checkpoint(20)], 1, 0),
    (True, True, [checkpoint(10), checkpoint(20)], 2, 0),
    (True, False, [checkpoint(20), checkpoint(10)], 1, 0),
    (True, False, [checkpoint(10), cancel(10)], 1, 0),
    (True, True, [checkpoint(10), cancel(10)], 2, 0),
    (True, True, [checkpoint(10), cancel(20)], 1, 0),
    (True, False, [checkpoint(20), cancel(10)], 1, 0),
]


@pytest.mark.parametrize(
    "expect_trigger, expect_abort, events, num_channels, channel",
    PARAMETERS,
    ids=[
        f"trigger={t}-abort={a}-channels={n}-"
        + ",".join(
            f"{'cancel' if isinstance(e, CancelCheckpointMarker) else 'checkpoint'}({e.checkpoint_id})" for e in ev
        )
        for t, a, ev, n, _ in PARAMETERS
    ],
)
def test(expect_trigger, expect_abort, events, num_channels, channel):
    """Port of Flink UnalignedCheckpointsCancellationTest.test.

    One pytest case per row of Flink's parameter table; the events go straight to the handler, as in
    Flink."""
    side = InputSide([["local"] * num_channels], CheckpointingMode.UNALIGNED, ManualClock())
    handler = side.barrier_handler
    info = InputChannelInfo(0, channel)
    for e in events:
        if isinstance(e, CancelCheckpointMarker):
            handler.process_cancellation_barrier(e, info)
        else:
            handler.process_barrier(e, info)
    actions = side.actions
    assert any(isinstance(a, AbortCheckpointOnBarrier) for a in actions) is expect_abort
    assert any(isinstance(a, TriggerCheckpointOnBarrier) for a in actions) is expect_trigger
    assert all(t.is_unaligned for t in side.triggered_checkpoints)
