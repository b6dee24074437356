"""A task's record writers: how the records and watermarks its operator emits reach its result partitions.

``RecordWriters`` holds one writer per output edge, the edge's partitioner choosing the subpartition of every record
(forward, rebalance, hash, broadcast) for a whole ``RecordBatch`` at once; each partition's ``BufferWriter`` cuts
each subpartition's share from the batch. It also tells how many records the outputs take before one is
backpressured, or until one finishes a buffer. Mirrors Flink's ``RecordWriterOutput`` over
``ChannelSelectorRecordWriter`` / ``BroadcastRecordWriter``. See ``docs/architecture.md``, "The data plane".
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

from barriersim.runtime.events import Watermark
from barriersim.runtime.jobgraph import JobEdge, JobGraph, Partitioner
from barriersim.runtime.network.output.result_partition import ResultPartition
from barriersim.runtime.operators.records import KEY
from barriersim.runtime.record_batch import RecordBatch, RecordsLike
from barriersim.runtime.state.key_groups import KeyGroupAssigner, operator_indices_for_key_groups

_FORWARD, _HASH, _REBALANCE = Partitioner.FORWARD, Partitioner.HASH, Partitioner.REBALANCE

# the ufuncs' reductions, called directly (``ndarray.max()`` goes through a Python wrapper each time)
_MAX, _MIN = np.maximum.reduce, np.minimum.reduce


class RecordWriters:
    """The writers of one task, one per output edge, in the order of the task's result partitions."""

    def __init__(
        self,
        graph: JobGraph,
        edges: Sequence[JobEdge],
        partitions: Sequence[ResultPartition],
        record_size: int,
        rng: random.Random,
    ) -> None:
        self._graph = graph
        self._edges = tuple(edges)
        self._partitions = tuple(partitions)
        self._writers = tuple(p.writer for p in self._partitions)  # each partition's ``BufferWriter``
        self._record_size = record_size
        self._next_rebalance = [rng.randrange(max(1, p.number_of_subpartitions)) for p in self._partitions]
        self._hash = [
            _HashTargets(graph.vertex(e.target).max_parallelism, graph.vertex(e.target).parallelism)
            if e.partitioner is Partitioner.HASH
            else None
            for e in self._edges
        ]
        # per output edge: its index, partitioner, partition's writer and key hashing (``emit`` reads it per batch)
        self._outputs = tuple(
            (i, e.partitioner, w, h) for i, (e, w, h) in enumerate(zip(self._edges, self._writers, self._hash))
        )

    def emit(self, records: RecordsLike) -> None:
        """Write ``records`` to every output edge, each record to the subpartition(s) its partitioner picks."""
        if type(records) is not RecordBatch:
            records = RecordBatch.of(records)
        n = records.columns.shape[1]  # ``len(records)``
        if not n:
            return
        size = self._record_size
        for i, kind, writer, hashing in self._outputs:
            if kind is _REBALANCE:  # round robin, starting at a random channel as Flink's RebalancePartitioner
                start = self._next_rebalance[i]
                writer.write_round_robin(records, start, size)
                self._next_rebalance[i] = (start + n) % self._partitions[i].number_of_subpartitions
            elif kind is _HASH:
                assert hashing is not None  # made for every hash edge
                writer.write_batch(records, hashing.targets(records), size)
            elif kind is _FORWARD:
                writer.write_batch(records, 0, size)
            else:  # broadcast
                writer.write_broadcast(records, size)

    def records_until_backpressured(self, records: RecordBatch) -> int:
        """How many leading records of ``records`` ``emit`` would write before one of the outputs is backpressured,
        the record that makes it so included (``ResultPartition.records_until_backpressured``); all of them if
        none is. A source reads only those: Flink's source emits one record per ``StreamTask.processInput`` and goes
        on only while ``taskIsAvailable()``, its output not backpressured."""
        return self._records_until(records, "records_until_backpressured")

    def records_until_buffer_finishes(self, records: RecordBatch) -> int:
        """How many leading records of ``records`` ``emit`` would write until one of them finishes a buffer of
        some output, that one included (``ResultPartition.records_until_buffer_finishes``); all of them if none
        does."""
        return self._records_until(records, "records_until_buffer_finishes")

    def buffer_finish_bounds(self) -> tuple[int, int]:
        """Bounds on how many records the outputs take until one of them finishes a buffer, to spare or bound a
        look at the records to come: at least the fewest records that finish some subpartition's open buffer
        (``fewest_records_to_finish_buffer``, over every output), and about that times an output's subpartitions
        (a broadcast output gives every record to each), the least over the outputs."""
        fewest = horizon = 1 << 62
        for edge, partition in zip(self._edges, self._partitions):
            records = partition.fewest_records_to_finish_buffer(self._record_size)
            fewest = min(fewest, records)
            spread = 1 if edge.partitioner is Partitioner.BROADCAST else partition.number_of_subpartitions
            horizon = min(horizon, records * spread)
        return fewest, horizon

    def _records_until(self, records: RecordBatch, prediction: str) -> int:
        n = len(records)
        allowed = n
        for i, (edge, partition) in enumerate(zip(self._edges, self._partitions)):
            kind = edge.partitioner
            targets: np.ndarray | int | None
            if kind is Partitioner.FORWARD:
                targets = 0
            elif kind is Partitioner.HASH:
                hashing = self._hash[i]
                assert hashing is not None  # made for every hash edge
                targets = hashing.targets(records)
            elif kind is Partitioner.BROADCAST:
                targets = None
            else:
                subpartitions = partition.number_of_subpartitions
                targets = (self._next_rebalance[i] + np.arange(n)) % subpartitions if subpartitions > 1 else 0
            allowed = min(allowed, getattr(partition, prediction)(targets, n, self._record_size))
        return allowed

    def broadcast(self, element: Watermark) -> None:
        """Write ``element`` (a watermark) to every subpartition of every output edge."""
        for p in self._partitions:
            p.broadcast_record(element, self._record_size)


