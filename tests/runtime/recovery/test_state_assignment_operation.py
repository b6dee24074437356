"""State assignment on restore: ports of Flink's StateAssignmentOperationTest (the ones that fit) and
CheckpointMetadataLoadingTest, plus Hypothesis properties of keyed and operator state redistribution."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barriersim.runtime.events import Buffer, InputChannelInfo, ResultSubpartitionInfo
from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobVertex, OperatorKind, Partitioner
from barriersim.runtime.recovery.operator_state_repartitioner import repartition_state
from barriersim.runtime.recovery.restore import checkpoint_loader, restore_from_pointer, restore_latest_checkpoint
from barriersim.runtime.recovery.state_assignment_operation import (
    ChannelStateRescalingUnsupportedError,
    ExecutionJobVertexInfo,
    MaxParallelismMismatchError,
    NonRestoredStateError,
    StateAssignmentError,
    assign_states,
    key_groups_state_intersection,
    reassign_keyed_state,
)
from barriersim.runtime.state.inflight_data_rescaling import (
    NO_RESCALE,
    InflightDataGateOrPartitionRescalingDescriptor,
    InflightDataRescalingDescriptor,
    MappingType,
)
from barriersim.runtime.state.key_groups import compute_key_group_range_for_operator_index
from barriersim.runtime.state.rescale_mappings import RescaleMappings
from barriersim.runtime.state.snapshot import (
    CheckpointMetadata,
    InputChannelStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorState,
    OperatorStateHandle,
    OperatorSubtaskState,
    ResultSubpartitionStateHandle,
)
from barriersim.runtime.state.snapshot import (
    OperatorStateDistributionMode as Mode,
)
from barriersim.runtime.storage.damage import corrupt_checkpoint
from barriersim.runtime.storage.fs_storage import FileSystemCheckpointStorage
from barriersim.runtime.storage.memory_storage import JobManagerCheckpointStorage

MAX_P = 256


def _parts(n: int, tag: str) -> tuple[bytes, ...]:
    return tuple(f"{tag}-{i}".encode() for i in range(n))


def _handle(spec: dict[str, tuple[int, Mode]], tag: str) -> OperatorStateHandle:
    """A handle with ``name -> (number of partitions, mode)``, like Flink's StateMetaInfo offsets."""
    return OperatorStateHandle(
        {name: _parts(n, f"{tag}/{name}") for name, (n, _) in spec.items()},
        {name: mode for name, (_, mode) in spec.items() if mode is not Mode.SPLIT_DISTRIBUTE},
    )


def _redistribute(state: OperatorState, new_parallelism: int) -> list[list[OperatorStateHandle]]:
    """Flink's ``StateAssignmentOperation.reDistributePartitionableStates`` for one operator."""
    old = [
        list(state.subtask_states.get(i, OperatorSubtaskState()).managed_operator_state)
        for i in range(state.parallelism)
    ]
    return repartition_state(old, state.parallelism, new_parallelism)


def _verify_and_collect_state_info(state: OperatorState, old_p: int, new_p: int) -> Counter:
    """Flink's ``verifyAndCollectStateInfo``: per new subtask, the partitions per mode and name; returns how
    many handles (over all new subtasks) carry each state name."""
    counts: Counter = Counter()
    for handles in _redistribute(state, new_p):
        per_mode: dict[Mode, Counter] = {m: Counter() for m in Mode}
        for handle in handles:
            for name, parts in handle.states.items():
                counts[name] += 1
                per_mode[handle.mode_of(name)][name] += len(parts)
        for length in per_mode[Mode.SPLIT_DISTRIBUTE].values():
            assert length == (1 if old_p < new_p else 2)
        for length in per_mode[Mode.UNION].values():
            assert length == 2
        for length in per_mode[Mode.BROADCAST].values():
            assert length == 3
    return counts


def _verify_one_kind(state: OperatorState) -> None:
    for old_p, new_p in ((2, 3), (2, 1), (2, 2)):
        counts = _verify_and_collect_state_info(state, old_p, new_p)
        assert len(counts) == 2
        if "t-1" in counts:
            assert counts["t-1"] == counts["t-2"] == (2 if old_p < new_p else 1)
        if "t-3" in counts:
            assert counts["t-3"] == 2 * new_p
            assert counts["t-4"] == new_p
        if "t-5" in counts:
            assert counts["t-5"] == counts["t-6"] == new_p


