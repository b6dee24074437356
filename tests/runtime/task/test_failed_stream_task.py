"""A failed StreamTask is a dead process: it releases its partitions, closes its inputs and ignores what still
reaches it, as Flink's ``Task`` does when it fails (``releaseResources``: ``failAllResultPartitions``,
``closeAllInputGates``; ``notifyCheckpoint`` ignores notifications for a task that is not running).

The first test is a BufferReorderingException found in aligned-with-timeout after a protocol-point crash,
reduced to one task: the whole-job case is ``tests/properties/cases/dead-task-sends-timed-out-barrier.toml``.
"""

import random

import pytest
from two_source_map_job import source_map_sink_graph

from barriersim.runtime.checkpointing.api import CheckpointingMode, ManualClock, ManualTimerService
from barriersim.runtime.events import (
    Buffer,
    CheckpointBarrier,
    CheckpointOptions,
    CheckpointType,
    InputChannelInfo,
    ResultSubpartitionInfo,
)
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.network.config import NetworkConfig
from barriersim.runtime.network.input.input_channel import AddCredit, BufferReorderingException, LocalInputChannel
from barriersim.runtime.task.actions import AcknowledgeCheckpoint
from barriersim.runtime.task.stream_task import StepOutcome, StreamTask

GRAPH = source_map_sink_graph(1)
IN = InputChannelInfo(0, 0)
OUT = ResultSubpartitionInfo(0, 0)
TIMEOUT_MS = 5


def _map_task():
    clock, timers = ManualClock(0), ManualTimerService()
    task = StreamTask(
        GRAPH,
        "map",
        0,
        ExecutionAttemptID("map", 0, 0),
        mode=CheckpointingMode.ALIGNED_WITH_TIMEOUT,
        clock=clock,
        timer_service=timers,
        rng=random.Random(0),
        network=NetworkConfig(buffer_size=64, record_size=32, max_buffers_per_channel=100),
    )
    task.restore(None)
    return task, clock, timers


def _records(first: int) -> Buffer:
    return Buffer(((first, 1, 1, 0), (first + 1, 1, 1, 0)), 64)


def _process_all(task: StreamTask) -> None:
    while task.process_next().outcome is StepOutcome.PROCESSED:
        pass


def _up_to_barrier(task: StreamTask, timers: ManualTimerService, clock: ManualClock):
    """Data then a timeoutable barrier reach the map task; its output holds both behind too little credit;
    two buffers go out (the second is lost in flight when the job fails over)."""
    for seq in range(3):
        task.on_element(IN, _records(2 * seq), seq, 0)
    barrier = CheckpointBarrier(2, 0, CheckpointOptions.aligned_with_timeout(CheckpointType.CHECKPOINT, TIMEOUT_MS))
    task.on_element(IN, barrier, 3, 0)
    _process_all(task)
    task.on_credit(OUT, 2)
    sent = task.poll_sendable()
    assert [type(item.element) for _, item in sent] == [Buffer, Buffer]
    receiver = LocalInputChannel(IN, lambda action: None)
    receiver.on_element(sent[0][1].element, sent[0][1].sequence_number)  # wire 1 is lost in flight
    return receiver


def test_failed_task_sends_nothing_after_its_alignment_timer_fires():
    """The failed task's partition is released (Flink's ``Task.releaseResources`` ->
    ``ResultPartition.fail`` -> ``PipelinedSubpartition.release``), so when its alignment timer would fire,
    no converted unaligned barrier is handed out to a receiver that lost the buffers in flight."""
    # control: a live task converts its barrier at the timeout and sends it with the next wire number
    task, clock, timers = _map_task()
    receiver = _up_to_barrier(task, timers, clock)
    clock.set(TIMEOUT_MS + 1)
    timers.advance_to(TIMEOUT_MS + 1)
    later = task.poll_sendable()
    assert later and later[0][1].element.options.is_unaligned_checkpoint
    with pytest.raises(BufferReorderingException):
        receiver.on_element(later[0][1].element, later[0][1].sequence_number)

    # the same task failing over before the timeout sends nothing, whatever still reaches it
    task, clock, timers = _map_task()
    receiver = _up_to_barrier(task, timers, clock)
    task.drain_actions()
    task.fail()
    assert timers.pending_timers() == []  # the output alignment timer and the handler's timer are cancelled
    clock.set(TIMEOUT_MS + 1)
    timers.advance_to(TIMEOUT_MS + 1)
    task.on_credit(OUT, 5)
    task.on_resume_consumption(OUT)
    task.notify_checkpoint_aborted(2, 1)
    task.notify_checkpoint_complete(1)
    task.on_element(IN, _records(100), 4, 0)
    assert task.poll_sendable() == []
    assert task.process_next().outcome is StepOutcome.FINISHED
    assert not [a for a in task.drain_actions() if isinstance(a, (AcknowledgeCheckpoint, AddCredit))]
    assert receiver.expected_sequence_number == 1
    assert task.failed and task.finished


def test_fail_is_idempotent_and_releases_every_partition():
    task, _, _ = _map_task()
    task.fail()
    task.fail()
    assert all(p.is_released for p in task.partitions)
