"""Which result subpartition feeds which input channel, for every subtask of a job graph.

How this works: Flink's channel layout (``runtime.jobgraph``) gives, per consumer subtask and gate, the
producer subtask behind each input channel, and per producer subtask and output edge, the consumer subtask
behind each subpartition. ``Wiring`` precomputes both directions once, so a driver maps a subpartition to
the channel it delivers to (data) and a channel back to its subpartition (credit, resume) in O(1).
"""

from __future__ import annotations

from dataclasses import dataclass

from barriersim.runtime.events import InputChannelInfo, ResultSubpartitionInfo
from barriersim.runtime.jobgraph import JobGraph

SubtaskKey = tuple[str, int]  # (vertex name, subtask index)


@dataclass(frozen=True)
class Endpoint:
    subtask: SubtaskKey
    channel: InputChannelInfo | None = None
    subpartition: ResultSubpartitionInfo | None = None


class Wiring:
    def __init__(self, graph: JobGraph):
        self.downstream: dict[tuple[SubtaskKey, ResultSubpartitionInfo], tuple[SubtaskKey, InputChannelInfo]] = {}
        self.upstream: dict[tuple[SubtaskKey, InputChannelInfo], tuple[SubtaskKey, ResultSubpartitionInfo]] = {}
        for vertex in graph.vertices:
            for gate_idx, edge in enumerate(graph.gates_of(vertex.name)):
                partition_idx = graph.outputs_of(edge.source).index(edge)
                for j in range(vertex.parallelism):
                    for channel_idx, producer in enumerate(graph.channels_in_gate(vertex.name, gate_idx, j)):
                        subpartition_idx = graph.subpartitions_of(edge, producer).index(j)
                        consumer = ((vertex.name, j), InputChannelInfo(gate_idx, channel_idx))
                        producer_end = ((edge.source, producer), ResultSubpartitionInfo(partition_idx, subpartition_idx))
                        self.downstream[producer_end] = consumer
                        self.upstream[consumer] = producer_end

    def channel_of(self, producer: SubtaskKey, info: ResultSubpartitionInfo) -> tuple[SubtaskKey, InputChannelInfo]:
        return self.downstream[(producer, info)]

    def subpartition_of(self, consumer: SubtaskKey, info: InputChannelInfo) -> tuple[SubtaskKey, ResultSubpartitionInfo]:
        return self.upstream[(consumer, info)]