def test_repartition_split_distribute_states():
    """Port of Flink StateAssignmentOperationTest.testRepartitionSplitDistributeStates."""
    state = OperatorState(
        "op",
        2,
        4,
        {
            0: OperatorSubtaskState(managed_operator_state=(_handle({"t-1": (2, Mode.SPLIT_DISTRIBUTE)}, "a"),)),
            1: OperatorSubtaskState(managed_operator_state=(_handle({"t-2": (2, Mode.SPLIT_DISTRIBUTE)}, "b"),)),
        },
    )
    _verify_one_kind(state)


def test_repartition_union_state():
    """Port of Flink StateAssignmentOperationTest.testRepartitionUnionState."""
    state = OperatorState(
        "op",
        2,
        4,
        {
            0: OperatorSubtaskState(
                managed_operator_state=(_handle({"t-3": (1, Mode.UNION), "t-4": (2, Mode.UNION)}, "a"),)
            ),
            1: OperatorSubtaskState(managed_operator_state=(_handle({"t-3": (1, Mode.UNION)}, "b"),)),
        },
    )
    _verify_one_kind(state)


_BROADCAST = {"t-5": (3, Mode.BROADCAST), "t-6": (3, Mode.BROADCAST)}


def test_repartition_broadcast_state():
    """Port of Flink StateAssignmentOperationTest.testRepartitionBroadcastState."""
    state = OperatorState(
        "op",
        2,
        4,
        {
            0: OperatorSubtaskState(managed_operator_state=(_handle(_BROADCAST, "a"),)),
            1: OperatorSubtaskState(managed_operator_state=(_handle(_BROADCAST, "b"),)),
        },
    )
    _verify_one_kind(state)


def test_repartition_broadcast_state_with_null_subtask_state():
    """Port of Flink StateAssignmentOperationTest.testRepartitionBroadcastStateWithNullSubtaskState."""
    state = OperatorState("op", 2, 4, {0: OperatorSubtaskState(managed_operator_state=(_handle(_BROADCAST, "a"),))})
    _verify_one_kind(state)


def test_repartition_broadcast_state_with_empty_subtask_state():
    """Port of Flink StateAssignmentOperationTest.testRepartitionBroadcastStateWithEmptySubtaskState."""
    state = OperatorState(
        "op",
        2,
        4,
        {
            0: OperatorSubtaskState(managed_operator_state=(_handle(_BROADCAST, "a"),)),
            1: OperatorSubtaskState(),
        },
    )
    _verify_one_kind(state)


def test_re_distribute_combined_partitionable_states():
    """Port of Flink StateAssignmentOperationTest.testReDistributeCombinedPartitionableStates."""
    state = OperatorState(
        "op",
        2,
        4,
        {
            0: OperatorSubtaskState(
                managed_operator_state=(
                    _handle(
                        {
                            "t-1": (1, Mode.UNION),
                            "t-2": (2, Mode.UNION),
                            "t-3": (2, Mode.SPLIT_DISTRIBUTE),
                            "t-4": (3, Mode.BROADCAST),
                            "t-5": (3, Mode.BROADCAST),
                            "t-6": (3, Mode.BROADCAST),
                        },
                        "a",
                    ),
                )
            ),
            1: OperatorSubtaskState(
                managed_operator_state=(
                    _handle(
                        {
                            "t-1": (1, Mode.UNION),
                            "t-4": (3, Mode.BROADCAST),
                            "t-5": (3, Mode.BROADCAST),
                            "t-6": (3, Mode.BROADCAST),
                        },
                        "b",
                    ),
                )
            ),
        },
    )
    for old_p, new_p in ((2, 3), (2, 1), (2, 2)):
        counts = _verify_and_collect_state_info(state, old_p, new_p)
        assert len(counts) == 6
        assert counts["t-1"] == 2 * new_p
        assert counts["t-2"] == new_p
        assert counts["t-3"] == (2 if old_p < new_p else 1)
        assert counts["t-4"] == counts["t-5"] == counts["t-6"] == new_p


# -- whole-operator assignment -----------------------------------------------------------------------------


def _buffers(rnd: random.Random) -> tuple[Buffer, ...]:
    return tuple(Buffer((rnd.randrange(100),), rnd.randrange(1, 100), s) for s in range(2))


