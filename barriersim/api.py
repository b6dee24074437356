"""The front door: every run (the CLI's ``run``, ``replay`` and ``sweep``, and ``barriersim.run`` in a notebook)
is planned, then executed, here.

How this works: ``plan`` checks everything the caller gave (overrides, seed, faults, actions, restore, modes, the
``Backend`` and ``WorkloadGenerator``) before anything slow starts and returns a ``Plan``: one effective scenario
per mode. ``execute`` runs it on the simulator (``barriersim.sim_backend``) or on Ray actors with Spark on Ray
(``barriersim.ray_backend``), each mode into its own run directory, whose ``scenario.toml`` replays it. The result
is a ``RunResult``: mode -> ``ModeRun`` (summary, verdict, Flink's checkpoint tables as pandas DataFrames).
``docs/architecture.md`` ("Settings: scenario to runtime") says where the simulator's workload can come from.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property, reduce
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd
import pyarrow.parquet as pq

from barriersim.actors.socket_links import socket_links_wanted
from barriersim.backends import BACKENDS, WORKLOADS, Backend, WorkloadGenerator
from barriersim.continuation import check_restore
from barriersim.errors import ArgumentError, UnsupportedScenario
from barriersim.extras import require
from barriersim.out_dir import prepare_out_dir
from barriersim.ray_address import check_address
from barriersim.run_storage import storage_uris
from barriersim.runtime.checkpointing_mode import (
    ALL_MODES,
    SIDE_BY_SIDE_MODES,
    CheckpointingMode,
    CheckpointingModeError,
)
from barriersim.runtime.faults.experiment import ActionSchedule, ActionScheduleError, RestoreSettings
from barriersim.runtime.faults.fault_schedule import FaultSchedule, FaultScheduleError
from barriersim.runtime.job.config import SourceEmission
from barriersim.runtime.record_batch import RecordsLike
from barriersim.runtime.records_codec import decode_split
from barriersim.runtime.storage.errors import CheckpointStorageError
from barriersim.runtime.storage.object_storage import check_storage_uri, is_object_store_uri, probe_storage
from barriersim.scenarios.library import is_bare_name, resolve
from barriersim.scenarios.loader import (
    Scenario,
    ScenarioError,
    apply_settings,
    effective_scenario,
    load_scenario,
    with_overrides,
)
from barriersim.scenarios.simulation_inputs import workload_splits
from barriersim.sim_backend import simulate
from barriersim.spark.analytics import parquet_to_spark
from barriersim.spark.session import SparkOnDemand
from barriersim.spark.workload import generate_workload, hand_off
from barriersim.summary import default_out_dir

Splits = dict[str, list[RecordsLike]]
Progress = Callable[[str, float | None], None]


class SparkFrames(NamedTuple):
    """A run's tables as Spark DataFrames."""

    checkpoints: Any  # pyspark.sql.DataFrame
    subtasks: Any


def _read_table(path: Path) -> pd.DataFrame:
    if not path.exists():  # a run writes no table without rows
        return pd.DataFrame()
    return pq.read_table(str(path)).to_pandas()


# -- results -------------------------------------------------------------------------------------------------


@dataclass
class ModeRun:
    """One mode's run: its directory and what it wrote there."""

    out_dir: Path
    summary: dict = field(repr=False)

    @property
    def mode(self) -> str:
        return self.summary["mode"]

    @property
    def backend(self) -> str:
        return self.summary["backend"]

    @property
    def verdict(self) -> str:
        """``exactly-once``, ``at-least-once`` or ``violated`` (the verification of the committed output)."""
        return self.summary["verification"]["verdict"]

    @property
    def scenario_file(self) -> Path:
        """The effective scenario this run ran (``barriersim replay`` of it runs it again)."""
        return self.out_dir / "scenario.toml"

    @cached_property
    def checkpoints(self) -> pd.DataFrame:
        """One row per checkpoint, Flink's field names (``id, status, end_to_end_duration, state_size, ...``)."""
        return _read_table(self.out_dir / "checkpoints.parquet")

    @cached_property
    def subtasks(self) -> pd.DataFrame:
        """One row per (checkpoint, subtask), Flink's ``SubtaskCheckpointStatistics`` names."""
        return _read_table(self.out_dir / "subtasks.parquet")

    def to_spark(self, spark) -> SparkFrames:
        """The run's checkpoints and subtasks as Spark DataFrames, read from its Parquet files."""
        return SparkFrames(
            parquet_to_spark(spark, self.out_dir / "checkpoints.parquet"),
            parquet_to_spark(spark, self.out_dir / "subtasks.parquet"),
        )

    def __repr__(self) -> str:
        cps = self.summary.get("checkpoints", {})
        return (
            f"ModeRun({self.summary.get('scenario')!r}, backend={self.backend!r}, mode={self.mode!r}, "
            f"verdict={self.verdict!r}, completed={cps.get('completed')}, out_dir={str(self.out_dir)!r})"
        )


