"""What the JobMaster asks its driver to do (``JobMaster.handle`` returns a list of these, carried out in order),
and the timers and messages it hands out, which come back to ``handle`` as events: a ``SendToCoordinator``'s
``CoordinatorMessage`` after the driver's transport time, a ``StartTimer``'s ``JobTimer`` when it is due. Every value
is frozen; none holds a callback. ``DeployTasks``, ``KillTask``, ``KillTaskManagers`` and ``CancelTasks`` start and
end tasks; ``ReportRunning`` hands the other RUNNING reports of a deployment back (``TasksRunning``) once what is due
at this instant ran; ``SendToTask`` carries a message to an attempt, delivered only if
``is_current(attempt)`` still holds then; ``JobEnded``: nothing more will happen. docs/architecture.md ("The
drivers") says how each driver carries them out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeAlias, TypeVar

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.events import CheckpointOptions
from barriersim.runtime.faults.fault_schedule import Fault, ProtocolPoint, SlowTask
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.job.config import JobConfig, JobOutcome
from barriersim.runtime.state.snapshot import CheckpointMetadata, TaskStateSnapshot

SubtaskKey = tuple[str, int]  # (vertex name, subtask index)


def subtask_name(key: SubtaskKey) -> str:
    """A subtask as the fault schedule and the statistics name it: ``vertex#index``."""
    return f"{key[0]}#{key[1]}"


# -- deploying ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskDeploymentDescriptor:
    """One subtask's deployment: its attempt, the state it restores (None: fresh), the task-side protocol points
    at which it must crash (``FaultSchedule.armed_crash_points``), its slowdowns (the fault schedule's
    ``SlowTask`` values for it, in the schedule's order) and, for a source, the splits it reads (its own index
    when fresh; after a restore the splits its state names). Mirrors Flink's ``TaskDeploymentDescriptor``."""

    attempt: ExecutionAttemptID
    state: TaskStateSnapshot | None = None
    crash_points: tuple[tuple[ProtocolPoint, int], ...] = ()
    slowdowns: tuple[SlowTask, ...] = ()
    source_splits: tuple[int, ...] = ()

    @property
    def key(self) -> SubtaskKey:
        return (self.attempt.vertex_id, self.attempt.subtask_index)

    @property
    def name(self) -> str:
        return subtask_name(self.key)


@dataclass(frozen=True)
class DeployTasks:
    """Deployment ``epoch`` of the job whose settings are ``config`` (a restored job may have another graph than the
    run's first): its tasks, the checkpoint they restore, and the node (``runtime.job.placement``) each TaskManager
    runs on, in TaskManager order."""

    epoch: int
    tasks: tuple[TaskDeploymentDescriptor, ...]
    restored_checkpoint_id: int | None = None
    restored_metadata: CheckpointMetadata | None = None
    config: JobConfig | None = None
    taskmanager_nodes: tuple[int, ...] = (0,)


@dataclass(frozen=True)
class KillTask:
    """The fault schedule kills this attempt (``why``: the fault). The driver kills it and reports its death with
    ``TaskFailed`` when it sees it (the simulator at once; on Ray, when the actor's ``run`` call fails)."""

    attempt: ExecutionAttemptID
    why: str


@dataclass(frozen=True)
class KillTaskManagers:
    """The fault schedule loses TaskManagers ``taskmanagers``: every attempt in ``attempts`` (their running tasks)
    dies at once. ``node``: they go because that node of the cluster goes (``kill_node``; the Ray driver kills the
    node's processes, so its tasks die with it), else None (``crash_taskmanager``: the driver kills the tasks).
    The driver reports the deaths with ``TaskFailed`` when it sees them; the first fails the job over, the
    others are then of a cancelled deployment."""

    taskmanagers: tuple[int, ...]
    attempts: tuple[ExecutionAttemptID, ...]
    node: int | None
    why: str


@dataclass(frozen=True)
class ReportRunning:
    """Tasks of deployment ``epoch`` that report RUNNING after the first one did (``TasksStarted``):
    Flink's tasks report one RPC each, over some milliseconds, so what the first report set off at once (a periodic
    trigger it started with no delay) runs before the others arrive. The driver hands them back with
    ``TasksRunning`` after what is due now (the simulator: at the same instant, after the timers; Ray:
    on a later turn of the loop)."""

    epoch: int
    attempts: tuple[ExecutionAttemptID, ...]


@dataclass(frozen=True)
class CancelTasks:
    """Every task of deployment ``epoch`` dies at once (global failover, or a JobManager failover)."""

    epoch: int


# -- messages ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TriggerCheckpoint:
    """Flink's ``triggerCheckpoint`` RPC to a source task."""

    checkpoint_id: int
    timestamp: int
    options: CheckpointOptions


@dataclass(frozen=True)
class NotifyCheckpointComplete:
    checkpoint_id: int


@dataclass(frozen=True)
class NotifyCheckpointAborted:
    checkpoint_id: int
    latest_completed_checkpoint_id: int


TaskMessage: TypeAlias = TriggerCheckpoint | NotifyCheckpointComplete | NotifyCheckpointAborted


@dataclass(frozen=True)
class SendToTask:
    attempt: ExecutionAttemptID
    message: TaskMessage
    delay_ms: int = 0


@dataclass(frozen=True)
class CoordinatorMessage:
    """A task's message for the coordinator of ``generation`` (lost if that coordinator has died meanwhile)."""

    generation: int
    event: m.AcknowledgeCheckpoint | m.DeclineCheckpoint | m.ReportCheckpointMetrics


_Message = TypeVar("_Message")
_Timer = TypeVar("_Timer")


@dataclass(frozen=True)
class SendToCoordinator(Generic[_Message]):
    message: _Message  # a CoordinatorMessage (a Dispatcher hands it out wrapped: its JobScoped)
    delay_ms: int = 0


# -- timers ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FaultDue:
    """A fault of the schedule with a time (``CrashTask`` with ``at_ms``, ``CrashCoordinator``) is due."""

    fault: Fault


@dataclass(frozen=True)
class RestartDue:
    """The restart delay after the failover that ended deployment ``epoch - 1`` has passed."""

    epoch: int


@dataclass(frozen=True)
class CoordinatorRecoveryDue:
    """The restart delay after a JobManager failover has passed: a new coordinator recovers."""

    epoch: int


JobTimer: TypeAlias = FaultDue | RestartDue | CoordinatorRecoveryDue


@dataclass(frozen=True)
class StartTimer(Generic[_Timer]):
    delay_ms: int
    timer: _Timer  # a JobTimer (a Dispatcher hands it out wrapped, and its own: JobScoped, ActionDue)


@dataclass(frozen=True)
class JobEnded:
    outcome: JobOutcome


JobAction: TypeAlias = (
    DeployTasks
    | ReportRunning
    | KillTask
    | KillTaskManagers
    | CancelTasks
    | SendToTask
    | SendToCoordinator[CoordinatorMessage]
    | StartTimer[JobTimer]
    | JobEnded
)
