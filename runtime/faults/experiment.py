"""Experiment actions: what a user does to a running job (savepoint, stop with savepoint, cancel, restore with a new
parallelism), scheduled like faults, the same on both backends.

Mirrors Flink's REST/CLI operations ``triggerSavepoint``, ``stopWithSavepoint``, ``cancel`` and job submission with
``SavepointRestoreSettings``. See docs/faults-and-actions.md, "Experiment actions".
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any, TypeAlias

from barriersim.runtime.faults.tagged_tables import decode_tagged_tables, table_fields, tables_from_json, tables_to_json
from barriersim.runtime.jobgraph import JobGraph, JobGraphError


class ActionScheduleError(ValueError):
    """An action schedule that cannot be used; the message names the action and the field."""


class SavepointFormatType(enum.Enum):
    """Flink's ``SavepointFormatType``; barriersim writes the canonical format only."""

    CANONICAL = "canonical"


class RestoreSource(enum.Enum):
    SAVEPOINT = "savepoint"  # the latest savepoint of the run
    CHECKPOINT = "checkpoint"  # the latest checkpoint the cancelled job retained


@dataclass(frozen=True)
class Savepoint:
    at_ms: int
    format: SavepointFormatType = SavepointFormatType.CANONICAL


@dataclass(frozen=True)
class StopWithSavepoint:
    at_ms: int
    drain: bool = False


@dataclass(frozen=True)
class Cancel:
    at_ms: int


ParallelismChanges: TypeAlias = Mapping[str, int] | Iterable[tuple[str, int]]  # vertex -> new parallelism


def _frozen_parallelism(parallelism: ParallelismChanges | None) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(dict(parallelism).items())) if parallelism else ()


@dataclass(frozen=True, init=False)
class Restore:
    """A new job restored from the run's latest savepoint or retained checkpoint, some vertices rescaled."""

    source: RestoreSource
    parallelism: tuple[tuple[str, int], ...]  # sorted (vertex, parallelism) pairs
    allow_non_restored_state: bool

    def __init__(
        self,
        source: RestoreSource = RestoreSource.SAVEPOINT,
        parallelism: ParallelismChanges | None = (),
        allow_non_restored_state: bool = False,
    ) -> None:
        """``parallelism``: vertex -> new parallelism, a mapping or pairs."""
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "parallelism", _frozen_parallelism(parallelism))
        object.__setattr__(self, "allow_non_restored_state", allow_non_restored_state)


@dataclass(frozen=True, init=False)
class RestoreSettings:
    """The run starts from ``path`` (a savepoint or retained checkpoint directory, or its ``_metadata``), some
    vertices rescaled (Flink's ``SavepointRestoreSettings``)."""

    path: str
    parallelism: tuple[tuple[str, int], ...]  # sorted (vertex, parallelism) pairs
    allow_non_restored_state: bool

    def __init__(
        self, path: str, parallelism: ParallelismChanges | None = (), allow_non_restored_state: bool = False
    ) -> None:
        """``parallelism``: vertex -> new parallelism, a mapping or pairs."""
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "parallelism", _frozen_parallelism(parallelism))
        object.__setattr__(self, "allow_non_restored_state", allow_non_restored_state)

    def to_plain(self) -> dict[str, Any]:
        d: dict[str, Any] = {"from": self.path}
        if self.parallelism:
            d["parallelism"] = dict(self.parallelism)
        if self.allow_non_restored_state:
            d["allow_non_restored_state"] = True
        return d

    @staticmethod
    def from_plain(item: object, where: str = "restore") -> RestoreSettings:
        if not isinstance(item, dict):
            raise ActionScheduleError(f"{where}: must be a table with from (a path) and parallelism")
        unknown = sorted(set(item) - {"from", "parallelism", "allow_non_restored_state"})
        if unknown:
            raise ActionScheduleError(
                f"{where}.{unknown[0]}: unknown key (known: from, parallelism, allow_non_restored_state)"
            )
        path = item.get("from")
        if not isinstance(path, str) or not path:
            raise ActionScheduleError(f"{where}.from: must be the path of a savepoint or checkpoint, got {path!r}")
        return RestoreSettings(
            path,
            _parallelism(item.get("parallelism", {}), f"{where}.parallelism"),
            _bool(item.get("allow_non_restored_state", False), f"{where}.allow_non_restored_state"),
        )


