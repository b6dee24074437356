"""Scenario files: TOML, validated against the scenario schema, parsed into the runtime's section objects.

How this works: ``load_scenario(path)`` reads the file with ``tomllib``; ``parse_scenario`` rejects unknown
sections and keys, wrong types and out-of-range values (``scenarios.schema``) with a ``ScenarioError`` whose one
line names the file and the key (``x.toml: workload.records: must be between 1 and 100000000, got 0``), builds each
section's runtime object (``Scenario.checkpointing`` is a ``CheckpointingConfig``, ...), the job graph (the
quickstart shorthand or ``[[job.vertex]]``/``[[job.edge]]``), the faults, actions and restore, then checks the rules
that span keys. ``apply_settings`` is the one checker of ``section.key`` settings from outside the file (overrides,
sweep points, modes); ``expand_sweep`` gives a ``[sweep]``'s run matrix. ``docs/architecture.md``: "Settings".
"""

from __future__ import annotations

import difflib
import itertools
import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from barriersim.runtime.checkpoint_cost import CheckpointCostModel
from barriersim.runtime.checkpointing_mode import CheckpointingMode
from barriersim.runtime.coordinator.configuration import CheckpointingConfig
from barriersim.runtime.coordinator.properties import ExternalizedCheckpointRetention
from barriersim.runtime.faults.experiment import ActionSchedule, ActionScheduleError, RestoreSettings, rescaled
from barriersim.runtime.faults.fault_schedule import FaultSchedule, FaultScheduleError
from barriersim.runtime.job.config import WorkloadConfig
from barriersim.runtime.job.placement import ClusterConfig, PlacementError, place
from barriersim.runtime.job.restart_strategy import RestartStrategyConfig
from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobGraphError, JobVertex, OperatorKind, Partitioner
from barriersim.runtime.network.config import NetworkConfig
from barriersim.runtime.state.backend import StateBackendConfig
from barriersim.scenarios.schema import (
    EDGE_FIELDS,
    REQUIRED,
    SCHEMA,
    SECTIONS,
    SETTABLE_SECTIONS,
    VERTEX_FIELDS,
    Field,
)


class ScenarioError(Exception):
    """A scenario file that cannot be used; ``str()`` is the one-line message for the user."""

    def __init__(self, path: str | Path, key: str | None, problem: str):
        self.path = str(path)
        self.key = key
        self.problem = problem
        super().__init__(f"{self.path}: {key}: {problem}" if key else f"{self.path}: {problem}")


@dataclass(frozen=True)
class JobSpec:
    """The quickstart shorthand's values (``[job]`` with parallelisms instead of vertices and edges); ``graph`` is
    the job in either form, and ``is_quickstart_shape`` says which form the file used."""

    source_parallelism: int
    keyed_sum_parallelism: int
    sink_parallelism: int
    records_per_buffer: int
    max_parallelism: int
    graph: JobGraph
    is_quickstart_shape: bool


@dataclass(frozen=True)
class Scenario:
    """A loaded scenario: its header, the job, one runtime object per configuration section, the fault schedule,
    the experiment actions, the restore and the sweep axes (dotted key, values as the file holds them)."""

    path: str
    name: str
    description: str
    seed: int
    workload: WorkloadConfig
    job: JobSpec
    checkpointing: CheckpointingConfig
    network: NetworkConfig = NetworkConfig()
    faults: FaultSchedule = FaultSchedule()
    sweep: tuple[tuple[str, tuple], ...] = ()
    cluster: ClusterConfig = ClusterConfig()
    actions: ActionSchedule = ActionSchedule()
    restore: RestoreSettings | None = None
    storage: CheckpointCostModel = CheckpointCostModel()
    state: StateBackendConfig = StateBackendConfig()
    restart: RestartStrategyConfig = RestartStrategyConfig()

    def job_graphs(self) -> list[JobGraph]:
        """The graph of every job of the run: the first (rescaled by ``[restore]``), then each restore's."""
        first = (
            rescaled(self.job.graph, self.restore.parallelism, "restore.parallelism")
            if self.restore
            else self.job.graph
        )
        return self.actions.graphs(first)


def _type_name(kind: type) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}[kind]


