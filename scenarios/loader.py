"""Scenario files: TOML, validated against a declarative schema, loaded into frozen dataclasses.

How this works: ``SCHEMA`` (``scenarios.schema``) lists every section and key a scenario may hold, each with its
type, default and allowed range. ``load_scenario(path)`` reads the file with ``tomllib``, rejects unknown sections
and keys, wrong types and out-of-range values with a ``ScenarioError`` whose one-line message names the file and the
key (``scenarios/x.toml: workload.records: must be an integer >= 1, got 0``), then checks rules that span
keys (e.g. unaligned checkpoints need exactly-once and at most one concurrent checkpoint).

The job is either the quickstart shorthand (``[job]`` with ``source_parallelism``, ``keyed_sum_parallelism``,
``sink_parallelism``) or a general DAG: ``[[job.vertex]]`` tables (``name``, ``operator``, ``parallelism``,
operator parameters, per-record cost, the size of the records it emits) and ``[[job.edge]]`` tables (``from``,
``to``, ``partitioner``, ``input``), validated as a ``runtime.jobgraph.JobGraph``. ``[network]`` sets the buffer
size, Flink's credit defaults and the channel latency; ``[cluster]`` the TaskManagers and slots the job is placed
in (one TaskManager by default, so every channel is local, as in Flink's MiniCluster) and the nodes they are spread
over; ``[storage]`` what checkpoint work costs (``runtime.checkpoint_cost``); ``[state]`` the keyed state backend
(``runtime.state.backend``); ``[[faults]]`` is a fault schedule (``runtime.faults.fault_schedule``), checked against the graph and
the placement; ``[[actions]]`` the experiment actions (``runtime.faults.experiment``: savepoints, stop-with-savepoint,
cancel, restores with new parallelisms), checked against the job as faults are; ``[restore]`` (``from`` a savepoint
or retained checkpoint path, ``parallelism``) starts the run from a snapshot; ``[sweep]`` maps dotted keys to
lists of values and expands into a run matrix. The CLI prints an error's line and exits 2.
"""

from __future__ import annotations

import difflib
import itertools
import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from barriersim.runtime.checkpoint_cost import CheckpointCostModel
from barriersim.runtime.coordinator.shared_state_registry import RecoveryClaimMode
from barriersim.runtime.checkpointing_mode import CheckpointingMode, checkpointing_problem
from barriersim.runtime.coordinator.properties import ExternalizedCheckpointRetention
from barriersim.runtime.faults.experiment import ActionSchedule, ActionScheduleError, RestoreSettings, rescaled
from barriersim.runtime.faults.fault_schedule import FaultSchedule, FaultScheduleError
from barriersim.runtime.job.placement import ClusterConfig, PlacementError, place
from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobGraphError, JobVertex, OperatorKind, Partitioner
from barriersim.runtime.job.restart_strategy import RestartStrategyConfig
from barriersim.runtime.state.backend import StateBackendConfig
from barriersim.scenarios.schema import EDGE_FIELDS, RETENTIONS, SCHEMA, SETTABLE_SECTIONS, VERTEX_FIELDS, Field

class ScenarioError(Exception):
    """A scenario file that cannot be used; ``str()`` is the one-line message for the user."""

    def __init__(self, path: str | Path, key: str | None, problem: str):
        self.path = str(path)
        self.key = key
        self.problem = problem
        super().__init__(f"{self.path}: {key}: {problem}" if key else f"{self.path}: {problem}")




@dataclass(frozen=True)
class WorkloadSpec:
    records: int
    keys: int
    zipf_exponent: float
    max_value: int
    rate_per_source: int
    hot_key_share: float = 0.0
    key_growth: bool = False
    min_checkpoints: int = 0
    source_emission: str = "steps"


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
class NetworkSpec:
    buffer_size: int
    exclusive_buffers_per_channel: int
    floating_buffers_per_gate: int
    max_buffers_per_channel: int
    latency_us_mean: float
    latency_us_jitter: float
    record_size: int
    buffer_timeout_ms: int
    buffer_debloat: bool
    buffer_debloat_target_ms: int
    buffer_debloat_period_ms: int
    buffer_debloat_samples: int
    buffer_debloat_threshold_percentages: int
    min_buffer_size: int


@dataclass(frozen=True)
class CheckpointingSpec:
    mode: CheckpointingMode
    interval_ms: int
    timeout_ms: int
    aligned_checkpoint_timeout_ms: int = 0
    max_concurrent: int = 1
    min_pause_ms: int = 0
    tolerable_failures: int = 0
    max_retained: int = 1
    checkpoints_after_tasks_finish: bool = True
    memory_threshold_bytes: int = 20 * 1024
    externalized_checkpoint_retention: str = RETENTIONS[0]
    recovery_claim_mode: str = RecoveryClaimMode.NO_CLAIM.value


@dataclass(frozen=True)
class ClusterSpec:
    taskmanagers: int = 1
    slots_per_taskmanager: int = 0
    nodes: int = 0
    cpu_cores: int = 0  # the simulator's shared cores (0: a core per subtask)

    def config(self) -> ClusterConfig:
        return ClusterConfig(self.taskmanagers, self.slots_per_taskmanager, self.nodes)