TimedAction: TypeAlias = Savepoint | StopWithSavepoint | Cancel  # on a job at its at_ms
Action: TypeAlias = TimedAction | Restore
ACTION_TYPES: dict[str, type[Action]] = {
    "savepoint": Savepoint,
    "stop_with_savepoint": StopWithSavepoint,
    "cancel": Cancel,
    "restore": Restore,
}
_NAME_OF = {cls: name for name, cls in ACTION_TYPES.items()}
TERMINATING = (StopWithSavepoint, Cancel)


def action_name(action: Action) -> str:
    return _NAME_OF[type(action)]


def action_to_plain(action: Action) -> dict[str, Any]:
    """One action as the plain table a scenario file gives: ``type`` first."""
    d: dict[str, Any] = {"type": _NAME_OF[type(action)]}
    for f in fields(action):
        value = getattr(action, f.name)
        if isinstance(action, Restore):
            if f.name == "source":
                d["from"] = value.value
            elif f.name == "parallelism":
                if value:
                    d["parallelism"] = dict(value)
            elif value:
                d[f.name] = value
            continue
        d[f.name] = value.value if isinstance(value, enum.Enum) else value
    return d


def _parallelism(value: object, where: str) -> tuple[tuple[str, int], ...]:
    if not isinstance(value, dict):
        raise ActionScheduleError(f"{where}: must be a table of vertex = parallelism, got {value!r}")
    for vertex, p in value.items():
        if isinstance(p, bool) or not isinstance(p, int) or p < 1:
            raise ActionScheduleError(f"{where}.{vertex}: must be an integer >= 1, got {p!r}")
    return _frozen_parallelism(value)


