"""What happens to retained checkpoints when the job ends: Flink's ``CheckpointRetentionPolicy`` as
``CheckpointProperties.forCheckpoint(policy)`` applies it (savepoints are never discarded by the system)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable

from barriersim.runtime.storage.checkpoint_storage import CompletedCheckpointStorageLocation


class RetentionDecision(enum.Enum):
    RETAINED = "RETAINED"
    DISCARDED = "DISCARDED"


# Flink's CheckpointProperties.forCheckpoint(policy): the terminal job statuses on which it discards.
_DISCARD_ON = {
    "NEVER_RETAIN_AFTER_TERMINATION": frozenset({"FINISHED", "CANCELED", "FAILED", "SUSPENDED"}),
    "RETAIN_ON_FAILURE": frozenset({"FINISHED", "CANCELED"}),
    "RETAIN_ON_CANCELLATION": frozenset({"FINISHED"}),
}
_TERMINAL_STATUSES = frozenset({"FINISHED", "CANCELED", "FAILED", "SUSPENDED"})


def _name(value: object) -> str:
    return str(getattr(value, "value", value))


def discard_on_termination(retention_policy: object, job_status: object) -> bool:
    """Whether a retained checkpoint is discarded when the job ends in ``job_status`` under
    ``retention_policy``. Both are given by name (a ``str`` or an enum whose value is Flink's name, e.g.
    the coordinator's ``CheckpointRetentionPolicy``/``JobStatus``)."""
    policy, status = _name(retention_policy), _name(job_status)
    if policy not in _DISCARD_ON:
        raise ValueError(f"unknown checkpoint retention policy {policy!r} (expected one of {sorted(_DISCARD_ON)})")
    if status not in _TERMINAL_STATUSES:
        raise ValueError(f"job status {status!r} is not terminal; retention applies on {sorted(_TERMINAL_STATUSES)}")
    return status in _DISCARD_ON[policy]


def retain_or_discard(
    retained: Iterable[CompletedCheckpointStorageLocation], discard: bool, discard_checkpoint: Callable[[int], object]
) -> dict[int, RetentionDecision]:
    """Discard (through ``discard_checkpoint``) or keep each retained checkpoint; the decision of each."""
    decisions: dict[int, RetentionDecision] = {}
    for location in retained:
        checkpoint_id = location.listed_checkpoint_id
        if discard:
            discard_checkpoint(checkpoint_id)
            decisions[checkpoint_id] = RetentionDecision.DISCARDED
        else:
            decisions[checkpoint_id] = RetentionDecision.RETAINED
    return decisions