@dataclass(frozen=True)
class Scenario:
    path: str
    name: str
    description: str
    seed: int
    workload: WorkloadSpec
    job: JobSpec
    checkpointing: CheckpointingSpec
    network: NetworkSpec | None = None
    faults: FaultSchedule = FaultSchedule()
    sweep: tuple[tuple[str, tuple], ...] = ()
    cluster: ClusterSpec = ClusterSpec()
    actions: ActionSchedule = ActionSchedule()
    restore: RestoreSettings | None = None

    def job_graphs(self) -> list[JobGraph]:
        """The graph of every job of the run: the first (rescaled by ``[restore]``), then each restore's."""
        first = rescaled(self.job.graph, self.restore.parallelism, "restore.parallelism") if self.restore else self.job.graph
        return self.actions.graphs(first)
    storage: CheckpointCostModel = CheckpointCostModel()
    state: StateBackendConfig = StateBackendConfig()
    restart: RestartStrategyConfig = RestartStrategyConfig()


def _type_name(kind: type) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}[kind]


def _coerce(path: str, key: str, spec: Field, value: Any) -> Any:
    # bool is a subclass of int in Python; TOML's true/false is never a valid number here.
    if spec.kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, spec.kind) or (spec.kind is not bool and isinstance(value, bool)):
        raise ScenarioError(path, key, f"must be {_type_name(spec.kind)}, got {type(value).__name__} {value!r}")
    problem = spec.check(value)
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
        elif field_spec.default is None:
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
        graph = quickstart_graph(shorthand["source_parallelism"], shorthand["keyed_sum_parallelism"],
                                 shorthand["max_parallelism"]).validate()
        return JobSpec(**shorthand, graph=graph, is_quickstart_shape=True)
    for key in ("source_parallelism", "keyed_sum_parallelism", "sink_parallelism"):
        if key in given:
            raise ScenarioError(path, f"job.{key}", "is the quickstart shorthand; with [[job.vertex]] set parallelism per vertex")
    vertices, edges = [], []
    for i, raw in enumerate(_array_of_tables(path, "job.vertex", given.get("vertex", []))):
        v = _table(path, f"job.vertex[{i}]", raw, VERTEX_FIELDS)
        if v["max_parallelism"] < v["parallelism"]:
            raise ScenarioError(path, f"job.vertex[{i}].max_parallelism", f"must be >= parallelism {v['parallelism']}")
        params = {k: v[k] for k in VERTEX_FIELDS if k not in ("name", "operator", "parallelism", "max_parallelism")
                  and not (k == "record_size" and v[k] == 0)}  # unset: the network's, and no parameter
        vertices.append(JobVertex(v["name"], OperatorKind(v["operator"]), v["parallelism"], v["max_parallelism"], params))
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
            return f"job.edge[{i}]", f"{message[len(prefix):]} ({e})"
    for i, v in enumerate(graph.vertices):
        prefix = f"vertex {v.name!r}: "
        if message.startswith(prefix):
            return f"job.vertex[{i}]", f"{message[len(prefix):]} (vertex {v.name!r})"
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


def _check_cross_rules(path: str, cp: CheckpointingSpec, origin: str = "") -> None:
    """The one rule on a mode with its settings (``runtime.checkpointing_mode.checkpointing_problem``);
    ``origin`` says where a mode that is not the file's came from."""
    problem = checkpointing_problem(cp.mode, cp.max_concurrent, cp.aligned_checkpoint_timeout_ms)
    if problem is not None:
        key, text = problem
        raise ScenarioError(path, key, f"{text} ({origin})" if origin else text)


def _check_restart(path: str, restart: RestartStrategyConfig, origin: str = "") -> None:
    """The rules Flink's restart strategies put on their settings together (initial backoff at most the maximum)."""
    text = restart.problem()
    if text is not None:
        raise ScenarioError(path, "restart", f"{text} ({origin})" if origin else text)


def _check_placement(path: str, graph: JobGraph, cluster: ClusterSpec, faults: FaultSchedule) -> None:
    """The cluster must hold the job (``runtime.job.placement.place``), and the TaskManager and node faults must
    name TaskManagers and nodes it has."""
    try:
        placement = place(graph, cluster.config())
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
        scenario.actions.check_against(graphs[0], scenario.checkpointing.externalized_checkpoint_retention
                                       == ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION.value)
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
    return JobGraph(tuple(replace(v, parallelism=max(g.vertex(v.name).parallelism for g in graphs))
                          for v in graphs[0].vertices), graphs[0].edges)


