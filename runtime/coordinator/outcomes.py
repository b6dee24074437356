"""What became of a message from a task (the coordinator's return values, as enums).

How this works: ``receive_acknowledge_message`` and ``receive_decline_message`` of the coordinator return one of
these, so drivers and tests can tell a counted acknowledgement from a duplicate, one for an unknown task, one
for an ended checkpoint (``DISCARDED``: disposed; ``LATE``: recently expired, Flink's "late message for now
expired checkpoint"; ``UNKNOWN_CHECKPOINT``: never seen or long gone), or a message for another job;
``TriggerPhaseOutcome`` tells whether a late answer of an operator coordinator or master hook still mattered. Mirrors
the branches of Flink's ``CheckpointCoordinator.receiveAcknowledgeMessage`` / ``receiveDeclineMessage`` and
``PendingCheckpoint.TaskAcknowledgeResult``.
"""

from __future__ import annotations

import enum


class AcknowledgeOutcome(enum.Enum):
    SUCCESS = "SUCCESS"
    DUPLICATE = "DUPLICATE"
    UNKNOWN = "UNKNOWN"  # the task is not one the checkpoint waits for
    DISCARDED = "DISCARDED"
    LATE = "LATE"
    UNKNOWN_CHECKPOINT = "UNKNOWN_CHECKPOINT"
    WRONG_JOB = "WRONG_JOB"
    COORDINATOR_SHUTDOWN = "COORDINATOR_SHUTDOWN"
    REJECTED = "REJECTED"  # its shared state could not be registered: dropped (AcknowledgementRejected)


class DeclineOutcome(enum.Enum):
    ABORTED = "ABORTED"
    LATE = "LATE"
    UNKNOWN_CHECKPOINT = "UNKNOWN_CHECKPOINT"
    COORDINATOR_SHUTDOWN = "COORDINATOR_SHUTDOWN"


class TriggerPhaseOutcome(enum.Enum):
    """What became of an answer of an operator coordinator or master hook to a checkpoint being triggered."""

    ACCEPTED = "ACCEPTED"  # it moved the trigger on (or failed it)
    NOT_TRIGGERING = (
        "NOT_TRIGGERING"  # no trigger waits for it: the checkpoint ended, is unknown, or it answered before
    )


class CoordinatorError(Exception):
    """An event the coordinator cannot accept (naming the event and the coordinator's state)."""
