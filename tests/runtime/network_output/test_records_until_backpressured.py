"""``ResultPartition.records_until_backpressured`` predicts where a producer that checks its output before each
record stops (Flink's source): over random partition states (staged hash writes, single records, flushes, credit,
polls, debloated buffer sizes, a local subpartition's held buffers) and random writes (hash targets, one
subpartition, a broadcast, round robin), the predicted count is the number of records written one at a time until
``is_backpressured`` first holds, the record that made it so included (all of them if it never does)."""

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from barriersim.runtime.network.output.result_partition import ResultPartition
from barriersim.runtime.record_batch import RecordBatch

N_SUB = 3

setup_ops = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.lists(st.integers(0, N_SUB - 1), min_size=1, max_size=30)),
        st.tuples(st.just("single"), st.integers(0, N_SUB - 1)),
        st.tuples(st.just("flush"), st.integers(0, N_SUB - 1)),
        st.tuples(st.just("credit"), st.integers(0, N_SUB - 1)),
        st.tuples(st.just("poll"), st.integers(0, N_SUB - 1)),
        st.tuples(st.just("buffer_size"), st.integers(0, N_SUB - 1), st.sampled_from([64, 200, 320])),
    ),
    max_size=25,
)

writes = st.one_of(
    st.tuples(st.just("hash"), st.lists(st.integers(0, N_SUB - 1), min_size=1, max_size=120)),
    st.tuples(st.just("one"), st.integers(0, N_SUB - 1), st.integers(1, 120)),
    st.tuples(st.just("broadcast"), st.integers(1, 60)),
    st.tuples(st.just("round_robin"), st.integers(0, N_SUB - 1), st.integers(1, 120)),
)


def _rows(n: int, first: int = 0) -> RecordBatch:
    return RecordBatch.from_rows([(first + k, 0, 0, 0) for k in range(n)])


def _partition(operations, size: int, max_buffers: int, local: bool) -> ResultPartition:
    partition = ResultPartition(
        0,
        N_SUB,
        memory_segment_size=320,
        max_buffers_per_channel=max_buffers,
        local_subpartitions=[local] + [False] * (N_SUB - 1),
    )
    infos = partition.subpartition_infos
    held = 0  # the buffers the local channel of subpartition 0 holds: it recycles them one per credit
    if local:
        partition.add_credit(infos[0], 2)  # the local channel's partition request
    for op in operations:
        if op[0] == "write":
            partition.write_batch(_rows(len(op[1])), np.array(op[1], dtype=np.int64), size)
        elif op[0] == "single":
            partition.emit_record(_rows(1), op[1], size)
        elif op[0] == "flush":
            partition.flush(op[1])
        elif op[0] == "credit":
            if local and op[1] == 0:
                if held:
                    partition.add_credit(infos[0], 1)
                    held -= 1
            else:
                partition.add_credit(infos[op[1]], 2)
        elif op[0] == "poll":
            got = partition.poll_next(infos[op[1]])
            held += int(local and op[1] == 0 and got is not None and got.is_buffer)
        elif op[0] == "buffer_size":
            partition.set_buffer_size(infos[op[1]], op[2])
    return partition


def _targets(write) -> tuple[object, list[list[int]]]:
    """The write's ``targets`` argument, and per record the subpartitions it goes to."""
    kind = write[0]
    if kind == "hash":
        return np.array(write[1], dtype=np.int64), [[t] for t in write[1]]
    if kind == "one":
        return write[1], [[write[1]]] * write[2]
    if kind == "broadcast":
        return None, [list(range(N_SUB))] * write[1]
    start, n = write[1], write[2]
    targets = [(start + k) % N_SUB for k in range(n)]
    return np.array(targets, dtype=np.int64), [[t] for t in targets]


@settings(max_examples=400, deadline=None)
@given(setup_ops, writes, st.sampled_from([8, 32, 40, 500]), st.sampled_from([2, 3, 10]), st.booleans())
def test_the_predicted_count_is_where_record_by_record_writes_become_backpressured(
    operations, write, size, max_buffers, local
):
    predicted_on = _partition(operations, size, max_buffers, local)
    assume(not predicted_on.is_backpressured())  # a producer only takes input while its output is available
    targets, per_record = _targets(write)
    predicted = predicted_on.records_until_backpressured(targets, len(per_record), size)

    written = _partition(operations, size, max_buffers, local)
    actual = len(per_record)
    for k, subpartitions in enumerate(per_record):
        for target in subpartitions:
            written.emit_record(_rows(1, 10_000 + k), target, size)
        if written.is_backpressured():
            actual = k + 1
            break
    assert predicted == actual