def _build_operator_states(
    operator_ids: list[str], num_subtasks: int, *, channel_state: bool = True
) -> dict[str, OperatorState]:
    """Flink's ``buildOperatorStates``: every subtask has operator state, keyed state of key group ``i``,
    input channel state (except the first operator) and result subpartition state (except the last)."""
    rnd = random.Random(len(operator_ids) * 1000 + num_subtasks)
    states = {}
    for op in operator_ids:
        subtasks = {}
        for i in range(num_subtasks):
            subtasks[i] = OperatorSubtaskState(
                managed_operator_state=(
                    OperatorStateHandle({"list": _parts(2, f"{op}/{i}/a")}),
                    OperatorStateHandle({"list": _parts(2, f"{op}/{i}/b")}),
                ),
                managed_keyed_state=(KeyGroupsStateHandle(KeyGroupRange(i, i), {i: f"{op}/{i}".encode()}),),
                input_channel_state=()
                if op == operator_ids[0] or not channel_state
                else tuple(InputChannelStateHandle(i, InputChannelInfo(0, c), _buffers(rnd)) for c in range(2)),
                result_subpartition_state=()
                if op == operator_ids[-1] or not channel_state
                else tuple(
                    ResultSubpartitionStateHandle(i, ResultSubpartitionInfo(0, c), _buffers(rnd)) for c in range(2)
                ),
            )
        states[op] = OperatorState(op, num_subtasks, MAX_P, subtasks)
    return states


def _metadata(states: dict[str, OperatorState], checkpoint_id: int = 0) -> CheckpointMetadata:
    return CheckpointMetadata(checkpoint_id, tuple(states.values()))


def _vertices(operator_ids: list[str], parallelism: int) -> list[ExecutionJobVertexInfo]:
    return [ExecutionJobVertexInfo(op, parallelism, MAX_P) for op in operator_ids]


def _chain(operator_ids: list[str], parallelism: int, partitioner: Partitioner = Partitioner.HASH) -> JobGraph:
    """Flink's ``buildVertices(operatorIds, parallelism, RANGE, ROUND_ROBIN)``: a chain of vertices, each edge
    with a range-mapped downstream and a round-robin upstream, as a hash edge is (only the topology is used)."""
    kinds = [OperatorKind.SOURCE] + [OperatorKind.KEYED_SUM] * (len(operator_ids) - 1)
    return JobGraph(
        tuple(JobVertex(op, kind, parallelism, MAX_P) for op, kind in zip(operator_ids, kinds)),
        tuple(JobEdge(a, b, partitioner) for a, b in zip(operator_ids, operator_ids[1:])),
    )


def _assign(states, operator_ids, parallelism, partitioner=Partitioner.HASH):
    return assign_states(
        _metadata(states), _vertices(operator_ids, parallelism), graph=_chain(operator_ids, parallelism, partitioner)
    )


def _assert_state(assignment, states, op, new_index, field, *old_indexes):
    """Flink's ``assertState``: the new subtask's channel state is the old subtasks' (in any order)."""
    got = getattr(assignment.subtask_state(op, new_index), field)
    want = [h for i in old_indexes for h in getattr(states[op].subtask_states[i], field)]
    assert sorted(map(repr, got)) == sorted(map(repr, want))


def _descriptor(old, mapping, ambiguous=(), identity=False):
    return InflightDataRescalingDescriptor(
        (
            InflightDataGateOrPartitionRescalingDescriptor(
                tuple(old),
                RescaleMappings.of(mapping, max((t for ts in mapping for t in ts), default=-1) + 1),
                frozenset(ambiguous),
                MappingType.IDENTITY if identity else MappingType.RESCALING,
            ),
        )
    )


def test_channel_state_assignment_stability():
    """Port of Flink StateAssignmentOperationTest.testChannelStateAssignmentStability."""
    operator_ids = [f"op-{j}" for j in range(10)]
    states = _build_operator_states(operator_ids, 100)
    assignment = _assign(states, operator_ids, 100)
    for op in operator_ids:
        for i in range(100):
            assert assignment.subtask_state(op, i) == states[op].subtask_states[i]


def test_channel_state_assignment_no_rescale():
    """Port of Flink StateAssignmentOperationTest.testChannelStateAssignmentNoRescale."""
    operator_ids = ["op-0", "op-1"]
    states = _build_operator_states(operator_ids, 2)
    assignment = _assign(states, operator_ids, 2)
    for op in operator_ids:
        for i in (0, 1):
            _assert_state(assignment, states, op, i, "input_channel_state", i)
            _assert_state(assignment, states, op, i, "result_subpartition_state", i)
    assert assignment.subtask_state("op-1", 0).input_channel_state  # really carried over
    for i in (0, 1):
        assert assignment.subtask_state("op-0", i).output_rescaling_descriptor == NO_RESCALE
        assert assignment.subtask_state("op-1", i).input_rescaling_descriptor == NO_RESCALE
    assert assignment.subtask_state("op-1", 0).end_of_channel_state_gates == ()


