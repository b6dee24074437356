"""A result partition's ``LocalBufferPool`` (Flink's ``NettyShuffleUtils.getMinMaxNetworkBuffersPerResultPartition``):
a pipelined partition of n subpartitions holds at most n x buffers-per-channel + floating-buffers-per-gate buffers
(at least n + 1), so under backpressure spread over many subpartitions each holds fewer than
``max_buffers_per_channel``; a broadcast partition's subpartitions share each buffer, which counts once."""

from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobVertex, OperatorKind, Partitioner
from barriersim.runtime.network.config import NetworkConfig
from barriersim.runtime.network.output.result_partition import ResultPartition, pipelined_pool_size
from barriersim.runtime.record_batch import RecordBatch
from barriersim.runtime.task.result_partition_factory import result_partitions

SEGMENT = 100  # bytes per buffer: ten 10-byte records


def _records(n: int) -> RecordBatch:
    return RecordBatch.from_rows([(k, k, 0, 0) for k in range(n)])


def test_the_pool_size_is_flinks():
    assert pipelined_pool_size(4, 2, 8) == 16  # Flink's defaults, four consumers
    assert pipelined_pool_size(1, 2, 8) == 10
    assert pipelined_pool_size(8, 2, 8) == 24
    assert pipelined_pool_size(3, 0, 0) == 4  # at least one buffer per subpartition and one more


def test_a_partition_is_backpressured_once_its_pool_is_handed_out():
    """Four subpartitions of four full buffers each hold the pool's 16: no buffer is left for a fifth, though no
    subpartition has its 10 (before the pool, each could take 10)."""
    pooled = ResultPartition(0, 4, memory_segment_size=SEGMENT, max_buffers_per_channel=10, pool_size=16)
    per_channel_only = ResultPartition(0, 4, memory_segment_size=SEGMENT, max_buffers_per_channel=10)
    for part in (pooled, per_channel_only):
        part.write_round_robin(_records(80), 0, 10)  # 20 records per subpartition: two full buffers
        assert [part.buffers_in_use(i) for i in range(4)] == [2, 2, 2, 2]
        assert not part.is_backpressured()
        part.write_round_robin(_records(64), 0, 10)  # 36 per subpartition: three full buffers, one open
        assert [part.buffers_in_use(i) for i in range(4)] == [4, 4, 4, 4]
    assert pooled.is_backpressured()
    assert not per_channel_only.is_backpressured()


def test_a_buffer_sent_to_a_remote_consumer_returns_to_the_pool():
    part = ResultPartition(0, 4, memory_segment_size=SEGMENT, max_buffers_per_channel=10, pool_size=16)
    part.write_round_robin(_records(160), 0, 10)  # four full buffers per subpartition
    assert part.is_backpressured()
    info = part.subpartition_infos[2]
    part.add_credit(info, 1)
    assert part.poll_next(info) is not None
    assert part.buffers_in_use(2) == 3 and not part.is_backpressured()


def test_a_broadcast_partition_counts_a_shared_buffer_once():
    """Flink writes a broadcast record once, into a buffer every subpartition reads: two subpartitions of seven
    buffers hold seven of the pool's 12, not 14."""
    broadcast = ResultPartition(
        0, 2, memory_segment_size=SEGMENT, max_buffers_per_channel=10, pool_size=12, broadcast=True
    )
    unicast = ResultPartition(0, 2, memory_segment_size=SEGMENT, max_buffers_per_channel=10, pool_size=12)
    broadcast.write_broadcast(_records(70), 10)
    unicast.write_round_robin(_records(140), 0, 10)
    for part in (broadcast, unicast):
        assert [part.buffers_in_use(i) for i in range(2)] == [7, 7]
    assert not broadcast.is_backpressured()
    assert unicast.is_backpressured()


def test_a_tasks_partitions_get_flinks_pool_per_edge():
    graph = JobGraph(
        (
            JobVertex("source", OperatorKind.SOURCE, 2),
            JobVertex("map", OperatorKind.MAP, 4),
            JobVertex("sink", OperatorKind.AT_LEAST_ONCE_SINK, 4),
        ),
        (JobEdge("source", "map", Partitioner.REBALANCE), JobEdge("map", "sink", Partitioner.BROADCAST)),
    ).validate()
    network = NetworkConfig(exclusive_buffers_per_channel=2, floating_buffers_per_gate=8)
    (to_map,) = result_partitions(graph, graph.outputs_of("source"), 0, network, None)
    (to_sinks,) = result_partitions(graph, graph.outputs_of("map"), 0, network, None)
    assert (to_map.pool_size, to_map.broadcast) == (16, False)
    assert (to_sinks.pool_size, to_sinks.broadcast) == (16, True)