def _coerce(path: str, key: str, spec: Field, value: Any) -> Any:
    # bool is a subclass of int in Python; TOML's true/false is never a valid number here.
    if spec.kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, spec.kind) or (spec.kind is not bool and isinstance(value, bool)):
        raise ScenarioError(path, key, f"must be {_type_name(spec.kind)}, got {type(value).__name__} {value!r}")
    problem = spec.problem(value)
    if problem:
        raise ScenarioError(path, key, problem)
    return value


def _table(path: str, where: str, given: Any, spec: dict[str, Field], skip: tuple[str, ...] = ()) -> dict:
    if not isinstance(given, dict):
        raise ScenarioError(path, where, "must be a table")
    for key in given:
        if key not in spec and key not in skip:
            raise ScenarioError(path, f"{where}.{key}", f"unknown key (known: {', '.join(list(spec) + list(skip))})")
    out: dict[str, Any] = {}
    for key, field_spec in spec.items():
        if key in given:
            out[key] = _coerce(path, f"{where}.{key}", field_spec, given[key])
        elif field_spec.default is REQUIRED:
            raise ScenarioError(path, f"{where}.{key}", "is required")
        else:
            out[key] = field_spec.default
    return out


def _array_of_tables(path: str, where: str, given: Any) -> list:
    if not isinstance(given, list) or not all(isinstance(t, dict) for t in given):
        raise ScenarioError(path, where, f"must be an array of tables ([[{where}]])")
    return given


def quickstart_graph(sources: int, sums: int, max_parallelism: int = 128) -> JobGraph:
    return JobGraph(
        (
            JobVertex("source", OperatorKind.SOURCE, sources, max_parallelism),
            JobVertex("keyed-sum", OperatorKind.KEYED_SUM, sums, max_parallelism),
            JobVertex("sink", OperatorKind.TWO_PHASE_COMMIT_SINK, 1, max_parallelism),
        ),
        (
            JobEdge("source", "keyed-sum", Partitioner.HASH),
            JobEdge("keyed-sum", "sink", Partitioner.REBALANCE),
        ),
    )


def _parse_job(path: str, given: Any) -> JobSpec:
    if not isinstance(given, dict):
        raise ScenarioError(path, "job", "must be a table")
    general = "vertex" in given or "edge" in given
    shorthand = _table(path, "job", given, SCHEMA["job"], skip=("vertex", "edge"))
    if not general:
        graph = quickstart_graph(
            shorthand["source_parallelism"], shorthand["keyed_sum_parallelism"], shorthand["max_parallelism"]
        ).validate()
        return JobSpec(**shorthand, graph=graph, is_quickstart_shape=True)
    for key in ("source_parallelism", "keyed_sum_parallelism", "sink_parallelism"):
        if key in given:
            raise ScenarioError(
                path, f"job.{key}", "is the quickstart shorthand; with [[job.vertex]] set parallelism per vertex"
            )
    vertices, edges = [], []
    for i, raw in enumerate(_array_of_tables(path, "job.vertex", given.get("vertex", []))):
        v = _table(path, f"job.vertex[{i}]", raw, VERTEX_FIELDS)
        if v["max_parallelism"] < v["parallelism"]:
            raise ScenarioError(path, f"job.vertex[{i}].max_parallelism", f"must be >= parallelism {v['parallelism']}")
        params = {
            k: v[k]
            for k in VERTEX_FIELDS
            if k not in ("name", "operator", "parallelism", "max_parallelism")
            and not (k == "record_size" and v[k] == 0)
        }  # unset: the network's, and no parameter
        vertices.append(
            JobVertex(v["name"], OperatorKind(v["operator"]), v["parallelism"], v["max_parallelism"], params)
        )
    for i, raw in enumerate(_array_of_tables(path, "job.edge", given.get("edge", []))):
        e = _table(path, f"job.edge[{i}]", raw, EDGE_FIELDS)
        edges.append(JobEdge(e["from"], e["to"], Partitioner(e["partitioner"]), e["input"]))
    graph = JobGraph(tuple(vertices), tuple(edges))
    try:
        graph.validate()
    except JobGraphError as err:
        raise ScenarioError(path, *_graph_error_key(graph, str(err))) from None
    return JobSpec(**shorthand, graph=graph, is_quickstart_shape=False)


