"""The coordinator's vocabulary: the events ``CheckpointCoordinator.handle`` takes (``CoordinatorEvent``) and the
actions it returns (``CoordinatorAction``), every one a frozen dataclass. Drivers carry out the actions in order;
the coordinator's timers come back as ``TimerFired``; whoever runs operator coordinators or master hooks that
answer later delivers their answers. Mirrors the RPCs around Flink's ``CheckpointCoordinator``
(``AcknowledgeCheckpoint``, ``DeclineCheckpoint``, ``Execution.triggerCheckpoint`` / ``notifyCheckpointComplete``
/ ``notifyCheckpointAborted``, ``OperatorCoordinatorCheckpointContext``, ``MasterTriggerRestoreHook``), its public
methods the scheduler calls (restores, the periodic scheduler, aborts, shutdown) and the job status it hears."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from barriersim.runtime.coordinator.properties import JobStatus
from barriersim.runtime.events import CheckpointOptions, CheckpointType
from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.state.snapshot import CheckpointMetadata, SharedStateHandle, TaskStateSnapshot

# -- events in ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TriggerRequest:
    """A user (or test) asks for a checkpoint or savepoint. ``forced`` None: Flink's choice (a savepoint is forced
    unless unaligned checkpoints are enabled; a checkpoint takes the configured properties, not forced)."""

    checkpoint_type: CheckpointType = CheckpointType.CHECKPOINT
    request_id: int | None = None
    is_periodic: bool = False
    forced: bool | None = None


@dataclass(frozen=True)
class AcknowledgeCheckpoint:
    job_id: str
    attempt_id: ExecutionAttemptID
    checkpoint_id: int
    subtask_state: TaskStateSnapshot | None = None
    metrics: Any = None


@dataclass(frozen=True)
class ReportCheckpointMetrics:
    """A task's figures for a checkpoint it will not acknowledge: its asynchronous part was closed when the task
    was cancelled or failed (Flink's ``CheckpointCoordinator.reportCheckpointMetrics`` from
    ``reportIncompleteTaskStateSnapshots``). Only the statistics take it."""

    job_id: str
    attempt_id: ExecutionAttemptID
    checkpoint_id: int
    metrics: Any
    state_size: int = 0
    checkpointed_size: int = 0


@dataclass(frozen=True)
class DeclineCheckpoint:
    job_id: str
    attempt_id: ExecutionAttemptID
    checkpoint_id: int
    exception: CheckpointException


@dataclass(frozen=True)
class AcknowledgeCoordinatorState:
    """An operator coordinator's state for a checkpoint (``None``: stateless)."""

    checkpoint_id: int
    operator_id: str
    state: bytes | None = None


@dataclass(frozen=True)
class CoordinatorCheckpointFailed:
    """An operator coordinator could not checkpoint (Flink: the future of its ``checkpointCoordinator`` call
    failed): the checkpoint being triggered fails as ``TRIGGER_CHECKPOINT_FAILURE``."""

    checkpoint_id: int
    operator_id: str
    detail: str = ""


@dataclass(frozen=True)
class MasterHookCompleted:
    """A master hook that answered ``trigger_checkpoint`` with ``MASTER_STATE_PENDING`` finished: with its state
    (``data``; None: nothing to store) or, if ``failure`` is set, with an error (Flink: the future the hook
    returned completes, normally or exceptionally)."""

    checkpoint_id: int
    identifier: str
    data: bytes | None = None
    failure: str | None = None


class TimerKind(enum.Enum):
    PERIODIC_TRIGGER = "PERIODIC_TRIGGER"
    CHECKPOINT_TIMEOUT = "CHECKPOINT_TIMEOUT"
    METADATA_WRITTEN = "METADATA_WRITTEN"  # the modelled time of a checkpoint's _metadata write has passed
    TRIGGER_FAILURE = "TRIGGER_FAILURE"  # the timer's next turn after a checkpoint being triggered was aborted


@dataclass(frozen=True)
class TimerFired:
    kind: TimerKind
    token: int  # the scheduler generation for PERIODIC_TRIGGER, else the checkpoint id


@dataclass(frozen=True)
class TaskDeploying:
    """A task of a new deployment is being deployed (Flink's SCHEDULED -> DEPLOYING)."""

    attempt_id: ExecutionAttemptID


