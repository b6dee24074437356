"""The fault schedule applied to a job: ``FaultInjector``, a collaborator of ``JobMaster``. It crashes tasks,
TaskManagers and nodes (at a time, or when a task reaches a protocol point), damages the checkpoint storage, arms
the timed faults, decides the fate of each message (dropped, delayed) and keeps which tasks it killed; the run's
``FaultLog`` counts what fired. docs/job-failover.md has the narrative."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from barriersim.runtime.faults.fault_log import FaultLog
from barriersim.runtime.faults.fault_schedule import (
    CRASHES,
    CrashCoordinator,
    CrashTask,
    CrashTaskManager,
    DamageCheckpoint,
    Fault,
    FaultSchedule,
    GroupCrash,
    KillNode,
    MessageKind,
    ProtocolPoint,
)
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.job.actions import (
    CoordinatorMessage,
    FaultDue,
    KillTask,
    KillTaskManagers,
    SendToCoordinator,
    SendToTask,
    StartTimer,
    SubtaskKey,
    TaskMessage,
    subtask_name,
)
from barriersim.runtime.job.events import SlowdownMet
from barriersim.runtime.job.execution_deployer import ExecutionDeployer
from barriersim.runtime.job.placement import Placement
from barriersim.runtime.storage.checkpoint_storage import CheckpointStorage
from barriersim.runtime.storage.damage import damage_checkpoint
from barriersim.runtime.storage.errors import CheckpointStorageError

# the fault schedule's name of each crash fault, as the trace and the fault log say it
FAULT_NAMES = {CrashTask: "crash_task", CrashTaskManager: "crash_taskmanager", KillNode: "kill_node"}


class FaultInjector:
    """The fault schedule's crashes, damage and message fates (see the module)."""

    def __init__(
        self,
        faults: FaultSchedule,
        placement: Placement,
        *,
        fault_log: FaultLog,
        fired_points: set[Fault],
        deployer: ExecutionDeployer,
        storage: CheckpointStorage,
        job_ms: Callable[[], int],
        job_ended: Callable[[], bool],
        trace: Callable[[str, str], None],
        emit: Callable[[Any], None],
    ):
        """``faults``: the job's ``FaultSchedule``; ``placement``: its TaskManagers' subtasks; ``fault_log`` and
        ``fired_points``: the run's (shared by its jobs); ``deployer``: which tasks run (and die); ``storage``: the
        checkpoint storage a damage strikes."""
        self._faults = faults
        self._placement = placement
        self.fault_log = fault_log
        self._fired_points = fired_points
        self._deployer = deployer
        self._storage = storage
        self._job_ms = job_ms
        self._job_ended = job_ended
        self._trace = trace
        self._emit = emit
        self.killed: list[str] = []  # what the faults killed: "name@attempt" of a task, or "coordinator"

    def record_death(self, what: str) -> None:
        """A task (``name@attempt``) or the coordinator died of a fault."""
        self.killed.append(what)

    def was_killed(self, attempt: ExecutionAttemptID) -> bool:
        return f"{subtask_name((attempt.vertex_id, attempt.subtask_index))}@{attempt.attempt_number}" in self.killed

    # -- timed faults ---------------------------------------------------------------------------------------------

    def arm_timed_faults(self) -> None:
        """The timers of the schedule's faults that have a time, on the run's clock (the first deployment)."""
        faults, now = self._faults, self._job_ms()
        for crash in faults.of_type(CrashTask):
            if crash.at_ms is not None:
                self._emit(StartTimer(max(0, crash.at_ms - now), FaultDue(crash)))
        for fault in faults.faults:
            if isinstance(fault, (CrashTaskManager, KillNode)) and fault.at_ms is not None:
                self._emit(StartTimer(max(0, fault.at_ms - now), FaultDue(fault)))
        timed: list[tuple[int, DamageCheckpoint | CrashCoordinator]] = [
            *((f.at_ms, f) for f in faults.of_type(DamageCheckpoint)),
            *((f.at_ms, f) for f in faults.of_type(CrashCoordinator) if f.at_ms is not None),
        ]
        # stable: a damage before a coordinator crash at the same ms
        for at_ms, timed_fault in sorted(timed, key=lambda pair: pair[0]):
            self._emit(StartTimer(max(0, at_ms - now), FaultDue(timed_fault)))

    def crash_during_restore(self) -> None:
        """A ``during_restore`` crash of the schedule, once per run: at a deployment that restores."""
        for fault in self._faults.faults:
            if (
                isinstance(fault, CRASHES)
                and fault.point is ProtocolPoint.DURING_RESTORE
                and fault not in self._fired_points
            ):
                self._fired_points.add(fault)
                if self.crash_fault(fault, "during_restore"):
                    self.fault_log.fired(fault, self._job_ms())
                break

    def savepoint_completed(self, checkpoint_id: int) -> None:
        """The coordinator completed savepoint ``checkpoint_id``: the crashes due ``delay_ms`` after it
        (``after_savepoint_completed``) are armed, each once per run."""
        self._arm_after(self._faults.of_type(CrashTask), ProtocolPoint.AFTER_SAVEPOINT_COMPLETED, checkpoint_id)

    def checkpoint_completed(self, checkpoint_id: int) -> None:
        """The coordinator completed checkpoint ``checkpoint_id``: the JobManager crashes due ``delay_ms`` after it
        (``after_checkpoint_completed``) are armed, each once per run."""
        self._arm_after(self._faults.of_type(CrashCoordinator), ProtocolPoint.AFTER_CHECKPOINT_COMPLETED, checkpoint_id)

    def _arm_after(
        self, faults: list[CrashTask] | list[CrashCoordinator], point: ProtocolPoint, checkpoint_id: int
    ) -> None:
        """A timer ``delay_ms`` ahead for each of ``faults`` at the JobMaster-side ``point`` of ``checkpoint_id``
        (a fault without an id: of any) that has not fired in this run."""
        for fault in faults:
            if (
                fault.point is point
                and fault.checkpoint_id in (None, checkpoint_id)
                and fault not in self._fired_points
            ):
                self._fired_points.add(fault)
                self._emit(StartTimer(fault.delay_ms or 0, FaultDue(fault)))

    def crash_due(self, fault: CrashTask | GroupCrash) -> None:
        """A crash fault with a time is due (``FaultDue``)."""
        if self.crash_fault(fault, FAULT_NAMES[type(fault)]):
            self.fault_log.fired(fault, self._job_ms())

    def slowdown_met(self, event: SlowdownMet) -> None:
        """The ``index``-th slowdown of ``task`` slowed its work for the first time in a deployment; it fires once
        per run."""
        fault = self._deployer.slowdowns[event.task][event.index]
        if not self.fault_log.times_fired(fault):
            self.fault_log.fired(fault, event.at_ms)

    # -- crashes --------------------------------------------------------------------------------------------------

    def crash_point(self, task: str, point: ProtocolPoint, checkpoint_id: int) -> bool:
        """Crash ``task`` if the fault schedule kills it, its TaskManager or its node at the JobMaster-side
        ``point`` of ``checkpoint_id``."""
        if not self._faults.faults:  # no fault scheduled (the common case): nothing to look up
            return False
        fault: CrashTask | GroupCrash | None = self._faults.crash_at(task, point, checkpoint_id, self._fired_points)
        if fault is None:
            vertex, _, index = task.partition("#")
            fault = self.group_crash_at((vertex, int(index or 0)), point, checkpoint_id)
        if fault is None:
            return False
        self._fired_points.add(fault)
        if self.crash_fault(fault, point.value):
            self.fault_log.fired(fault, self._job_ms())
        return True

    def task_crashed_at(
        self, key: SubtaskKey, point: ProtocolPoint, checkpoint_id: int
    ) -> CrashTask | GroupCrash | None:
        """The fault of a task-side crash point a task reached (a crash of the task, or of its TaskManager or
        node), marked fired; None if none of the schedule's."""
        fault: CrashTask | GroupCrash | None = self._faults.crash_at(
            subtask_name(key), point, checkpoint_id, self._fired_points
        )
        if fault is None:  # armed by a crash of its TaskManager or node: the others of the group die with it
            fault = self.group_crash_at(key, point, checkpoint_id)
        if fault is not None:
            self._fired_points.add(fault)
        return fault

    def group_crash_at(self, key: SubtaskKey, point: ProtocolPoint, checkpoint_id: int | None) -> GroupCrash | None:
        """The TaskManager or node crash of the subtask ``key``'s TaskManager that strikes at ``point``."""
        tm = self._placement.taskmanager_of.get(key)
        if tm is None:
            return None
        return self._faults.group_crash_at(
            tm, self._deployer.taskmanager_nodes[tm], point, checkpoint_id, self._fired_points
        )

    def crash_fault(self, fault: CrashTask | GroupCrash, why: str) -> bool:
        """Carry out a crash fault (of a task, a TaskManager or a node); False if it met no running task."""
        if isinstance(fault, CrashTask):
            return self._crash(fault.task, why)
        return self.crash_group(fault, why)

    def crash_group(self, fault: GroupCrash, why: str, already_dead: SubtaskKey | None = None) -> bool:
        """Kill every running task of the TaskManagers a ``CrashTaskManager`` or ``KillNode`` takes, at once; a
        node kill also loses the node for good. ``already_dead``: the task whose reaching a task-side crash point
        set the fault off (it stopped itself). False (nothing happens) if the job is not running or none of those
        TaskManagers runs a task."""
        deployer = self._deployer
        taskmanagers: tuple[int, ...]
        if isinstance(fault, CrashTaskManager):
            taskmanagers, node = (fault.taskmanager,), None
        else:
            node = fault.node
            taskmanagers = tuple(t for t, n in enumerate(deployer.taskmanager_nodes) if n == node)
        if not deployer.running or self._job_ended():
            return False
        victims = [
            key
            for tm in taskmanagers
            for key in self._placement.subtasks_of(tm)
            if deployer.killable(key) and key != already_dead
        ]
        if not victims and already_dead is None:
            return False
        attempts = tuple(deployer.kill(key) for key in victims)
        for key, attempt in zip(victims, attempts):
            self.killed.append(f"{subtask_name(key)}@{attempt.attempt_number}")
        if node is not None:
            deployer.lose_node(node)
        self._trace("crash-group", f"{FAULT_NAMES[type(fault)]} taskmanagers={list(taskmanagers)} node={node} {why}")
        self._emit(KillTaskManagers(taskmanagers, attempts, node, why))
        return True

    def _crash(self, task: str, why: str) -> bool:
        """Kill ``task`` (its death, once the driver sees it, fails the job over); False (nothing happens) if it is
        unknown, finished, already killed or not running."""
        vertex, _, index = task.partition("#")
        key = (vertex, int(index or 0))
        if not self._deployer.killable(key) or self._job_ended():
            return False
        attempt = self._deployer.kill(key)
        self.killed.append(f"{task}@{attempt.attempt_number}")
        self._emit(KillTask(attempt, why))
        return True

    def damage_checkpoint(self, fault: DamageCheckpoint) -> None:
        """The storage is damaged (fault injection); it fires if there was a checkpoint it could strike."""
        if self._job_ended():
            return
        try:
            checkpoint_id = fault.checkpoint_id
            if checkpoint_id is None:
                listed = self._storage.completed_checkpoint_pointers() or ()
                if not listed:
                    return
                checkpoint_id = listed[-1].checkpoint_id
            what = damage_checkpoint(self._storage, checkpoint_id, fault.damage, fault.target)
        except (CheckpointStorageError, OSError) as err:
            self._trace("damage-missed", str(err))
            return
        self._trace("damage", what)
        self.fault_log.fired(fault, self._job_ms())

    # -- messages -------------------------------------------------------------------------------------------------

    def to_coordinator(
        self, kind: MessageKind | None, task: str, checkpoint_id: int, message: CoordinatorMessage
    ) -> None:
        """A task's message for the coordinator, unless its fault drops it (``kind``: one the schedule can drop or
        delay)."""
        delay_ms = 0
        if kind is not None:
            drop, delay_ms = self.fault_log.message_fate(kind, task, checkpoint_id, self._job_ms())
            if drop:
                self._trace("dropped", f"{kind.value} {task} {checkpoint_id}")
                return
        self._emit(SendToCoordinator(message, delay_ms))

    def to_task(
        self,
        kind: MessageKind | None,
        attempt: ExecutionAttemptID,
        checkpoint_id: int,
        message: TaskMessage,
        delay_ms: int = 0,
    ) -> None:
        """A message for a task, unless its fault drops it; its fault's delay adds to ``delay_ms``."""
        if kind is not None:
            name = subtask_name((attempt.vertex_id, attempt.subtask_index))
            drop, fault_delay_ms = self.fault_log.message_fate(kind, name, checkpoint_id, self._job_ms())
            delay_ms += fault_delay_ms
            if drop:
                self._trace("dropped", f"{kind.value} {name} {checkpoint_id}")
                return
        self._emit(SendToTask(attempt, message, delay_ms))