class RunResult(Mapping):
    """What a run gives back, for one mode or several: mode -> ``ModeRun``, in run order, with every mode's
    tables side by side."""

    def __init__(self, out_dir: Path, runs: Mapping[str, ModeRun]):
        self.out_dir = Path(out_dir)
        self._runs = dict(runs)

    def __getitem__(self, mode: str) -> ModeRun:
        return self._runs[CheckpointingMode.parse(mode).value]

    def __iter__(self) -> Iterator[str]:
        return iter(self._runs)

    def __len__(self) -> int:
        return len(self._runs)

    @property
    def only(self) -> ModeRun:
        """The run of a one-mode request."""
        if len(self._runs) != 1:
            raise ValueError(
                f"this result holds {len(self._runs)} modes ({', '.join(self._runs)}): pick one with result[mode]"
            )
        return next(iter(self._runs.values()))

    @property
    def verdicts(self) -> dict[str, str]:
        return {mode: r.verdict for mode, r in self.items()}

    @property
    def summaries(self) -> dict[str, dict]:
        return {mode: r.summary for mode, r in self.items()}

    def _concat(self, name: str) -> pd.DataFrame:
        frames = [getattr(r, name).assign(mode=mode) for mode, r in self.items()]
        frames = [f[["mode", *[c for c in f.columns if c != "mode"]]] for f in frames if len(f)]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    @property
    def checkpoints(self) -> pd.DataFrame:
        """Every mode's checkpoints, a ``mode`` column first."""
        return self._concat("checkpoints")

    @property
    def subtasks(self) -> pd.DataFrame:
        return self._concat("subtasks")

    def to_spark(self, spark) -> SparkFrames:
        """All modes' tables as two Spark DataFrames with a ``mode`` column first."""

        def union(name: str):
            frames = [
                parquet_to_spark(spark, r.out_dir / name, mode)
                for mode, r in self.items()
                if (r.out_dir / name).exists()
            ]
            return (
                reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)
                if frames
                else spark.createDataFrame([], "mode string, id bigint")
            )

        return SparkFrames(union("checkpoints.parquet"), union("subtasks.parquet"))

    def __repr__(self) -> str:
        return f"RunResult({str(self.out_dir)!r}, {self.verdicts})"


# -- checking what the caller gave ---------------------------------------------------------------------------


def as_scenario(scenario: str | os.PathLike | Scenario) -> Scenario:
    """A loaded scenario, a scenario file's path, or a bundled scenario's name (``quickstart``:
    ``scenarios.library``), loaded."""
    if isinstance(scenario, Scenario):
        return scenario
    if isinstance(scenario, (str, os.PathLike)):
        path = resolve(scenario)
        name = os.fspath(scenario)
        if not path.exists() and is_bare_name(name) and not name.endswith(".toml"):  # a name, not a file
            raise ScenarioError(
                path,
                None,
                "no such scenario file, nor a bundled scenario of that name (barriersim scenarios lists them)",
            )
        return load_scenario(path)
    raise ScenarioError(
        "<scenario>", None, f"must be a scenario file's path or a Scenario, got {type(scenario).__name__}"
    )


def check_seed(scenario: Scenario, seed: Any) -> int | None:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ScenarioError(scenario.path, "seed", f"must be a non-negative integer, got {seed!r}")
    return seed