def test_a_write_that_fits_is_taken_whole_and_one_that_does_not_stops_at_the_record_that_fills_the_last_buffer():
    """Two buffers per channel of 320 bytes, 32-byte records: an empty subpartition is backpressured once its
    second buffer is opened, i.e. by the 11th record (the 10th fills the first buffer, the 11th opens the
    second); records to other subpartitions in between do not count."""
    partition = ResultPartition(0, 2, memory_segment_size=320, max_buffers_per_channel=2)
    assert partition.records_until_backpressured(0, 10, 32) == 10
    assert partition.records_until_backpressured(0, 50, 32) == 11
    assert partition.records_until_backpressured(np.array([1, 0] * 30, dtype=np.int64), 60, 32) == 21
    assert partition.records_until_backpressured(None, 50, 32) == 11
    assert partition.records_until_backpressured(0, 50, 0) == 50  # records of no bytes fill nothing


def test_the_buffers_a_local_channel_holds_count_until_it_recycles_them():
    """A local subpartition's buffers stay the producer's until its channel recycles them (``buffers_in_use``):
    with one held and three allowed, the 11th record of an empty subpartition opens its third buffer; once the
    channel recycled it, the 21st does."""
    partition = ResultPartition(
        0, 2, memory_segment_size=320, max_buffers_per_channel=3, local_subpartitions=[True, False]
    )
    local = partition.subpartition_infos[0]
    partition.add_credit(local, 2)  # the partition request
    partition.write_batch(_rows(10), 0, 32)  # one full buffer
    assert partition.poll_next(local).is_buffer  # handed to the local channel, which holds it
    assert partition.records_until_backpressured(0, 50, 32) == 11
    partition.add_credit(local, 1)  # recycled
    assert partition.records_until_backpressured(0, 50, 32) == 21


def _finished_buffers(partition: ResultPartition) -> int:
    return sum(sub.number_of_queued_buffers for sub in partition.subpartitions)


@settings(max_examples=400, deadline=None)
@given(setup_ops, writes, st.sampled_from([8, 32, 40, 500]), st.sampled_from([2, 3, 10]), st.booleans())
def test_the_predicted_count_is_where_record_by_record_writes_first_finish_a_buffer(
    operations, write, size, max_buffers, local
):
    """``records_until_buffer_finishes`` (a paced source's next sync point, ``SourceEmission.EXACT``): the records
    written one at a time until one of them finishes a buffer, that one included (all of them if none does)."""
    predicted_on = _partition(operations, size, max_buffers, local)
    targets, per_record = _targets(write)
    predicted = predicted_on.records_until_buffer_finishes(targets, len(per_record), size)

    written = _partition(operations, size, max_buffers, local)
    before = _finished_buffers(written)
    actual = len(per_record)
    for k, subpartitions in enumerate(per_record):
        for target in subpartitions:
            written.emit_record(_rows(1, 10_000 + k), target, size)
        if _finished_buffers(written) > before:
            actual = k + 1
            break
    assert predicted == actual
    fewest = predicted_on.fewest_records_to_finish_buffer(size)
    assert fewest <= actual or actual == len(per_record)  # the bound a source uses to skip the look ahead


def test_a_buffer_finishes_at_the_record_that_fills_or_spans_it():
    partition = ResultPartition(0, 2, memory_segment_size=320, max_buffers_per_channel=10)
    assert partition.records_until_buffer_finishes(0, 50, 32) == 10  # 10 records of 32 bytes fill 320 exactly
    assert partition.records_until_buffer_finishes(0, 50, 30) == 11  # the 11th spans the buffer's end
    assert partition.records_until_buffer_finishes(np.array([1, 0] * 30, dtype=np.int64), 60, 32) == 19
    assert partition.records_until_buffer_finishes(None, 50, 32) == 10
    partition.emit_record(_rows(1), 0, 32)
    assert partition.records_until_buffer_finishes(0, 50, 32) == 9
    assert partition.fewest_records_to_finish_buffer(32) == 9
