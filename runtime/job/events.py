"""What a driver tells the ``JobMaster`` and the ``Dispatcher`` (their one way in, ``handle(event)``): what its tasks
did, the user's operations, and the values the JobMaster handed out coming back (a ``CoordinatorMessage`` of a
``SendToCoordinator`` once carried, a ``JobTimer`` of a ``StartTimer`` once due, ``runtime.job.actions``). Every
value is frozen. Mirrors the RPCs of Flink's ``JobMasterGateway`` (``updateTaskExecutionState``,
``acknowledgeCheckpoint``, ``declineCheckpoint``, ``reportCheckpointMetrics``) and the REST operations."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from barriersim.runtime.failure_reason import CheckpointFailureReason
from barriersim.runtime.faults.fault_schedule import ProtocolPoint
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.job.actions import CoordinatorMessage, CoordinatorRecoveryDue, FaultDue, RestartDue
from barriersim.runtime.task.actions import ReportIncompleteSnapshotStats, TaskCheckpointMetrics

# -- the deployment ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Start:
    """Deploy the job's first attempt (fresh, or restoring the run's savepoint)."""


@dataclass(frozen=True)
class TasksRestored:
    """Every task of deployment ``epoch`` was built and restored its state: they count as running.
    ``source_records_read``: per source subtask (by name), its reader's offset once restored."""

    epoch: int
    restored_in_flight_bytes: int
    source_records_read: Mapping[str, int] | None = None


@dataclass(frozen=True)
class TasksStarted:
    """The tasks of deployment ``epoch`` work."""

    epoch: int


@dataclass(frozen=True)
class TasksRunning:
    """Tasks of deployment ``epoch`` report RUNNING, in order (a ``ReportRunning`` handed back)."""

    epoch: int
    attempts: tuple[ExecutionAttemptID, ...]


@dataclass(frozen=True)
class DeployFailed:
    """A task of deployment ``epoch`` could not be deployed (its process died, or it could not restore)."""

    epoch: int
    cause: str


# -- what the tasks tell -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointAcknowledged:
    attempt: ExecutionAttemptID
    checkpoint_id: int
    snapshot: Any  # the task's TaskStateSnapshot, or None
    metrics: TaskCheckpointMetrics


@dataclass(frozen=True)
class CheckpointDeclined:
    attempt: ExecutionAttemptID
    checkpoint_id: int
    reason: CheckpointFailureReason
    detail: str


@dataclass(frozen=True)
class IncompleteStatsReported:
    """A cancelled or failed task's closed asynchronous part reports its figures."""

    attempt: ExecutionAttemptID
    report: ReportIncompleteSnapshotStats


@dataclass(frozen=True)
class TaskFinished:
    attempt: ExecutionAttemptID


@dataclass(frozen=True)
class TaskFailed:
    """A task died (killed by the fault schedule, or not) or raised."""

    attempt: ExecutionAttemptID
    cause: str


@dataclass(frozen=True)
class TaskCrashedAt:
    """A task stopped itself at a task-side crash point it was deployed with."""

    attempt: ExecutionAttemptID
    point: ProtocolPoint
    checkpoint_id: int


@dataclass(frozen=True)
class SlowdownMet:
    """The ``index``-th slowdown of ``task`` slowed its work (at ``at_ms`` of the job's clock)."""

    task: str
    index: int
    at_ms: int


# -- the user's operations -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TriggerSavepoint:
    """Flink's ``triggerSavepoint`` (canonical format); the job goes on."""


@dataclass(frozen=True)
class StopWithSavepoint:
    """Flink's ``stopWithSavepoint`` (``drain``: ``SAVEPOINT_TERMINATE``, else ``SAVEPOINT_SUSPEND``)."""

    drain: bool


@dataclass(frozen=True)
class CancelJob:
    """Flink's ``cancel``."""


# -- timers --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CoordinatorTimerFired:
    """A timer of the coordinator of JobManager generation ``generation`` fired (``event``: its ``TimerFired``)."""

    generation: int
    event: Any


JobEvent: TypeAlias = (
    Start
    | TasksRestored
    | TasksStarted
    | TasksRunning
    | DeployFailed
    | CheckpointAcknowledged
    | CheckpointDeclined
    | IncompleteStatsReported
    | TaskFinished
    | TaskFailed
    | TaskCrashedAt
    | SlowdownMet
    | TriggerSavepoint
    | StopWithSavepoint
    | CancelJob
    | CoordinatorTimerFired
    | CoordinatorMessage
    | FaultDue
    | RestartDue
    | CoordinatorRecoveryDue
)