def modes_of(scenario: Scenario, mode) -> list[CheckpointingMode] | None:
    """The modes a request covers: None (the scenario's own), one mode, a list of them, or ``"all"`` (aligned,
    unaligned and at-least-once side by side)."""
    if mode is None:
        return None
    if mode == "all":
        return list(SIDE_BY_SIDE_MODES)
    wanted = [mode] if isinstance(mode, (str, CheckpointingMode)) else list(mode)
    if not wanted:
        raise ScenarioError(scenario.path, "mode", "must name at least one mode")
    try:
        return [CheckpointingMode.parse(m, "mode") for m in wanted]
    except CheckpointingModeError:
        bad = next(m for m in wanted if m not in ALL_MODES and not isinstance(m, CheckpointingMode))
        raise ScenarioError(
            scenario.path, "mode", f"must be one of {', '.join(ALL_MODES)} or all, got {bad!r}"
        ) from None


def as_faults(faults: FaultSchedule | list | str | None) -> FaultSchedule | None:
    """A fault schedule from a ``FaultSchedule``, its plain form (a list of dicts, as in a scenario's
    ``[[faults]]``) or its JSON (as in a replay command)."""
    return _as_schedule(
        faults, FaultSchedule, FaultScheduleError, "faults: must be a FaultSchedule, a list of fault tables or JSON"
    )


def as_actions(actions: ActionSchedule | list | str | None) -> ActionSchedule | None:
    """An action schedule from an ``ActionSchedule``, its plain form (a list of dicts, as in a scenario's
    ``[[actions]]``) or its JSON."""
    return _as_schedule(
        actions,
        ActionSchedule,
        ActionScheduleError,
        "actions: must be an ActionSchedule, a list of action tables or JSON",
    )


def _as_schedule(value, schedule: type[Any], error: type, expected: str):
    if value is None or isinstance(value, schedule):
        return value
    if isinstance(value, str):
        return schedule.from_json(value)
    if isinstance(value, list):
        return schedule.from_plain(value)
    raise error(f"{expected}, got {type(value).__name__}")


def as_restore(
    scenario: Scenario, restore_from: str | os.PathLike | None, parallelism: Mapping[str, int] | None
) -> RestoreSettings | None:
    """The run's start from a savepoint or retained checkpoint: ``restore_from`` with ``parallelism`` (vertex ->
    parallelism of the restored job)."""
    if restore_from is None:
        if parallelism:
            raise ArgumentError(
                "parallelism: rescales the job restored from a savepoint or checkpoint; give "
                "restore_from (--from PATH) too"
            )
        return None
    if not isinstance(parallelism, (Mapping, type(None))):
        raise ArgumentError(
            f"parallelism: must be a mapping of vertex to parallelism, got {type(parallelism).__name__}"
        )
    pointer = os.fspath(restore_from)
    try:  # an object store URI as given (its query holds the S3 client's options), a path made absolute
        return RestoreSettings.from_plain(
            {
                "from": pointer if is_object_store_uri(pointer) else os.path.abspath(pointer),
                "parallelism": dict(parallelism or {}),
            }
        )
    except ActionScheduleError as err:
        raise ScenarioError(scenario.path, *str(err).split(": ", 1)) from None


def apply_overrides(scenario: Scenario, overrides: Mapping[str, Any] | None) -> Scenario:
    """``scenario`` with ``section.key`` settings replaced, checked as the scenario file's are."""
    if not overrides:
        return scenario
    if not isinstance(overrides, Mapping):
        raise ScenarioError(
            scenario.path, "overrides", f"must be a mapping of dotted keys to values, got {type(overrides).__name__}"
        )
    return apply_settings(scenario, dict(overrides), "overrides")


