"""A task's record writers: how the records and watermarks its operator emits reach its result partitions.

How this works: ``RecordWriters`` holds one writer per output edge of the task, each writing into that edge's
``ResultPartition`` with the edge's partitioner choosing the subpartition of every record: forward (the one
subpartition), rebalance (round robin, starting at a channel drawn from the task's injected random source, as
Flink's ``RebalancePartitioner`` starts at a random channel), hash (key -> key group -> consumer subtask,
Flink's ``KeyGroupStreamPartitioner``, memoized per key) and broadcast (every subpartition). ``emit`` writes a
batch of records; ``broadcast`` writes a watermark to every subpartition of every partition. Records are
written in batches (``emit_batch`` / ``emit_round_robin``) because this is the simulator's hottest path.
Mirrors Flink's ``RecordWriterOutput`` over ``ChannelSelectorRecordWriter`` / ``BroadcastRecordWriter``.
"""

from __future__ import annotations

import random
from operator import itemgetter
from typing import Iterable, Sequence

from barriersim.runtime.jobgraph import JobEdge, JobGraph, Partitioner
from barriersim.runtime.network.output.result_partition import ResultPartition
from barriersim.runtime.operators.records import KEY
from barriersim.runtime.state.key_groups import assign_key_to_parallel_operator


class RecordWriters:
    """The writers of one task, one per output edge, in the order of the task's result partitions."""

    def __init__(self, graph: JobGraph, edges: Sequence[JobEdge], partitions: Sequence[ResultPartition],
                 record_size: int, rng: random.Random):
        self._graph = graph
        self._edges = tuple(edges)
        self._partitions = tuple(partitions)
        self._record_size = record_size
        self._next_rebalance = [rng.randrange(max(1, p.number_of_subpartitions)) for p in self._partitions]
        self._hash_cache: list[dict] = [{} for _ in self._partitions]

    def emit(self, records: Iterable[tuple]) -> None:
        """Write ``records`` to every output edge, each record to the subpartition(s) its partitioner picks."""
        size = self._record_size
        if not isinstance(records, (list, tuple)):
            records = list(records)
        for i, (edge, partition) in enumerate(zip(self._edges, self._partitions)):
            kind = edge.partitioner
            if kind is Partitioner.BROADCAST:
                for r in records:
                    partition.broadcast_record(r, size)
            elif kind is Partitioner.FORWARD:
                partition.emit_batch(records, 0, size)
            elif kind is Partitioner.HASH:
                cache = self._hash_cache[i]
                targets = [
                    cache[key] if key in cache else self._hash_target(i, edge, key)
                    for key in map(itemgetter(KEY), records)
                ]
                partition.emit_batch(records, targets, size)
            else:  # rebalance: round robin, starting at a random channel as Flink's RebalancePartitioner
                n = partition.number_of_subpartitions
                start = self._next_rebalance[i]
                partition.emit_round_robin(records, start, size)
                self._next_rebalance[i] = (start + len(records)) % n

    def broadcast(self, element) -> None:
        """Write ``element`` (a watermark) to every subpartition of every output edge."""
        for p in self._partitions:
            p.broadcast_record(element, self._record_size)

    def _hash_target(self, partition_idx: int, edge: JobEdge, key) -> int:
        """Flink's KeyGroupStreamPartitioner (key -> key group -> subtask), memoized per key."""
        cache = self._hash_cache[partition_idx]
        target = cache.get(key)
        if target is None:
            consumer = self._graph.vertex(edge.target)
            target = cache[key] = assign_key_to_parallel_operator(key, consumer.max_parallelism, consumer.parallelism)
        return target
