"""A local channel reads its producer's own buffers (Flink's ``LocalInputChannel``): the buffers it holds, the one
its task reads and the one read next, count against the producer's ``max_buffers_per_channel`` until the task
processed them, as Flink's memory segments return to the producer's ``LocalBufferPool`` only once the consumer's
deserializer has read them. A remote subpartition's buffers leave the producer's count when sent."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barriersim.runtime.events import Buffer
from barriersim.runtime.network.input.input_channel import LOCAL_CHANNEL_BUFFERS, AddCredit
from barriersim.runtime.network.input.single_input_gate import SingleInputGate
from barriersim.runtime.network.output.result_partition import ResultPartition
from barriersim.runtime.network.output.view_reader import CreditError
from barriersim.runtime.record_batch import RecordBatch

SEGMENT = 100  # bytes per buffer: ten 10-byte records


def _records(n: int, start: int = 0) -> RecordBatch:
    return RecordBatch.from_rows([(k, k, 0, 0) for k in range(start, start + n)])


def test_buffers_a_local_channel_holds_count_until_it_gives_them_back():
    part = ResultPartition(
        0, 2, memory_segment_size=SEGMENT, max_buffers_per_channel=4, local_subpartitions=[True, False]
    )
    local, remote = part.subpartition_infos
    part.add_credit(local, LOCAL_CHANNEL_BUFFERS)  # the partition request
    part.add_credit(remote, 2)
    part.write_round_robin(_records(60), 0, 10)  # 30 records, three full buffers, per subpartition
    assert part.buffers_in_use(0) == part.buffers_in_use(1) == 3
    sent = [item for item in (part.poll_next(local), part.poll_next(local), part.poll_next(local)) if item]
    assert len(sent) == 2  # the request's two buffers
    for _ in range(2):
        part.poll_next(remote)
    assert part.buffers_in_use(0) == 3  # one queued, two at the consumer
    assert part.buffers_in_use(1) == 1  # sent to the network: no longer the producer's
    part.write_round_robin(_records(2), 0, 10)  # opens a fourth buffer on each
    assert part.is_backpressured()  # the local subpartition has its 4 buffers
    part.add_credit(local, 1)  # the consumer processed one
    assert part.buffers_in_use(0) == 3 and not part.is_backpressured()
    with pytest.raises(CreditError, match="holds only 1 buffer"):
        part.add_credit(local, 2)


def _wired(max_buffers: int):
    """A producer partition with one local subpartition, wired in process to a gate with one local channel."""
    part = ResultPartition(
        0, 1, memory_segment_size=SEGMENT, max_buffers_per_channel=max_buffers, local_subpartitions=[True]
    )
    info = part.subpartition_infos[0]
    gate = SingleInputGate(
        0, ["local"], lambda action: part.add_credit(info, action.credit) if isinstance(action, AddCredit) else None
    )
    gate.setup()
    return part, info, gate


def _deliver(part, info, gate) -> None:
    while (item := part.poll_next(info)) is not None:
        gate.on_element(0, item.element, item.sequence_number)


def _held_by_consumer(gate) -> int:
    channel = gate.get_channel(0)
    queued = sum(1 for e in channel.queued_elements() if isinstance(e, Buffer))
    return queued + len(channel._in_task)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["produce", "consume", "flush"]), max_size=120), st.integers(2, 6))
def test_a_backpressured_producer_never_has_more_buffers_out_than_its_limit(ops, max_buffers):
    """Property: the producer writes only while not backpressured; whatever the order of its writes, flushes and
    the consumer's steps, the buffers between them (queued, open, held by the local channel and its task) never
    exceed ``max_buffers_per_channel``, the producer's count is exactly those, and nothing is lost."""
    part, info, gate = _wired(max_buffers)
    written = received = 0
    for op in ops:
        if op == "produce":
            if not part.is_backpressured():
                part.write_round_robin(_records(3, written), 0, 10)
                written += 3
        elif op == "flush":
            part.flush(0)
        else:
            gate.release_processed()  # the task's next step: it processed what it polled before
            boe = gate.poll_next()
            if boe is not None:
                received += len(boe.element.records)
        _deliver(part, info, gate)
        in_flight = part.buffers_in_use(0)
        assert in_flight == (
            part.subpartitions[0].number_of_queued_buffers
            + _held_by_consumer(gate)
            + (1 if part._builders[0].records else 0)
        )
        assert in_flight <= max_buffers
    gate.release_processed()
    part.flush(0)
    _deliver(part, info, gate)
    while (boe := gate.poll_next()) is not None:
        received += len(boe.element.records)
        gate.release_processed()
        _deliver(part, info, gate)
    assert received == written and part.buffers_in_use(0) == _held_by_consumer(gate) == 0