@dataclass(frozen=True)
class TaskRunning:
    attempt_id: ExecutionAttemptID


@dataclass(frozen=True)
class TaskFinished:
    attempt_id: ExecutionAttemptID


@dataclass(frozen=True)
class TaskFailed:
    """A task failed and the job fails over (every task is restarted): the failed attempt ends FAILED, the others
    CANCELED. The new attempts and the restore come with ``RestartTasks``, after the restart delay."""

    attempt_id: ExecutionAttemptID
    cause: str = ""


@dataclass(frozen=True)
class RestartTasks:
    """The restart delay after a failover has passed (Flink's ``DefaultScheduler.restartTasks``): every task gets a
    new attempt, the pending checkpoints are aborted and the latest completed checkpoint is restored."""


@dataclass(frozen=True)
class JobStatusChanged:
    status: JobStatus


@dataclass(frozen=True)
class RestoreLatestCheckpoint:
    """Restore the latest completed checkpoint (Flink's ``restoreLatestCheckpointedStateToAll``): ``RestoreFrom``
    it, or ``RestoreFrom(None)`` when there is none (a JobManager's recovery)."""

    allow_non_restored_state: bool = False


@dataclass(frozen=True)
class RestoreSavepoint:
    """Restore the savepoint or retained checkpoint at ``path``, its ``_metadata`` read by ``loader(path)`` (Flink's
    ``restoreSavepoint``)."""

    path: str
    loader: Callable[[str], CheckpointMetadata]
    allow_non_restored_state: bool = False


@dataclass(frozen=True)
class StartCheckpointScheduler:
    """Flink's ``startCheckpointScheduler``."""


@dataclass(frozen=True)
class StopCheckpointScheduler:
    """Flink's ``stopCheckpointScheduler``: the pending checkpoints and queued requests are aborted."""


@dataclass(frozen=True)
class AbortPendingCheckpoints:
    """Flink's ``abortPendingCheckpoints``: every pending checkpoint fails with ``exception``."""

    exception: CheckpointException


@dataclass(frozen=True)
class Shutdown:
    """Flink's ``shutdown`` (the job reached ``job_status``): nothing is triggered or completed any more."""

    job_status: JobStatus


CoordinatorEvent: TypeAlias = (
    TriggerRequest
    | AcknowledgeCheckpoint
    | DeclineCheckpoint
    | ReportCheckpointMetrics
    | AcknowledgeCoordinatorState
    | CoordinatorCheckpointFailed
    | MasterHookCompleted
    | TimerFired
    | TaskDeploying
    | TaskRunning
    | TaskFinished
    | TaskFailed
    | RestartTasks
    | JobStatusChanged
    | RestoreLatestCheckpoint
    | RestoreSavepoint
    | StartCheckpointScheduler
    | StopCheckpointScheduler
    | AbortPendingCheckpoints
    | Shutdown
)

# -- actions out -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TriggerCheckpointOnSources:
    """Send the trigger (barrier injection) to ``tasks`` (the plan's tasks to trigger)."""

    checkpoint_id: int
    timestamp: int
    options: CheckpointOptions
    tasks: tuple[ExecutionAttemptID, ...]


@dataclass(frozen=True)
class TriggerCoordinatorCheckpoint:
    """Ask the operator coordinator of ``operator_id`` for its state in checkpoint ``checkpoint_id`` (Flink's
    ``OperatorCoordinatorCheckpointContext.checkpointCoordinator``). It answers with ``AcknowledgeCoordinatorState``
    or ``CoordinatorCheckpointFailed``; the tasks are triggered once every coordinator has answered."""

    operator_id: str
    checkpoint_id: int


@dataclass(frozen=True)
class AbortCoordinatorTriggering:
    """A trigger failed: the operator coordinator stops waiting for it (Flink's ``abortCurrentTriggering``)."""

    operator_id: str


@dataclass(frozen=True)
class NotifyCheckpointComplete:
    task: ExecutionAttemptID
    checkpoint_id: int
    last_subsumed_id: int
    timestamp: int = 0