class _HashTargets:
    """Flink's ``KeyGroupStreamPartitioner`` for a whole key column: key -> key group (``KeyGroupAssigner``) -> the
    consumer subtask owning that key group; for small non-negative keys the two lookups composed into one table."""

    _MAX_CACHED = 1 << 20  # keys in [0, _MAX_CACHED) are looked up in ``_by_key`` (as ``KeyGroupAssigner``)

    def __init__(self, max_parallelism: int, parallelism: int) -> None:
        self._key_groups = KeyGroupAssigner(max_parallelism)
        self._max_parallelism = max_parallelism
        self._parallelism = parallelism
        self._table: np.ndarray | None = None  # operator index per key group
        self._by_key = np.empty(0, dtype=np.int64)  # operator index per small key (``_table`` of its key group)
        self._last_columns: np.ndarray | None = None
        self._last_keys: np.ndarray | None = None
        self._last_targets: np.ndarray | None = None

    def targets(self, records: RecordBatch) -> np.ndarray | int:
        """The consumer subtask of every record's key. The targets of the last batch asked for are kept: asked
        again for it (a source looks at its next records, then writes them) or a leading part of its key column
        (it writes fewer), they are not computed again. The batch's columns are kept alive with them, so no other
        array can have their identity or address meanwhile."""
        if self._parallelism == 1:
            return 0
        columns = records.columns
        if columns is self._last_columns:
            assert self._last_targets is not None  # kept with the columns
            return self._last_targets
        keys = columns[KEY]
        last = self._last_keys
        if (
            last is not None
            and len(keys) < len(last)
            and keys.__array_interface__["data"][0] == last.__array_interface__["data"][0]
            and keys.strides == last.strides
            and keys.dtype == last.dtype
        ):
            assert self._last_targets is not None  # kept with the keys
            return self._last_targets[: len(keys)]
        by_key = self._by_key
        size = len(by_key)
        targets: np.ndarray
        if size and len(keys) and _MAX(keys.view(np.uint64)) < size:  # every key in [0, size) (negative: huge)
            targets = by_key[keys]
        else:
            targets = self._targets_of(keys)
        self._last_columns, self._last_keys, self._last_targets = columns, keys, targets
        return targets

    def _targets_of(self, keys: np.ndarray) -> np.ndarray:
        """Key -> key group -> operator index, growing ``_by_key`` to cover small keys."""
        if self._table is None:
            self._table = operator_indices_for_key_groups(
                np.arange(self._max_parallelism, dtype=np.int64), self._max_parallelism, self._parallelism
            )
        if len(keys):
            low, high = int(_MIN(keys)), int(_MAX(keys))
            if low >= 0 and high < self._MAX_CACHED and high >= len(self._by_key):
                size = min(self._MAX_CACHED, max(1024, 2 * (high + 1)))
                self._by_key = self._table[self._key_groups.of_keys(np.arange(size, dtype=np.int64))]
        targets: np.ndarray = self._table[self._key_groups.of_keys(keys)]
        return targets
