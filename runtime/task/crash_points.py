"""Task-side crash points: where a fault schedule stops a task inside the checkpoint protocol.

How this works: a driver deploys each task with the protocol points at which it must crash
(``FaultSchedule.armed_crash_points``: pairs of a task-side ``ProtocolPoint`` and a checkpoint id). The task's
parts call ``CrashPoints.reached(point, checkpoint_id)`` where the protocol passes such a point:
``before_forwarding_barrier`` in ``SubtaskCheckpointCoordinator.checkpoint_state`` after the operator's
pre-barrier step and before the barrier goes into the result partitions, ``mid_alignment`` in ``StreamTask``
once a barrier of the checkpoint has arrived on some input channels but not on all (the barrier handler's
alignment is running). An armed point raises ``TaskCrashed``, which unwinds the task's call at that very point,
so nothing after it happens (no barrier forwarded, no further input consumed). ``StreamTask`` catches it at its
entry point, fails itself as a dead process does (its partitions are released, so nothing it queued is sent)
and emits ``CrashedAtProtocolPoint`` for its driver, which fails the job over and marks the fault as fired,
exactly as it does for a crash at a coordinator-side point. Unarmed points cost one truth test.

Mirrors the effect of a TaskManager process dying in the middle of Flink's ``SubtaskCheckpointCoordinatorImpl
.checkpointState`` or of a ``SingleCheckpointBarrierHandler`` alignment: the JobMaster sees the task fail
(``Execution.markFailed``) and the failover strategy restarts the job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from barriersim.runtime.faults.fault_schedule import ProtocolPoint


class TaskCrashed(Exception):
    """The task reached a protocol point its fault schedule crashes it at; names the task, point and checkpoint."""

    def __init__(self, task: str, point: ProtocolPoint, checkpoint_id: int):
        super().__init__(f"{task}: crashed at {point.value} of checkpoint {checkpoint_id} (fault schedule)")
        self.task = task
        self.point = point
        self.checkpoint_id = checkpoint_id


@dataclass(frozen=True)
class CrashedAtProtocolPoint:
    """The task's action after ``TaskCrashed``: it is dead; the driver fails the job over."""

    point: ProtocolPoint
    checkpoint_id: int


class CrashPoints:
    """The armed ``(point, checkpoint_id)`` pairs of one task; falsy when none is armed."""

    __slots__ = ("_task", "_armed")

    def __init__(self, task: str, armed: Iterable[tuple[ProtocolPoint, int]] = ()):
        self._task = task
        self._armed = frozenset(armed)
        for point, _ in self._armed:
            if not point.is_task_side:
                raise ValueError(f"{task}: {point.value} is not a task-side protocol point")

    def __bool__(self) -> bool:
        return bool(self._armed)

    def is_armed(self, point: ProtocolPoint) -> bool:
        return any(p is point for p, _ in self._armed)

    def reached(self, point: ProtocolPoint, checkpoint_id: int) -> None:
        """Raise ``TaskCrashed`` if the task crashes at ``point`` of ``checkpoint_id``."""
        if self._armed and (point, checkpoint_id) in self._armed:
            raise TaskCrashed(self._task, point, checkpoint_id)


NO_CRASH_POINTS = CrashPoints("")
