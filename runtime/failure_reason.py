"""Why a checkpoint failed: Flink's ``CheckpointFailureReason``, with its pre-flight flag, its message and
whether it counts against the tolerable-failure threshold (``isCountedAgainstFailureThreshold``, the single
source of truth used by Flink's ``CheckpointFailureManager``).

How this works: a plain enum whose members carry ``(pre_flight, message)``; errors elsewhere in the runtime
(``CheckpointException``) carry one of these members so every abort, decline and expiry is named in Flink's
vocabulary in traces, statistics and tests.
"""

from __future__ import annotations

import enum


class CheckpointFailureReason(enum.Enum):
    PERIODIC_SCHEDULER_SHUTDOWN = (True, "Periodic checkpoint scheduler is shut down.")
    TOO_MANY_CHECKPOINT_REQUESTS = (True, "The maximum number of queued checkpoint requests exceeded")
    MINIMUM_TIME_BETWEEN_CHECKPOINTS = (
        True,
        "The minimum time between checkpoints is still pending. Checkpoint will be triggered after the minimum time.",
    )
    NOT_ALL_REQUIRED_TASKS_RUNNING = (True, "Not all required tasks are currently running.")
    IO_EXCEPTION = (True, "An Exception occurred while triggering the checkpoint. IO-problem detected.")
    BLOCKING_OUTPUT_EXIST = (True, "Blocking output edge exists in running tasks.")
    CHECKPOINT_ASYNC_EXCEPTION = (False, "Asynchronous task checkpoint failed.")
    CHANNEL_STATE_SHARED_STREAM_EXCEPTION = (
        False,
        "The checkpoint was aborted due to exception of other subtasks sharing the ChannelState file.",
    )
    CHECKPOINT_EXPIRED = (False, "Checkpoint expired before completing.")
    CHECKPOINT_SUBSUMED = (False, "Checkpoint has been subsumed.")
    CHECKPOINT_DECLINED = (False, "Checkpoint was declined.")
    CHECKPOINT_DECLINED_TASK_NOT_READY = (False, "Checkpoint was declined (tasks not ready)")
    CHECKPOINT_DECLINED_TASK_CLOSING = (False, "Checkpoint was declined (task is closing)")
    CHECKPOINT_DECLINED_SUBSUMED = (
        False,
        "Checkpoint was canceled because a barrier from newer checkpoint was received.",
    )
    CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER = (False, "Task received cancellation from one of its inputs")
    CHECKPOINT_DECLINED_INPUT_END_OF_STREAM = (False, "Checkpoint was declined because one input stream is finished")
    CHECKPOINT_COORDINATOR_SHUTDOWN = (False, "CheckpointCoordinator shutdown.")
    CHECKPOINT_COORDINATOR_SUSPEND = (False, "Checkpoint Coordinator is suspending.")
    JOB_FAILOVER_REGION = (False, "FailoverRegion is restarting.")
    TASK_FAILURE = (False, "Task has failed.")
    TASK_CHECKPOINT_FAILURE = (False, "Task local checkpoint failure.")
    UNKNOWN_TASK_CHECKPOINT_NOTIFICATION_FAILURE = (False, "Unknown task for the checkpoint to notify.")
    FINALIZE_CHECKPOINT_FAILURE = (False, "Failure to finalize checkpoint.")
    TRIGGER_CHECKPOINT_FAILURE = (False, "Trigger checkpoint failure.")

    @property
    def pre_flight(self) -> bool:
        """True if the failure happened before the checkpoint reached the job's tasks."""
        return self.value[0]

    @property
    def message(self) -> str:
        return self.value[1]

    @property
    def counted_against_failure_threshold(self) -> bool:
        """Flink's ``isCountedAgainstFailureThreshold``."""
        return self in _COUNTED


_COUNTED = frozenset(
    {
        CheckpointFailureReason.IO_EXCEPTION,
        CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION,
        CheckpointFailureReason.CHECKPOINT_DECLINED,
        CheckpointFailureReason.CHECKPOINT_EXPIRED,
        CheckpointFailureReason.FINALIZE_CHECKPOINT_FAILURE,
    }
)


class CheckpointException(Exception):
    """Flink's ``CheckpointException``: a checkpoint failure with its reason (and the checkpoint id when known)."""

    def __init__(self, reason: CheckpointFailureReason, checkpoint_id: int | None = None, detail: str = "") -> None:
        self.reason = reason
        self.checkpoint_id = checkpoint_id
        self.detail = detail
        where = f"checkpoint {checkpoint_id}: " if checkpoint_id is not None else ""
        extra = f" ({detail})" if detail else ""
        super().__init__(f"{where}{reason.name}: {reason.message}{extra}")
