"""State assignment on restore: which state each subtask of the (possibly rescaled) job starts from.

Mirrors Flink's ``StateAssignmentOperation`` and ``Checkpoints.loadAndValidateCheckpoint``. See
docs/state-and-rescaling.md, "State assignment on restore".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from barriersim.runtime.ids import OperatorID
from barriersim.runtime.jobgraph import JobGraph
from barriersim.runtime.recovery.channel_state_assignment import ChannelStateAssignment
from barriersim.runtime.recovery.errors import (  # noqa: F401 (re-exported)
    ChannelStateRescalingUnsupportedError,
    MaxParallelismMismatchError,
    NonRestoredStateError,
    StateAssignmentError,
)
from barriersim.runtime.recovery.operator_state_repartitioner import repartition_state
from barriersim.runtime.state.key_groups import (
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
)
from barriersim.runtime.state.snapshot import (
    CheckpointMetadata,
    IncrementalKeyedStateHandle,
    KeyedStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorState,
    OperatorSubtaskState,
    TaskStateSnapshot,
)


@dataclass(frozen=True)
class ExecutionJobVertexInfo:
    """What state assignment needs of a job vertex (Flink's ``ExecutionJobVertex``): its operator, its
    new parallelism and max parallelism; ``max_parallelism_configured=False`` lets it adopt the checkpoint's."""

    operator_id: OperatorID
    parallelism: int
    max_parallelism: int
    max_parallelism_configured: bool = True


@dataclass(frozen=True)
class JobManagerTaskRestore:
    """Flink's ``JobManagerTaskRestore``: the checkpoint a subtask restores from and its state."""

    restore_checkpoint_id: int
    task_state_snapshot: TaskStateSnapshot


@dataclass(frozen=True)
class StateAssignment:
    """The result: ``task_restores[operator_id][subtask_index]``, the max parallelism each vertex ends up
    with, coordinator states, and the checkpoint operators whose state was skipped."""

    checkpoint_id: int
    task_restores: Mapping[OperatorID, tuple[JobManagerTaskRestore, ...]]
    max_parallelism: Mapping[OperatorID, int]
    coordinator_states: Mapping[OperatorID, bytes] = field(default_factory=dict)
    non_restored_operators: tuple[OperatorID, ...] = ()

    def subtask_state(self, operator_id: OperatorID, subtask_index: int) -> OperatorSubtaskState:
        snapshot = self.task_restores[operator_id][subtask_index].task_state_snapshot
        return snapshot.subtask_states_by_operator.get(operator_id, OperatorSubtaskState())


def assign_states(
    metadata: CheckpointMetadata,
    vertices: Iterable[ExecutionJobVertexInfo],
    *,
    allow_non_restored_state: bool = False,
    graph: JobGraph | None = None,
) -> StateAssignment:
    """Flink's ``StateAssignmentOperation.assignStates`` (with ``Checkpoints.loadAndValidateCheckpoint``'s checks);
    ``graph``: the job graph (vertex name = operator id), needed to rescale in-flight data."""
    vertices = list(vertices)
    by_operator = {v.operator_id: v for v in vertices}
    if len(by_operator) != len(vertices):
        raise ValueError("two job vertices share an operator id")
    states = {s.operator_id: s for s in metadata.operator_states}
    non_restored = _check_state_mapping_completeness(metadata, by_operator, allow_non_restored_state)
    for vertex in vertices:
        state = states.get(vertex.operator_id)
        if state is not None:
            _check_subtask_indexes(metadata.checkpoint_id, state)
    channels = ChannelStateAssignment(
        metadata.checkpoint_id,
        graph,
        {
            v.operator_id: (
                None
                if states.get(v.operator_id) is None or states[v.operator_id].fully_finished
                else states[v.operator_id]
            )
            for v in vertices
        },
        {v.operator_id: v.parallelism for v in vertices},
    )

    task_restores: dict[OperatorID, tuple[JobManagerTaskRestore, ...]] = {}
    max_parallelism: dict[OperatorID, int] = {}
    coordinator_states: dict[OperatorID, bytes] = {}
    for vertex in vertices:
        state = states.get(vertex.operator_id)
        if state is None:
            max_parallelism[vertex.operator_id] = vertex.max_parallelism
            subtasks = [OperatorSubtaskState() for _ in range(vertex.parallelism)]
            finished = False
        else:
            max_p = _check_parallelism_preconditions(metadata.checkpoint_id, state, vertex)
            max_parallelism[vertex.operator_id] = max_p
            if state.coordinator_state is not None:
                coordinator_states[vertex.operator_id] = state.coordinator_state
            finished = state.fully_finished
            subtasks = (
                [OperatorSubtaskState() for _ in range(vertex.parallelism)]
                if finished
                else _assign_operator(state, vertex.parallelism, max_p)
            )
        op = vertex.operator_id
        gates, partitions = channels.end_of_channel_state_gates(op), channels.end_of_channel_state_partitions(op)
        subtasks = [
            dataclasses.replace(
                s,
                input_channel_state=channels.input_states[op][i],
                result_subpartition_state=channels.output_states[op][i],
                input_rescaling_descriptor=channels.input_descriptor(op, i),
                output_rescaling_descriptor=channels.output_descriptor(op, i),
                end_of_channel_state_gates=gates,
                end_of_channel_state_partitions=partitions,
            )
            if not finished
            else dataclasses.replace(s, end_of_channel_state_partitions=partitions)
            for i, s in enumerate(subtasks)
        ]
        task_restores[vertex.operator_id] = tuple(
            JobManagerTaskRestore(
                metadata.checkpoint_id,
                TaskStateSnapshot({vertex.operator_id: s}, is_task_deployed_as_finished=finished or s.is_finished),
            )
            for s in subtasks
        )
    return StateAssignment(metadata.checkpoint_id, task_restores, max_parallelism, coordinator_states, non_restored)


def _check_state_mapping_completeness(
    metadata: CheckpointMetadata,
    by_operator: Mapping[OperatorID, ExecutionJobVertexInfo],
    allow_non_restored_state: bool,
) -> tuple[OperatorID, ...]:
    skipped = []
    for state in metadata.operator_states:
        if state.operator_id in by_operator:
            continue
        has_state = state.coordinator_state is not None or any(s.has_state for s in state.subtask_states.values())
        if has_state and not allow_non_restored_state:
            raise NonRestoredStateError(
                f"Failed to rollback to checkpoint/savepoint {metadata.checkpoint_id}. Cannot map checkpoint/savepoint "
                f"state for operator {state.operator_id} to the new program, because the operator is not available "
                "in the new program. If you want to allow to skip this, set allowNonRestoredState "
                "(--allowNonRestoredState on the CLI)."
            )
        skipped.append(state.operator_id)
    return tuple(skipped)


def _check_parallelism_preconditions(checkpoint_id: int, state: OperatorState, vertex: ExecutionJobVertexInfo) -> int:
    if state.max_parallelism < vertex.parallelism:
        raise MaxParallelismMismatchError(
            f"The state for operator {vertex.operator_id} of checkpoint {checkpoint_id} can not be restored. The "
            f"maximum parallelism ({state.max_parallelism}) of the restored state is lower than the configured "
            f"parallelism ({vertex.parallelism}). Please reduce the parallelism of the task to be lower or equal "
            "to the maximum parallelism."
        )
    if vertex.max_parallelism != state.max_parallelism:
        if vertex.max_parallelism_configured:
            raise MaxParallelismMismatchError(
                f"Failed to rollback to checkpoint/savepoint {checkpoint_id}. Max parallelism mismatch between "
                f"checkpoint/savepoint state and new program. Cannot map operator {vertex.operator_id} with max "
                f"parallelism {state.max_parallelism} to new program with max parallelism {vertex.max_parallelism}. "
                "This indicates that the program has been changed in a non-compatible way after the "
                "checkpoint/savepoint."
            )
        return state.max_parallelism
    return vertex.max_parallelism


def _check_subtask_indexes(checkpoint_id: int, state: OperatorState) -> None:
    stray = sorted(i for i in state.subtask_states if not 0 <= i < state.parallelism)
    if stray:
        raise StateAssignmentError(
            f"checkpoint {checkpoint_id}: operator {state.operator_id} has state for subtasks {stray} outside its "
            f"parallelism {state.parallelism}"
        )


def _assign_operator(state: OperatorState, new_parallelism: int, max_parallelism: int) -> list[OperatorSubtaskState]:
    """Keyed and operator state of each new subtask (channel state is assigned by ``ChannelStateAssignment``)."""
    old_parallelism = state.parallelism
    old = [state.subtask_states.get(i, OperatorSubtaskState()) for i in range(old_parallelism)]
    keyed = reassign_keyed_state(old, old_parallelism, new_parallelism, max_parallelism)
    operator = repartition_state([list(s.managed_operator_state) for s in old], old_parallelism, new_parallelism)
    result = []
    for i in range(new_parallelism):
        same = old[i] if new_parallelism == old_parallelism else OperatorSubtaskState()
        result.append(
            OperatorSubtaskState(
                managed_operator_state=tuple(operator[i]),
                managed_keyed_state=keyed[i],
                is_finished=same.is_finished,  # FLIP-147: kept only at unchanged parallelism
            )
        )
    return result


def key_groups_state_intersection(
    handle: KeyGroupsStateHandle, key_group_range: KeyGroupRange
) -> KeyGroupsStateHandle | None:
    """Flink's ``KeyGroupsStateHandle.getIntersection``: the part of ``handle`` in ``key_group_range``, or
    None when they do not overlap."""
    overlap = handle.key_group_range.intersection(key_group_range)
    if overlap.number_of_key_groups == 0:
        return None
    return KeyGroupsStateHandle(overlap, {kg: v for kg, v in handle.key_groups.items() if kg in overlap})


def reassign_keyed_state(
    old: list[OperatorSubtaskState], old_parallelism: int, new_parallelism: int, max_parallelism: int
) -> list[tuple[KeyedStateHandle, ...]]:
    """Keyed state of each new subtask: unchanged with the same parallelism, else the intersections of all
    old handles with the subtask's key-group range (Flink's ``reDistributeKeyedStates``). An incremental handle
    cannot be cut: each new subtask whose range overlaps it gets it whole, and its backend reads only its own key
    groups (Flink's ``IncrementalRemoteKeyedStateHandle.getIntersection`` returns the handle itself)."""
    if new_parallelism == old_parallelism:
        return [tuple(s.managed_keyed_state) for s in old]
    ranges = [
        compute_key_group_range_for_operator_index(max_parallelism, new_parallelism, i) for i in range(new_parallelism)
    ]
    result: list[list[KeyedStateHandle]] = [[] for _ in range(new_parallelism)]
    for s in old:
        for handle in s.managed_keyed_state:
            r = handle.key_group_range.intersection(KeyGroupRange(0, max_parallelism - 1))
            if r.number_of_key_groups == 0:
                continue
            # only the new subtasks whose ranges overlap this handle; entries bucketed in one pass
            first = compute_operator_index_for_key_group(max_parallelism, new_parallelism, r.start_key_group)
            last = compute_operator_index_for_key_group(max_parallelism, new_parallelism, r.end_key_group)
            if isinstance(handle, IncrementalKeyedStateHandle):
                for i in range(first, last + 1):
                    result[i].append(handle)
                continue
            buckets: dict[int, dict[int, bytes]] = {}
            for kg, value in handle.key_groups.items():
                if kg in r:
                    buckets.setdefault(compute_operator_index_for_key_group(max_parallelism, new_parallelism, kg), {})[
                        kg
                    ] = value
            for i in range(first, last + 1):
                result[i].append(KeyGroupsStateHandle(r.intersection(ranges[i]), buckets.get(i, {})))
    return [tuple(parts) for parts in result]
