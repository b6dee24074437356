"""Checkpoints of a task whose upstream finished (FLIP-147): the RPC-triggered barrier waits for the data the
finished upstream sent before its end of partition. Found by the consistent-cut check (checkpoint N, inputs of
'keyed_sum': missing the last records); the whole-job case is
``tests/properties/cases/rpc-checkpoint-after-upstream-finished.toml``."""

import random

from two_source_map_job import source_map_sink_graph

from barriersim.runtime.checkpointing.api import CheckpointingMode, ManualClock, ManualTimerService
from barriersim.runtime.events import (
    Buffer,
    CheckpointBarrier,
    CheckpointOptions,
    EndOfPartition,
    InputChannelInfo,
    ResultSubpartitionInfo,
)
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.network.config import NetworkConfig
from barriersim.runtime.task.actions import AcknowledgeCheckpoint
from barriersim.runtime.task.stream_task import StepOutcome, StreamTask

GRAPH = source_map_sink_graph(1)
IN = InputChannelInfo(0, 0)
OUT = ResultSubpartitionInfo(0, 0)


def _records(first: int) -> Buffer:
    return Buffer(((first, 1, 1, 0), (first + 1, 1, 1, 0)), 64)


def _aligned_map_task():
    clock, timers = ManualClock(0), ManualTimerService()
    task = StreamTask(
        GRAPH,
        "map",
        0,
        ExecutionAttemptID("map", 0, 0),
        mode=CheckpointingMode.ALIGNED,
        clock=clock,
        timer_service=timers,
        rng=random.Random(0),
        network=NetworkConfig(buffer_size=64, record_size=32, max_buffers_per_channel=100),
    )
    task.restore(None)
    task.on_credit(OUT, 100)
    return task


def test_rpc_triggered_checkpoint_waits_for_the_data_of_a_finished_upstream():
    """A checkpoint triggered by RPC because the upstream finished (Flink's
    ``StreamTask.triggerUnfinishedChannelsCheckpoint``, FLIP-147) is taken after the data the upstream sent
    before its end of partition, as in Flink, where the upstream finishes only once its consumers processed all
    its records (``ResultPartition.getAllDataProcessedFuture``) so that nothing but the end of partition is left.
    Here the upstream reports finished when its final checkpoint completed, so two buffers are still queued (one
    arrives only after the trigger): the snapshot comes after both, not before (which lost them on restore)."""
    task = _aligned_map_task()
    task.on_element(IN, _records(0), 0, 0)
    task.trigger_checkpoint(7, 0, CheckpointOptions.aligned())
    assert task.poll_sendable() == []  # no barrier yet: the channel still holds data
    task.on_element(IN, _records(2), 1, 0)
    task.on_element(IN, EndOfPartition(), 2, None)
    sent = []
    while task.process_next().outcome is StepOutcome.PROCESSED:
        sent += [item.element for _, item in task.poll_sendable()]
    barrier_at = next(i for i, e in enumerate(sent) if isinstance(e, CheckpointBarrier))
    records_before = [r for e in sent[:barrier_at] if isinstance(e, Buffer) for r in e.records]
    assert [r[0] for r in records_before] == [0, 1, 2, 3]  # everything the finished upstream sent
    assert any(isinstance(a, AcknowledgeCheckpoint) and a.checkpoint_id == 7 for a in task.drain_actions())


def test_rpc_triggered_checkpoint_with_only_the_end_of_partition_left_is_taken_at_once():
    task = _aligned_map_task()
    task.on_element(IN, EndOfPartition(), 0, None)
    task.trigger_checkpoint(7, 0, CheckpointOptions.aligned())
    assert any(isinstance(item.element, CheckpointBarrier) for _, item in task.poll_sendable())