def test_channel_state_assignment_downscaling():
    """Port of Flink StateAssignmentOperationTest.testChannelStateAssignmentDownscaling (3 -> 2)."""
    operator_ids = ["op-0", "op-1"]
    states = _build_operator_states(operator_ids, 3)
    assignment = _assign(states, operator_ids, 2)
    for op in operator_ids:
        # input is range partitioned, so there is an overlap
        _assert_state(assignment, states, op, 0, "input_channel_state", 0, 1)
        _assert_state(assignment, states, op, 1, "input_channel_state", 1, 2)
        # output is round robin redistributed
        _assert_state(assignment, states, op, 0, "result_subpartition_state", 0, 2)
        _assert_state(assignment, states, op, 1, "result_subpartition_state", 1)
    assert assignment.subtask_state("op-0", 0).output_rescaling_descriptor == _descriptor((0, 2), [(0, 1), (1, 2)])
    assert assignment.subtask_state("op-0", 1).output_rescaling_descriptor == _descriptor((1,), [(0, 1), (1, 2)])
    assert assignment.subtask_state("op-1", 0).input_rescaling_descriptor == _descriptor((0, 1), [(0, 2), (1,)], {1})
    assert assignment.subtask_state("op-1", 1).input_rescaling_descriptor == _descriptor((1, 2), [(0, 2), (1,)], {1})
    # barriersim's own: the edge's recovered data ends with an EndOfChannelStateEvent on both sides
    assert assignment.subtask_state("op-0", 1).end_of_channel_state_partitions == (0,)
    assert assignment.subtask_state("op-1", 1).end_of_channel_state_gates == (0,)


def test_channel_state_assignment_upscaling():
    """Port of Flink StateAssignmentOperationTest.testChannelStateAssignmentUpscaling (2 -> 3)."""
    operator_ids = ["op-0", "op-1"]
    states = _build_operator_states(operator_ids, 2)
    assignment = _assign(states, operator_ids, 3)
    for op in operator_ids:
        _assert_state(assignment, states, op, 0, "input_channel_state", 0)
        _assert_state(assignment, states, op, 1, "input_channel_state", 0, 1)
        _assert_state(assignment, states, op, 2, "input_channel_state", 1)
        _assert_state(assignment, states, op, 0, "result_subpartition_state", 0)
        _assert_state(assignment, states, op, 1, "result_subpartition_state", 1)
        _assert_state(assignment, states, op, 2, "result_subpartition_state")
    mapping = [(0,), (0, 1), (1,)]
    assert assignment.subtask_state("op-0", 0).output_rescaling_descriptor == _descriptor((0,), mapping)
    assert assignment.subtask_state("op-0", 1).output_rescaling_descriptor == _descriptor((1,), mapping)
    # unmapped subtask index, so nothing to do
    assert assignment.subtask_state("op-0", 2).output_rescaling_descriptor == NO_RESCALE
    assert assignment.subtask_state("op-1", 0).input_rescaling_descriptor == _descriptor((0,), [(0,), (1,), ()], {0, 1})
    assert assignment.subtask_state("op-1", 1).input_rescaling_descriptor == _descriptor(
        (0, 1), [(0,), (1,), ()], {0, 1}
    )
    assert assignment.subtask_state("op-1", 2).input_rescaling_descriptor == _descriptor((1,), [(0,), (1,), ()], {0, 1})
    # the unmapped producer still ends its (empty) recovered output on the rescaled edge
    assert assignment.subtask_state("op-0", 2).end_of_channel_state_partitions == (0,)


def test_only_upstream_channel_state_assignment():
    """Port of Flink StateAssignmentOperationTest.testOnlyUpstreamChannelStateAssignment.

    Adapted: only subtask 0 of the upstream operator has (result subpartition) channel state. At the same
    parallelism every subtask of both vertices gets a restore (possibly empty); at parallelism 3 the downstream
    vertex, which holds no state itself (an empty operator state, as every acknowledged vertex has one), still
    gets rescaling descriptors for the upstream's in-flight data (FLINK-31963)."""
    rnd = random.Random(3)
    upstream = OperatorState(
        "op-0",
        2,
        MAX_P,
        {
            0: OperatorSubtaskState(
                result_subpartition_state=(
                    ResultSubpartitionStateHandle(0, ResultSubpartitionInfo(0, 0), _buffers(rnd)),
                    ResultSubpartitionStateHandle(0, ResultSubpartitionInfo(0, 1), _buffers(rnd)),
                )
            )
        },
    )
    metadata = CheckpointMetadata(0, (upstream, OperatorState("op-1", 2, MAX_P)))
    graph = _chain(["op-0", "op-1"], 2)
    assignment = assign_states(metadata, _vertices(["op-0", "op-1"], 2), graph=graph)
    for op in ("op-0", "op-1"):
        assert len(assignment.task_restores[op]) == 2
        assert all(r is not None and r.restore_checkpoint_id == 0 for r in assignment.task_restores[op])
    assert assignment.subtask_state("op-0", 0) == upstream.subtask_states[0]
    assert assignment.subtask_state("op-1", 1) == OperatorSubtaskState()
    rescaled = assign_states(metadata, _vertices(["op-0", "op-1"], 3), graph=_chain(["op-0", "op-1"], 3))
    assert (
        rescaled.subtask_state("op-0", 0).result_subpartition_state
        == upstream.subtask_states[0].result_subpartition_state
    )
    assert not rescaled.subtask_state("op-1", 1).has_state
    assert rescaled.subtask_state("op-1", 1).input_rescaling_descriptor == _descriptor((0, 1), [(0,), (1,), ()], {0, 1})
    # without the topology, the in-flight data cannot be rescaled
    with pytest.raises(ChannelStateRescalingUnsupportedError, match="without the job's topology"):
        assign_states(metadata, _vertices(["op-0", "op-1"], 3))


