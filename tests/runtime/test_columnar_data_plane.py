"""The columnar data plane gives, for every batch, exactly what the per-record path gives record by record:
Flink's key-group assignment for a whole key column, the hash, rebalance and broadcast partitioners cutting the
same buffers as one record at a time, the keyed running sum and the windows over a batch, the verification's
counts against a plain multiset count, and the byte forms of batches (wire, records codec, persisted channel
state). Derandomized Hypothesis with small budgets; ``BARRIERSIM_HYPOTHESIS_EXAMPLES`` raises them."""

import os
import random
from collections import Counter

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barriersim.runtime.events import Buffer, StreamElements, Watermark, from_wire, to_wire
from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobVertex
from barriersim.runtime.jobgraph import OperatorKind as K
from barriersim.runtime.jobgraph import Partitioner as P
from barriersim.runtime.network.output.result_partition import ResultPartition
from barriersim.runtime.operators.keyed_sum import KeyedRunningSum
from barriersim.runtime.operators.window import TumblingEventTimeWindowSum
from barriersim.runtime.record_batch import MalformedRecords, RecordBatch, batch_from_bytes, batch_to_bytes
from barriersim.runtime.records_codec import decode_records, encode_records, pack, unpack
from barriersim.runtime.state.key_groups import (
    KeyGroupAssigner,
    assign_key_to_parallel_operator,
    assign_to_key_group,
    assign_to_key_groups,
)
from barriersim.runtime.state.snapshot import KeyGroupRange
from barriersim.runtime.task.record_writers import RecordWriters
from barriersim.runtime.verification.reference import Expected, verify

EXAMPLES = int(os.environ.get("BARRIERSIM_HYPOTHESIS_EXAMPLES", "60"))
SETTINGS = settings(max_examples=EXAMPLES, derandomize=True, deadline=None)

int64s = st.integers(-(2**63), 2**63 - 1)
keys = st.one_of(int64s, st.integers(-(2**31) - 3, 2**31 + 3), st.integers(0, 3000))
records = st.lists(
    st.tuples(st.integers(0, 10**6), st.integers(0, 40), st.integers(-50, 100), st.integers(0, 500)), max_size=60
)


@SETTINGS
@given(st.lists(keys, max_size=200), st.sampled_from([1, 7, 128, 4096, 32768]))
def test_key_groups_of_a_key_column_are_flinks_key_groups_of_each_key(column, max_parallelism):
    array = np.array(column, dtype=np.int64)
    expected = [assign_to_key_group(k, max_parallelism) for k in column]
    assert assign_to_key_groups(array, max_parallelism).tolist() == expected
    assigner = KeyGroupAssigner(max_parallelism)
    assert assigner.of_keys(array).tolist() == expected  # memoized table for small keys, hashing for the rest
    assert assigner.of_keys(array).tolist() == expected


def _graph(partitioner: P, consumers: int) -> JobGraph:
    consumer = K.KEYED_SUM if partitioner is P.HASH else K.MAP
    return JobGraph(
        (
            JobVertex("source", K.SOURCE, 1),
            JobVertex("sink", consumer, consumers),
            JobVertex("out", K.AT_LEAST_ONCE_SINK, 1),
        ),
        (JobEdge("source", "sink", partitioner), JobEdge("sink", "out", P.REBALANCE)),
    ).validate()


def _per_record_reference(graph, batches, partitioner, size, segment, seed):
    """What Flink's record writer does one record at a time, with the scalar partitioners."""
    consumers = graph.vertex("sink")
    part = ResultPartition(0, consumers.parallelism, memory_segment_size=segment, max_buffers_per_channel=10**6)
    channel = random.Random(seed).randrange(consumers.parallelism)
    for batch in batches:
        for record in batch:
            if partitioner is P.BROADCAST:
                part.broadcast_record(record, size)
                continue
            if partitioner is P.HASH:
                target = assign_key_to_parallel_operator(record[1], consumers.max_parallelism, consumers.parallelism)
            elif partitioner is P.FORWARD:
                target = 0
            else:
                target, channel = channel, (channel + 1) % consumers.parallelism
            part.emit_record(record, target, size)
    return part


def _buffers(part: ResultPartition) -> list:
    part.finish()
    out = []
    for info in part.subpartition_infos:
        part.add_credit(info, 10**6)
        while (item := part.poll_next(info)) is not None:
            if isinstance(item.element, Buffer):
                out.append(
                    (
                        info.subpartition_idx,
                        item.element.sequence_number,
                        item.element.size,
                        [tuple(r) for r in item.element.records],
                    )
                )
    return out


