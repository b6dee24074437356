"""What kind of snapshot a checkpoint is and what happens to it when it is subsumed or the job terminates.

How this works: ``CheckpointProperties`` is a frozen value attached to every trigger request, pending and
completed checkpoint. ``forced`` checkpoints bypass the max-concurrent and min-pause limits of the request
decider; savepoints are never subsumed by checkpoints and are never discarded by the coordinator; the
``discard_*`` flags decide, per ``JobStatus``, whether the completed checkpoint store discards a checkpoint on
shutdown (Flink's ``CheckpointRetentionPolicy``). Mirrors Flink's ``CheckpointProperties``,
``CheckpointRetentionPolicy``, ``ExternalizedCheckpointRetention`` (and the ``JobStatus`` values the store cares about).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from barriersim.runtime.events import CheckpointType


class CheckpointRetentionPolicy(enum.Enum):
    """Flink's ``CheckpointRetentionPolicy`` (externalized checkpoint cleanup)."""

    RETAIN_ON_CANCELLATION = "RETAIN_ON_CANCELLATION"
    RETAIN_ON_FAILURE = "RETAIN_ON_FAILURE"
    NEVER_RETAIN_AFTER_TERMINATION = "NEVER_RETAIN_AFTER_TERMINATION"


class ExternalizedCheckpointRetention(enum.Enum):
    """Flink's ``ExternalizedCheckpointRetention`` (``execution.checkpointing.externalized-checkpoint-retention``,
    default ``NO_EXTERNALIZED_CHECKPOINTS``) and the ``CheckpointRetentionPolicy`` Flink's
    ``StreamingJobGraphGenerator`` derives from it. Every policy discards a finished job's checkpoints."""

    NO_EXTERNALIZED_CHECKPOINTS = "NO_EXTERNALIZED_CHECKPOINTS"
    DELETE_ON_CANCELLATION = "DELETE_ON_CANCELLATION"
    RETAIN_ON_CANCELLATION = "RETAIN_ON_CANCELLATION"

    @property
    def retention_policy(self) -> CheckpointRetentionPolicy:
        if self is ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS:
            return CheckpointRetentionPolicy.NEVER_RETAIN_AFTER_TERMINATION
        if self is ExternalizedCheckpointRetention.DELETE_ON_CANCELLATION:
            return CheckpointRetentionPolicy.RETAIN_ON_FAILURE
        return CheckpointRetentionPolicy.RETAIN_ON_CANCELLATION


class JobStatus(enum.Enum):
    """The job statuses the coordinator reacts to (Flink's ``JobStatus``)."""

    INITIALIZING = "INITIALIZING"
    CREATED = "CREATED"
    RUNNING = "RUNNING"
    FAILING = "FAILING"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELED = "CANCELED"
    FINISHED = "FINISHED"
    RESTARTING = "RESTARTING"
    SUSPENDED = "SUSPENDED"

    @property
    def is_globally_terminal(self) -> bool:
        return self in (JobStatus.FAILED, JobStatus.CANCELED, JobStatus.FINISHED)

    @property
    def is_terminal(self) -> bool:
        return self.is_globally_terminal or self is JobStatus.SUSPENDED


@dataclass(frozen=True)
class CheckpointProperties:
    """Flink's ``CheckpointProperties``: ``(forced, checkpoint_type, discard_subsumed, discard_finished,
    discard_cancelled, discard_failed, discard_suspended, unclaimed)``."""

    forced: bool
    checkpoint_type: CheckpointType
    discard_subsumed: bool
    discard_finished: bool
    discard_cancelled: bool
    discard_failed: bool
    discard_suspended: bool
    unclaimed: bool = False

    @property
    def is_savepoint(self) -> bool:
        return self.checkpoint_type.is_savepoint

    @property
    def is_synchronous(self) -> bool:
        return self.checkpoint_type.is_synchronous

    @property
    def is_unclaimed(self) -> bool:
        return self.unclaimed

    def discard_on_shutdown(self, job_status: JobStatus) -> bool:
        """Flink's ``CompletedCheckpoint.shouldBeDiscardedOnShutdown``."""
        return (
            (job_status is JobStatus.FINISHED and self.discard_finished)
            or (job_status is JobStatus.CANCELED and self.discard_cancelled)
            or (job_status is JobStatus.FAILED and self.discard_failed)
            or (job_status is JobStatus.SUSPENDED and self.discard_suspended)
        )

    # -- factories, as Flink's static ones -----------------------------------------------------

    @staticmethod
    def for_checkpoint(policy: CheckpointRetentionPolicy) -> CheckpointProperties:
        if policy is CheckpointRetentionPolicy.NEVER_RETAIN_AFTER_TERMINATION:
            return CheckpointProperties(False, CheckpointType.CHECKPOINT, True, True, True, True, True)
        if policy is CheckpointRetentionPolicy.RETAIN_ON_FAILURE:
            return CheckpointProperties(False, CheckpointType.CHECKPOINT, True, True, True, False, False)
        return CheckpointProperties(False, CheckpointType.CHECKPOINT, True, True, False, False, False)

    @staticmethod
    def for_standard_checkpoint() -> CheckpointProperties:
        return CheckpointProperties.for_checkpoint(CheckpointRetentionPolicy.NEVER_RETAIN_AFTER_TERMINATION)

    @staticmethod
    def for_savepoint(forced: bool = True) -> CheckpointProperties:
        return CheckpointProperties(forced, CheckpointType.SAVEPOINT, False, False, False, False, False)

    @staticmethod
    def for_sync_savepoint(forced: bool = True, terminate: bool = False) -> CheckpointProperties:
        kind = CheckpointType.SAVEPOINT_TERMINATE if terminate else CheckpointType.SAVEPOINT_SUSPEND
        return CheckpointProperties(forced, kind, False, False, False, False, False)

    @staticmethod
    def for_unclaimed_snapshot() -> CheckpointProperties:
        """A restored snapshot the job does not own (restore mode NO_CLAIM): never discarded by us."""
        return CheckpointProperties(False, CheckpointType.SAVEPOINT, False, False, False, False, False, True)

    @staticmethod
    def for_type(
        checkpoint_type: CheckpointType, checkpoint_props: CheckpointProperties, forced: bool | None = None
    ) -> CheckpointProperties:
        """The properties of a trigger request of ``checkpoint_type``: the configured checkpoint properties for
        checkpoints, savepoint properties (forced unless told otherwise) for savepoints."""
        if checkpoint_type is CheckpointType.CHECKPOINT:
            if forced:
                return CheckpointProperties(True, *_tail(checkpoint_props))
            return checkpoint_props
        if checkpoint_type.is_synchronous:
            return CheckpointProperties.for_sync_savepoint(
                True if forced is None else forced, checkpoint_type is CheckpointType.SAVEPOINT_TERMINATE
            )
        return CheckpointProperties.for_savepoint(True if forced is None else forced)


def _tail(p: CheckpointProperties) -> tuple[CheckpointType, bool, bool, bool, bool, bool, bool]:
    return (
        p.checkpoint_type,
        p.discard_subsumed,
        p.discard_finished,
        p.discard_cancelled,
        p.discard_failed,
        p.discard_suspended,
        p.unclaimed,
    )
