"""Task-side crash points: where a fault schedule stops a task inside the checkpoint protocol
(``before_forwarding_barrier``, ``mid_alignment``); an armed point raises ``TaskCrashed`` there.

Mirrors the effect of a TaskManager process dying in the middle of Flink's
``SubtaskCheckpointCoordinatorImpl.checkpointState`` or of a ``SingleCheckpointBarrierHandler`` alignment. See
docs/faults-and-actions.md, "Task-side crash points".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from barriersim.runtime.faults.fault_schedule import ProtocolPoint


class TaskCrashed(Exception):
    """The task reached a protocol point its fault schedule crashes it at; names the task, point and checkpoint."""

    def __init__(self, task: str, point: ProtocolPoint, checkpoint_id: int) -> None:
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

    def __init__(self, task: str, armed: Iterable[tuple[ProtocolPoint, int]] = ()) -> None:
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
