"""Task-side crash points (``runtime.task.crash_points``): a task armed to crash ``mid_alignment`` or
``before_forwarding_barrier`` of a checkpoint stops exactly there, as a dead process (nothing more is sent, the
barrier is not forwarded), tells its driver with ``CrashedAtProtocolPoint``, and is not disturbed by the
checkpoints it is not armed for."""

import pytest
from two_source_map_job import CH0, CH1, OUT, deployed_task

from barriersim.runtime.checkpointing.api import CheckpointingMode
from barriersim.runtime.events import Buffer, CheckpointBarrier, CheckpointOptions, CheckpointType
from barriersim.runtime.faults.fault_schedule import CrashTask, FaultSchedule, ProtocolPoint
from barriersim.runtime.network.input.input_channel import AddCredit
from barriersim.runtime.task.crash_points import CrashedAtProtocolPoint, CrashPoints, TaskCrashed
from barriersim.runtime.task.stream_task import StepOutcome, StreamTask

MODES = [CheckpointingMode.ALIGNED, CheckpointingMode.UNALIGNED, CheckpointingMode.AT_LEAST_ONCE]


def _options(mode: CheckpointingMode) -> CheckpointOptions:
    if mode is CheckpointingMode.UNALIGNED:
        return CheckpointOptions.unaligned(CheckpointType.CHECKPOINT)
    if mode is CheckpointingMode.AT_LEAST_ONCE:
        return CheckpointOptions.not_exactly_once(CheckpointType.CHECKPOINT)
    return CheckpointOptions.aligned(CheckpointType.CHECKPOINT)


def _task(vertex, mode, crash_points=(), index=0):
    return deployed_task(vertex, mode, index=index, crash_points=crash_points)


def _process_all(task: StreamTask) -> None:
    while task.process_next().outcome is StepOutcome.PROCESSED:
        pass


def _barrier(checkpoint_id: int, mode: CheckpointingMode) -> CheckpointBarrier:
    return CheckpointBarrier(checkpoint_id, 0, _options(mode))


@pytest.mark.parametrize("mode", MODES)
def test_a_task_armed_mid_alignment_dies_after_the_first_barrier_of_that_checkpoint(mode):
    task = _task("map", mode, {(ProtocolPoint.MID_ALIGNMENT, 2)})
    task.on_credit(OUT, 10)
    # checkpoint 1 (not armed) aligns and goes through
    for ch in (CH0, CH1):
        task.on_element(ch, _barrier(1, mode), 0, 0)
        _process_all(task)
    assert not task.failed
    assert [type(item.element).__name__ for _, item in task.poll_sendable()] == ["CheckpointBarrier"]
    task.drain_actions()
    # checkpoint 2: the barrier on channel 0 starts the alignment; the task crashes there
    task.on_element(CH0, _barrier(2, mode), 1, 0)
    _process_all(task)
    assert task.failed
    assert task.drain_actions() == [CrashedAtProtocolPoint(ProtocolPoint.MID_ALIGNMENT, 2)]
    # a dead process: what still arrives is not taken, nothing goes out, no checkpoint is acknowledged
    task.on_element(CH1, _barrier(2, mode), 1, 0)
    assert task.process_next().outcome is StepOutcome.FINISHED
    assert task.poll_sendable() == [] and task.drain_actions() == []


@pytest.mark.parametrize("mode", MODES)
def test_a_task_armed_before_forwarding_the_barrier_never_forwards_it(mode):
    task = _task("map", mode, {(ProtocolPoint.BEFORE_FORWARDING_BARRIER, 1)})
    task.on_credit(OUT, 10)
    task.on_element(CH0, Buffer(((1, 1, 1, 0),), 32), 0, 0)
    for ch in (CH0, CH1):
        task.on_element(ch, _barrier(1, mode), 1 if ch == CH0 else 0, 0)
        _process_all(task)
    assert task.failed
    # the credit it announced before it died, then the crash; no acknowledgement
    assert [a for a in task.drain_actions() if not isinstance(a, AddCredit)] == [
        CrashedAtProtocolPoint(ProtocolPoint.BEFORE_FORWARDING_BARRIER, 1)
    ]
    assert task.poll_sendable() == []  # neither the barrier nor the record before it leaves the dead task


def test_a_source_armed_before_forwarding_the_barrier_dies_on_its_trigger():
    task = _task("source", CheckpointingMode.ALIGNED, {(ProtocolPoint.BEFORE_FORWARDING_BARRIER, 3)})
    task.on_credit(OUT, 10)
    task.trigger_checkpoint(2, 0, _options(CheckpointingMode.ALIGNED))
    assert not task.failed and [type(a).__name__ for a in task.drain_actions()] == ["AcknowledgeCheckpoint"]
    task.poll_sendable()
    task.trigger_checkpoint(3, 0, _options(CheckpointingMode.ALIGNED))
    assert task.failed and task.poll_sendable() == []
    assert task.drain_actions() == [CrashedAtProtocolPoint(ProtocolPoint.BEFORE_FORWARDING_BARRIER, 3)]


def test_crash_points_name_the_task_point_and_checkpoint_and_refuse_coordinator_side_points():
    points = CrashPoints("map#0", {(ProtocolPoint.MID_ALIGNMENT, 4)})
    points.reached(ProtocolPoint.MID_ALIGNMENT, 3)
    points.reached(ProtocolPoint.BEFORE_FORWARDING_BARRIER, 4)
    with pytest.raises(TaskCrashed, match="map#0: crashed at mid_alignment of checkpoint 4"):
        points.reached(ProtocolPoint.MID_ALIGNMENT, 4)
    assert not CrashPoints("map#0") and points
    with pytest.raises(ValueError, match="after_sync_snapshot_before_ack is not a task-side protocol point"):
        CrashPoints("map#0", {(ProtocolPoint.AFTER_SYNC_SNAPSHOT_BEFORE_ACK, 1)})


def test_the_schedule_arms_each_task_with_its_unfired_task_side_points():
    mid = CrashTask("map#0", point=ProtocolPoint.MID_ALIGNMENT, checkpoint_id=2)
    before = CrashTask("map#0", point=ProtocolPoint.BEFORE_FORWARDING_BARRIER, checkpoint_id=5)
    ack = CrashTask("map#0", point=ProtocolPoint.AFTER_SYNC_SNAPSHOT_BEFORE_ACK, checkpoint_id=2)
    other = CrashTask("sink#0", point=ProtocolPoint.MID_ALIGNMENT, checkpoint_id=2)
    schedule = FaultSchedule((mid, before, ack, other))
    assert schedule.armed_crash_points("map#0", set()) == {
        (ProtocolPoint.MID_ALIGNMENT, 2),
        (ProtocolPoint.BEFORE_FORWARDING_BARRIER, 5),
    }
    assert schedule.armed_crash_points("map#0", {mid}) == {(ProtocolPoint.BEFORE_FORWARDING_BARRIER, 5)}
    assert schedule.crash_at("map#0", ProtocolPoint.AFTER_SYNC_SNAPSHOT_BEFORE_ACK, 2, set()) is ack
    assert schedule.crash_at("map#0", ProtocolPoint.AFTER_SYNC_SNAPSHOT_BEFORE_ACK, 2, {ack}) is None
    assert schedule.crash_at("map#0", ProtocolPoint.MID_ALIGNMENT, 3, set()) is None
