"""Releasing a result partition when its task fails: ports of Flink's SubpartitionTestBase and ResultPartitionTest
release methods, and the exact sequence of a dead producer's timed-out barrier at the component level.

Model differences the ports adapt to: buffers are values, so "recycled" becomes "not queued and never handed
out"; Flink's ``add`` returns -1 on a released subpartition, ours returns the buffer unqueued.
"""

import pytest

from barriersim.runtime.events import (
    Buffer,
    CheckpointBarrier,
    CheckpointOptions,
    CheckpointType,
    InputChannelInfo,
    ResultSubpartitionInfo,
)
from barriersim.runtime.network.input.input_channel import BufferReorderingException, LocalInputChannel
from barriersim.runtime.network.output.result_partition import Availability, ResultPartition
from barriersim.runtime.network.output.subpartition import PipelinedSubpartition

INFO = ResultSubpartitionInfo(0, 0)
MAX = 2**31 - 1


def _buf(size: int) -> Buffer:
    return Buffer((size,), size)


def _timeoutable(cid: int) -> CheckpointBarrier:
    return CheckpointBarrier(cid, 0, CheckpointOptions.aligned_with_timeout(CheckpointType.CHECKPOINT, 5))


def test_add_after_release():
    """Port of Flink SubpartitionTestBase.testAddAfterRelease."""
    sub = PipelinedSubpartition(INFO)
    sub.release()
    sub.add_buffer(_buf(4096))
    assert sub.add_event(_timeoutable(1)) == ()
    assert sub.number_of_queued_buffers == 0 and sub.get_buffers_in_backlog() == 0
    assert sub.queued_elements() == []
    assert sub.poll_buffer(MAX) is None
    assert sub.is_released and not sub.is_finished


def test_release_is_idempotent():
    """Port of Flink SubpartitionTestBase.testReleaseIsIdempotent."""
    sub = PipelinedSubpartition(INFO)
    sub.add_buffer(_buf(4096))
    sub.finish()
    sub.release()
    sub.release()
    sub.release()
    assert sub.is_released and sub.poll_buffer(MAX) is None
    partition = ResultPartition(0, 2)
    partition.emit_record("r", 0, 32)
    partition.release()
    partition.release()
    assert partition.is_released and all(s.is_released for s in partition.subpartitions)


def test_add_on_released_pipelined_partition():
    """Port of Flink ResultPartitionTest.testAddOnReleasedPipelinedPartition.

    Adapted: the record is silently dropped (Flink recycles its buffer): nothing is queued, the open buffer
    stays empty and the partition is not backpressured by it."""
    partition = ResultPartition(0, 2, memory_segment_size=64, max_buffers_per_channel=1)
    partition.release()
    assert partition.emit_record("r", 0, 64) is Availability.AVAILABLE
    assert partition.emit_records((("s", 1),), 64) is Availability.AVAILABLE
    assert partition.broadcast_event(_timeoutable(1)) == {}
    partition.flush_all()
    partition.finish()
    assert partition.buffers_in_use(0) == 0 and partition.buffers_in_use(1) == 0
    assert partition.get_availability() is Availability.AVAILABLE
    partition.add_credit(INFO, 5)
    assert partition.poll_next(INFO) is None and partition.poll_next(ResultSubpartitionInfo(0, 1)) is None


def _sent_until_blocked_or_empty(partition: ResultPartition) -> list:
    out = []
    while (item := partition.poll_next(INFO)) is not None:
        out.append(item)
    return out


def test_released_partition_never_sends_its_timed_out_barrier():
    """The sequence behind the BufferReorderingException after a failover, at the component level.

    A producer queues data and a timeoutable barrier; the receiver was granted two buffers, so two buffers go
    out, and then the producer's task fails (global failover) while the second is still in flight: the driver
    drops it. The producer's alignment timer fires later. In Flink the
    failed task's partition is released (``Task.releaseResources`` -> ``ResultPartition.fail`` ->
    ``PipelinedSubpartition.release``): its queue is gone, ``alignedBarrierTimeout`` finds no barrier, and the
    released reader ignores credit, so nothing is ever sent again. Before the fix our partition still handed
    out the barrier converted to unaligned, with the next wire number, to a receiver that never got the
    dropped buffer: ``RemoteInputChannel.onBuffer``'s sequence check failed."""

    def run(fail_producer: bool):
        partition = ResultPartition(0, 1, memory_segment_size=64)
        for i in range(3):
            partition.emit_record(i, 0, 64)  # three full buffers
        partition.broadcast_event(_timeoutable(2))
        receiver = LocalInputChannel(InputChannelInfo(0, 0), lambda action: None)
        partition.add_credit(INFO, 2)
        sent = _sent_until_blocked_or_empty(partition)
        assert [type(s.element) for s in sent] == [Buffer, Buffer]
        receiver.on_element(sent[0].element, sent[0].sequence_number)  # the buffer (wire 1) is lost in flight
        if fail_producer:
            partition.release()
        converted = partition.aligned_barrier_timeout(2)  # the producer's alignment timer fires
        partition.add_credit(INFO, 3)  # credit granted before the failover arrives late
        return receiver, converted, _sent_until_blocked_or_empty(partition)

    # control: a live producer converts the barrier and sends it ahead of the data, as it should ...
    receiver, converted, later = run(fail_producer=False)
    assert len(converted[INFO]) == 1 and later[0].element.options.is_unaligned_checkpoint
    with pytest.raises(BufferReorderingException):  # ... which a receiver that lost wire 1 cannot take
        receiver.on_element(later[0].element, later[0].sequence_number)

    # a released (failed) producer converts nothing and sends nothing more
    receiver, converted, later = run(fail_producer=True)
    assert converted == {} and later == []
    assert receiver.expected_sequence_number == 1