@pytest.mark.parametrize("upstream_state", [True, False], ids=["upstream", "downstream"])
def test_only_upstream_or_downstream_channel_rescale_state_assignment(upstream_state):
    """Port of Flink StateAssignmentOperationTest.testOnlyUpstreamChannelRescaleStateAssignment and
    testOnlyDownstreamChannelRescaleStateAssignment (FLINK-31963): from parallelism 5 for both, with only the
    upstream's output state the downstream goes to 3 (5 and 7 old subtasks mapped), with only the downstream's
    input state the upstream goes to 3 (5 and 5)."""
    rnd = random.Random(31963)
    up, down = OperatorState("op-0", 5, MAX_P), OperatorState("op-1", 5, MAX_P)
    if upstream_state:
        up = OperatorState(
            "op-0",
            5,
            MAX_P,
            {
                0: OperatorSubtaskState(
                    result_subpartition_state=(
                        ResultSubpartitionStateHandle(0, ResultSubpartitionInfo(0, 0), _buffers(rnd)),
                        ResultSubpartitionStateHandle(0, ResultSubpartitionInfo(0, 1), _buffers(rnd)),
                    )
                )
            },
        )
        parallelism = {"op-0": 5, "op-1": 3}
    else:
        down = OperatorState(
            "op-1",
            5,
            MAX_P,
            {
                0: OperatorSubtaskState(
                    input_channel_state=(
                        InputChannelStateHandle(0, InputChannelInfo(0, 0), _buffers(rnd)),
                        InputChannelStateHandle(0, InputChannelInfo(0, 1), _buffers(rnd)),
                    )
                )
            },
        )
        parallelism = {"op-0": 3, "op-1": 5}
    graph = JobGraph(
        (
            JobVertex("op-0", OperatorKind.SOURCE, parallelism["op-0"], MAX_P),
            JobVertex("op-1", OperatorKind.KEYED_SUM, parallelism["op-1"], MAX_P),
        ),
        (JobEdge("op-0", "op-1", Partitioner.HASH),),
    )
    assignment = assign_states(
        CheckpointMetadata(0, (up, down)),
        [ExecutionJobVertexInfo(op, p, MAX_P) for op, p in parallelism.items()],
        graph=graph,
    )

    def mapped(op, side):
        counts = [
            len(getattr(assignment.subtask_state(op, i), side).old_subtask_indexes(0)) for i in range(parallelism[op])
        ]
        assert all(n > 0 for n in counts)  # there is a mapping
        return sum(counts)

    assert (mapped("op-0", "output_rescaling_descriptor"), mapped("op-1", "input_rescaling_descriptor")) == (
        (5, 7) if upstream_state else (5, 5)
    )


@pytest.mark.parametrize("partitioner", [Partitioner.BROADCAST, Partitioner.FORWARD])
def test_in_flight_data_of_a_partitioner_that_cannot_rescale_is_refused(partitioner):
    """Flink's UNSUPPORTED subtask state mapper (broadcast, forward): restoring their in-flight data rescaled fails
    with one line naming the edge; aligned state of the same job rescales."""
    operator_ids = ["op-0", "op-1"]
    states = _build_operator_states(operator_ids, 2)
    with pytest.raises(
        ChannelStateRescalingUnsupportedError, match=rf"edge op-0 -\[{partitioner.value}\]-> op-1 .*explicit shuffle"
    ):
        _assign(states, operator_ids, 3, partitioner)
    aligned = _build_operator_states(operator_ids, 2, channel_state=False)
    assert (
        _assign(aligned, operator_ids, 3, partitioner).subtask_state("op-1", 2).input_rescaling_descriptor == NO_RESCALE
    )


