"""The shared-state registry: which checkpoints use each shared file, and when a file may go. Mirrors Flink's
``SharedStateRegistryImpl`` and ``IncrementalRemoteKeyedStateHandle.registerSharedStates``. See
docs/coordinator.md, "The shared-state registry".
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable
from dataclasses import dataclass

from barriersim.runtime.ids import OperatorID
from barriersim.runtime.state.snapshot import (
    HandleAndLocalPath,
    IncrementalKeyedStateHandle,
    KeyedStateHandle,
    OperatorState,
    OperatorSubtaskState,
    PlaceholderStateHandle,
    SharedStateHandle,
    TaskStateSnapshot,
)


class RecoveryClaimMode(enum.Enum):
    """Who owns the checkpoints a job is restored from (Flink's ``RecoveryClaimMode``, formerly ``RestoreMode``)."""

    CLAIM = "claim"  # the job owns them: their shared files go once unused
    NO_CLAIM = "no_claim"  # Flink's default: they are never discarded by this job


class SharedStateRegistryError(Exception):
    """A registration the registry cannot make (names the key and the checkpoint)."""


@dataclass
class _Entry:
    handle: SharedStateHandle
    created_by: int
    last_used: int
    confirmed: bool = False


class SharedStateRegistry:
    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._highest_not_claimed = -1

    # -- registration ---------------------------------------------------------------------------------------

    def register_reference(
        self, handle: SharedStateHandle | PlaceholderStateHandle, checkpoint_id: int
    ) -> tuple[SharedStateHandle, SharedStateHandle | None]:
        """Register ``handle`` for ``checkpoint_id``: the handle the checkpoint refers to from now on, and a handle
        to discard (a duplicate upload), if any."""
        entry = self._entries.get(handle.key)
        if entry is None:
            if isinstance(handle, PlaceholderStateHandle):
                raise SharedStateRegistryError(
                    f"checkpoint {checkpoint_id}: attempt to reference unknown shared state {handle.key}"
                )
            self._entries[handle.key] = _Entry(handle, checkpoint_id, checkpoint_id)
            return handle, None
        discard = None
        if isinstance(handle, PlaceholderStateHandle) or handle == entry.handle:
            pass  # the normal case: a reference to what is registered
        elif entry.confirmed:
            discard = handle  # a re-upload of confirmed state: keep the old one
        else:
            discard, entry.handle = entry.handle, handle  # the old one is in no completed checkpoint: keep the new
        entry.last_used = max(entry.last_used, checkpoint_id)
        return entry.handle, discard

    def register_keyed_handle(
        self, handle: KeyedStateHandle, checkpoint_id: int
    ) -> tuple[KeyedStateHandle, list[SharedStateHandle]]:
        """An incremental handle with its placeholders replaced by the registered handles; other handles as they
        are. Returns the handle and what to discard."""
        if not isinstance(handle, IncrementalKeyedStateHandle):
            return handle, []
        shared, discards = [], []
        for entry in handle.shared_state:
            registered, discard = self.register_reference(entry.handle, checkpoint_id)
            shared.append(HandleAndLocalPath(entry.local_path, registered))
            if discard is not None:
                discards.append(discard)
        return dataclasses.replace(handle, shared_state=tuple(shared)), discards

    def register_subtask_state(
        self, state: OperatorSubtaskState, checkpoint_id: int
    ) -> tuple[OperatorSubtaskState, list[SharedStateHandle]]:
        if not any(isinstance(h, IncrementalKeyedStateHandle) for h in state.managed_keyed_state):
            return state, []
        handles: list[KeyedStateHandle] = []
        discards: list[SharedStateHandle] = []
        for handle in state.managed_keyed_state:
            registered, discard = self.register_keyed_handle(handle, checkpoint_id)
            handles.append(registered)
            discards += discard
        return dataclasses.replace(state, managed_keyed_state=tuple(handles)), discards

    def register_task_state(
        self, snapshot: TaskStateSnapshot, checkpoint_id: int
    ) -> tuple[TaskStateSnapshot, list[SharedStateHandle]]:
        """An acknowledgement's snapshot, registered (Flink's ``TaskStateSnapshot.registerSharedStates``)."""
        states: dict[OperatorID, OperatorSubtaskState] = {}
        discards: list[SharedStateHandle] = []
        for operator_id, state in snapshot.subtask_states_by_operator.items():
            states[operator_id], discard = self.register_subtask_state(state, checkpoint_id)
            discards += discard
        if not discards and all(states[k] is v for k, v in snapshot.subtask_states_by_operator.items()):
            return snapshot, []
        return dataclasses.replace(snapshot, subtask_states_by_operator=states), discards

    def register_all_after_restored(
        self, checkpoint_id: int, operator_states: Iterable[OperatorState], claim_mode: RecoveryClaimMode
    ) -> list[OperatorState]:
        """Re-register a recovered checkpoint's shared state; returns its operator states with registered handles."""
        registered: list[OperatorState] = []
        for state in operator_states:
            subtasks = {}
            for index, subtask in state.subtask_states.items():
                subtasks[index], _ = self.register_subtask_state(subtask, checkpoint_id)
            registered.append(
                dataclasses.replace(state, subtask_states=subtasks) if isinstance(state, OperatorState) else state
            )
        self.checkpoint_completed(checkpoint_id)
        if claim_mode is not RecoveryClaimMode.CLAIM:
            self._highest_not_claimed = max(self._highest_not_claimed, checkpoint_id)
        return registered

    def checkpoint_completed(self, checkpoint_id: int) -> None:
        for entry in self._entries.values():
            if entry.last_used == checkpoint_id:
                entry.confirmed = True

    # -- release --------------------------------------------------------------------------------------------

    def unregister_unused_state(self, lowest_checkpoint_id: int) -> list[SharedStateHandle]:
        """Drop every entry last used before ``lowest_checkpoint_id``; the handles to discard (not those created by
        checkpoints the job did not claim)."""
        discard = []
        for key in [k for k, e in self._entries.items() if e.last_used < lowest_checkpoint_id]:
            entry = self._entries.pop(key)
            if entry.created_by > self._highest_not_claimed:
                discard.append(entry.handle)
        return discard

    # -- queries ---------------------------------------------------------------------------------------------

    def registered_keys(self) -> set[str]:
        return set(self._entries)

    def handle(self, key: str) -> SharedStateHandle | None:
        entry = self._entries.get(key)
        return None if entry is None else entry.handle

    def __len__(self) -> int:
        return len(self._entries)
