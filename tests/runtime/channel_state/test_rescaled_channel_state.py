"""Restoring rescaled in-flight data: the channel state reader routes it by the rescaling descriptors (Flink's
InputChannelRecoveredStateHandler / ResultSubpartitionRecoveredStateHandler) and a channel demultiplexes it by
virtual channel (a port of Flink's DemultiplexingRecordDeserializerTest.testWatermarks, adapted)."""

import pytest

from barriersim.runtime.channel_state.reader import ChannelStateRestoreError, SequentialChannelStateReader
from barriersim.runtime.events import (
    END_OF_CHANNEL_STATE,
    Buffer,
    InputChannelInfo,
    ResultSubpartitionInfo,
    Watermark,
)
from barriersim.runtime.events import (
    SubtaskConnectionDescriptor as D,
)
from barriersim.runtime.network.input.virtual_channels import VirtualChannelError, demultiplexers
from barriersim.runtime.network.output.result_partition import ResultPartition
from barriersim.runtime.state.inflight_data_rescaling import (
    InflightDataGateOrPartitionRescalingDescriptor as GateDescriptor,
)
from barriersim.runtime.state.inflight_data_rescaling import (
    InflightDataRescalingDescriptor,
    MappingType,
)
from barriersim.runtime.state.rescale_mappings import RescaleMappings
from barriersim.runtime.state.snapshot import (
    InputChannelStateHandle,
    OperatorSubtaskState,
    ResultSubpartitionStateHandle,
)


def buf(*records, seq=0):
    return Buffer(tuple(records), 8 * len(records), seq)


def descriptor(old, mapping, targets, ambiguous=()):
    return InflightDataRescalingDescriptor(
        (GateDescriptor(tuple(old), RescaleMappings.of(mapping, targets), frozenset(ambiguous), MappingType.RESCALING),)
    )


def test_input_state_of_old_channels_goes_to_the_new_channel_that_took_them_over_after_its_virtual_channel():
    # this (downstream) subtask took over old subtasks 0 and 1; the upstream went from 3 to 2 subtasks (round
    # robin: new channel 0 <- old channels 0 and 2, new channel 1 <- old channel 1)
    d = descriptor((0, 1), [(0, 2), (1,)], 3)
    state = OperatorSubtaskState(
        input_channel_state=(
            InputChannelStateHandle(0, InputChannelInfo(0, 2), (buf((1, 1, 1, 0), seq=1), buf((2, 1, 1, 0), seq=0))),
            InputChannelStateHandle(1, InputChannelInfo(0, 1), (buf((3, 1, 1, 0)),)),
            InputChannelStateHandle(1, InputChannelInfo(0, 0), (buf((4, 1, 1, 0)),)),
        )
    )
    got = []
    restored = SequentialChannelStateReader([state]).read_input_data(
        lambda info, elements: got.append((info, elements)), d
    )
    assert got == [
        (InputChannelInfo(0, 0), (D(0, 2), buf((2, 1, 1, 0), seq=0), buf((1, 1, 1, 0), seq=1))),
        (InputChannelInfo(0, 0), (D(1, 0), buf((4, 1, 1, 0)))),
        (InputChannelInfo(0, 1), (D(1, 1), buf((3, 1, 1, 0)))),
    ]
    assert restored == {InputChannelInfo(0, 0): 24, InputChannelInfo(0, 1): 8}


def test_an_old_channel_that_two_new_channels_took_over_is_refused():
    d = descriptor((0,), [(0,), (0,)], 1)  # a mapping no upstream mapper makes
    state = OperatorSubtaskState(
        input_channel_state=(InputChannelStateHandle(0, InputChannelInfo(0, 0), (buf((1,)),)),)
    )
    with pytest.raises(ChannelStateRestoreError, match="one buffer is only distributed to one target input channel"):
        SequentialChannelStateReader([state]).read_input_data(lambda info, elements: None, d)


def test_output_state_goes_to_every_new_subpartition_that_took_the_old_one_and_the_edge_ends_its_recovered_data():
    # the downstream went from 3 to 2 subtasks by range: new 0 <- old 0, 1; new 1 <- old 1, 2; this producer is
    # old subtask 4's successor
    d = descriptor((4,), [(0, 1), (1, 2)], 3)
    state = OperatorSubtaskState(
        result_subpartition_state=(
            ResultSubpartitionStateHandle(4, ResultSubpartitionInfo(0, 1), (buf((7,)),)),
            ResultSubpartitionStateHandle(4, ResultSubpartitionInfo(0, 2), (buf((8,)),)),
        )
    )
    partition = ResultPartition(0, 2, initial_credit=10)
    SequentialChannelStateReader([state]).read_output_data([partition], d, end_of_channel_state_partitions=(0,))
    sent = {info: [] for info in partition.subpartition_infos}
    for info, item in partition.poll_sendable():
        sent[info].append(item.element)
    assert sent[ResultSubpartitionInfo(0, 0)] == [D(1, 4), buf((7,), seq=0), END_OF_CHANNEL_STATE]
    assert sent[ResultSubpartitionInfo(0, 1)] == [
        D(1, 4),
        buf((7,), seq=0),
        D(2, 4),
        buf((8,), seq=1),
        END_OF_CHANNEL_STATE,
    ]


def test_watermarks_of_virtual_channels_are_combined_and_ambiguous_records_filtered():
    """Port of Flink's DemultiplexingRecordDeserializerTest.testWatermarks, adapted: channel 0 of a subtask that
    took over old subtasks 0 and 1, its upstream rescaled so that it replaces old channels 0 and 1: four virtual
    channels. A watermark is emitted only once every virtual channel has one, as their minimum; records of an
    ambiguous old subtask pass only if the filter keeps them."""
    d = descriptor((0, 1), [(0, 1)], 2, ambiguous=(1,))
    demux = demultiplexers([[InputChannelInfo(0, 0)]], d, lambda gate: lambda batch: batch.columns[1] % 2 == 0)[
        InputChannelInfo(0, 0)
    ]
    assert sorted(demux.virtual_channels) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    out = []
    for i, (subtask, channel) in enumerate(sorted(demux.virtual_channels)):
        demux.select(D(subtask, channel))
        out.append(demux.demultiplex([(i, i, 1, 0), Watermark(10 - i)]))
    # no watermark while a virtual channel has none; old subtask 1 is ambiguous: its odd key 3 is not ours
    assert out == [[(0, 0, 1, 0)], [(1, 1, 1, 0)], [(2, 2, 1, 0)], [Watermark(7)]]  # then min(10, 9, 8, 7)
    demux.select(D(0, 0))
    assert demux.demultiplex([Watermark(20)]) == [Watermark(7)]  # min(20, 9, 8, 7): it does not move
    demux.finish()
    assert not demux.is_selecting and demux.demultiplex([(5, 5, 1, 0)]) == [(5, 5, 1, 0)]
    with pytest.raises(VirtualChannelError, match=r"cannot select virtual channel \(3, 0\)"):
        demux.select(D(3, 0))