def test_state_with_fully_finished_operators():
    """Port of Flink StateAssignmentOperationTest.testStateWithFullyFinishedOperators."""
    states = _build_operator_states(["op-1"], 3)
    states["op-0"] = OperatorState("op-0", 3, 256, {}, fully_finished=True)
    assignment = assign_states(_metadata(states), _vertices(["op-0", "op-1"], 2), graph=_chain(["op-0", "op-1"], 2))
    assert all(r.task_state_snapshot.is_task_deployed_as_finished for r in assignment.task_restores["op-0"])
    assert not any(r.task_state_snapshot.is_task_deployed_as_finished for r in assignment.task_restores["op-1"])


def test_assigning_state_handles_can_not_be_null():
    """Port of Flink StateAssignmentOperationTest.assigningStateHandlesCanNotBeNull.

    Adapted: an operator state without subtask states yields empty (never None) keyed state per subtask."""
    state = OperatorState("op", 1, MAX_P)
    keyed = reassign_keyed_state([state.subtask_states.get(0, OperatorSubtaskState())], 1, 2, MAX_P)
    assert keyed == [(), ()]
    assignment = assign_states(CheckpointMetadata(0, (state,)), [ExecutionJobVertexInfo("op", 2, MAX_P)])
    assert [assignment.subtask_state("op", i).managed_keyed_state for i in (0, 1)] == [(), ()]


def test_non_empty_intersection():
    """Port of Flink KeyGroupsStateHandleTest.testNonEmptyIntersection."""
    handle = KeyGroupsStateHandle(KeyGroupRange(0, 7), {kg: bytes([kg]) for kg in range(8)})
    part = key_groups_state_intersection(handle, KeyGroupRange(0, 3))
    assert part is not None
    assert part.key_group_range == KeyGroupRange(0, 3)
    assert part.key_groups == {kg: bytes([kg]) for kg in range(4)}


def test_empty_intersection():
    """Port of Flink KeyGroupsStateHandleTest.testEmptyIntersection."""
    handle = KeyGroupsStateHandle(KeyGroupRange(0, 7), {0: b"x"})
    assert key_groups_state_intersection(handle, KeyGroupRange(8, 11)) is None


@pytest.mark.parametrize("extract", ["input_channel_state", "result_subpartition_state"])
@pytest.mark.parametrize("offsets_size", [0, 1, 2])
@pytest.mark.parametrize("new_parallelism", [1, 2])
@pytest.mark.parametrize("old_parallelism", [1, 2])
def test_no_rescaling(old_parallelism, new_parallelism, offsets_size, extract):
    """Port of Flink ChannelStateNoRescalingPartitionerTest.testNoRescaling.

    Adapted: Flink's offsets are our buffers; the whole assignment is run (not only the repartitioner), with
    max parallelism 128 (Flink's test calls the repartitioner directly, which skips that check) and without the
    job graph, so that in-flight data cannot be rescaled (the repartitioner Flink's test exercises); an empty
    channel state handle is dropped when rescaling."""
    buffers = tuple(Buffer((0,), 1, s) for s in range(offsets_size))
    subtask = OperatorSubtaskState(
        input_channel_state=(InputChannelStateHandle(0, InputChannelInfo(0, 0), buffers),)
        if extract == "input_channel_state"
        else (),
        result_subpartition_state=(ResultSubpartitionStateHandle(0, ResultSubpartitionInfo(0, 0), buffers),)
        if extract == "result_subpartition_state"
        else (),
    )
    metadata = CheckpointMetadata(1, (OperatorState("op", old_parallelism, 128, {0: subtask}),))
    vertex = ExecutionJobVertexInfo("op", new_parallelism, 128)
    should_fail = old_parallelism != new_parallelism and offsets_size > 0
    if should_fail:
        with pytest.raises(ChannelStateRescalingUnsupportedError):
            assign_states(metadata, [vertex])
        return
    assignment = assign_states(metadata, [vertex])
    restored = getattr(assignment.subtask_state("op", 0), extract)
    assert restored == (getattr(subtask, extract) if old_parallelism == new_parallelism else ())