@dataclass(frozen=True)
class NotifyCheckpointAborted:
    task: ExecutionAttemptID
    checkpoint_id: int
    latest_completed_checkpoint_id: int
    timestamp: int = 0


@dataclass(frozen=True)
class NotifyCoordinatorCheckpointComplete:
    """Tell the operator coordinator of ``operator_id`` that checkpoint ``checkpoint_id`` completed (Flink's
    ``OperatorCoordinatorCheckpointContext.notifyCheckpointComplete``)."""

    operator_id: str
    checkpoint_id: int


@dataclass(frozen=True)
class NotifyCoordinatorCheckpointAborted:
    """Tell the operator coordinator of ``operator_id`` that checkpoint ``checkpoint_id`` was aborted (Flink's
    ``OperatorCoordinatorCheckpointContext.notifyCheckpointAborted``)."""

    operator_id: str
    checkpoint_id: int


@dataclass(frozen=True)
class PersistCheckpoint:
    """Write the ``_metadata`` of a completed checkpoint or savepoint (storage's job)."""

    metadata: CheckpointMetadata
    is_savepoint: bool = False


class DiscardReason(enum.Enum):
    SUBSUMED = "SUBSUMED"  # dropped from the completed store
    ABORTED = "ABORTED"  # a pending checkpoint failed: discard what its tasks already wrote
    SHUTDOWN = "SHUTDOWN"  # the job terminated and the retention policy does not keep it


@dataclass(frozen=True)
class DiscardCheckpoint:
    checkpoint_id: int
    reason: DiscardReason


@dataclass(frozen=True)
class DiscardSharedState:
    """Shared files no retained checkpoint uses any more (the ``SharedStateRegistry`` released them after
    checkpoint ``lowest_retained`` became the oldest retained one, or at the job's end): delete them."""

    handles: tuple[SharedStateHandle, ...]
    lowest_retained: int


@dataclass(frozen=True)
class DiscardSubtaskState:
    """A late or unknown acknowledgement's state is not needed: discard it (Flink's ``discardSubtaskState``)."""

    task: ExecutionAttemptID
    checkpoint_id: int


@dataclass(frozen=True)
class AcknowledgementRejected:
    """An acknowledgement whose shared state could not be registered (a placeholder for a file the registry no
    longer holds: the late acknowledgement of a checkpoint subsumed meanwhile) was dropped. Flink's
    ``receiveAcknowledgeMessage`` throws and its JobMaster logs "Error while processing checkpoint acknowledgement
    message"."""

    task: ExecutionAttemptID
    checkpoint_id: int
    detail: str


@dataclass(frozen=True)
class FailJob:
    """Fail the job over (checkpoint failures exceeded the tolerable number, or a stop-with-savepoint failed)."""

    reason: CheckpointFailureReason
    message: str
    failing_task: ExecutionAttemptID | None = None


@dataclass(frozen=True)
class StopJob:
    """A synchronous savepoint completed: the job now finishes (``drain``: SAVEPOINT_TERMINATE)."""

    savepoint_id: int
    drain: bool


@dataclass(frozen=True)
class RestoreFrom:
    """Deploy the new task attempts from this checkpoint (``None``: start fresh)."""

    checkpoint_id: int | None
    metadata: CheckpointMetadata | None
    is_savepoint: bool = False
    allow_non_restored_state: bool = False


@dataclass(frozen=True)
class TriggerRequestCompleted:
    request_id: int | None
    checkpoint_id: int


@dataclass(frozen=True)
class TriggerRequestFailed:
    request_id: int | None
    checkpoint_id: int | None
    reason: CheckpointFailureReason


CoordinatorAction: TypeAlias = (
    TriggerCheckpointOnSources
    | TriggerCoordinatorCheckpoint
    | AbortCoordinatorTriggering
    | NotifyCheckpointComplete
    | NotifyCheckpointAborted
    | NotifyCoordinatorCheckpointComplete
    | NotifyCoordinatorCheckpointAborted
    | PersistCheckpoint
    | DiscardCheckpoint
    | DiscardSharedState
    | DiscardSubtaskState
    | AcknowledgementRejected
    | FailJob
    | StopJob
    | RestoreFrom
    | TriggerRequestCompleted
    | TriggerRequestFailed
)