# -- planning --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """A checked request: one effective scenario per mode, the backend and where the workload comes from;
    ``nest``: each mode gets ``out/<mode>/`` (several modes, or ``mode="all"``)."""

    runs: tuple[Scenario, ...]
    backend: Backend
    workload: WorkloadGenerator
    nest: bool

    @property
    def modes(self) -> list[str]:
        return [s.checkpointing.mode.value for s in self.runs]

    @property
    def scenario(self) -> Scenario:
        """The first run's effective scenario (every run of a plan shares its workload and seed)."""
        return self.runs[0]

    def targets(self, out: Path) -> list[tuple[Path, Scenario]]:
        return [(out / s.checkpointing.mode.value if self.nest else out, s) for s in self.runs]


def plan(
    scenario,
    *,
    backend: Backend | str = Backend.SIM,
    mode=None,
    seed=None,
    faults=None,
    actions=None,
    restore_from=None,
    parallelism=None,
    overrides=None,
    workload: WorkloadGenerator | str | None = None,
    mode_origin: str = "mode=",
) -> Plan:
    """Check everything the caller gave, before anything slow starts: the backend and workload (names or members),
    the overrides first, then the seed, the faults, the actions and the restore (the snapshot must be readable, of
    an earlier run of the same scenario), then each mode (``mode_origin`` names where a mode came from in its
    errors)."""
    backend = Backend.parse(backend)
    workload = backend.default_workload if workload is None else WorkloadGenerator.parse(workload)
    if backend is Backend.RAY:
        require("spark", "the Ray backend")
        try:
            socket_links_wanted()  # the environment's BARRIERSIM_RAY_LINKS, checked before anything starts
        except ValueError as err:
            raise ArgumentError(str(err)) from None
    elif workload is WorkloadGenerator.SPARK:
        require("spark", 'workload="spark" (generated in Spark on Ray)')
    s = apply_overrides(as_scenario(scenario), overrides)
    if backend is Backend.RAY and workload is not WorkloadGenerator.SPARK:
        raise UnsupportedScenario(
            f"{s.path}: workload: the Ray backend generates its workload in Spark on Ray; "
            f'workload="{workload}" applies to the sim backend'
        )
    if backend is Backend.RAY and s.workload.source_emission is SourceEmission.EXACT:
        raise UnsupportedScenario(
            f'{s.path}: workload.source_emission: "exact" is the simulator\'s model; the Ray '
            "backend paces its sources in real time, in steps"
        )
    s = effective_scenario(
        s,
        seed=check_seed(s, seed),
        faults=as_faults(faults),
        actions=as_actions(actions),
        restore=as_restore(s, restore_from, parallelism),
    )
    check_restore(s)
    modes = modes_of(s, mode)
    runs = (s,) if modes is None else tuple(effective_scenario(s, mode=m, origin=mode_origin) for m in modes)
    return Plan(runs, backend, workload, nest=mode == "all" or len(runs) > 1)


# -- running ---------------------------------------------------------------------------------------------------


def local_workload_splits(scenario: Scenario) -> Splits:
    return workload_splits(scenario)


def spark_workload_splits(spark, scenario: Scenario) -> Splits:
    """The simulator's source splits generated in Spark on Ray, by the Ray backend's own path: one Spark job
    draws every source vertex's records (``barriersim.spark.workload.generate_workload``: vertex ``k`` draws with
    seed ``seed + k``, record ids offset by ``k * 10**9``, one Spark partition per split) and hands them over as
    Arrow tables (``hand_off``), decoded as the source actors decode them. The same splits as the local draws
    (``scenarios.simulation_inputs.workload_splits``)."""
    workload = generate_workload(spark, scenario, scenario.seed)
    try:
        return {vertex: [decode_split(table) for table in tables] for vertex, tables in hand_off(workload).items()}
    finally:
        workload.df.unpersist()


def check_checkpoint_storage(backend: Backend | str, checkpoint_storage: str | None) -> str | None:
    """The checkpoint storage URI to run with (a plain path made absolute: the job manager's working directory is
    not the caller's); ``ArgumentError`` for one that names no storage or an object store this node cannot reach.
    Both backends take one (the simulator then writes its checkpoints there instead of keeping them in memory)."""
    if checkpoint_storage is None:
        return None
    Backend.parse(backend)
    try:
        check_storage_uri(checkpoint_storage)
        probe_storage(checkpoint_storage)  # the job manager runs on this (the driver's) node: what it will reach
    except CheckpointStorageError as err:
        raise ArgumentError(str(err)) from None
    return checkpoint_storage if "://" in checkpoint_storage else str(Path(checkpoint_storage).resolve())


