"""The coordinator's configuration: interval, timeout, min pause, concurrency, tolerable failures, retention.

How this works: one frozen value passed to ``CheckpointCoordinator``; every duration is in milliseconds.
``checkpoint_interval`` of ``NO_PERIODIC_CHECKPOINTS`` (or anything under 10 ms) disables periodic checkpoints
(savepoints and manual checkpoints can still be requested). ``checkpoint_options`` are the options of a plain
checkpoint (Flink's ``CheckpointOptions.forConfig`` of the exactly-once flag, the unaligned flag and the
aligned-checkpoint timeout); ``unaligned_checkpoints_enabled`` reads Flink's ``isUnalignedCheckpointsEnabled``
back from them (unaligned, or aligned with a timeout after which it switches to unaligned). Mirrors Flink's
``CheckpointCoordinatorConfiguration`` (and the defaults of ``ExecutionCheckpointingOptions``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from barriersim.runtime.coordinator.properties import CheckpointRetentionPolicy
from barriersim.runtime.events import NO_ALIGNED_CHECKPOINT_TIME_OUT, AlignmentType, CheckpointOptions

NO_PERIODIC_CHECKPOINTS = 2**63 - 1


@dataclass(frozen=True)
class CheckpointCoordinatorConfiguration:
    """Flink's ``CheckpointCoordinatorConfiguration`` (all durations in ms). ``tolerable_checkpoint_failure_number``
    -1 (Flink's default, undefined) means 0."""

    checkpoint_interval: int = NO_PERIODIC_CHECKPOINTS
    checkpoint_timeout: int = 600_000
    min_pause_between_checkpoints: int = 0
    max_concurrent_checkpoints: int = 1
    tolerable_checkpoint_failure_number: int = -1
    max_retained_checkpoints: int = 1
    checkpoint_options: CheckpointOptions = field(default_factory=CheckpointOptions.aligned)
    retention_policy: CheckpointRetentionPolicy = CheckpointRetentionPolicy.NEVER_RETAIN_AFTER_TERMINATION
    allow_checkpoints_after_tasks_finished: bool = True
    max_queued_requests: int = 1000

    @property
    def unaligned_checkpoints_enabled(self) -> bool:
        """Flink's ``isUnalignedCheckpointsEnabled``: plain checkpoints are unaligned, or aligned with a timeout
        (``execution.checkpointing.unaligned.enabled`` with a positive ``aligned-checkpoint-timeout``)."""
        options = self.checkpoint_options
        return options.alignment is AlignmentType.UNALIGNED or (
            options.alignment is AlignmentType.ALIGNED
            and options.aligned_checkpoint_timeout != NO_ALIGNED_CHECKPOINT_TIME_OUT
        )
