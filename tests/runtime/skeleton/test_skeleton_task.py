"""The walking skeleton's task: aligned alignment, snapshot-before-barrier, end of partition."""

from barriersim.runtime.events import Buffer, CheckpointBarrier, CheckpointOptions, END_OF_PARTITION
from barriersim.runtime.operators.collect_sink import CollectSink
from barriersim.runtime.operators.source import SplitSourceReader
from barriersim.runtime.skeleton.task import (
    AcknowledgeCheckpoint,
    BroadcastEvent,
    OutputChannels,
    SendBuffer,
    SkeletonTask,
    TaskFinished,
)


def barrier(n, ts=0):
    return CheckpointBarrier(n, ts, CheckpointOptions.aligned())


def buf(*records, seq=0):
    return Buffer(tuple(records), 32 * len(records), seq)


def sink_task(inputs=2):
    sink = CollectSink()
    task = SkeletonTask(inputs, sink, None, process=lambda rs: sink.invoke_all(rs) or [])
    return task, sink


def test_aligned_blocks_the_channel_that_delivered_the_barrier_until_all_arrived():
    task, sink = sink_task()
    assert task.on_element(0, barrier(1, ts=100), now=110) == []
    assert task.on_element(0, buf((1,)), now=111) == []  # blocked: queued, not processed
    assert task.on_element(1, buf((2,)), now=112) == []  # not blocked: processed
    assert sink.output == [(2,)]
    actions = task.on_element(1, barrier(1, ts=100), now=120)
    acks = [a for a in actions if isinstance(a, AcknowledgeCheckpoint)]
    assert len(acks) == 1 and acks[0].checkpoint_id == 1
    # The snapshot holds only what was processed before the barrier on every channel.
    restored = CollectSink()
    restored.restore_state(acks[0].operator_state)
    assert restored.output == [(2,)]
    # After the checkpoint the queued buffer is processed.
    assert sink.output == [(2,), (1,)]
    m = acks[0].metrics
    assert (m.start_delay, m.alignment_duration, m.alignment_processed, m.alignment_buffered) == (10, 10, 32, 32)


def test_source_snapshots_its_offset_before_emitting_the_barrier():
    reader = SplitSourceReader(0, [(i, i % 2, 1, i) for i in range(10)])
    task = SkeletonTask(0, reader, OutputChannels(2, 100))
    routed = [(r[1], r) for r in reader.poll(4)]
    sent = task.emit_records(routed, end_of_input=False)
    assert [a.channel for a in sent] == [0, 1]
    actions = task.trigger_checkpoint(barrier(1, ts=5), now=9)
    assert isinstance(actions[0], BroadcastEvent) and isinstance(actions[1], AcknowledgeCheckpoint)
    restored = SplitSourceReader(0, [(i, i % 2, 1, i) for i in range(10)])
    restored.restore_state(actions[1].operator_state)
    assert restored.offset == 4
    assert task.trigger_checkpoint(barrier(1, ts=5), now=9) == []  # a repeated trigger is ignored


def test_records_are_flushed_before_the_barrier_goes_out():
    reader = SplitSourceReader(0, [(i, 0, 1, i) for i in range(3)])
    task = SkeletonTask(0, reader, OutputChannels(1, 100))
    task.outputs.emit(0, (9, 0, 1, 9), [])  # pending, not yet a full buffer
    actions = task.trigger_checkpoint(barrier(1), now=0)
    assert isinstance(actions[0], SendBuffer) and actions[0].buffer.records == ((9, 0, 1, 9),)
    assert isinstance(actions[1], BroadcastEvent)


def test_end_of_partition_on_all_inputs_finishes_the_task_and_completes_alignment():
    task, sink = sink_task()
    task.on_element(0, barrier(1), now=0)
    actions = task.on_element(1, END_OF_PARTITION, now=5)
    assert any(isinstance(a, AcknowledgeCheckpoint) for a in actions)
    actions = task.on_element(0, END_OF_PARTITION, now=6)
    assert any(isinstance(a, TaskFinished) for a in actions)
    assert task.finished


def test_old_barriers_are_ignored_after_a_newer_checkpoint():
    task, _ = sink_task(inputs=1)
    assert any(isinstance(a, AcknowledgeCheckpoint) for a in task.on_element(0, barrier(2), now=0))
    assert task.on_element(0, barrier(1), now=1) == []
    assert task.latest_checkpoint_id == 2
