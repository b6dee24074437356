"""How a task's data ends (Flink's ``StreamTask.endData``). With ``StopMode.DRAIN`` (a bounded input's end,
stop-with-savepoint ``--drain``) event time advances to its end and every open window fires; with
``StopMode.NO_DRAIN`` (stop-with-savepoint without ``--drain``, on any of the task's channels) the windows keep
their state for the savepoint and fire nothing, also when the channels end after the savepoint: Flink's
``StatusWatermarkValve`` never takes an ended channel for ``MAX_WATERMARK``. Either way ``EndOfData`` goes
downstream, each consumer acknowledges it once it processed every record before it
(``AcknowledgeAllRecordsProcessed``), and the task finishes only when its final checkpoint completed and every
consumer acknowledged (``getAllDataProcessedFuture``). Found by the rescale property: an at-least-once job whose
direct-writing sink received half-filled windows from the stopped job."""

import random

import pytest

from barriersim.runtime.checkpointing.api import CheckpointingMode, ManualClock, ManualTimerService
from barriersim.runtime.events import (
    MAX_WATERMARK,
    Buffer,
    CheckpointBarrier,
    EndOfData,
    EndOfPartition,
    InputChannelInfo,
    ResultSubpartitionInfo,
    StopMode,
    StreamElements,
    Watermark,
)
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobVertex, OperatorKind, Partitioner
from barriersim.runtime.network.config import NetworkConfig
from barriersim.runtime.network.input.input_channel import AcknowledgeAllRecordsProcessed
from barriersim.runtime.record_batch import RecordBatch
from barriersim.runtime.task.actions import TaskFinished
from barriersim.runtime.task.stream_task import StepOutcome, StreamTask

GRAPH = JobGraph(
    (
        JobVertex("source", OperatorKind.SOURCE, 1),
        JobVertex("window", OperatorKind.TUMBLING_WINDOW, 1, params={"window_ms": 10}),
        JobVertex("sink", OperatorKind.AT_LEAST_ONCE_SINK, 1),
    ),
    (JobEdge("source", "window", Partitioner.HASH), JobEdge("window", "sink", Partitioner.REBALANCE)),
).validate()
IN = InputChannelInfo(0, 0)
OUT = ResultSubpartitionInfo(0, 0)


def _window_task() -> StreamTask:
    task = StreamTask(
        GRAPH,
        "window",
        0,
        ExecutionAttemptID("window", 0, 0),
        mode=CheckpointingMode.ALIGNED,
        clock=ManualClock(0),
        timer_service=ManualTimerService(),
        rng=random.Random(0),
        network=NetworkConfig(buffer_size=4096, record_size=32, max_buffers_per_channel=100),
        emit_watermarks=True,
    )
    task.restore(None)
    task.on_credit(OUT, 100)
    return task


def _sent_after(task: StreamTask, *elements, first_sequence_number: int = 0) -> list:
    """Hands ``elements`` to the task's one channel, runs it until it has nothing left, flushes its output (as its
    output flusher would) and returns what it sent."""
    for sequence_number, element in enumerate(elements, first_sequence_number):
        task.on_element(IN, element, sequence_number, 0 if isinstance(element, Buffer) else None)
    sent = []
    while task.process_next().outcome is StepOutcome.PROCESSED:
        sent += [item.element for _, item in task.poll_sendable()]
    task.flush_outputs()
    return sent + [item.element for _, item in task.poll_sendable()]


def _window_results(sent) -> list[tuple]:
    return [
        r
        for e in sent
        if isinstance(e, Buffer)
        for r in (
            e.records if type(e.records) is RecordBatch else [p for p in e.records if not isinstance(p, Watermark)]
        )
    ]


def _watermarks(sent) -> list[int]:
    return [
        p.timestamp
        for e in sent
        if isinstance(e, Buffer) and isinstance(e.records, StreamElements)
        for p in e.records.parts
        if isinstance(p, Watermark)
    ]


