"""The walking skeleton's job graph: sources -> hash partition by key -> keyed running sum -> one sink.

How this works: ``QuickstartJob`` names the subtasks (``source#i``, ``keyed-sum#j``, ``sink#0``), says who
sends to whom on which input channel, and builds each subtask's sans-IO ``SkeletonTask`` with its operator.
The hash partitioning is Flink's ``KeyGroupStreamPartitioner``: key -> key group (murmur hash modulo the max
parallelism) -> the subtask whose key-group range holds it, so keyed state can later be redistributed by key
group. Both drivers (Ray actors, simulator) build the same tasks from this one description.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from barriersim.runtime.operators.collect_sink import CollectSink
from barriersim.runtime.operators.keyed_sum import KeyedRunningSum
from barriersim.runtime.operators.records import KEY
from barriersim.runtime.operators.source import SplitSourceReader
from barriersim.runtime.skeleton.task import OutputChannels, SkeletonTask
from barriersim.runtime.state.key_groups import (
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
)

SOURCE, KEYED_SUM, SINK = "source", "keyed-sum", "sink"


@dataclass(frozen=True)
class QuickstartJob:
    source_parallelism: int
    keyed_sum_parallelism: int
    records_per_buffer: int
    max_parallelism: int = 128

    @property
    def sources(self) -> list[str]:
        return [f"{SOURCE}#{i}" for i in range(self.source_parallelism)]

    @property
    def keyed_sums(self) -> list[str]:
        return [f"{KEYED_SUM}#{j}" for j in range(self.keyed_sum_parallelism)]

    @property
    def sink(self) -> str:
        return f"{SINK}#0"

    @property
    def tasks(self) -> list[str]:
        return self.sources + self.keyed_sums + [self.sink]

    def keyed_sum_index_of(self, key: int) -> int:
        kg = assign_to_key_group(key, self.max_parallelism)
        return compute_operator_index_for_key_group(self.max_parallelism, self.keyed_sum_parallelism, kg)

    def route(self, records: Sequence[tuple]) -> list[tuple[int, tuple]]:
        return [(self.keyed_sum_index_of(r[KEY]), r) for r in records]

    def build_source(self, index: int, records: Sequence[tuple]) -> tuple[SkeletonTask, SplitSourceReader]:
        reader = SplitSourceReader(index, records)
        task = SkeletonTask(0, reader, OutputChannels(self.keyed_sum_parallelism, self.records_per_buffer))
        return task, reader

    def build_keyed_sum(self, index: int) -> SkeletonTask:
        key_groups = compute_key_group_range_for_operator_index(self.max_parallelism, self.keyed_sum_parallelism, index)
        operator = KeyedRunningSum(key_groups, lambda key: assign_to_key_group(key, self.max_parallelism))
        return SkeletonTask(
            self.source_parallelism,
            operator,
            OutputChannels(1, self.records_per_buffer),
            process=lambda records: [(0, out) for out in operator.process_all(records)],
        )

    def build_sink(self) -> tuple[SkeletonTask, CollectSink]:
        sink = CollectSink()

        def process(records):
            sink.invoke_all(records)
            return []

        return SkeletonTask(self.keyed_sum_parallelism, sink, None, process=process), sink
