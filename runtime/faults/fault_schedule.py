"""Fault schedules: what goes wrong, when, as immutable named values shared by both backends; malformed ones raise
``FaultScheduleError`` naming the fault and the field. See docs/faults-and-actions.md, "Fault schedules".
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any, Protocol, TypeVar

from barriersim.runtime.faults.tagged_tables import decode_tagged_tables, table_fields, tables_from_json, tables_to_json
from barriersim.runtime.jobgraph import JobGraph
from barriersim.runtime.storage.damage import LIST_DAMAGES, CheckpointDamage, DamageTarget

_F = TypeVar("_F")  # a fault type


class ProtocolPoint(enum.Enum):
    """Where in the checkpoint protocol a task crash happens."""

    BEFORE_FORWARDING_BARRIER = "before_forwarding_barrier"
    MID_ALIGNMENT = "mid_alignment"
    AFTER_SYNC_SNAPSHOT_BEFORE_ACK = "after_sync_snapshot_before_ack"
    AFTER_ACK_BEFORE_COMPLETION_NOTICE = "after_ack_before_completion_notice"
    DURING_RESTORE = "during_restore"
    # JobMaster-side, of a ``crash_task`` only: ``delay_ms`` after the coordinator completed savepoint
    # ``checkpoint_id`` (None: the first savepoint of the run that completes), a failure before the next checkpoint
    AFTER_SAVEPOINT_COMPLETED = "after_savepoint_completed"
    # JobMaster-side, of a ``crash_coordinator`` only: ``delay_ms`` (default 0) after the coordinator completed
    # checkpoint ``checkpoint_id``, whenever a loaded machine lets it complete
    AFTER_CHECKPOINT_COMPLETED = "after_checkpoint_completed"

    @property
    def is_task_side(self) -> bool:
        """Reached inside the task (its input side or its checkpoint steps), not at a message to or from the
        coordinator: the task itself stops there (``runtime.task.crash_points``)."""
        return self in TASK_SIDE_POINTS


TASK_SIDE_POINTS = frozenset({ProtocolPoint.BEFORE_FORWARDING_BARRIER, ProtocolPoint.MID_ALIGNMENT})


class MessageKind(enum.Enum):
    ACKNOWLEDGE = "acknowledge"
    DECLINE = "decline"
    NOTIFY_COMPLETE = "notify_complete"
    NOTIFY_ABORTED = "notify_aborted"


class FaultScheduleError(ValueError):
    """A fault schedule that cannot be used; the message names the fault and the field."""


@dataclass(frozen=True)
class CrashTask:
    """Kill subtask ``task`` at ``at_ms``, or when it reaches ``point`` during checkpoint ``checkpoint_id``; with
    ``after_savepoint_completed``, ``delay_ms`` after that savepoint completed."""

    task: str
    at_ms: int | None = None
    point: ProtocolPoint | None = None
    checkpoint_id: int | None = None
    delay_ms: int | None = None


@dataclass(frozen=True)
class CrashTaskManager:
    """Lose TaskManager ``taskmanager`` (its process dies): every subtask it runs dies at once, at ``at_ms``, or
    when one of them reaches ``point`` during checkpoint ``checkpoint_id``. Flink's JobMaster sees the
    TaskManager's slots released and fails their tasks; the first failure restarts the job, the others are of
    attempts already being cancelled."""

    taskmanager: int
    at_ms: int | None = None
    point: ProtocolPoint | None = None
    checkpoint_id: int | None = None


@dataclass(frozen=True)
class KillNode:
    """Lose node ``node`` of the cluster (the job's placement spreads its TaskManagers over ``cluster.nodes``
    nodes): every TaskManager on it dies at once, at ``at_ms``, or when one of its subtasks reaches ``point``
    during checkpoint ``checkpoint_id``, and the node does not come back, so later deployments place those
    TaskManagers on the surviving nodes. On Ray the node's raylet and worker processes are killed; on the
    simulator it is a ``CrashTaskManager`` of every TaskManager on the node. Node 0 hosts the JobManager and
    cannot be killed."""

    node: int
    at_ms: int | None = None
    point: ProtocolPoint | None = None
    checkpoint_id: int | None = None


@dataclass(frozen=True)
class CrashCoordinator:
    """Kill the checkpoint coordinator at ``at_ms``, or ``delay_ms`` (default 0) after checkpoint ``checkpoint_id``
    completed (``point`` ``after_checkpoint_completed``); it restarts from the completed checkpoint store."""

    at_ms: int | None = None
    point: ProtocolPoint | None = None
    checkpoint_id: int | None = None
    delay_ms: int | None = None


@dataclass(frozen=True)
class DelayMessage:
    """Delay the ``kind`` message of ``task`` for ``checkpoint_id`` (None: every checkpoint) by ``delay_ms``."""

    kind: MessageKind
    delay_ms: int
    task: str | None = None
    checkpoint_id: int | None = None


@dataclass(frozen=True)
class DropMessage:
    """Lose the ``kind`` message of ``task`` (None: any task) for ``checkpoint_id``."""

    kind: MessageKind
    task: str | None = None
    checkpoint_id: int | None = None


@dataclass(frozen=True)
class SlowTask:
    """Multiply ``task``'s per-record processing cost by ``factor`` from ``from_ms`` until ``until_ms``."""

    task: str
    factor: float
    from_ms: int = 0
    until_ms: int | None = None