# records (record_id, key, value, event_time): window [0, 10) is closed by the watermark 9, window [10, 20) is open
RECORDS = Buffer(
    StreamElements(
        [RecordBatch.from_rows([(0, 1, 5, 2), (1, 1, 7, 8)]), Watermark(9), RecordBatch.from_rows([(2, 1, 3, 12)])]
    ),
    96,
)


@pytest.mark.parametrize("mode", [StopMode.DRAIN, StopMode.NO_DRAIN])
def test_only_a_drained_end_of_data_fires_the_open_windows(mode):
    sent = _sent_after(_window_task(), RECORDS, EndOfData(mode), EndOfPartition())
    results = _window_results(sent)
    assert [r[0] for r in results if r[0] == 0] == [0]  # the closed window fired in either mode
    if mode is StopMode.DRAIN:
        assert [r[0] for r in results] == [0, 10]  # event time reached its end: the open window fired too
        assert MAX_WATERMARK.timestamp in _watermarks(sent)
    else:
        assert [r[0] for r in results] == [0]  # the open window stays in the state the savepoint holds
        assert MAX_WATERMARK.timestamp not in _watermarks(sent)


def test_a_channel_that_ends_without_end_of_data_counts_as_drained():
    """An input that ends without ``EndOfData`` (an upstream that runs without checkpoints after tasks finish ends
    its partition at once) ended drained, as if after its ``MAX_WATERMARK``: the open window fires."""
    sent = _sent_after(_window_task(), RECORDS, EndOfPartition())
    assert [r[0] for r in _window_results(sent)] == [0, 10]
    assert MAX_WATERMARK.timestamp in _watermarks(sent)


def test_the_task_acknowledges_end_of_data_and_finishes_once_its_consumer_acknowledged_its_own():
    task = _window_task()
    sent = _sent_after(task, RECORDS, EndOfData(StopMode.DRAIN), CheckpointBarrier(1, 0), EndOfPartition())
    barrier_at = next(i for i, e in enumerate(sent) if isinstance(e, CheckpointBarrier))
    assert EndOfData(StopMode.DRAIN) in sent[:barrier_at]  # its own data ended and it said so downstream, in order
    actions = task.drain_actions()
    assert AcknowledgeAllRecordsProcessed(IN) in actions  # it processed everything its producer sent
    task.notify_checkpoint_complete(1)  # its final checkpoint
    assert not task.finished and not any(isinstance(a, TaskFinished) for a in task.drain_actions())
    task.on_all_records_processed(OUT)  # and its sink processed everything it sent
    assert task.finished and any(isinstance(a, TaskFinished) for a in task.drain_actions())


def test_the_task_finishes_only_once_every_input_channel_ended():
    """Flink's ``END_OF_INPUT``: a task whose data ended and whose final checkpoint completed still waits for its
    upstream's end of partition, for until the upstream finishes, later checkpoints' barriers come through its
    channels (that upstream's final checkpoint may be a later one, when its data ended after this task's final
    checkpoint was triggered). Found on Ray: a sink that finished early never took a later checkpoint, which
    stayed pending, and the job never ended."""
    task = _window_task()
    _sent_after(task, RECORDS, EndOfData(StopMode.DRAIN), CheckpointBarrier(1, 0))
    task.on_resume_consumption(OUT)  # the sink aligned checkpoint 1
    task.notify_checkpoint_complete(1)
    task.on_all_records_processed(OUT)
    assert not task.finished and not any(isinstance(a, TaskFinished) for a in task.drain_actions())
    sent = _sent_after(task, CheckpointBarrier(2, 0), first_sequence_number=3)
    assert CheckpointBarrier(2, 0) in sent  # a later checkpoint still reaches it, and goes on
    _sent_after(task, EndOfPartition(), first_sequence_number=4)  # the upstream finished: now this task may
    assert task.finished and any(isinstance(a, TaskFinished) for a in task.drain_actions())