def test_load_and_validate_savepoint(tmp_path):
    """Port of Flink CheckpointMetadataLoadingTest.testLoadAndValidateSavepoint.

    Adapted: parallelism 4 instead of 128128 (above our max parallelism bound of 32768, and it only makes
    the test slow); the savepoint goes through a real savepoint directory of the filesystem storage."""
    rnd = random.Random(10)
    parallelism, checkpoint_id = 4, 2**31 - 1 + 123123
    subtask = OperatorSubtaskState(
        managed_operator_state=(OperatorStateHandle({}),),
        input_channel_state=(InputChannelStateHandle(0, InputChannelInfo(0, 0), _buffers(rnd)),),
        result_subpartition_state=(ResultSubpartitionStateHandle(0, ResultSubpartitionInfo(0, 0), _buffers(rnd)),),
    )
    state = OperatorState("vertex", parallelism, parallelism, {0: subtask})
    storage = FileSystemCheckpointStorage(tmp_path / "ck", "job", default_savepoint_directory=tmp_path / "sp")
    pointer = storage.persist_checkpoint(
        CheckpointMetadata(checkpoint_id, (state,)), is_savepoint=True
    ).external_pointer
    loader = checkpoint_loader(storage)
    vertex = ExecutionJobVertexInfo("vertex", parallelism, parallelism)
    # 1) everything correct
    restored = restore_from_pointer(storage, pointer, [vertex])
    assert restored.assignment.checkpoint_id == checkpoint_id == loader(pointer).checkpoint_id
    assert restored.assignment.subtask_state("vertex", 0) == subtask
    # 2) max parallelism mismatch
    with pytest.raises(MaxParallelismMismatchError, match="Max parallelism mismatch"):
        assign_states(loader(pointer), [ExecutionJobVertexInfo("vertex", parallelism, 222)])
    # 3) missing vertex
    with pytest.raises(NonRestoredStateError, match="allowNonRestoredState"):
        assign_states(loader(pointer), [])
    # 4) ignore missing vertex
    assignment = assign_states(loader(pointer), [], allow_non_restored_state=True)
    assert assignment.non_restored_operators == ("vertex",)


# -- our own checks ------------------------------------------------------------------------------------------


def test_max_parallelism_lower_than_new_parallelism_is_refused_and_unconfigured_adopts_it():
    states = _build_operator_states(["op"], 2, channel_state=False)
    with pytest.raises(
        MaxParallelismMismatchError,
        match=r"maximum parallelism \(256\) of the restored state is lower than the configured parallelism \(300\)",
    ):
        assign_states(_metadata(states), [ExecutionJobVertexInfo("op", 300, 512, max_parallelism_configured=False)])
    assignment = assign_states(
        _metadata(states), [ExecutionJobVertexInfo("op", 4, 128, max_parallelism_configured=False)]
    )
    assert assignment.max_parallelism["op"] == MAX_P
    # key group i of old subtask i (i < 2) ends on the subtask whose range (max parallelism 256) holds it
    assert assignment.subtask_state("op", 0).managed_keyed_state[0].key_groups == {0: b"op/0"}


def test_operator_without_state_in_the_job_is_skipped_silently_and_new_operators_start_empty():
    metadata = CheckpointMetadata(4, (OperatorState("gone", 2, MAX_P, {0: OperatorSubtaskState()}),))
    assignment = assign_states(metadata, [ExecutionJobVertexInfo("new", 3, MAX_P)])
    assert assignment.non_restored_operators == ("gone",)
    assert [assignment.subtask_state("new", i) for i in range(3)] == [OperatorSubtaskState()] * 3


def test_coordinator_state_counts_as_state_for_non_restored_check():
    metadata = CheckpointMetadata(4, (OperatorState("gone", 1, MAX_P, {}, coordinator_state=b"enumerator"),))
    with pytest.raises(NonRestoredStateError, match="operator gone"):
        assign_states(metadata, [])


def test_subtask_state_outside_the_parallelism_is_an_error():
    metadata = CheckpointMetadata(4, (OperatorState("op", 1, MAX_P, {3: OperatorSubtaskState()}),))
    with pytest.raises(StateAssignmentError, match=r"subtasks \[3\] outside its parallelism 1"):
        assign_states(metadata, [ExecutionJobVertexInfo("op", 2, MAX_P)])