@SETTINGS
@given(
    st.lists(records, min_size=1, max_size=4),
    st.sampled_from([P.HASH, P.REBALANCE, P.BROADCAST, P.FORWARD]),
    st.integers(1, 5),
    st.sampled_from([(32, 32 * 1024), (32, 100), (40, 64), (7, 20)]),
    st.integers(0, 99),
)
def test_vectorized_partitioners_cut_the_same_buffers_as_one_record_at_a_time(
    batches, partitioner, consumers, sizes, seed
):
    if partitioner is P.FORWARD:
        consumers = 1
    graph = _graph(partitioner, consumers)
    size, segment = sizes
    part = ResultPartition(0, consumers, memory_segment_size=segment, max_buffers_per_channel=10**6)
    writers = RecordWriters(graph, graph.outputs_of("source"), [part], size, random.Random(seed))
    for batch in batches:
        writers.emit(RecordBatch.from_rows(batch))
    reference = _per_record_reference(graph, batches, partitioner, size, segment, seed)
    assert part.total_written_bytes == reference.total_written_bytes
    assert _buffers(part) == _buffers(reference)


@SETTINGS
@given(st.lists(records, max_size=5))
def test_the_keyed_running_sum_of_batches_is_the_per_record_running_sum(batches):
    op = KeyedRunningSum(KeyGroupRange(0, 127), KeyGroupAssigner(128))
    sums: dict = {}
    for batch in batches:
        expected = []
        for rid, key, value, _ in batch:
            sums[key] = sums.get(key, 0) + value
            expected.append((rid, key, value, sums[key]))
        assert op.process_all(RecordBatch.from_rows(batch)).to_rows() == expected
    again = KeyedRunningSum(KeyGroupRange(0, 127), KeyGroupAssigner(128))
    again.restore_state(op.snapshot_state())
    assert again.process_all([(0, k, 0, 0) for k in sorted(sums)]).column(3).tolist() == [sums[k] for k in sorted(sums)]


def test_keyed_sum_keys_outside_the_dense_table_keep_their_sums():
    op = KeyedRunningSum(KeyGroupRange(0, 127), KeyGroupAssigner(128))
    big, small = 2**40, 3
    assert op.process_all([(1, big, 5, 0), (2, -4, 1, 0), (3, small, 2, 0)]).column(3).tolist() == [5, 1, 2]
    assert op.process_all([(4, big, 1, 0), (5, 10**6 + 5, 7, 0), (6, small, 1, 0)]).column(3).tolist() == [6, 7, 3]
    assert op.process_all([(7, 10**6 + 5, 1, 0), (8, -4, 1, 0)]).column(3).tolist() == [8, 2]


@SETTINGS
@given(st.lists(st.one_of(records, st.integers(-10, 600)), max_size=8), st.sampled_from([1, 10, 75]))
def test_a_window_over_batches_and_watermarks_is_the_per_record_window(steps, size):
    """Batches and watermarks in any order: the batch operator fires and drops (late) what the per-record rule
    does."""
    op = TumblingEventTimeWindowSum(size, KeyGroupRange(0, 127), KeyGroupAssigner(128))
    windows: dict = {}
    watermark, late = -(2**63), 0
    for step in steps:
        if isinstance(step, int):
            watermark = max(watermark, step)
            due = sorted(w for w in windows if w[0] + size - 1 <= watermark)
            expected = [(w[0], w[1], *windows.pop(w)) for w in due]
            assert op.process_watermark(Watermark(step)).to_rows() == expected
            continue
        for _, key, value, t in step:
            start = t - t % size
            if start + size - 1 <= watermark:
                late += 1
                continue
            acc = windows.setdefault((start, key), [0, 0])
            acc[0] += value
            acc[1] += 1
        op.process_all(RecordBatch.from_rows(step))
        assert op.late_records == late


def _counter_verdict(expected_rows: list, committed: list) -> tuple:
    """The multiset counts as the per-record verification took them."""
    want, got = Counter(expected_rows), Counter(committed)
    lost = sum(max(0, n - got.get(k, 0)) for k, n in want.items())
    duplicated = sum(max(0, n - want[k]) for k, n in got.items() if k in want)
    wrong = sum(n for k, n in got.items() if k not in want)
    return lost, duplicated, wrong


