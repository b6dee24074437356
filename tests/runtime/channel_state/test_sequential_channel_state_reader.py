"""The restore side of channel state: persisted buffers go back, ordered by sequence number, before new data."""

import pytest

from barriersim.runtime.channel_state.reader import ChannelStateRestoreError, SequentialChannelStateReader
from barriersim.runtime.events import Buffer, InputChannelInfo, ResultSubpartitionInfo
from barriersim.runtime.network.output.result_partition import ResultPartition
from barriersim.runtime.state.snapshot import (
    InputChannelStateHandle,
    OperatorSubtaskState,
    ResultSubpartitionStateHandle,
    TaskStateSnapshot,
)


def _snapshot():
    in0 = InputChannelInfo(0, 0)
    out1 = ResultSubpartitionInfo(0, 1)
    return TaskStateSnapshot(
        {
            "op": OperatorSubtaskState(
                input_channel_state=(
                    InputChannelStateHandle(0, in0, (Buffer(("b",), 2, 5),)),
                    InputChannelStateHandle(0, in0, (Buffer(("a",), 1, 3),)),
                ),
                result_subpartition_state=(
                    ResultSubpartitionStateHandle(0, out1, (Buffer(("y",), 4, 8), Buffer(("x",), 3, 7))),
                ),
            )
        }
    )


def test_input_data_reinjected_per_channel_in_sequence_order():
    reader = SequentialChannelStateReader(_snapshot())
    got = []
    restored = reader.read_input_data(lambda info, bufs: got.append((info, bufs)))
    assert got == [(InputChannelInfo(0, 0), (Buffer(("a",), 1, 3), Buffer(("b",), 2, 5)))]
    assert restored == {InputChannelInfo(0, 0): 3}


def test_output_data_requeued_before_new_data():
    reader = SequentialChannelStateReader(_snapshot())
    part = ResultPartition(0, 2)
    assert reader.read_output_data([part]) == {ResultSubpartitionInfo(0, 1): 7}
    part.emit_record("new", 1, 1)
    part.flush(1)
    info = ResultSubpartitionInfo(0, 1)
    part.add_credit(info, 5)
    assert [part.poll_next(info).element.records for _ in range(3)] == [("x",), ("y",), ("new",)]


def test_output_data_after_new_data_is_refused():
    part = ResultPartition(0, 2)
    part.emit_record("new", 1, 1)
    part.flush(1)
    with pytest.raises(RuntimeError, match="before any new data"):
        SequentialChannelStateReader(_snapshot()).read_output_data([part])


def test_unknown_partition_is_an_error():
    with pytest.raises(ChannelStateRestoreError, match="no result subpartition"):
        SequentialChannelStateReader(_snapshot()).read_output_data([ResultPartition(3, 1)])


def test_empty_state_has_nothing_to_restore():
    reader = SequentialChannelStateReader(TaskStateSnapshot({"op": OperatorSubtaskState()}))
    assert not reader.has_state and reader.read_input_data(lambda *_: None) == {}


def test_an_empty_persisted_buffer_counts_in_the_size_and_brings_nothing_back():
    """A drained open output buffer an unaligned barrier overtook is persisted empty: 4 bytes of channel state (its
    length, as Flink's ChannelStateSerializerImpl writes it), nothing to re-queue on restore."""
    out = ResultSubpartitionInfo(0, 0)
    handle = ResultSubpartitionStateHandle(0, out, (Buffer(("x",), 3, 7), Buffer((), 0)))
    assert handle.state_size == (4 + 3) + (4 + 0)
    only_empty = ResultSubpartitionStateHandle(0, ResultSubpartitionInfo(0, 1), (Buffer((), 0),))
    reader = SequentialChannelStateReader(
        TaskStateSnapshot({"op": OperatorSubtaskState(result_subpartition_state=(handle, only_empty))})
    )
    part = ResultPartition(0, 2)
    assert reader.read_output_data([part]) == {out: 3}
    part.add_credit(out, 5)
    assert part.poll_next(out).element.records == ("x",) and part.poll_next(out) is None