def _graph_error_key(graph: JobGraph, message: str) -> tuple[str, str]:
    """The key a job graph error is about (``job.edge[i]`` or ``job.vertex[i]``, else ``job``) and the problem;
    ``JobGraph.validate`` names an edge as ``edge <from -[partitioner]-> to (input n)>: ...`` and a vertex as
    ``vertex 'name': ...``."""
    for i, e in enumerate(graph.edges):
        prefix = f"edge {e}: "
        if message.startswith(prefix):
            return f"job.edge[{i}]", f"{message[len(prefix) :]} ({e})"
    for i, v in enumerate(graph.vertices):
        prefix = f"vertex {v.name!r}: "
        if message.startswith(prefix):
            return f"job.vertex[{i}]", f"{message[len(prefix) :]} (vertex {v.name!r})"
    return "job", message


def _parse_sweep(path: str, given: Any) -> tuple[tuple[str, tuple], ...]:
    if not isinstance(given, dict):
        raise ScenarioError(path, "sweep", "must be a table of dotted keys to lists of values")
    axes = []
    for key, values in given.items():
        _settable_field(path, "sweep", key)
        if not isinstance(values, list) or not values:
            raise ScenarioError(path, f"sweep.{key}", "must be a non-empty list of values")
        axes.append((key, tuple(check_setting(path, "sweep", key, v) for v in values)))
    return tuple(axes)


def _check_cross_rules(
    path: str, checkpointing: CheckpointingConfig, workload: WorkloadConfig, origin: str = ""
) -> None:
    """The rules on a section's settings together: the mode with its settings
    (``CheckpointingConfig.problem``), a paced emission with its rate (``WorkloadConfig.problem``); ``origin``
    says where settings that are not the file's came from."""
    for problem in (checkpointing.problem(), workload.problem()):
        if problem is not None:
            key, text = problem
            raise ScenarioError(path, key, f"{text} ({origin})" if origin else text)


def _check_restart(path: str, restart: RestartStrategyConfig, origin: str = "") -> None:
    """The rules Flink's restart strategies put on their settings together (initial backoff at most the maximum)."""
    text = restart.problem()
    if text is not None:
        raise ScenarioError(path, "restart", f"{text} ({origin})" if origin else text)


def _check_placement(path: str, graph: JobGraph, cluster: ClusterConfig, faults: FaultSchedule) -> None:
    """The cluster must hold the job (``runtime.job.placement.place``), and the TaskManager and node faults must
    name TaskManagers and nodes it has."""
    try:
        placement = place(graph, cluster)
    except PlacementError as err:
        raise ScenarioError(path, err.key, str(err).partition(": ")[2]) from None
    try:
        faults.check_against_placement(graph, placement)
    except FaultScheduleError as err:
        raise ScenarioError(path, None, str(err)) from None


def _check_jobs(path: str, scenario: Scenario) -> None:
    """The actions and the restore fit the job, the cluster holds every job of the run, and every fault names a
    subtask of some job (``ScenarioError`` naming the key)."""
    try:
        graphs = scenario.job_graphs()
        scenario.actions.check_against(
            graphs[0],
            scenario.checkpointing.externalized_checkpoint_retention
            is ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION,
        )
    except ActionScheduleError as err:
        key, _, problem = str(err).partition(": ")
        raise ScenarioError(path, key, problem) from None
    for graph in graphs if scenario.restore is not None else graphs[1:]:
        _check_placement(path, graph, scenario.cluster, FaultSchedule())  # its faults: checked on the first job
    try:
        scenario.faults.check_against(graphs[0] if len(graphs) == 1 else _union_graph(graphs))
    except FaultScheduleError as err:
        raise ScenarioError(path, None, str(err)) from None


def _union_graph(graphs: list[JobGraph]) -> JobGraph:
    return JobGraph(
        tuple(replace(v, parallelism=max(g.vertex(v.name).parallelism for g in graphs)) for v in graphs[0].vertices),
        graphs[0].edges,
    )


