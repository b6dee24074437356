"""Round-robin redistribution of operator (non-keyed) state on restore.

Mirrors Flink's ``RoundRobinOperatorStateRepartitioner``. See docs/state-and-rescaling.md, "Operator state
repartitioning".
"""

from __future__ import annotations

from collections.abc import Sequence

from barriersim.runtime.state.snapshot import OperatorStateDistributionMode as Mode
from barriersim.runtime.state.snapshot import OperatorStateHandle

_Origin = tuple[int, int]  # (old subtask index, handle index within that subtask)


class _MergeMap:
    """New handles of one new subtask, keyed by the old handle their partitions come from."""

    def __init__(self) -> None:
        self.by_origin: dict[_Origin, tuple[dict[str, tuple[bytes, ...]], dict[str, Mode]]] = {}

    def put(self, origin: _Origin, name: str, partitions: tuple[bytes, ...], mode: Mode) -> None:
        states, modes = self.by_origin.setdefault(origin, ({}, {}))
        states[name] = partitions
        if mode is not Mode.SPLIT_DISTRIBUTE:
            modes[name] = mode

    def handles(self) -> list[OperatorStateHandle]:
        return [OperatorStateHandle(states, modes) for states, modes in self.by_origin.values()]


# a mode's states: per name, the partitions of each handle that has it
_ByName = dict[str, list[tuple[_Origin, tuple[bytes, ...]]]]


def _group_by_mode(
    previous: Sequence[Sequence[OperatorStateHandle | None]],
) -> dict[Mode, _ByName]:
    grouped: dict[Mode, _ByName] = {m: {} for m in Mode}
    for old_index, handles in enumerate(previous):
        for handle_index, handle in enumerate(handles):
            if handle is None:
                continue
            for name, partitions in handle.states.items():
                grouped[handle.mode_of(name)].setdefault(name, []).append(
                    ((old_index, handle_index), tuple(partitions))
                )
    return grouped


def repartition_state(
    previous_parallel_subtask_states: Sequence[Sequence[OperatorStateHandle | None]],
    old_parallelism: int,
    new_parallelism: int,
) -> list[list[OperatorStateHandle]]:
    """Flink's ``RoundRobinOperatorStateRepartitioner.repartitionState``: the handles of each new subtask."""
    if new_parallelism <= 0:
        raise ValueError(f"new parallelism must be positive, got {new_parallelism}")
    if len(previous_parallel_subtask_states) != old_parallelism:
        raise ValueError(
            f"{len(previous_parallel_subtask_states)} old subtask states given for old parallelism {old_parallelism}"
        )
    grouped = _group_by_mode(previous_parallel_subtask_states)
    if new_parallelism == old_parallelism:
        union = grouped[Mode.UNION]
        partly_finished_broadcast = {
            name: entries
            for name, entries in grouped[Mode.BROADCAST].items()
            if len({origin[0] for origin, _ in entries}) < old_parallelism
        }
        if not union and not partly_finished_broadcast:
            return [list(h for h in handles if h is not None) for handles in previous_parallel_subtask_states]
        merge_maps: list[_MergeMap] = []
        for old_index, handles in enumerate(previous_parallel_subtask_states):
            mm = _MergeMap()
            for handle_index, handle in enumerate(handles):
                if handle is None:
                    continue
                for name, partitions in handle.states.items():
                    mm.put((old_index, handle_index), name, tuple(partitions), handle.mode_of(name))
            merge_maps.append(mm)
        _repartition_union(union, merge_maps)
        # subtasks that finished (FLIP-147) reported no broadcast state: give every subtask a copy again
        _repartition_broadcast(partly_finished_broadcast, merge_maps)
    else:
        merge_maps = [_MergeMap() for _ in range(new_parallelism)]
        _repartition_split(grouped[Mode.SPLIT_DISTRIBUTE], new_parallelism, merge_maps)
        _repartition_union(grouped[Mode.UNION], merge_maps)
        _repartition_broadcast(grouped[Mode.BROADCAST], merge_maps)
    return [mm.handles() for mm in merge_maps]


def _repartition_split(by_name: _ByName, new_parallelism: int, merge_maps: list[_MergeMap]) -> None:
    start_op = 0
    for name, current in by_name.items():
        total = sum(len(parts) for _, parts in current)
        base, remainder = divmod(total, new_parallelism)
        list_idx = offset_idx = 0
        new_start_op = start_op
        for i in range(new_parallelism):
            op_idx = (i + start_op) % new_parallelism
            to_assign = base
            if remainder > 0:
                to_assign += 1
                remainder -= 1
            elif remainder == 0:
                # out of odd partitions: the next name starts its round at this subtask
                new_start_op = op_idx
                remainder -= 1
            while to_assign > 0:
                origin, parts = current[list_idx]
                remaining = len(parts) - offset_idx
                if remaining > to_assign:
                    chunk = parts[offset_idx : offset_idx + to_assign]
                    offset_idx += to_assign
                else:
                    chunk = parts[offset_idx:]
                    offset_idx = 0
                    list_idx += 1
                to_assign -= remaining
                merge_maps[op_idx].put(origin, name, chunk, Mode.SPLIT_DISTRIBUTE)
        start_op = new_start_op


def _repartition_union(by_name: _ByName, merge_maps: list[_MergeMap]) -> None:
    for mm in merge_maps:
        for name, entries in by_name.items():
            for origin, parts in entries:
                mm.put(origin, name, parts, Mode.UNION)


def _repartition_broadcast(by_name: _ByName, merge_maps: list[_MergeMap]) -> None:
    for i, mm in enumerate(merge_maps):
        for name, entries in by_name.items():
            origin, parts = entries[i % len(entries)]
            mm.put(origin, name, parts, Mode.BROADCAST)
