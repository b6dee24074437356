"""Master hooks: state kept by the job master itself (e.g. an external system's offsets) that is snapshotted with
every checkpoint and handed back on restore. Mirrors Flink's ``MasterTriggerRestoreHook`` and
``hooks/MasterHooks``. See docs/coordinator.md, "Master hooks".
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Protocol

from barriersim.runtime.state.snapshot import MasterState


class MasterHookError(Exception):
    """A master hook failed or its state cannot be restored (naming the hook and the checkpoint)."""


class _Pending(enum.Enum):
    PENDING = "PENDING"


MASTER_STATE_PENDING = _Pending.PENDING  # a hook's answer: "my state follows in a MasterHookCompleted event"


class MasterTriggerRestoreHook(Protocol):
    identifier: str
    version: int

    def trigger_checkpoint(self, checkpoint_id: int, timestamp: int) -> bytes | None | _Pending: ...

    def restore_checkpoint(self, checkpoint_id: int, data: bytes | None) -> None: ...


def trigger_hook(hook: MasterTriggerRestoreHook, checkpoint_id: int, timestamp: int) -> MasterState | None | _Pending:
    """Flink's ``MasterHooks.triggerHook``: the hook's state now, or ``MASTER_STATE_PENDING``; a hook that raises
    becomes a ``MasterHookError``."""
    try:
        data = hook.trigger_checkpoint(checkpoint_id, timestamp)
    except Exception as e:  # a user hook may fail in any way: the checkpoint fails, not the coordinator
        raise MasterHookError(
            f"master hook {hook.identifier!r} failed to trigger checkpoint {checkpoint_id}: {e}"
        ) from e
    if data is MASTER_STATE_PENDING:
        return MASTER_STATE_PENDING
    return master_state_of(hook, data)


def master_state_of(hook: MasterTriggerRestoreHook, data: bytes | None) -> MasterState | None:
    """The ``MasterState`` a hook's state is stored as (None: the hook stores nothing)."""
    if data is None:
        return None
    return MasterState(hook.identifier, int(getattr(hook, "version", 0)), bytes(data))


def restore_master_hooks(
    hooks: Mapping[str, MasterTriggerRestoreHook],
    states: Sequence[MasterState],
    checkpoint_id: int,
    allow_unmatched_state: bool,
) -> list[str]:
    """Restore every hook; return the names of dropped (unmatched) states. As Flink, nothing happens when there
    are no hooks or no states."""
    if not hooks or not states:
        return []
    remaining = dict(hooks)
    matched: list[tuple[MasterTriggerRestoreHook, MasterState]] = []
    dropped: list[str] = []
    for state in states:
        hook = remaining.pop(state.name, None)
        if hook is not None:
            matched.append((hook, state))
        elif not allow_unmatched_state:
            raise MasterHookError(
                f"restore checkpoint {checkpoint_id}: found state {state.name!r} which is not resumed by any hook"
            )
        else:
            dropped.append(state.name)
    for hook, state in matched:
        hook.restore_checkpoint(checkpoint_id, state.data)
    for hook in remaining.values():
        hook.restore_checkpoint(checkpoint_id, None)
    return dropped


def validate_hook(hook: MasterTriggerRestoreHook) -> None:
    identifier = getattr(hook, "identifier", None)
    if not isinstance(identifier, str) or not identifier.strip():
        raise MasterHookError(f"master hook {hook!r} has an invalid identifier {identifier!r}")


def reset_hooks(hooks: Mapping[str, MasterTriggerRestoreHook]) -> None:
    for hook in hooks.values():
        reset = getattr(hook, "reset", None)
        if reset is not None:
            reset()


def close_hooks(hooks: Mapping[str, MasterTriggerRestoreHook]) -> None:
    for hook in hooks.values():
        close = getattr(hook, "close", None)
        if close is not None:
            close()
