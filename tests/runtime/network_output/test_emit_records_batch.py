"""The batch write (``emit_records``) is exactly a sequence of ``emit_record`` calls."""

from hypothesis import given, settings
from hypothesis import strategies as st

from barriersim.runtime.network.output.result_partition import ResultPartition


@settings(max_examples=200, deadline=None)
@given(
    targets=st.lists(st.integers(0, 2), max_size=300),
    size=st.sampled_from([1, 7, 32, 100, 1024]),
    segment=st.sampled_from([64, 256, 1024]),
)
def test_batch_write_equals_record_by_record(targets, size, segment):
    one = ResultPartition(0, 3, memory_segment_size=segment, max_buffers_per_channel=10**6)
    batch = ResultPartition(0, 3, memory_segment_size=segment, max_buffers_per_channel=10**6)
    for i, t in enumerate(targets):
        one.emit_record(i, t, size)
    availability = batch.emit_records(((i, t) for i, t in enumerate(targets)), size)
    assert availability == one.get_availability()
    assert batch.total_written_bytes == one.total_written_bytes
    one.flush_all()
    batch.flush_all()
    for sub_one, sub_batch in zip(one.subpartitions, batch.subpartitions):
        assert sub_one.queued_elements() == sub_batch.queued_elements()