@SETTINGS
@given(
    st.lists(st.tuples(st.integers(0, 30), st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)), max_size=40),
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)), max_size=50),
    st.booleans(),
    st.sampled_from([0, 10**12]),
)
def test_the_columnar_verification_counts_as_a_multiset_count(expected_rows, noise, distinct_ids, spread):
    if distinct_ids:  # every workload: distinct, dense record ids (compared by direct addressing)
        expected_rows = list({r[0]: r for r in expected_rows}.values())
    expected_rows = [(r[0] * (spread or 1), *r[1:]) for r in expected_rows]  # sparse ids: compared by sorting
    committed = [r for r in expected_rows if r[3] != 0] + expected_rows[: len(expected_rows) // 3] + noise
    random.Random(len(committed)).shuffle(committed)
    expected = Expected(
        RecordBatch.from_rows(expected_rows).columns if expected_rows else RecordBatch.empty().columns, False, {}
    )
    v = verify(expected, RecordBatch.from_rows(committed) if committed else [])
    assert (v.lost, v.duplicated, v.wrong) == _counter_verdict(expected_rows, committed)
    assert v.expected_records == len(expected_rows) and v.output_records == len(committed)


def test_a_batch_crosses_the_wire_the_codec_and_channel_state_as_its_columns():
    batch = RecordBatch.from_rows([(1, 2, 3, 4), (2, -7, 2**40, -(2**63))])
    assert batch_from_bytes(batch_to_bytes(batch)) == batch
    assert batch_from_bytes(batch_to_bytes(batch.slice(1, 2))).to_rows() == [(2, -7, 2**40, -(2**63))]
    assert decode_records(encode_records(batch)) == batch and decode_records(encode_records([(5, 6, 7, 8)])) == [
        (5, 6, 7, 8)
    ]
    mixed = StreamElements([batch, Watermark(99), batch.slice(0, 1)])
    for content in (batch, mixed, RecordBatch.empty()):
        buffer = Buffer(content, 96, 4)
        assert from_wire(msgpack.unpackb(msgpack.packb(to_wire(buffer)), use_list=False)) == buffer
        assert unpack(pack([content]))[0] == content
    assert list(mixed) == [(1, 2, 3, 4), (2, -7, 2**40, -(2**63)), Watermark(99), (1, 2, 3, 4)]
    with pytest.raises(MalformedRecords, match="expected"):
        batch_from_bytes(batch_to_bytes(batch)[:-1])


def test_persisted_channel_state_keeps_its_batches():
    from barriersim.runtime.events import InputChannelInfo
    from barriersim.runtime.state.snapshot import (
        CheckpointMetadata,
        InputChannelStateHandle,
        OperatorState,
        OperatorSubtaskState,
    )
    from barriersim.runtime.storage.metadata_serializer import deserialize, serialize

    buffers = (
        Buffer(RecordBatch.from_rows([(1, 2, 3, 4)]), 32, 7),
        Buffer(StreamElements([Watermark(5), RecordBatch.from_rows([(9, 9, 9, 9)])]), 64, 8),
    )
    state = OperatorSubtaskState(input_channel_state=(InputChannelStateHandle(0, InputChannelInfo(0, 0), buffers),))
    back = deserialize(serialize(CheckpointMetadata(3, (OperatorState("sink", 1, 128, {0: state}),))))
    assert back.operator_states[0].subtask_states[0].input_channel_state[0].buffers == buffers


def test_every_channel_element_has_its_own_wire_tag_and_comes_back():
    """A batch buffer and the rescaling events of a restore (virtual channel descriptors, the end of recovered
    channel state, end of data) cross the wire in one stream: each kind decodes as itself."""
    from barriersim.runtime.events import (
        END_OF_CHANNEL_STATE,
        END_OF_PARTITION,
        EndOfData,
        StopMode,
        SubtaskConnectionDescriptor,
    )

    batch = RecordBatch.from_rows([(1, 2, 3, 4)])
    elements = [
        Buffer(batch, 32, 0),
        Buffer(StreamElements([batch, Watermark(5)]), 32, 1),
        END_OF_CHANNEL_STATE,
        SubtaskConnectionDescriptor(1, 0),
        EndOfData(StopMode.DRAIN),
        END_OF_PARTITION,
    ]
    wires = [to_wire(e) for e in elements]
    assert len({w[0] for w in wires}) == len(elements)
    assert [from_wire(msgpack.unpackb(msgpack.packb(w), use_list=False)) for w in wires] == elements
