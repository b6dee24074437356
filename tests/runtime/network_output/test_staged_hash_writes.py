"""Hash writes are staged (``ResultPartition.write_batch``) until one fills a buffer or something reads or changes
the open buffers: over random interleavings of hash-partitioned batch writes, single records, flushes, credit, polls,
barriers, buffer-size announcements and a release, a partition written with ``write_batch`` behaves exactly as one
written record by record with ``emit_record`` (the same availability, buffers in use, backlog and elements on the
wire, with the same records in each buffer)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from barriersim.runtime.events import Buffer, CheckpointBarrier, CheckpointOptions
from barriersim.runtime.network.output.result_partition import ResultPartition
from barriersim.runtime.record_batch import RecordBatch

N_SUB = 4

ops = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.lists(st.integers(0, N_SUB - 1), min_size=1, max_size=40), st.just(0)),
        st.tuples(st.just("single"), st.integers(0, N_SUB - 1), st.just(0)),
        st.tuples(st.just("flush"), st.integers(0, N_SUB - 1), st.just(0)),
        st.tuples(st.just("credit"), st.integers(0, N_SUB - 1), st.integers(1, 3)),
        st.tuples(st.just("poll"), st.integers(0, N_SUB - 1), st.integers(1, 4)),
        st.tuples(st.just("barrier"), st.booleans(), st.just(0)),
        st.tuples(st.just("buffer_size"), st.integers(0, N_SUB - 1), st.sampled_from([64, 200, 320])),
        st.tuples(st.just("release"), st.just(0), st.just(0)),
    ),
    max_size=60,
)


def _rows(element):
    if isinstance(element, Buffer):
        return ("buffer", element.size, [tuple(int(v) for v in r) for r in element.records])
    return ("event", repr(element))


@settings(max_examples=300, deadline=None)
@given(ops, st.sampled_from([8, 32, 40]), st.sampled_from([2, 10]))
def test_staged_hash_writes_behave_as_record_by_record_writes(operations, size, max_buffers):
    staged = ResultPartition(0, N_SUB, memory_segment_size=320, max_buffers_per_channel=max_buffers)
    plain = ResultPartition(0, N_SUB, memory_segment_size=320, max_buffers_per_channel=max_buffers)
    infos = staged.subpartition_infos
    record = 0
    checkpoint = 0
    for op, a, b in operations:
        if op == "write":
            rows = [(record + k, t, 0, 0) for k, t in enumerate(a)]
            record += len(a)
            staged.write_batch(RecordBatch.from_rows(rows), np.array(a, dtype=np.int64), size)
            for row, t in zip(rows, a):
                plain.emit_record(RecordBatch.from_rows([row]), t, size)
        elif op == "single":
            row = RecordBatch.from_rows([(record, a, 0, 0)])
            record += 1
            staged.emit_record(row, a, size)
            plain.emit_record(row, a, size)
        elif op == "flush":
            staged.flush(a)
            plain.flush(a)
        elif op == "credit":
            staged.add_credit(infos[a], b)
            plain.add_credit(infos[a], b)
        elif op == "poll":
            for _ in range(b):
                got, expected = staged.poll_next(infos[a]), plain.poll_next(infos[a])
                assert (got is None) == (expected is None)
                if got is None:
                    break
                assert _rows(got.element) == _rows(expected.element)
                assert (got.buffers_in_backlog, got.sequence_number) == (
                    expected.buffers_in_backlog,
                    expected.sequence_number,
                )
        elif op == "barrier":
            checkpoint += 1
            options = CheckpointOptions.unaligned() if a else CheckpointOptions.aligned()
            got = staged.broadcast_event(CheckpointBarrier(checkpoint, 0, options), a)
            expected = plain.broadcast_event(CheckpointBarrier(checkpoint, 0, options), a)
            assert {i: [_rows(x) for x in d] for i, d in got.items()} == {
                i: [_rows(x) for x in d] for i, d in expected.items()
            }
        elif op == "buffer_size":
            staged.set_buffer_size(infos[a], b)
            plain.set_buffer_size(infos[a], b)
        elif op == "release":
            staged.release()
            plain.release()
        assert staged.get_availability() == plain.get_availability()
        assert staged.total_written_bytes == plain.total_written_bytes
        for i, info in enumerate(infos):
            assert staged.buffers_in_use(i) == plain.buffers_in_use(i)
            assert staged.get_backlog(info) == plain.get_backlog(info)
            assert staged.is_subpartition_available(info) == plain.is_subpartition_available(info)
    if not plain.is_released:
        staged.finish()
        plain.finish()
        for info in infos:
            staged.add_credit(info, 10_000)
            plain.add_credit(info, 10_000)
            got = [_rows(x.element) for x in iter(lambda: staged.poll_next(info), None)]  # noqa: B023
            want = [_rows(x.element) for x in iter(lambda: plain.poll_next(info), None)]  # noqa: B023
            assert got == want
