"""Which result subpartition feeds which input channel, for every subtask of a job graph.

How this works: Flink's channel layout (``runtime.jobgraph``) gives, per consumer subtask and gate, the
producer subtask behind each input channel, and per producer subtask and output edge, the consumer subtask
behind each subpartition. ``Wiring`` precomputes both directions once, so a driver maps a subpartition to
the channel it delivers to (data) and a channel back to its subpartition (credit, resume) in O(1); given the
job's placement it also says which channels are local (producer and consumer in one TaskManager).
"""

from __future__ import annotations

from barriersim.runtime.events import InputChannelInfo, ResultSubpartitionInfo
from barriersim.runtime.job.placement import Placement
from barriersim.runtime.jobgraph import JobGraph

SubtaskKey = tuple[str, int]  # (vertex name, subtask index)


class Wiring:
    def __init__(self, graph: JobGraph, placement: Placement | None = None) -> None:
        """``placement``: where the subtasks run, for ``is_local`` (without one, every channel is remote)."""
        self._taskmanager_of = placement.taskmanager_of if placement is not None else None
        self.downstream: dict[tuple[SubtaskKey, ResultSubpartitionInfo], tuple[SubtaskKey, InputChannelInfo]] = {}
        self.upstream: dict[tuple[SubtaskKey, InputChannelInfo], tuple[SubtaskKey, ResultSubpartitionInfo]] = {}
        for vertex in graph.vertices:
            for gate_idx, edge in enumerate(graph.gates_of(vertex.name)):
                partition_idx = graph.outputs_of(edge.source).index(edge)
                for j in range(vertex.parallelism):
                    for channel_idx, producer in enumerate(graph.channels_in_gate(vertex.name, gate_idx, j)):
                        subpartition_idx = graph.subpartitions_of(edge, producer).index(j)
                        consumer = ((vertex.name, j), InputChannelInfo(gate_idx, channel_idx))
                        producer_end = (
                            (edge.source, producer),
                            ResultSubpartitionInfo(partition_idx, subpartition_idx),
                        )
                        self.downstream[producer_end] = consumer
                        self.upstream[consumer] = producer_end

    def channel_of(self, producer: SubtaskKey, info: ResultSubpartitionInfo) -> tuple[SubtaskKey, InputChannelInfo]:
        return self.downstream[(producer, info)]

    def subpartition_of(
        self, consumer: SubtaskKey, info: InputChannelInfo
    ) -> tuple[SubtaskKey, ResultSubpartitionInfo]:
        return self.upstream[(consumer, info)]

    def is_local(self, producer: SubtaskKey, consumer: SubtaskKey) -> bool:
        """Whether the channel between the two subtasks is local (one TaskManager runs both)."""
        tm = self._taskmanager_of
        return tm is not None and tm[producer] == tm[consumer]
