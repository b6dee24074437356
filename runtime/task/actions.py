"""What the subtask checkpoint coordinator asks its driver to do, and the per-checkpoint metrics it reports: frozen
values, returned in the order Flink's task would act (``BroadcastEvent``, ``AcknowledgeCheckpoint``,
``DeclineCheckpoint``, ``SyncSnapshotTaken``, ``AsyncCheckpointStarted``, ``CheckpointSkipped``,
``ReportIncompleteSnapshotStats``).

Mirrors the messages of Flink's ``SubtaskCheckpointCoordinatorImpl`` / ``AsyncCheckpointRunnable``. See
docs/architecture.md, "A subtask's checkpoint steps".
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from barriersim.runtime.events import ChannelElement
from barriersim.runtime.failure_reason import CheckpointFailureReason
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.state.snapshot import TaskStateSnapshot


@dataclass(frozen=True)
class TaskFailed:
    """The task failed on its own (Flink's ``Task.failExternally``: e.g. ``Stop-with-savepoint failed.`` when the
    synchronous savepoint it stopped for was aborted); it is dead, and the driver fails the job over."""

    cause: str


@dataclass(frozen=True)
class TaskFinished:
    """The task finished (its partitions ended); the driver tells the JobMaster (Flink's ``Task`` reaching
    ``FINISHED``)."""

    attempt_id: ExecutionAttemptID


UNSET = -1  # Flink's CheckpointMetrics.UNSET: a figure not known when the metrics were built


@dataclass(frozen=True)
class TaskCheckpointMetrics:
    """Flink's ``CheckpointMetrics`` of one subtask for one checkpoint (durations in ms, sizes in bytes)."""

    checkpoint_id: int
    sync_duration_ms: int = 0
    async_duration_ms: int = 0
    alignment_duration_ms: int = 0
    checkpoint_start_delay_ms: int = 0
    bytes_processed_during_alignment: int = 0
    bytes_persisted_during_alignment: int = 0  # in-flight input data (unaligned)
    persisted_output_bytes: int = 0  # in-flight output data the barrier overtook (unaligned)
    total_bytes_persisted: int = 0  # operator state plus channel state
    unaligned_checkpoint: bool = False  # Flink 1.16+: persisted in-flight data (input or output) > 0, not the options


@dataclass(frozen=True)
class BroadcastEvent:
    """``event`` was added to every subpartition of the task's result partitions (as a priority event that
    overtakes queued data when ``is_priority_event``); ``overtaken_bytes`` is what it overtook."""

    event: ChannelElement
    is_priority_event: bool = False
    overtaken_bytes: int = 0


class AsyncPart(enum.Enum):
    """What runs off the task thread before a subtask acknowledges: the snapshot's asynchronous part (Flink's
    ``AsyncCheckpointRunnable``: the upload of the state) and, for a checkpoint that persisted in-flight data,
    the channel-state write (Flink's ``ChannelStateWriteRequestExecutor`` closing the checkpoint's stream)."""

    SNAPSHOT = "SNAPSHOT"
    CHANNEL_STATE = "CHANNEL_STATE"


@dataclass(frozen=True)
class SyncSnapshotTaken:
    """The synchronous part of ``checkpoint_id`` kept the task thread busy for ``duration_ms`` by the cost model
    (0 where real time passed instead)."""

    checkpoint_id: int
    duration_ms: float


@dataclass(frozen=True)
class AsyncCheckpointStarted:
    """``part`` of ``checkpoint_id`` runs off the task thread now; the driver calls ``complete_async_part`` when it
    has finished: ``delay_ms`` from now by the cost model (on Ray, after the real writes as well)."""

    checkpoint_id: int
    state_size: int
    part: AsyncPart = AsyncPart.SNAPSHOT
    delay_ms: float = 0.0


@dataclass(frozen=True)
class AcknowledgeCheckpoint:
    checkpoint_id: int
    task_state_snapshot: TaskStateSnapshot
    metrics: TaskCheckpointMetrics


@dataclass(frozen=True)
class DeclineCheckpoint:
    checkpoint_id: int
    reason: CheckpointFailureReason
    detail: str = ""


@dataclass(frozen=True)
class ReportIncompleteSnapshotStats:
    """A running asynchronous part closed because its task was cancelled or failed (Flink's
    ``AsyncCheckpointRunnable.close`` -> ``reportAbortedSnapshotStats`` ->
    ``TaskStateManager.reportIncompleteTaskStateSnapshots``): the figures the part had so far, built as
    ``CheckpointMetricsBuilder.buildIncomplete`` builds them, for the checkpoint coordinator's statistics (Flink's
    ``reportCheckpointMetrics``), not an acknowledgement. What was not known yet is Flink's ``UNSET`` (-1): the
    asynchronous duration, the in-flight data persisted (so ``unaligned_checkpoint`` is false), and the bytes
    processed during an alignment that had not ended (its duration then 0: Flink's -1 ns in ms).
    ``state_size``/``checkpointed_size``: the state the part had finished writing, which its close discards."""

    checkpoint_id: int
    metrics: TaskCheckpointMetrics
    state_size: int = 0
    checkpointed_size: int = 0


class SkipReason(enum.Enum):
    OUT_OF_ORDER = "OUT_OF_ORDER"  # a barrier not newer than the last checkpoint this task started
    ABORTED_BEFORE_TRIGGER = "ABORTED_BEFORE_TRIGGER"  # notified aborted before its barrier arrived


@dataclass(frozen=True)
class CheckpointSkipped:
    checkpoint_id: int
    reason: SkipReason


TaskCheckpointAction = (
    BroadcastEvent
    | SyncSnapshotTaken
    | AsyncCheckpointStarted
    | AcknowledgeCheckpoint
    | DeclineCheckpoint
    | CheckpointSkipped
)