def _bool(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise ActionScheduleError(f"{where}: must be true or false, got {value!r}")
    return value


def rescaled(graph: JobGraph, parallelism: ParallelismChanges, where: str = "parallelism") -> JobGraph:
    """``graph`` with new parallelisms (vertex -> parallelism), validated: ``ActionScheduleError`` naming
    ``where`` for an unknown vertex, a parallelism above the vertex's max parallelism or a graph that cannot run."""
    changes = dict(parallelism)
    names = {v.name for v in graph.vertices}
    for vertex, p in changes.items():
        if vertex not in names:
            raise ActionScheduleError(
                f"{where}.{vertex}: the job has no vertex {vertex!r} (its vertices: "
                f"{', '.join(v.name for v in graph.vertices)})"
            )
        v = graph.vertex(vertex)
        if p > v.max_parallelism:
            raise ActionScheduleError(
                f"{where}.{vertex}: parallelism {p} is above the vertex's max parallelism "
                f"{v.max_parallelism} (its key groups)"
            )
    new = JobGraph(
        tuple(dataclasses.replace(v, parallelism=changes.get(v.name, v.parallelism)) for v in graph.vertices),
        graph.edges,
    )
    try:
        return new.validate()
    except JobGraphError as err:
        raise ActionScheduleError(f"{where}: {err}") from None


@dataclass(frozen=True)
class ActionSchedule:
    actions: tuple[Action, ...] = ()

    def __post_init__(self) -> None:
        for i, action in enumerate(self.actions):
            if type(action) not in _NAME_OF:
                raise ActionScheduleError(f"actions[{i}]: not an action: {action!r}")
            at_ms = getattr(action, "at_ms", 0)
            if isinstance(at_ms, bool) or not isinstance(at_ms, int) or at_ms < 0:
                raise ActionScheduleError(f"actions[{i}].at_ms: must be an integer >= 0, got {at_ms!r}")
        self._check_order()

    def __len__(self) -> int:
        return len(self.actions)

    def __iter__(self) -> Iterator[Action]:
        return iter(self.actions)

    def _check_order(self) -> None:
        terminated: int | None = None  # index of the action that ends the current job
        for i, action in enumerate(self.actions):
            where = f"actions[{i}]"
            if isinstance(action, Restore):
                if terminated is None:
                    raise ActionScheduleError(
                        f"{where}: a restore must follow a stop_with_savepoint or a cancel of the job before it"
                    )
                ender = self.actions[terminated]
                if action.source is RestoreSource.CHECKPOINT and not isinstance(ender, Cancel):
                    raise ActionScheduleError(
                        f"{where}.from: a stopped job keeps no checkpoint (stop-with-savepoint ends it FINISHED); "
                        f'restore from = "savepoint", or cancel it'
                    )
                if action.source is RestoreSource.SAVEPOINT and not any(
                    isinstance(a, (Savepoint, StopWithSavepoint)) for a in self.actions[:i]
                ):
                    raise ActionScheduleError(
                        f"{where}.from: no savepoint is taken before it (add a savepoint action before "
                        f'actions[{terminated}], or restore from = "checkpoint")'
                    )
                terminated = None
            elif terminated is not None:
                raise ActionScheduleError(
                    f"{where}: the job was already ended by actions[{terminated}] "
                    f"({action_name(self.actions[terminated])}); only a restore may follow"
                )
            elif isinstance(action, TERMINATING):
                terminated = i

    def jobs(self) -> list[tuple[Restore | None, tuple[TimedAction, ...]]]:
        """The run's jobs in order: (the restore that starts it, None for the first; its timed actions)."""
        out: list[tuple[Restore | None, list[TimedAction]]] = [(None, [])]
        for action in self.actions:
            if isinstance(action, Restore):
                out.append((action, []))
            else:
                out[-1][1].append(action)
        return [(restore, tuple(actions)) for restore, actions in out]

    @property
    def restores(self) -> list[Restore]:
        return [a for a in self.actions if isinstance(a, Restore)]

    def graphs(self, graph: JobGraph, where: str = "actions") -> list[JobGraph]:
        """The job graph of each job of the run (parallelism changes accumulate), validated."""
        graphs = [graph]
        for i, action in enumerate(self.actions):
            if isinstance(action, Restore):
                graphs.append(rescaled(graphs[-1], action.parallelism, f"{where}[{i}].parallelism"))
        return graphs

    def check_against(self, graph: JobGraph, retains_on_cancellation: bool) -> None:
        """Every restore's parallelism must fit the job (``rescaled``); a restore from a retained checkpoint needs
        externalized checkpoints retained on cancellation."""
        self.graphs(graph)
        for i, action in enumerate(self.actions):
            if (
                isinstance(action, Restore)
                and action.source is RestoreSource.CHECKPOINT
                and not retains_on_cancellation
            ):
                raise ActionScheduleError(
                    f"actions[{i}].from: a cancelled job retains no checkpoint unless "
                    f'checkpointing.externalized_checkpoint_retention = "RETAIN_ON_CANCELLATION"'
                )

    # -- plain values and JSON --------------------------------------------------------------------------

    def to_plain(self) -> list[dict[str, Any]]:
        return [action_to_plain(a) for a in self.actions]

    @staticmethod
    def from_plain(items: object, where: str = "actions") -> ActionSchedule:
        actions = decode_tagged_tables(
            items,
            where,
            ACTION_TYPES,
            "action",
            ActionScheduleError,
            f"{where}: must be a list of action tables ([[{where}]])",
            _action_from_plain,
        )
        try:
            return ActionSchedule(tuple(actions))
        except ActionScheduleError as err:
            raise ActionScheduleError(str(err).replace("actions[", f"{where}[", 1)) from None

    def to_json(self) -> str:
        return tables_to_json(self.to_plain())

    @staticmethod
    def from_json(text: str) -> ActionSchedule:
        return ActionSchedule.from_plain(tables_from_json(text, "actions", ActionScheduleError))


def _action_from_plain(cls: type[Action], item: Mapping[str, Any], at: str) -> Action:
    known = ["from", "parallelism", "allow_non_restored_state"] if cls is Restore else [f.name for f in fields(cls)]
    kwargs = {}
    for key, value in table_fields(item, known, at, ActionScheduleError):
        where = f"{at}.{key}"
        if key == "at_ms":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ActionScheduleError(f"{where}: must be an integer >= 0, got {value!r}")
        elif key in ("drain", "allow_non_restored_state"):
            value = _bool(value, where)
        elif key == "format":
            try:
                value = SavepointFormatType(value)
            except ValueError:
                raise ActionScheduleError(
                    f"{where}: must be canonical (barriersim writes canonical savepoints only), got {value!r}"
                ) from None
        elif key == "from":
            try:
                key, value = "source", RestoreSource(value)
            except ValueError:
                raise ActionScheduleError(f"{where}: must be savepoint or checkpoint, got {value!r}") from None
        elif key == "parallelism":
            value = _parallelism(value, where)
        kwargs[key] = value
    if cls is not Restore and "at_ms" not in kwargs:
        raise ActionScheduleError(f"{at}.at_ms: is required")
    return cls(**kwargs)
