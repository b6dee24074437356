"""The exactly-once barrier handler tells its ``ChannelListener``s of every barrier, cancellation marker and end of
partition it took, after taking it (also an obsolete barrier, and a marker the planted bug ignores); the
at-least-once tracker has none."""

from barriersim.runtime.checkpointing.api import CheckpointingMode, InputSide, ManualClock
from barriersim.runtime.events import (
    END_OF_PARTITION,
    CancelCheckpointMarker,
    CheckpointBarrier,
    CheckpointOptions,
    InputChannelInfo,
)
from barriersim.runtime.faults.mutations import PlantedBug, planted

A0, A1 = InputChannelInfo(0, 0), InputChannelInfo(0, 1)


class Recorder:
    def __init__(self, side: InputSide) -> None:
        self.side = side
        self.heard: list[tuple[InputChannelInfo, int | None, bool]] = []

    def channel_event_taken(self, channel_info: InputChannelInfo, checkpoint_id: int | None) -> None:
        self.heard.append((channel_info, checkpoint_id, self.side.is_checkpoint_pending()))


def _side_with_recorder(mode: CheckpointingMode) -> tuple[InputSide, Recorder]:
    side = InputSide([2], mode, ManualClock(0))
    recorder = Recorder(side)
    assert side.add_channel_listener(recorder)
    return side, recorder


def test_the_listener_hears_each_channel_event_after_the_handler_took_it():
    side, recorder = _side_with_recorder(CheckpointingMode.ALIGNED)
    side.on_element(A0, CheckpointBarrier(1, 0, CheckpointOptions.aligned()))
    side.on_element(A1, CancelCheckpointMarker(1))
    side.on_element(A1, CheckpointBarrier(1, 0, CheckpointOptions.aligned()))  # obsolete: checkpoint 1 was aborted
    side.on_element(A1, END_OF_PARTITION)
    side.poll_all()
    assert recorder.heard == [(A0, 1, True), (A1, 1, False), (A1, 1, False), (A1, None, False)]


def test_the_listener_hears_a_cancellation_marker_the_planted_bug_ignores():
    side, recorder = _side_with_recorder(CheckpointingMode.ALIGNED)
    with planted(PlantedBug.CANCEL_MARKER_IGNORED):
        side.on_element(A0, CheckpointBarrier(1, 0, CheckpointOptions.aligned()))
        side.on_element(A1, CancelCheckpointMarker(1))
        side.poll_all()
    assert recorder.heard == [(A0, 1, True), (A1, 1, True)]  # still aligning: what the liveness check reports


def test_the_at_least_once_tracker_takes_no_listener():
    side = InputSide([2], CheckpointingMode.AT_LEAST_ONCE, ManualClock(0))
    assert not side.add_channel_listener(Recorder(side))