@pytest.mark.parametrize("make_storage", ["memory", "fs"])
def test_restore_latest_checkpoint_skips_a_corrupt_newest_one(tmp_path, make_storage):
    storage = (
        JobManagerCheckpointStorage("job") if make_storage == "memory" else FileSystemCheckpointStorage(tmp_path, "job")
    )
    vertices = _vertices(["op"], 3)
    assert restore_latest_checkpoint(storage, vertices) is None
    for checkpoint_id in (1, 2):
        storage.persist_checkpoint(_metadata(_build_operator_states(["op"], 2, channel_state=False), checkpoint_id))
    corrupt_checkpoint(storage, 2, lambda b: b[: len(b) // 2])
    restored = restore_latest_checkpoint(storage, vertices)
    assert restored.assignment.checkpoint_id == 1
    assert "chk-2/_metadata: truncated" in str(restored.checkpoint.skipped[0])
    assert {
        kg
        for i in range(3)
        for h in restored.assignment.subtask_state("op", i).managed_keyed_state
        for kg in h.key_groups
    } == {0, 1}


def test_recovery_modules_use_no_clock_threads_or_pickle():
    import os

    import barriersim.runtime.recovery as pkg

    directory = os.path.dirname(pkg.__file__)
    for name in os.listdir(directory):
        if name.endswith(".py"):
            source = open(os.path.join(directory, name)).read()
            for banned in ("import time", "import threading", "import asyncio", "import pickle", "import random"):
                assert banned not in source, f"{name} has {banned!r}"


# -- Hypothesis properties -----------------------------------------------------------------------------------


@st.composite
def _rescale_cases(draw):
    max_p = draw(st.integers(1, 300))
    old_p = draw(st.integers(1, max_p))
    new_p = draw(st.integers(1, max_p))
    present = draw(st.sets(st.integers(0, max_p - 1), max_size=60))
    return max_p, old_p, new_p, present


def _keyed_operator_state(max_p: int, old_p: int, present: set[int]) -> OperatorState:
    subtasks = {}
    for i in range(old_p):
        r = compute_key_group_range_for_operator_index(max_p, old_p, i)
        subtasks[i] = OperatorSubtaskState(
            managed_keyed_state=(KeyGroupsStateHandle(r, {kg: f"v{kg}".encode() for kg in r if kg in present}),)
        )
    return OperatorState("op", old_p, max_p, subtasks)


@settings(max_examples=200, deadline=None)
@given(_rescale_cases())
def test_property_rescaled_keyed_state_loses_and_duplicates_no_key_group(case):
    max_p, old_p, new_p, present = case
    state = _keyed_operator_state(max_p, old_p, present)
    assignment = assign_states(CheckpointMetadata(1, (state,)), [ExecutionJobVertexInfo("op", new_p, max_p)])
    seen: Counter = Counter()
    covered: Counter = Counter()
    for i in range(new_p):
        own = compute_key_group_range_for_operator_index(max_p, new_p, i)
        for handle in assignment.subtask_state("op", i).managed_keyed_state:
            assert handle.key_group_range.start_key_group >= own.start_key_group
            assert handle.key_group_range.end_key_group <= own.end_key_group
            covered.update(handle.key_group_range)
            for kg, value in handle.key_groups.items():
                assert kg in own and value == f"v{kg}".encode()
                seen[kg] += 1
    assert set(seen) == present and all(n == 1 for n in seen.values())
    # every key group's range is handed to exactly one new subtask
    assert set(covered) == set(range(max_p)) and all(n == 1 for n in covered.values())


@settings(max_examples=100, deadline=None)
@given(_rescale_cases(), st.integers(1, 300))
def test_property_rescaling_twice_is_lossless(case, third_p):
    max_p, old_p, new_p, present = case
    third_p = min(third_p, max_p)
    first = assign_states(
        CheckpointMetadata(1, (_keyed_operator_state(max_p, old_p, present),)),
        [ExecutionJobVertexInfo("op", new_p, max_p)],
    )
    middle = OperatorState("op", new_p, max_p, {i: first.subtask_state("op", i) for i in range(new_p)})
    second = assign_states(CheckpointMetadata(2, (middle,)), [ExecutionJobVertexInfo("op", third_p, max_p)])
    values = sorted(
        kg for i in range(third_p) for h in second.subtask_state("op", i).managed_keyed_state for kg in h.key_groups
    )
    assert values == sorted(present)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 5), max_size=3), min_size=1, max_size=6),
    st.integers(1, 8),
)
def test_property_split_distribute_state_loses_and_duplicates_no_partition(per_subtask, new_p):
    old = [
        [OperatorStateHandle({name: _parts(n, f"{i}/{name}") for name, n in spec.items()})] if spec else []
        for i, spec in enumerate(per_subtask)
    ]
    result = repartition_state(old, len(old), new_p)
    assert len(result) == new_p
    before = Counter(p for handles in old for h in handles for parts in h.states.values() for p in parts)
    after = Counter(p for handles in result for h in handles for parts in h.states.values() for p in parts)
    assert after == before
    if len(old) != new_p:  # round robin: per name, the subtasks' shares differ by at most one
        for name in ("a", "b", "c"):
            shares = [sum(len(h.states.get(name, ())) for h in handles) for handles in result]
            assert max(shares) - min(shares) <= 1