def check_cluster(address: str | None, connect_timeout: float | None = None) -> str | None:
    """The Ray cluster a run attaches to (``address``, else ``RAY_ADDRESS``; None: a local one it starts), checked
    to answer within ``connect_timeout`` seconds (default ``$BARRIERSIM_CONNECT_TIMEOUT``, else 30) before anything
    starts: ``barriersim.ray_address``; an address that cannot be reached is one ``AddressError`` line."""
    return check_address(address, connect_timeout)


def execute(
    p: Plan,
    out: Path,
    *,
    spark=None,
    address: str | None = None,
    progress: Progress | None = None,
    splits: Splits | None = None,
    checkpoint_files: bool = False,
    checkpoint_storage: str | None = None,
    cache: bool = True,
    connect_timeout: float | None = None,
) -> RunResult:
    """Run a plan into ``out``. On the sim backend with the Spark workload the splits are generated once for all
    modes (or given); ``checkpoint_files``: the simulator writes its checkpoints as a Ray run does.
    ``checkpoint_storage``: Flink's ``state.checkpoints.dir`` (a path every node sees, ``file://...`` or
    ``s3://bucket/prefix[?endpoint_override=host:port&scheme=http]``; ``run_storage.storage_uris`` says where each
    run goes;
    default: each run directory's ``checkpoints/`` on Ray, memory (or ``checkpoints/`` with ``checkpoint_files``)
    on the simulator). ``cache``: the ray backend takes a workload Spark generated before, and its reference,
    from the workload cache (``barriersim.workload_cache``) without starting Spark; False: Spark generates it.
    ``connect_timeout``: how long the Ray cluster at ``address`` may take to answer (``check_cluster``)."""
    out = Path(out)
    if p.backend is Backend.RAY or (p.workload is WorkloadGenerator.SPARK and splits is None and spark is None):
        address = check_cluster(address, connect_timeout)
    checkpoint_storage = check_checkpoint_storage(p.backend, checkpoint_storage)
    targets = p.targets(out)
    if p.backend is Backend.RAY:
        # the Ray driver imports ray, an optional extra (plan() required `spark`, which brings it): loaded only here
        from barriersim.ray_backend import run_on_ray

        summaries = run_on_ray(
            targets, address=address, progress=progress, checkpoint_storage=checkpoint_storage, cache=cache
        )
        return RunResult(out, {s["mode"]: ModeRun(target, s) for (target, _), s in zip(targets, summaries)})
    if p.workload is WorkloadGenerator.SPARK and splits is None:
        with SparkOnDemand(spark, address, log_dir=out / "logs") as session:
            if progress is not None and spark is None:
                progress("starting Spark on Ray", None)
            spark_session = session.get()
            if progress is not None:
                progress("generating the workload in Spark", None)
            splits = spark_workload_splits(spark_session, p.scenario)
    runs = {}
    _, storages = storage_uris(checkpoint_storage, targets)
    for target, scenario in targets:
        if progress is not None:
            progress(f"simulating {scenario.name} in {scenario.checkpointing.mode.value} mode", None)
        summary = simulate(
            scenario,
            target,
            splits=splits,
            generated_by=p.workload,
            checkpoint_files=checkpoint_files,
            checkpoint_storage=storages[target],
        )
        runs[summary["mode"]] = ModeRun(target, summary)
    return RunResult(out, runs)