@dataclass(frozen=True)
class FailStorageWrite:
    """A checkpoint storage write of checkpoint ``checkpoint_id`` fails, and the checkpoint is aborted. Without
    ``task``: the coordinator's ``_metadata`` write at finalization (Flink: ``FINALIZE_CHECKPOINT_FAILURE``);
    with ``task``: that subtask's state write in the asynchronous part of its snapshot, so it declines
    (Flink: ``CHECKPOINT_ASYNC_EXCEPTION``)."""

    checkpoint_id: int
    task: str | None = None


@dataclass(frozen=True)
class DamageCheckpoint:
    """At ``at_ms``, ``damage`` strikes the ``target`` (``metadata``, ``state_file`` or ``directory``) of completed
    checkpoint ``checkpoint_id`` (None: the newest one the completed-checkpoint list names) in the checkpoint
    storage, or the list itself (``completed_list``: ``roll_back`` undoes that checkpoint's completion and every
    later one) (``runtime.storage.damage``); a later read must detect it (e.g. after a ``crash_coordinator``)."""

    at_ms: int
    damage: CheckpointDamage
    target: DamageTarget = DamageTarget.METADATA
    checkpoint_id: int | None = None


@dataclass(frozen=True)
class FailCheckpoints:
    """Checkpoints ``first_checkpoint_id`` .. ``+count-1`` are declined by ``task`` (None: the first source),
    to exercise the tolerable-failure threshold."""

    first_checkpoint_id: int
    count: int
    task: str | None = None


Fault = (
    CrashTask
    | CrashTaskManager
    | KillNode
    | CrashCoordinator
    | DelayMessage
    | DropMessage
    | SlowTask
    | FailStorageWrite
    | FailCheckpoints
    | DamageCheckpoint
)


class PlacementView(Protocol):
    """What the schedule checks of a job's placement (``runtime.job.placement.Placement``)."""

    @property
    def taskmanager_of(self) -> Mapping[tuple[str, int], int]: ...
    @property
    def taskmanagers(self) -> int: ...
    @property
    def nodes(self) -> int: ...
    def node_of_taskmanager(self, taskmanager: int) -> int: ...


GroupCrash = CrashTaskManager | KillNode  # faults that kill every subtask of some TaskManagers at once
GROUP_CRASHES = (CrashTaskManager, KillNode)
CRASHES = (CrashTask, CrashTaskManager, KillNode)  # faults with a time or a protocol point that kill subtasks
FAULT_TYPES: dict[str, type[Fault]] = {
    "crash_task": CrashTask,
    "crash_taskmanager": CrashTaskManager,
    "kill_node": KillNode,
    "crash_coordinator": CrashCoordinator,
    "delay_message": DelayMessage,
    "drop_message": DropMessage,
    "slow_task": SlowTask,
    "fail_storage_write": FailStorageWrite,
    "fail_checkpoints": FailCheckpoints,
    "damage_checkpoint": DamageCheckpoint,
}
_NAME_OF = {cls: name for name, cls in FAULT_TYPES.items()}
_ENUMS = {"point": ProtocolPoint, "kind": MessageKind, "damage": CheckpointDamage, "target": DamageTarget}


