"""Operators snapshot and restore their state through OperatorSubtaskState (through the ``_metadata`` format)."""

from barriersim.runtime.operators.keyed_sum import KeyedRunningSum
from barriersim.runtime.operators.source import SplitSourceReader
from barriersim.runtime.state.snapshot import CheckpointMetadata, KeyGroupRange, OperatorState, OperatorSubtaskState
from barriersim.runtime.storage.metadata_serializer import deserialize, serialize


def through_metadata(state: OperatorSubtaskState) -> OperatorSubtaskState:
    data = serialize(CheckpointMetadata(1, (OperatorState("keyed-sum", 1, 128, {0: state}),)))
    return deserialize(data).operator_states[0].subtask_states[0]


def test_keyed_sum_emits_running_sums_and_restores_them():
    op = KeyedRunningSum(KeyGroupRange(0, 9), key_group_of=lambda k: k % 10)
    out = op.process_all([(1, 3, 5, 0), (2, 3, 2, 0), (3, 4, 1, 0)])
    assert out == [(1, 3, 5, 5), (2, 3, 2, 7), (3, 4, 1, 1)]
    state = through_metadata(op.snapshot_state())
    [handle] = state.managed_keyed_state
    assert sorted(handle.key_groups) == [3, 4]
    again = KeyedRunningSum(KeyGroupRange(0, 9), key_group_of=lambda k: k % 10)
    again.restore_state(state)
    assert again.process((4, 3, 1, 0)) == (4, 3, 1, 8)


def test_keyed_sum_restores_only_its_key_groups():
    op = KeyedRunningSum(KeyGroupRange(0, 9), key_group_of=lambda k: k % 10)
    op.process_all([(1, 1, 5, 0), (2, 7, 2, 0)])
    half = KeyedRunningSum(KeyGroupRange(5, 9), key_group_of=lambda k: k % 10)
    half.restore_state(op.snapshot_state())
    assert half.process((3, 7, 1, 0))[3] == 3
    assert half.process((4, 1, 1, 0))[3] == 1


def test_source_poll_and_offset_restore():
    records = [(i, i, 1, i) for i in range(5)]
    src = SplitSourceReader(3, records)
    assert list(src.poll(2)) == records[:2]
    state = src.snapshot_state()
    assert list(src.poll(10)) == records[2:] and src.is_finished
    again = SplitSourceReader(3, records)
    again.restore_state(state)
    assert list(again.poll(10)) == records[2:]
    other_split = SplitSourceReader(4, records)
    other_split.restore_state(state)
    assert other_split.offset == 0
