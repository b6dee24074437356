"""When a stream task reacts, as Flink's does: an unaligned barrier is handled when it arrives, also while the
task is backpressured (Flink's priority-event mail, ``CheckpointedInputGate.processPriorityEvents``), and a
timeoutable aligned barrier that left the task acknowledges at once, not when the alignment timer fires
(``PipelinedSubpartition.pollBuffer`` -> ``completeTimeoutableCheckpointBarrier``). Both were found by the
alignment-latency benchmark (unaligned under backpressure took as long as the backpressure lasted; aligned
with a timeout always took the full timeout). A source stops reading at the record after which its output is
backpressured (``StreamTask.processInput`` goes on only while ``taskIsAvailable()``)."""

import random

from two_source_map_job import CH0, CH1, GRAPH, OUT, deployed_task

from barriersim.runtime.checkpointing.api import CheckpointingMode, ManualClock, ManualTimerService
from barriersim.runtime.events import Buffer, CheckpointBarrier, CheckpointOptions, CheckpointType
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.network.config import NetworkConfig
from barriersim.runtime.record_batch import RecordBatch
from barriersim.runtime.task.actions import AcknowledgeCheckpoint
from barriersim.runtime.task.stream_task import StepOutcome, StreamTask


def _map_task(mode: CheckpointingMode, timers: ManualTimerService) -> StreamTask:
    return deployed_task("map", mode, timer_service=timers, max_buffers_per_channel=2)


def _records(first: int) -> Buffer:
    return Buffer(((first, 1, 1, 0), (first + 1, 1, 1, 0)), 64)


def _acks(task: StreamTask) -> list[int]:
    return [a.checkpoint_id for a in task.drain_actions() if isinstance(a, AcknowledgeCheckpoint)]


def _backpressure(task: StreamTask) -> None:
    """No credit downstream: the map task fills its output and stops taking input with data still queued."""
    seq = {CH0: 0, CH1: 0}
    first = 0
    while task.process_next().outcome is not StepOutcome.BACKPRESSURED:
        for ch in (CH0, CH1):
            task.on_element(ch, _records(first), seq[ch], 0)
            seq[ch] += 1
            first += 2
    for ch in (CH0, CH1):  # more data behind the backpressure
        task.on_element(ch, _records(first), seq[ch], 0)
        seq[ch] += 1
    return seq


def test_an_unaligned_barrier_is_handled_on_arrival_while_the_task_is_backpressured():
    task = _map_task(CheckpointingMode.UNALIGNED, ManualTimerService())
    seq = _backpressure(task)
    barrier = CheckpointBarrier(1, 0, CheckpointOptions.unaligned(CheckpointType.CHECKPOINT))
    task.on_element(CH0, barrier, seq[CH0], None)
    # the task has not processed anything since it became backpressured, yet the checkpoint started: the
    # barrier overtook the queued output (sent without credit, as an event) ...
    sent = [item.element for _, item in task.poll_sendable()]
    assert [e for e in sent if isinstance(e, CheckpointBarrier)] == [barrier]
    assert task.process_next().outcome is StepOutcome.BACKPRESSURED
    # ... and the second barrier completes it, with the data it overtook on both sides as channel state
    task.on_element(CH1, barrier, seq[CH1], None)
    task.poll_sendable()
    assert _acks(task) == [1]


def test_a_timeoutable_aligned_barrier_acknowledges_when_it_leaves_not_when_the_timer_fires():
    timers = ManualTimerService()
    task = _map_task(CheckpointingMode.ALIGNED_WITH_TIMEOUT, timers)
    task.on_credit(OUT, 100)
    barrier = CheckpointBarrier(1, 0, CheckpointOptions.aligned_with_timeout(CheckpointType.CHECKPOINT, 500))
    task.on_element(CH0, _records(0), 0, 0)
    task.on_element(CH0, barrier, 1, None)
    task.on_element(CH1, barrier, 0, None)
    while task.process_next().outcome is StepOutcome.PROCESSED:
        pass
    sent = [item.element for _, item in task.poll_sendable()]
    assert barrier in sent
    assert _acks(task) == [1]  # no timer fired: the barrier went out aligned, the output channel state is empty


def test_a_source_step_ends_at_the_record_after_which_its_output_is_backpressured():
    """Flink's source emits one record per ``StreamTask.processInput`` and goes on only while ``taskIsAvailable()``:
    with 64-byte buffers of two 32-byte records and three buffers per channel, the step reads the five records whose
    last opens the third buffer, not its whole batch of 256, and the next step finds the output backpressured."""
    split = RecordBatch.from_rows([(k, k % 7, 1, k) for k in range(1000)])
    task = StreamTask(
        GRAPH,
        "source",
        0,
        ExecutionAttemptID("source", 0, 0),
        mode=CheckpointingMode.ALIGNED,
        clock=ManualClock(0),
        timer_service=ManualTimerService(),
        rng=random.Random(0),
        network=NetworkConfig(buffer_size=64, record_size=32, max_buffers_per_channel=3),
        split=split,
    )
    task.restore(None)
    step = task.process_next()
    assert (step.outcome, step.records) == (StepOutcome.PROCESSED, 5)
    assert task.operator.reader.records_read == 5
    assert task.process_next().outcome is StepOutcome.BACKPRESSURED
