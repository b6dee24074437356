"""Map, filter, watermark valve and the tumbling event-time window."""

import msgpack
import pytest

from barriersim.runtime.events import MAX_WATERMARK, Buffer, Watermark, from_wire, to_wire
from barriersim.runtime.operators.stateless import FilterOperator, MapOperator
from barriersim.runtime.operators.watermarks import WatermarkValve
from barriersim.runtime.operators.window import TumblingEventTimeWindowSum
from barriersim.runtime.state.snapshot import KeyGroupRange


def test_map_and_filter():
    assert MapOperator(3).process_all([(1, 7, 2, 10)]) == [(1, 7, 6, 10)]
    assert FilterOperator(3).process_all([(1, 7, 3, 0), (2, 7, 4, 0)]) == [(2, 7, 4, 0)]


def test_watermarks_travel_in_buffers_on_the_wire():
    buffer = Buffer(((1, 2, 3, 4), Watermark(99)), 40, 5)
    assert from_wire(to_wire(buffer)) == buffer
    assert from_wire(msgpack.unpackb(msgpack.packb(to_wire(buffer)), use_list=False)) == buffer


@pytest.mark.parametrize("use_list", [False, True])
def test_a_buffer_of_records_crosses_msgpack_as_tuples_of_tuples(use_list):
    buffer = Buffer(((1, 2, 3, 4), (2, -7, 2**40, 0)), 64, 3)
    back = from_wire(msgpack.unpackb(msgpack.packb(to_wire(buffer)), use_list=use_list))
    assert back == buffer
    assert all(type(r) is tuple for r in back.records)
    assert from_wire(to_wire(Buffer((), 0, 1))) == Buffer((), 0, 1)


def test_valve_emits_the_minimum_when_it_advances_and_ended_channels_do_not_hold_it_back():
    valve = WatermarkValve(["a", "b"])
    assert valve.input_watermark("a", Watermark(10)) is None
    assert valve.input_watermark("b", Watermark(5)) == Watermark(5)
    assert valve.input_watermark("b", Watermark(4)) is None  # watermarks never go back
    assert valve.input_watermark("b", Watermark(20)) == Watermark(10)
    assert valve.end_of_input("a") == Watermark(20)
    assert valve.end_of_input("b") == MAX_WATERMARK


def window():
    return TumblingEventTimeWindowSum(10, KeyGroupRange(0, 127), key_group_of=lambda k: k % 128)


def test_windows_fire_on_the_watermark_in_order_and_late_records_are_dropped():
    w = window()
    w.process_all([(1, 5, 1, 3), (2, 6, 2, 9), (3, 5, 4, 12), (4, 5, 8, 19)])
    assert w.process_watermark(Watermark(8)) == []
    assert w.process_watermark(Watermark(9)) == [(0, 5, 1, 1), (0, 6, 2, 1)]
    w.process_all([(5, 5, 100, 7)])  # late: window [0, 10) already fired
    assert w.late_records == 1
    assert w.process_watermark(MAX_WATERMARK) == [(10, 5, 12, 2)]


def test_window_state_survives_snapshot_and_restore():
    w = window()
    w.process_all([(1, 5, 1, 3), (2, 5, 2, 14)])
    state = w.snapshot_state()
    again = window()
    again.restore_state(state)
    assert again.process_watermark(MAX_WATERMARK) == [(0, 5, 1, 1), (10, 5, 2, 1)]
