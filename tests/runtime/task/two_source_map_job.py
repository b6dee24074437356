"""The small job the stream task tests deploy one task of: two sources feed one map task through one gate of two
channels (CH0, CH1); the map task writes to one sink through one subpartition (OUT)."""

import random

from barriersim.runtime.checkpointing.api import CheckpointingMode, ManualClock, ManualTimerService
from barriersim.runtime.events import InputChannelInfo, ResultSubpartitionInfo
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobVertex, OperatorKind, Partitioner
from barriersim.runtime.network.config import NetworkConfig
from barriersim.runtime.task.stream_task import StreamTask


def source_map_sink_graph(sources: int) -> JobGraph:
    """source (``sources`` subtasks) -> map -> exactly-once sink, rebalanced; the map task has one gate of
    ``sources`` channels. Other stream task tests deploy its one-source form."""
    return JobGraph(
        (
            JobVertex("source", OperatorKind.SOURCE, sources),
            JobVertex("map", OperatorKind.MAP, 1),
            JobVertex("sink", OperatorKind.TWO_PHASE_COMMIT_SINK, 1),
        ),
        (JobEdge("source", "map", Partitioner.REBALANCE), JobEdge("map", "sink", Partitioner.REBALANCE)),
    ).validate()


GRAPH = source_map_sink_graph(2)
CH0, CH1 = InputChannelInfo(0, 0), InputChannelInfo(0, 1)
OUT = ResultSubpartitionInfo(0, 0)


def deployed_task(
    vertex: str,
    mode: CheckpointingMode,
    *,
    index: int = 0,
    crash_points=(),
    timer_service=None,
    max_buffers_per_channel: int = 100,
) -> StreamTask:
    """A task of ``vertex`` restored from nothing, on a manual clock at 0, with 64-byte buffers of two records."""
    task = StreamTask(
        GRAPH,
        vertex,
        index,
        ExecutionAttemptID(vertex, index, 0),
        mode=mode,
        clock=ManualClock(0),
        timer_service=timer_service or ManualTimerService(),
        rng=random.Random(0),
        network=NetworkConfig(buffer_size=64, record_size=32, max_buffers_per_channel=max_buffers_per_channel),
        crash_points=crash_points,
    )
    task.restore(None)
    return task
