"""A subtask's result partitions, one per output edge, built from the job graph and the network settings: Flink's
``ResultPartitionFactory`` (each partition's subpartitions, segment size, per-channel limit and ``LocalBufferPool``
size, whether it is a broadcast and whether its edge carries unaligned barriers)."""

from __future__ import annotations

from collections.abc import Sequence

from barriersim.runtime.faults.mutations import PlantedBug, is_planted
from barriersim.runtime.jobgraph import JobEdge, JobGraph, Partitioner
from barriersim.runtime.network.config import NetworkConfig
from barriersim.runtime.network.output.result_partition import ResultPartition, pipelined_pool_size


def result_partitions(
    graph: JobGraph,
    output_edges: Sequence[JobEdge],
    subtask_index: int,
    network: NetworkConfig,
    local_subpartitions: Sequence[Sequence[bool]] | None,
) -> list[ResultPartition]:
    """A subtask's result partitions, one per output edge (Flink's ``ResultPartitionFactory``)."""
    partitions = []
    for i, edge in enumerate(output_edges):
        subpartitions = len(graph.subpartitions_of(edge, subtask_index))
        partitions.append(
            ResultPartition(
                i,
                subpartitions,
                memory_segment_size=network.buffer_size,
                max_buffers_per_channel=network.max_buffers_per_channel,
                pool_size=pipelined_pool_size(
                    subpartitions, network.exclusive_buffers_per_channel, network.floating_buffers_per_gate
                ),
                broadcast=edge.partitioner is Partitioner.BROADCAST,
                supports_unaligned_checkpoints=_supports_unaligned_checkpoints(graph, edge),
                local_subpartitions=local_subpartitions[i] if local_subpartitions is not None else (),
                starting_buffer_size=network.debloat_configuration().starting_size(network.buffer_size),
            )
        )
    return partitions


def _supports_unaligned_checkpoints(graph: JobGraph, edge: JobEdge) -> bool:
    """Whether ``edge`` carries unaligned barriers (``JobGraph.supports_unaligned_checkpoints``)."""
    if is_planted(PlantedBug.POINTWISE_EDGES_PERSIST_INFLIGHT_DATA):  # FLINK-21945: pointwise edges carried them
        return all(e.partitioner is not Partitioner.BROADCAST for e in graph.inputs_of(edge.target))
    return graph.supports_unaligned_checkpoints(edge)
