"""A job's checkpointing settings and the coordinator's configuration derived from them.

How this works: ``CheckpointingConfig`` is a scenario's ``[checkpointing]`` section (Flink's ``CheckpointConfig``
and ``CheckpointingOptions``: each field a ``runtime.settings`` setting); ``coordinator_configuration()`` is the
one mapping onto ``CheckpointCoordinatorConfiguration``, the frozen value ``CheckpointCoordinator`` takes (Flink's
class of that name; every duration in ms). An interval of ``NO_PERIODIC_CHECKPOINTS`` (or under 10 ms) disables
periodic checkpoints; ``checkpoint_options`` are a plain checkpoint's options (Flink's ``CheckpointOptions.forConfig``)
and ``unaligned_checkpoints_enabled`` reads Flink's ``isUnalignedCheckpointsEnabled`` back from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from barriersim.runtime.checkpointing_mode import CheckpointingMode, checkpointing_problem
from barriersim.runtime.coordinator.properties import CheckpointRetentionPolicy, ExternalizedCheckpointRetention
from barriersim.runtime.coordinator.shared_state_registry import RecoveryClaimMode
from barriersim.runtime.events import (
    NO_ALIGNED_CHECKPOINT_TIME_OUT,
    AlignmentType,
    CheckpointOptions,
    CheckpointType,
)
from barriersim.runtime.settings import AtLeast, Between, setting

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


@dataclass(frozen=True)
class CheckpointingConfig:
    """A scenario's ``[checkpointing]``: the mode and the coordinator's settings (Flink's defaults)."""

    mode: CheckpointingMode = setting(
        CheckpointingMode.ALIGNED,
        "how barriers are handled: aligned, unaligned, aligned with a timeout, or "
        "at-least-once (runtime.checkpointing_mode)",
    )
    interval_ms: int = setting(
        1000, "the coordinator triggers a checkpoint this often (Flink's execution.checkpointing.interval)", AtLeast(10)
    )
    timeout_ms: int = setting(
        600_000,
        "a checkpoint not completed this long after its trigger is aborted (execution.checkpointing.timeout)",
        AtLeast(1),
    )
    aligned_checkpoint_timeout_ms: int = setting(
        0,
        "aligned-with-timeout mode: an alignment lasting longer switches the checkpoint to unaligned "
        "(execution.checkpointing.aligned-checkpoint-timeout); 0 in the other modes",
        AtLeast(0),
    )
    max_concurrent: int = setting(
        1,
        "checkpoints in progress at once, at most (execution.checkpointing.max-concurrent-checkpoints)",
        Between(1, 100),
    )
    min_pause_ms: int = setting(
        0,
        "the least time from one checkpoint's completion to the next trigger (execution.checkpointing.min-pause)",
        AtLeast(0),
    )
    tolerable_failures: int = setting(
        0,
        "checkpoint failures in a row the job tolerates before it fails over "
        "(execution.checkpointing.tolerable-failed-checkpoints)",
        Between(0, 1_000_000),
    )
    max_retained: int = setting(1, "completed checkpoints kept (state.checkpoints.num-retained)", Between(1, 1000))
    checkpoints_after_tasks_finish: bool = setting(
        True,
        "checkpoints go on after some tasks finished, and tasks wait for a final checkpoint (FLIP-147, "
        "execution.checkpointing.checkpoints-after-tasks-finish)",
    )
    memory_threshold_bytes: int = setting(
        20 * 1024,
        "a subtask's state stream at or above this size is a file of its own, a smaller one inline in "
        "_metadata (state.storage.fs.memory-threshold)",
        Between(0, 1024 * 1024),
    )
    externalized_checkpoint_retention: ExternalizedCheckpointRetention = setting(
        ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS,
        "what a cancelled, failed or suspended job keeps of its completed checkpoints; a finished job keeps none "
        "(execution.checkpointing.externalized-checkpoint-retention)",
    )
    recovery_claim_mode: RecoveryClaimMode = setting(
        RecoveryClaimMode.NO_CLAIM,
        "whether a new JobManager's recovered checkpoints are the job's to discard: "
        "no_claim never discards the files they created, claim once no retained "
        "checkpoint uses them (execution.state-recovery.claim-mode)",
    )

    def __post_init__(self) -> None:  # a caller's strings become the enums
        object.__setattr__(self, "mode", CheckpointingMode.parse(self.mode, "checkpointing.mode"))
        object.__setattr__(
            self,
            "externalized_checkpoint_retention",
            ExternalizedCheckpointRetention(self.externalized_checkpoint_retention),
        )
        object.__setattr__(self, "recovery_claim_mode", RecoveryClaimMode(self.recovery_claim_mode))

    def problem(self) -> tuple[str, str] | None:
        """``(key, problem)`` if the mode cannot run with these settings (``checkpointing_problem``), else None."""
        return checkpointing_problem(self.mode, self.max_concurrent, self.aligned_checkpoint_timeout_ms)

    def checkpoint_options(self) -> CheckpointOptions:
        """A plain checkpoint's options: the mode's exactly-once and unaligned flags and its alignment timeout."""
        return CheckpointOptions.for_config(
            CheckpointType.CHECKPOINT,
            exactly_once=self.mode.exactly_once,
            unaligned_enabled=self.mode.unaligned_enabled,
            aligned_checkpoint_timeout=self.mode.alignment_timeout_ms(self.aligned_checkpoint_timeout_ms),
        )

    def coordinator_configuration(self) -> CheckpointCoordinatorConfiguration:
        """The coordinator's configuration for these settings (Flink's ``StreamingJobGraphGenerator``
        ``.configureCheckpointing``): the one mapping, for both drivers."""
        return CheckpointCoordinatorConfiguration(
            checkpoint_interval=self.interval_ms,
            checkpoint_timeout=self.timeout_ms,
            min_pause_between_checkpoints=self.min_pause_ms,
            max_concurrent_checkpoints=self.max_concurrent,
            tolerable_checkpoint_failure_number=self.tolerable_failures,
            max_retained_checkpoints=self.max_retained,
            retention_policy=self.externalized_checkpoint_retention.retention_policy,
            checkpoint_options=self.checkpoint_options(),
            allow_checkpoints_after_tasks_finished=self.checkpoints_after_tasks_finish,
        )