def _check(fault: Fault, where: str) -> None:
    def bad(field_name: str, problem: str) -> FaultScheduleError:
        return FaultScheduleError(f"{where}.{field_name}: {problem} (in a {_NAME_OF[type(fault)]} fault)")

    for f in fields(fault):
        value = getattr(fault, f.name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
            raise bad(f.name, f"must be >= 0, got {value}")
    if isinstance(fault, CRASHES):
        if (fault.at_ms is None) == (fault.point is None):
            raise bad("at_ms", "give exactly one of at_ms and point")
        after_savepoint = fault.point is ProtocolPoint.AFTER_SAVEPOINT_COMPLETED
        optional_id = (ProtocolPoint.DURING_RESTORE, ProtocolPoint.AFTER_SAVEPOINT_COMPLETED)
        if fault.point is not None and fault.checkpoint_id is None and fault.point not in optional_id:
            raise bad("checkpoint_id", f"is required with point {fault.point.value}")
        if after_savepoint and not isinstance(fault, CrashTask):
            raise bad("point", "after_savepoint_completed is a point of crash_task faults only")
        if fault.point is ProtocolPoint.AFTER_CHECKPOINT_COMPLETED:
            raise bad("point", "after_checkpoint_completed is a point of crash_coordinator faults only")
        if isinstance(fault, CrashTask) and (fault.delay_ms is not None) != after_savepoint:
            raise bad("delay_ms", "give delay_ms exactly with point after_savepoint_completed")
    if isinstance(fault, CrashCoordinator):
        if (fault.at_ms is None) == (fault.point is None):
            raise bad("at_ms", "give exactly one of at_ms and point")
        if fault.point is not None and fault.point is not ProtocolPoint.AFTER_CHECKPOINT_COMPLETED:
            raise bad("point", f"a crash_coordinator's point is after_checkpoint_completed, got {fault.point.value}")
        if (fault.point is None) != (fault.checkpoint_id is None):
            raise bad("checkpoint_id", "give checkpoint_id exactly with point after_checkpoint_completed")
        if fault.delay_ms is not None and fault.point is None:
            raise bad("delay_ms", "give delay_ms only with point after_checkpoint_completed")
    if isinstance(fault, KillNode) and fault.node == 0:
        raise bad("node", "node 0 hosts the JobManager and cannot be killed (name a node from 1)")
    if isinstance(fault, SlowTask) and fault.factor <= 0:
        raise bad("factor", f"must be > 0, got {fault.factor}")
    if isinstance(fault, SlowTask) and fault.until_ms is not None and fault.until_ms < fault.from_ms:
        raise bad("until_ms", "must not be before from_ms")
    if isinstance(fault, FailCheckpoints) and fault.count < 1:
        raise bad("count", f"must be >= 1, got {fault.count}")
    if isinstance(fault, DamageCheckpoint) and fault.checkpoint_id is not None and fault.checkpoint_id < 1:
        raise bad("checkpoint_id", "checkpoint ids start at 1")
    if (
        isinstance(fault, DamageCheckpoint)
        and fault.damage is CheckpointDamage.FOREIGN_METADATA
        and fault.target is not DamageTarget.METADATA
    ):
        raise bad("target", "foreign_metadata replaces a metadata file")
    if (
        isinstance(fault, DamageCheckpoint)
        and fault.damage is CheckpointDamage.ROLL_BACK
        and fault.target is not DamageTarget.COMPLETED_LIST
    ):
        raise bad("target", "roll_back rolls the completed-checkpoint list back (target completed_list)")
    if (
        isinstance(fault, DamageCheckpoint)
        and fault.target is DamageTarget.COMPLETED_LIST
        and fault.damage not in LIST_DAMAGES
    ):
        raise bad(
            "damage",
            f"{fault.damage.value} does not strike the completed-checkpoint list (its damages: "
            f"{', '.join(sorted(d.value for d in LIST_DAMAGES))})",
        )
    if isinstance(fault, (FailStorageWrite, FailCheckpoints)):
        first = fault.checkpoint_id if isinstance(fault, FailStorageWrite) else fault.first_checkpoint_id
        if first < 1:
            raise bad(
                "checkpoint_id" if isinstance(fault, FailStorageWrite) else "first_checkpoint_id",
                "checkpoint ids start at 1",
            )


def fault_to_plain(fault: Fault) -> dict[str, Any]:
    """One fault as the plain table a scenario file or a replay command gives: ``type`` first, no None fields."""
    d = {"type": _NAME_OF[type(fault)]}
    for key, value in asdict(fault).items():
        if value is not None:
            d[key] = value.value if isinstance(value, enum.Enum) else value
    return d


def _hits(fault: GroupCrash, taskmanager: int | None, node: int | None) -> bool:
    """Whether a group crash strikes TaskManager ``taskmanager`` running on ``node``."""
    if isinstance(fault, CrashTaskManager):
        return fault.taskmanager == taskmanager
    return fault.node == node


def fate_of(message_faults: list[Any]) -> tuple[bool, int]:
    """``(dropped, delay_ms)`` of a message hit by ``message_faults``: any drop loses it, delays add up."""
    drop = any(isinstance(f, DropMessage) for f in message_faults)
    return drop, sum(f.delay_ms for f in message_faults if isinstance(f, DelayMessage))


@dataclass(frozen=True)
class FaultSchedule:
    faults: tuple[Fault, ...] = ()

    def __post_init__(self) -> None:
        for i, fault in enumerate(self.faults):
            if type(fault) not in _NAME_OF:
                raise FaultScheduleError(f"faults[{i}]: not a fault: {fault!r}")
            _check(fault, f"faults[{i}]")

    def __len__(self) -> int:
        return len(self.faults)

    def of_type(self, cls: type[_F]) -> list[_F]:
        return [f for f in self.faults if isinstance(f, cls)]

    # -- how a driver reads the schedule (one reading for the simulator and the Ray backend) -----------

    def message_faults(self, kind: MessageKind, task: str | None, checkpoint_id: int) -> list[Any]:
        """The ``DropMessage`` / ``DelayMessage`` faults that hit the ``kind`` message of ``task`` for
        ``checkpoint_id``."""
        return [
            f
            for f in self.faults
            if isinstance(f, (DropMessage, DelayMessage))
            and f.kind is kind
            and f.task in (None, task)
            and f.checkpoint_id in (None, checkpoint_id)
        ]

    def message_fate(self, kind: MessageKind, task: str | None, checkpoint_id: int) -> tuple[bool, int]:
        """``(dropped, delay_ms)`` of the ``kind`` message of ``task`` for ``checkpoint_id``: delays add up."""
        return fate_of(self.message_faults(kind, task, checkpoint_id))

    def decline_fault(self, task: str, checkpoint_id: int, first_source: str) -> FailCheckpoints | None:
        """The ``FailCheckpoints`` by which ``task`` declines ``checkpoint_id`` (default task: the first source)."""
        for f in self.of_type(FailCheckpoints):
            if (
                f.task or first_source
            ) == task and f.first_checkpoint_id <= checkpoint_id < f.first_checkpoint_id + f.count:
                return f
        return None

    def declines(self, task: str, checkpoint_id: int, first_source: str) -> bool:
        """Whether ``task`` declines ``checkpoint_id`` by a ``FailCheckpoints`` (default task: the first source)."""
        return self.decline_fault(task, checkpoint_id, first_source) is not None

    def storage_write_fault(self, checkpoint_id: int) -> FailStorageWrite | None:
        """The ``FailStorageWrite`` without a task that fails the ``_metadata`` write of ``checkpoint_id``."""
        for f in self.of_type(FailStorageWrite):
            if f.checkpoint_id == checkpoint_id and f.task is None:
                return f
        return None

    def fails_storage_write(self, checkpoint_id: int) -> bool:
        """Whether the ``_metadata`` write of ``checkpoint_id`` fails (a ``FailStorageWrite`` without a task)."""
        return self.storage_write_fault(checkpoint_id) is not None

    def state_write_fault(self, task: str, checkpoint_id: int) -> FailStorageWrite | None:
        """The ``FailStorageWrite`` naming ``task`` that fails its state write for ``checkpoint_id``."""
        for f in self.of_type(FailStorageWrite):
            if f.checkpoint_id == checkpoint_id and f.task == task:
                return f
        return None

    def fails_state_write(self, task: str, checkpoint_id: int) -> bool:
        """Whether ``task``'s state write for ``checkpoint_id`` fails (a ``FailStorageWrite`` naming the task)."""
        return self.state_write_fault(task, checkpoint_id) is not None

    def crash_at(
        self, task: str, point: ProtocolPoint, checkpoint_id: int | None, fired: Collection[Fault]
    ) -> CrashTask | None:
        """The ``CrashTask`` that kills ``task`` at ``point`` of ``checkpoint_id`` (any checkpoint for
        ``during_restore``) and is not in ``fired`` (each fires once per run), else None."""
        for f in self.faults:
            if (
                isinstance(f, CrashTask)
                and f.task == task
                and f.point is point
                and f not in fired
                and (point is ProtocolPoint.DURING_RESTORE or f.checkpoint_id == checkpoint_id)
            ):
                return f
        return None

    def group_crash_at(
        self, taskmanager: int, node: int, point: ProtocolPoint, checkpoint_id: int | None, fired: Collection[Fault]
    ) -> GroupCrash | None:
        """The ``CrashTaskManager`` of ``taskmanager`` or the ``KillNode`` of ``node`` (where that TaskManager runs)
        that strikes when one of its subtasks reaches ``point`` of ``checkpoint_id`` (any checkpoint for
        ``during_restore``) and is not in ``fired``, else None."""
        for f in self.faults:
            if (
                isinstance(f, GROUP_CRASHES)
                and f.point is point
                and f not in fired
                and _hits(f, taskmanager, node)
                and (point is ProtocolPoint.DURING_RESTORE or f.checkpoint_id == checkpoint_id)
            ):
                return f
        return None

    def armed_crash_points(
        self, task: str, fired: Collection[Fault], taskmanager: int | None = None, node: int | None = None
    ) -> frozenset[tuple[ProtocolPoint, int]]:
        """The task-side protocol points (``ProtocolPoint.is_task_side``) at which a deployment of ``task`` must
        stop, as ``(point, checkpoint_id)`` pairs: the schedule's crashes of ``task``, and of its TaskManager
        ``taskmanager`` and node ``node`` when given, that have not fired yet."""
        armed: set[tuple[ProtocolPoint, int]] = set()
        for f in self.faults:
            if (
                isinstance(f, CRASHES)
                and f.point in TASK_SIDE_POINTS
                and f not in fired
                and (f.task == task if isinstance(f, CrashTask) else _hits(f, taskmanager, node))
            ):
                # a point other than during_restore comes with its checkpoint id (_check)
                assert f.point is not None and f.checkpoint_id is not None, f
                armed.add((f.point, f.checkpoint_id))
        return frozenset(armed)

    def check_against(self, graph: JobGraph) -> None:
        """Raise ``FaultScheduleError`` for a fault naming a subtask the job graph (``runtime.jobgraph.JobGraph``)
        does not have, or crashing a task ``mid_alignment`` that has fewer than two input channels (its
        alignment starts and ends with one barrier, so the point is never reached)."""
        subtasks = {f"{v.name}#{i}": (v.name, i) for v in graph.vertices for i in range(v.parallelism)}
        for i, f in enumerate(self.faults):
            task = getattr(f, "task", None)
            if task is None:
                continue
            if task not in subtasks:
                names = list(subtasks)
                shown = ", ".join(names[:8]) + (f", ... ({len(names)} in all)" if len(names) > 8 else "")
                raise FaultScheduleError(f"faults[{i}].task: the job has no subtask {task!r} (its subtasks: {shown})")
            if isinstance(f, CrashTask) and f.point is ProtocolPoint.MID_ALIGNMENT:
                name, index = subtasks[task]
                channels = sum(len(graph.channels_in_gate(name, g, index)) for g in range(len(graph.gates_of(name))))
                if channels < 2:
                    raise FaultScheduleError(
                        f"faults[{i}].point: {task} has {channels} input channel(s), so it is never "
                        f"mid_alignment (only a task with two or more aligns barriers)"
                    )

    def check_against_placement(self, graph: JobGraph, placement: PlacementView) -> None:
        """Raise ``FaultScheduleError`` for a ``crash_taskmanager`` naming a TaskManager the job's placement
        (``runtime.job.placement.Placement``) does not have, a ``kill_node`` naming a node it does not spread
        over, or either crashing ``mid_alignment`` where no subtask of theirs has two or more input channels."""
        aligning = {
            key
            for key in placement.taskmanager_of
            if sum(len(graph.channels_in_gate(key[0], g, key[1])) for g in range(len(graph.gates_of(key[0])))) >= 2
        }
        for i, f in enumerate(self.faults):
            if isinstance(f, CrashTaskManager):
                if f.taskmanager >= placement.taskmanagers:
                    raise FaultScheduleError(
                        f"faults[{i}].taskmanager: the job runs in {placement.taskmanagers} "
                        f"TaskManager(s), numbered from 0, got {f.taskmanager}"
                    )
                members = {key for key, tm in placement.taskmanager_of.items() if tm == f.taskmanager}
            elif isinstance(f, KillNode):
                if placement.nodes < 2 or f.node >= placement.nodes:
                    raise FaultScheduleError(
                        f"faults[{i}].node: the job's TaskManagers are spread over {placement.nodes} node(s) "
                        f"(cluster.nodes), so kill_node needs cluster.nodes >= 2 and a node from 1 to "
                        f"{max(1, placement.nodes - 1)}, got {f.node}"
                    )
                members = {
                    key for key, tm in placement.taskmanager_of.items() if placement.node_of_taskmanager(tm) == f.node
                }
            else:
                continue
            if f.point is ProtocolPoint.MID_ALIGNMENT and not members & aligning:
                raise FaultScheduleError(
                    f"faults[{i}].point: no subtask of its TaskManager(s) has two or more input "
                    f"channels, so none is ever mid_alignment"
                )

    def coordinator_crashes(self) -> list[int]:
        """The times (ms) at which the coordinator crashes, in order (the crashes with a time)."""
        return sorted(f.at_ms for f in self.of_type(CrashCoordinator) if f.at_ms is not None)

    # -- plain values and JSON (for scenario files and replay commands) ------------------------------

    def to_plain(self) -> list[dict[str, Any]]:
        return [fault_to_plain(fault) for fault in self.faults]

    @staticmethod
    def from_plain(items: list[Any], where: str = "faults") -> FaultSchedule:
        return FaultSchedule(
            tuple(
                decode_tagged_tables(
                    items,
                    where,
                    FAULT_TYPES,
                    "fault",
                    FaultScheduleError,
                    f"{where}: must be a list of fault tables",
                    _fault_from_plain,
                )
            )
        )

    def to_json(self) -> str:
        return tables_to_json(self.to_plain())

    @staticmethod
    def from_json(text: str) -> FaultSchedule:
        return FaultSchedule.from_plain(tables_from_json(text, "faults", FaultScheduleError))


def _fault_from_plain(cls: type[Fault], item: dict[str, Any], at: str) -> Fault:
    """One ``[[faults]]`` table of fault class ``cls`` at ``at``, its fields checked."""
    known = {f.name: f for f in fields(cls)}
    kwargs = {}
    for key, value in table_fields(item, known, at, FaultScheduleError):
        if key in _ENUMS:
            try:
                value = _ENUMS[key](value)
            except ValueError:
                choices = ", ".join(m.value for m in _ENUMS[key])
                raise FaultScheduleError(f"{at}.{key}: must be one of {choices}, got {value!r}") from None
        elif key in ("task",):
            if not isinstance(value, str):
                raise FaultScheduleError(f"{at}.{key}: must be a string, got {value!r}")
        elif key == "factor":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise FaultScheduleError(f"{at}.{key}: must be a number, got {value!r}")
            value = float(value)
        elif isinstance(value, bool) or not isinstance(value, int):
            raise FaultScheduleError(f"{at}.{key}: must be an integer, got {value!r}")
        kwargs[key] = value
    try:
        fault = cls(**kwargs)
    except TypeError as e:
        missing = [f for f in known if f not in kwargs and known[f].default is MISSING]
        raise FaultScheduleError(f"{at}.{missing[0] if missing else 'type'}: is required ({e})") from None
    _check(fault, at)
    return fault