def parse_scenario(data: dict[str, Any], path: str = "<scenario>") -> Scenario:
    """Validate an already-parsed TOML document."""
    known = list(SCHEMA) + ["faults", "actions", "restore", "sweep"]
    for section in data:
        if section not in known:
            raise ScenarioError(path, section, f"unknown section (known: {', '.join(known)})")
    header = _table(path, "scenario", data.get("scenario", {}), SCHEMA["scenario"])
    sections = {
        name: SECTIONS[name].build(_table(path, name, data.get(name, {}), SCHEMA[name]))
        for name in SCHEMA
        if name in SECTIONS
    }
    job = _parse_job(path, data.get("job", {}))
    _check_cross_rules(path, sections["checkpointing"], sections["workload"])
    try:
        actions = ActionSchedule.from_plain(data.get("actions", []))
        restore = RestoreSettings.from_plain(data["restore"]) if "restore" in data else None
        if restore is not None and not Path(restore.path).is_absolute() and Path(path).is_file():
            # a relative path in a scenario file is relative to the file
            restore = RestoreSettings(
                str((Path(path).parent / restore.path).resolve()), restore.parallelism, restore.allow_non_restored_state
            )
    except ActionScheduleError as err:
        key, _, problem = str(err).partition(": ")
        raise ScenarioError(path, key, problem) from None
    try:
        faults = FaultSchedule.from_plain(data.get("faults", []))
    except FaultScheduleError as err:
        raise ScenarioError(path, None, str(err)) from None
    _check_placement(path, job.graph, sections["cluster"], faults)
    scenario = Scenario(
        path=path,
        name=header["name"],
        description=header["description"],
        seed=header["seed"],
        job=job,
        faults=faults,
        sweep=_parse_sweep(path, data["sweep"]) if "sweep" in data else (),
        actions=actions,
        restore=restore,
        **sections,
    )
    _check_restart(path, scenario.restart)
    _check_jobs(path, scenario)
    return scenario


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; raises ``ScenarioError`` with a one-line message."""
    p = Path(path)
    if not p.exists():
        raise ScenarioError(p, None, "no such scenario file")
    if not p.is_file():
        raise ScenarioError(p, None, "not a file")
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ScenarioError(p, None, "not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(p, None, f"not valid TOML: {e}") from None
    return parse_scenario(data, str(p))


def with_overrides(scenario: Scenario, **changes: Any) -> Scenario:
    """A copy of ``scenario`` with top-level fields replaced (e.g. ``seed``)."""
    current = {f.name: getattr(scenario, f.name) for f in fields(scenario)}
    current.update(changes)
    return Scenario(**current)


def with_setting(scenario: Scenario, dotted_key: str, value: Any) -> Scenario:
    """A copy with one ``section.key`` of a settable section replaced by ``value`` as the file would hold it
    (unchecked: see ``apply_settings``)."""
    section, _, name = dotted_key.partition(".")
    current = getattr(scenario, section)
    parsed = SECTIONS[section].fields[name].parse(value)
    return with_overrides(scenario, **{section: replace(current, **{name: parsed})})


def check_setting(path: str, where: str, dotted_key: Any, value: Any) -> Any:
    """``value`` for ``section.key`` checked as the scenario file's would be (type and range; the key named
    ``where.section.key`` in the error), returned as the file would hold it."""
    return _coerce(path, f"{where}.{dotted_key}", _settable_field(path, where, dotted_key), value)


def _settable_field(path: str, where: str, dotted_key: Any) -> Field:
    section, dot, name = str(dotted_key).partition(".")
    if dot and section in SETTABLE_SECTIONS and name in SECTIONS[section].fields:
        return SECTIONS[section].fields[name]
    raise ScenarioError(path, f"{where}.{dotted_key}", _unknown_setting(section, dot, name))


def _unknown_setting(section: str, dot: str, name: str) -> str:
    """What is wrong with a ``section.key`` that names no setting, and the keys it may have meant."""
    if dot and section in SETTABLE_SECTIONS:
        known = list(SCHEMA[section])
        close = [k for k in known if name and k.startswith(name)][:1] or difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {section}.{close[0]}?)" if close else ""
        return f"unknown key {name!r} in [{section}]{hint}; its keys: {', '.join(known)}"
    key = name if dot else section
    owners = [f"{s}.{key}" for s in SETTABLE_SECTIONS if key in SCHEMA[s]]
    hint = f" (did you mean {' or '.join(owners)}?)" if owners else ""
    what = f"unknown section {section!r}" if dot else "must be SECTION.KEY"
    return f"{what}{hint}; the sections: {', '.join(SETTABLE_SECTIONS)}"


def apply_settings(scenario: Scenario, settings: dict[str, Any], where: str, origin: str | None = None) -> Scenario:
    """``scenario`` with ``section.key`` settings replaced, each checked as the file's values are
    (``check_setting``, naming the key ``where.section.key``), then the rules that span keys (``origin``: where the
    settings came from, for their message): the one checker of overrides, sweep points and modes given from
    outside the file. A mode set without a timeout drops the file's aligned-checkpoint timeout unless the mode
    uses it (the timeout applies only in aligned-with-timeout mode)."""
    for key, value in settings.items():
        scenario = with_setting(scenario, str(key), check_setting(scenario.path, where, key, value))
    if (
        "checkpointing.mode" in settings
        and "checkpointing.aligned_checkpoint_timeout_ms" not in settings
        and not scenario.checkpointing.mode.uses_alignment_timeout
    ):
        scenario = with_setting(scenario, "checkpointing.aligned_checkpoint_timeout_ms", 0)
    _check_cross_rules(
        scenario.path, scenario.checkpointing, scenario.workload, origin or f"with {where} {_shown(settings)}"
    )
    _check_restart(scenario.path, scenario.restart, origin or f"with {where} {_shown(settings)}")
    _check_placement(scenario.path, scenario.job.graph, scenario.cluster, scenario.faults)
    _check_jobs(scenario.path, scenario)
    return scenario


def _shown(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k} = {v!r}" for k, v in settings.items())


def in_mode(scenario: Scenario, mode: CheckpointingMode | str, origin: str = "the mode given") -> Scenario:
    """``scenario`` run in ``mode`` (``apply_settings``): a mode its settings do not allow (aligned-with-timeout
    without a timeout, an unaligned mode with more than one concurrent checkpoint) is a ``ScenarioError`` naming
    the key and ``origin``."""
    mode = CheckpointingMode.parse(mode, "mode")
    if mode is scenario.checkpointing.mode:
        return scenario
    return apply_settings(scenario, {"checkpointing.mode": mode.value}, "mode", f"mode {mode.value} from {origin}")


def expand_sweep(scenario: Scenario) -> list[tuple[dict[str, Any], Scenario]]:
    """The run matrix of a ``[sweep]``: every combination of its axes, each as (settings, scenario) with the
    settings applied (``apply_settings``) and no ``[sweep]`` table left."""
    if not scenario.sweep:
        return [({}, scenario)]
    keys = [k for k, _ in scenario.sweep]
    base = with_overrides(scenario, sweep=())
    runs = []
    for combo in itertools.product(*(values for _, values in scenario.sweep)):
        settings = dict(zip(keys, combo))
        runs.append((settings, apply_settings(base, settings, "sweep")))
    return runs


def effective_scenario(
    scenario: Scenario,
    *,
    mode: CheckpointingMode | str | None = None,
    seed: int | None = None,
    faults: FaultSchedule | None = None,
    actions: ActionSchedule | None = None,
    restore: RestoreSettings | None = None,
    origin: str = "the mode given",
) -> Scenario:
    """What a run of ``scenario`` runs: in ``mode`` (``in_mode``), with ``seed``, ``faults``, ``actions`` and
    ``restore`` replacing the file's when given (checked against the job's graphs: ``FaultScheduleError``,
    ``ScenarioError``)."""
    if mode is not None:
        scenario = in_mode(scenario, mode, origin)
    if seed is not None:
        scenario = with_overrides(scenario, seed=seed)
    if actions is not None or restore is not None:
        changes: dict[str, ActionSchedule | RestoreSettings] = {"actions": actions} if actions is not None else {}
        if restore is not None:
            changes["restore"] = restore
        scenario = with_overrides(scenario, **changes)
        _check_jobs(scenario.path, scenario)
    if faults is not None:
        graphs = scenario.job_graphs()
        faults.check_against(graphs[0] if len(graphs) == 1 else _union_graph(graphs))
        faults.check_against_placement(scenario.job.graph, place(scenario.job.graph, scenario.cluster))
        scenario = with_overrides(scenario, faults=faults)
    return scenario