def run(
    scenario: str | os.PathLike | Scenario,
    *,
    backend: Backend | str = Backend.SIM,
    mode=None,
    seed: int | None = None,
    out: str | os.PathLike | None = None,
    faults=None,
    actions=None,
    restore_from=None,
    parallelism=None,
    address: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    workload: WorkloadGenerator | str | None = None,
    spark=None,
    progress: Progress | None = None,
    force: bool = False,
    checkpoint_files: bool = False,
    checkpoint_storage: str | None = None,
    cache: bool = True,
    connect_timeout: float | None = None,
) -> RunResult:
    """Run a scenario and return its results (``RunResult``: mode -> ``ModeRun``; ``.only`` for one mode).

    ``scenario``: a scenario file's path or a loaded ``Scenario``. ``backend``: ``"sim"`` (the deterministic
    simulator, default) or ``"ray"`` (Ray actors, Spark on Ray). ``mode``: a checkpointing mode overriding the
    scenario's, a list of modes, or ``"all"`` (aligned, unaligned, at-least-once side by side). ``seed``:
    overrides the scenario's. ``out``: the run directory (default ``runs/<scenario>-<UTC stamp>``; each mode in
    ``out/<mode>/`` when there are several). ``faults``: a fault schedule (``FaultSchedule``, its plain list or
    its JSON) replacing the scenario's. ``actions``: experiment actions (``ActionSchedule``, its plain list or
    JSON: savepoints, stop-with-savepoint, cancel, restores) replacing the scenario's. ``restore_from``: start
    from this savepoint or retained checkpoint of an earlier run of the scenario, with ``parallelism`` (vertex ->
    parallelism) for the restored job. ``address``: an existing Ray cluster. ``overrides``:
    ``{"section.key": value}`` for workload, checkpointing and network keys. ``workload``: ``"local"`` or
    ``"spark"`` (sim backend; the Ray backend always uses Spark). ``spark``: a live SparkSession on Ray to use
    instead of starting one. ``progress``: ``(stage, fraction)`` callback. ``force``: ``out`` may be a previous
    run's directory, whose contents are replaced (else a non-empty ``out`` is refused). ``checkpoint_files``: on
    the simulator, keep the checkpoints in files under ``out/checkpoints/`` as a Ray run does (same trace).
    ``checkpoint_storage``: where the checkpoints and savepoints go (Flink's ``state.checkpoints.dir``: a path,
    ``file://`` or ``s3://`` URI), on either backend. ``cache``: the ray backend reuses the workload and the
    verification reference Spark computed in an earlier run of the same workload (``barriersim.workload_cache``:
    in ``$BARRIERSIM_CACHE_DIR``, else ``$XDG_CACHE_HOME/barriersim`` or ``~/.cache/barriersim``) and then does not
    start Spark; False: Spark computes them and the cache is not used. ``connect_timeout``: seconds the Ray
    cluster at ``address`` (or ``RAY_ADDRESS``) may take to answer before the run gives up (default
    ``$BARRIERSIM_CONNECT_TIMEOUT``, else 30).

    Raises ``ScenarioError`` / ``FaultScheduleError`` / ``UnsupportedScenario`` / ``ArgumentError`` (one-line
    messages naming the file and key) for bad input, ``MissingExtra`` for an extra the run needs and has not, and
    ``AddressError`` for a Ray cluster that does not answer, before anything is started or written.
    """
    p = plan(
        scenario,
        backend=backend,
        mode=mode,
        seed=seed,
        faults=faults,
        actions=actions,
        restore_from=restore_from,
        parallelism=parallelism,
        overrides=overrides,
        workload=workload,
    )
    check_checkpoint_storage(p.backend, checkpoint_storage)
    out_dir = Path(out) if out is not None else default_out_dir(p.scenario)
    if p.backend is Backend.RAY or (p.workload is WorkloadGenerator.SPARK and spark is None):
        address = check_cluster(address, connect_timeout)
    prepare_out_dir(out_dir, force)
    return execute(
        p,
        out_dir,
        spark=spark,
        address=address,
        progress=progress,
        checkpoint_files=checkpoint_files,
        checkpoint_storage=checkpoint_storage,
        cache=cache,
        connect_timeout=connect_timeout,
    )


__all__ = [
    "BACKENDS",
    "WORKLOADS",
    "Backend",
    "ModeRun",
    "Plan",
    "RunResult",
    "SparkFrames",
    "WorkloadGenerator",
    "execute",
    "plan",
    "run",
    "as_scenario",
    "apply_overrides",
    "local_workload_splits",
    "spark_workload_splits",
    "with_overrides",
]
