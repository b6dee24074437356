"""The heap keyed state backend (Flink's ``HashMapStateBackend``): a full snapshot, every entry every time, through
the operator's own ``snapshot_state``; its synchronous part walks the tables (copy-on-write), its asynchronous part
writes them all, one stream (a file at or over the memory threshold). It restores incremental handles too, merged
into a full snapshot (``incremental.as_full_snapshot``). ``last_work`` is what the last snapshot did, for the
checkpoint cost model (``runtime.checkpoint_cost.SnapshotWork``).
"""

from __future__ import annotations

from barriersim.runtime.checkpoint_cost import NO_WORK, SnapshotWork
from barriersim.runtime.events import CheckpointType
from barriersim.runtime.state.backend import KeyedRows, StateBackendConfig, full_keyed_snapshot, full_snapshot_work
from barriersim.runtime.state.incremental import as_full_snapshot
from barriersim.runtime.state.snapshot import KeyGroupRange, OperatorSubtaskState


class HeapKeyedStateBackend:
    """Full snapshots (Flink's ``HashMapStateBackend`` with its ``HeapSnapshotStrategy``): the synchronous part is the
    copy-on-write snapshot of the tables, the asynchronous part writes every entry."""

    def __init__(
        self, operator: KeyedRows, key_group_range: KeyGroupRange, config: StateBackendConfig, memory_threshold: int
    ) -> None:
        self._operator = operator
        self.key_group_range = key_group_range
        self._entry_bytes = config.entry_bytes
        self._threshold = memory_threshold
        self.last_work: SnapshotWork = NO_WORK

    def snapshot(
        self,
        checkpoint_id: int,
        checkpoint_type: CheckpointType = CheckpointType.CHECKPOINT,
    ) -> OperatorSubtaskState:
        """A checkpoint and a savepoint alike: the heap backend's full snapshot is the canonical format."""
        state = full_keyed_snapshot(self._operator, self._entry_bytes)
        self.last_work = full_snapshot_work(state, self._threshold)
        return state

    def restore(self, state: OperatorSubtaskState) -> None:
        self._operator.restore_state(as_full_snapshot(state, self.key_group_range))

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        pass

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        pass