def parse_scenario(data: dict[str, Any], path: str = "<scenario>") -> Scenario:
    """Validate an already-parsed TOML document."""
    known = list(SCHEMA) + ["faults", "actions", "restore", "sweep"]
    for section in data:
        if section not in known:
            raise ScenarioError(path, section, f"unknown section (known: {', '.join(known)})")
    plain = {}
    for section in ("scenario", "workload", "network", "cluster", "checkpointing", "storage", "state", "restart"):
        plain[section] = _table(path, section, data.get(section, {}), SCHEMA[section])
    job = _parse_job(path, data.get("job", {}))
    checkpointing = CheckpointingSpec(**{**plain["checkpointing"],
                                         "mode": CheckpointingMode.parse(plain["checkpointing"]["mode"])})
    _check_cross_rules(path, checkpointing)
    if plain["workload"]["source_emission"] == "exact" and not plain["workload"]["rate_per_source"]:
        raise ScenarioError(path, "workload.source_emission",
                            '"exact" paces records by workload.rate_per_source, which is 0 (unpaced sources read in steps)')
    try:
        actions = ActionSchedule.from_plain(data.get("actions", []))
        restore = RestoreSettings.from_plain(data["restore"]) if "restore" in data else None
        if restore is not None and not Path(restore.path).is_absolute() and Path(path).is_file():
            # a relative path in a scenario file is relative to the file
            restore = RestoreSettings(str((Path(path).parent / restore.path).resolve()), restore.parallelism,
                                      restore.allow_non_restored_state)
    except ActionScheduleError as err:
        key, _, problem = str(err).partition(": ")
        raise ScenarioError(path, key, problem) from None
    try:
        faults = FaultSchedule.from_plain(data.get("faults", []))
    except FaultScheduleError as err:
        raise ScenarioError(path, None, str(err)) from None
    cluster = ClusterSpec(**plain["cluster"])
    _check_placement(path, job.graph, cluster, faults)
    scenario = Scenario(
        path=path,
        name=plain["scenario"]["name"],
        description=plain["scenario"]["description"],
        seed=plain["scenario"]["seed"],
        workload=WorkloadSpec(**plain["workload"]),
        job=job,
        checkpointing=checkpointing,
        network=NetworkSpec(**plain["network"]),
        faults=faults,
        sweep=_parse_sweep(path, data["sweep"]) if "sweep" in data else (),
        cluster=cluster,
        actions=actions,
        restore=restore,
        storage=CheckpointCostModel(**plain["storage"]),
        state=StateBackendConfig(**plain["state"]),
        restart=RestartStrategyConfig(**plain["restart"]),
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
    """A copy with one ``section.key`` of workload, checkpointing or network replaced (unchecked: see
    ``apply_setting``)."""
    section, _, name = dotted_key.partition(".")
    current = getattr(scenario, section)
    values = {f.name: getattr(current, f.name) for f in fields(current)}
    values[name] = CheckpointingMode.parse(value) if dotted_key == "checkpointing.mode" else value
    return with_overrides(scenario, **{section: type(current)(**values)})


def check_setting(path: str, where: str, dotted_key: Any, value: Any) -> Any:
    """``value`` for ``section.key`` checked as the scenario file's would be (type and range; the key named
    ``where.section.key`` in the error), returned as the file would hold it."""
    return _coerce(path, f"{where}.{dotted_key}", _settable_field(path, where, dotted_key), value)


def _settable_field(path: str, where: str, dotted_key: Any) -> Field:
    section, dot, name = str(dotted_key).partition(".")
    if dot and section in SETTABLE_SECTIONS and name in SCHEMA[section]:
        return SCHEMA[section][name]
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
    if ("checkpointing.mode" in settings and "checkpointing.aligned_checkpoint_timeout_ms" not in settings
            and not scenario.checkpointing.mode.uses_alignment_timeout):
        scenario = with_setting(scenario, "checkpointing.aligned_checkpoint_timeout_ms", 0)
    _check_cross_rules(scenario.path, scenario.checkpointing, origin or f"with {where} {_shown(settings)}")
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


def effective_scenario(scenario: Scenario, *, mode: CheckpointingMode | str | None = None, seed: int | None = None,
                       faults: FaultSchedule | None = None, actions: ActionSchedule | None = None,
                       restore: RestoreSettings | None = None, origin: str = "the mode given") -> Scenario:
    """What a run of ``scenario`` runs: in ``mode`` (``in_mode``), with ``seed``, ``faults``, ``actions`` and
    ``restore`` replacing the file's when given (checked against the job's graphs: ``FaultScheduleError``,
    ``ScenarioError``)."""
    if mode is not None:
        scenario = in_mode(scenario, mode, origin)
    if seed is not None:
        scenario = with_overrides(scenario, seed=seed)
    if actions is not None or restore is not None:
        changes = {"actions": actions} if actions is not None else {}
        if restore is not None:
            changes["restore"] = restore
        scenario = with_overrides(scenario, **changes)
        _check_jobs(scenario.path, scenario)
    if faults is not None:
        graphs = scenario.job_graphs()
        faults.check_against(graphs[0] if len(graphs) == 1 else _union_graph(graphs))
        faults.check_against_placement(scenario.job.graph, place(scenario.job.graph, scenario.cluster.config()))
        scenario = with_overrides(scenario, faults=faults)
    return scenario
