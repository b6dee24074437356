"""The Python API for notebooks: ``barriersim.run(scenario, ...)`` runs a scenario and hands back its results
as pandas DataFrames (and Spark DataFrames on request).

How this works: ``run`` takes a scenario file's path or a loaded ``Scenario``, applies the caller's settings
(``overrides`` of ``section.key`` values, ``seed``, ``faults``), checks everything before anything slow starts
(the errors are the CLI's: ``ScenarioError`` naming the file and the key, ``FaultScheduleError``,
``UnsupportedScenario``) and runs it on the deterministic simulator (``backend="sim"``,
``barriersim.simulate.simulate_scenario``) or on Ray actors with Spark on Ray (``backend="ray"``,
``barriersim.run.run_scenario``). Each run writes its run directory as the CLI does; the result reads it back:
``summary`` (the ``summary.json`` dict), ``checkpoints`` and ``subtasks`` (Flink's field names, from the Parquet
files), ``verdict`` and ``to_spark(spark)``. ``mode="all"`` runs aligned, unaligned and at-least-once on the same
workload, each in ``out/<mode>/``, and returns a ``RunResults`` mapping mode to result.

The simulator's workload is drawn locally by default (``workload="local"``); ``workload="spark"`` generates it
as the Ray backend does, as a Spark DataFrame on Ray (RayDP) passed through Ray's object store as Arrow blocks
and cut there into the source splits (``spark_workload_splits``). Every draw is a pure function of (seed, record id), so both give
the same splits; the summary records which one was used in ``workload.generated_by``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property, reduce
from pathlib import Path
from typing import Any, Callable, NamedTuple

import pandas as pd

from barriersim.runtime.faults import FaultSchedule, FaultScheduleError
from barriersim.scenarios.loader import (
    MODES, SCHEMA, Scenario, ScenarioError, expand_sweep, load_scenario, with_overrides, with_setting,
)

BACKENDS = ("sim", "ray")
WORKLOADS = ("local", "spark")
SIDE_BY_SIDE_MODES = ("aligned", "unaligned", "at-least-once")
SETTABLE_SECTIONS = ("workload", "checkpointing", "network")

Splits = dict[str, list[list[tuple]]]


class SparkFrames(NamedTuple):
    """A run's tables as Spark DataFrames."""

    checkpoints: Any  # pyspark.sql.DataFrame
    subtasks: Any


# Columns that hold only nulls in a run without failures are stored with Arrow's null type, which Spark cannot
# read; they are read as typed nulls instead.
_NULL_COLUMN_TYPES = {"failure_timestamp": "bigint", "failure_message": "string", "failure_reason": "string",
                      "external_path": "string"}
_ARROW_TO_SPARK = {"int8": "tinyint", "int16": "smallint", "int32": "int", "int64": "bigint", "double": "double",
                   "float": "float", "string": "string", "large_string": "string", "bool": "boolean"}


def _parquet_to_spark(spark, path: Path, mode: str | None = None):
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    if not path.exists():
        return spark.createDataFrame([], "id bigint")
    schema = pq.read_schema(str(path))
    typed = [(n, _ARROW_TO_SPARK.get(str(schema.field(n).type))) for n in schema.names]
    ddl = ", ".join(f"`{n}` {t}" for n, t in typed if t)
    df = spark.read.schema(ddl).parquet(str(path))
    cols = [F.col(f"`{n}`") if t else F.lit(None).cast(_NULL_COLUMN_TYPES.get(n, "string")).alias(n) for n, t in typed]
    if mode is not None:
        cols.insert(0, F.lit(mode).alias("mode"))
    return df.select(*cols)


def _read_table(path: Path) -> pd.DataFrame:
    import pyarrow.parquet as pq

    if not path.exists():  # a run writes no table without rows
        return pd.DataFrame()
    return pq.read_table(str(path)).to_pandas()


@dataclass
class RunResult:
    """One run: its directory and what it wrote there."""

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
        return SparkFrames(_parquet_to_spark(spark, self.out_dir / "checkpoints.parquet"),
                           _parquet_to_spark(spark, self.out_dir / "subtasks.parquet"))

    def __repr__(self) -> str:
        cps = self.summary.get("checkpoints", {})
        return (f"RunResult({self.summary.get('scenario')!r}, backend={self.backend!r}, mode={self.mode!r}, "
                f"verdict={self.verdict!r}, completed={cps.get('completed')}, out_dir={str(self.out_dir)!r})")


class RunResults(dict):
    """``mode="all"``: mode -> ``RunResult`` (in run order), with the tables of all modes side by side."""

    def __init__(self, out_dir: Path, results: Mapping[str, RunResult]):
        super().__init__(results)
        self.out_dir = out_dir

    @property
    def verdicts(self) -> dict[str, str]:
        return {mode: r.verdict for mode, r in self.items()}

    @property
    def summary(self) -> dict[str, dict]:
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
            frames = [_parquet_to_spark(spark, r.out_dir / name, mode) for mode, r in self.items()
                      if (r.out_dir / name).exists()]
            return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames) if frames else \
                spark.createDataFrame([], "mode string, id bigint")
        return SparkFrames(union("checkpoints.parquet"), union("subtasks.parquet"))


# -- checking what the caller gave ---------------------------------------------------------------------------

def as_scenario(scenario: str | os.PathLike | Scenario) -> Scenario:
    if isinstance(scenario, Scenario):
        return scenario
    if isinstance(scenario, (str, os.PathLike)):
        return load_scenario(scenario)
    raise ScenarioError("<scenario>", None, f"must be a scenario file's path or a Scenario, got {type(scenario).__name__}")


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name}: must be one of {', '.join(choices)}, got {value!r}")


def check_seed(scenario: Scenario, seed: Any) -> int:
    if seed is None:
        return scenario.seed
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ScenarioError(scenario.path, "seed", f"must be a non-negative integer, got {seed!r}")
    return seed


def modes_of(scenario: Scenario, mode: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """The modes a run covers: the scenario's, the one given, a list of them, or ``"all"`` (side by side)."""
    if mode is None:
        return [scenario.checkpointing.mode]
    if mode == "all":
        return list(SIDE_BY_SIDE_MODES)
    wanted = [mode] if isinstance(mode, str) else list(mode)
    for m in wanted:
        if m not in MODES:
            raise ScenarioError(scenario.path, "mode", f"must be one of {', '.join(MODES)} or all, got {m!r}")
    if not wanted:
        raise ScenarioError(scenario.path, "mode", "must name at least one mode")
    return wanted


def as_faults(faults: FaultSchedule | list | str | None) -> FaultSchedule | None:
    """A fault schedule from a ``FaultSchedule``, its plain form (a list of dicts, as in a scenario's
    ``[[faults]]``) or its JSON (as in a replay command)."""
    if faults is None or isinstance(faults, FaultSchedule):
        return faults
    if isinstance(faults, str):
        return FaultSchedule.from_json(faults)
    if isinstance(faults, list):
        return FaultSchedule.from_plain(faults)
    raise FaultScheduleError(f"faults: must be a FaultSchedule, a list of fault tables or JSON, got {type(faults).__name__}")


_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def apply_overrides(scenario: Scenario, overrides: Mapping[str, Any] | None) -> Scenario:
    """``scenario`` with ``section.key`` settings replaced, each checked as the scenario file's would be."""
    if not overrides:
        return scenario
    if not isinstance(overrides, Mapping):
        raise ScenarioError(scenario.path, "overrides", f"must be a mapping of dotted keys to values, got {type(overrides).__name__}")
    for key, value in overrides.items():
        section, _, name = str(key).partition(".")
        if section not in SETTABLE_SECTIONS or name not in SCHEMA[section]:
            raise ScenarioError(scenario.path, f"overrides.{key}",
                                "must name a workload, checkpointing or network key, e.g. \"workload.zipf_exponent\"")
        spec = SCHEMA[section][name]
        if spec.kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, spec.kind) or (spec.kind is not bool and isinstance(value, bool)):
            raise ScenarioError(scenario.path, f"overrides.{key}",
                                f"must be {_TYPE_NAMES[spec.kind]}, got {type(value).__name__} {value!r}")
        problem = spec.check(value)
        if problem:
            raise ScenarioError(scenario.path, f"overrides.{key}", problem)
        scenario = with_setting(scenario, key, value)
    # The loader's checks that span keys (e.g. unaligned needs max_concurrent 1), through its sweep expansion
    # of a one-point sweep that changes nothing.
    sweep = (("checkpointing.mode", (scenario.checkpointing.mode,)),)
    [(_, checked)] = expand_sweep(with_overrides(scenario, sweep=sweep))
    return with_overrides(checked, sweep=scenario.sweep)


def default_out(scenario: Scenario, suffix: str = "") -> Path:
    from barriersim.run import default_out_dir

    out = default_out_dir(scenario)
    return out.with_name(out.name.replace(scenario.name, scenario.name + suffix, 1)) if suffix else out


# -- workloads ---------------------------------------------------------------------------------------------

def local_workload_splits(scenario: Scenario, seed: int) -> Splits:
    from barriersim.scenarios.simulation_inputs import workload_splits

    return workload_splits(scenario, seed)


def spark_workload_splits(spark, scenario: Scenario, seed: int) -> Splits:
    """The simulator's source splits generated in Spark on Ray, by the Ray backend's own path: one DataFrame of
    every source vertex's records (``barriersim.spark.workload.generate_workload``: vertex ``k`` draws with seed
    ``seed + k``, record ids offset by ``k * 10**9``), converted once into Arrow blocks in Ray's object store and
    cut there into one msgpack split per source subtask (``splits_to_object_store``), which are fetched and
    decoded as the source actors decode them. The same splits as the local draws
    (``scenarios.simulation_inputs.workload_splits``)."""
    import ray

    from barriersim.runtime.records_codec import decode_records
    from barriersim.spark.workload import generate_workload, splits_to_object_store

    workload = generate_workload(spark, scenario, seed)
    try:
        refs = splits_to_object_store(workload)
        return {vertex: [decode_records(data) for data in ray.get(list(split_refs))]
                for vertex, split_refs in refs.items()}
    finally:
        workload.df.unpersist()


class SparkOnDemand:
    """A SparkSession for as long as it is needed: the caller's, or Spark on Ray started on first use and
    stopped by ``close``."""

    def __init__(self, spark=None, address: str | None = None, app_name: str = "barriersim-api"):
        self._given = spark
        self._address = address
        self._app_name = app_name
        self._cluster = None

    def get(self):
        if self._given is not None:
            return self._given
        if self._cluster is None:
            from barriersim.run import ray_address
            from barriersim.spark.session import RayAndSpark

            cluster = RayAndSpark(app_name=self._app_name, address=ray_address(self._address))
            cluster.__enter__()
            self._cluster = cluster
        return self._cluster.spark

    def close(self) -> None:
        if self._cluster is not None:
            cluster, self._cluster = self._cluster, None
            cluster.close()

    def __enter__(self) -> "SparkOnDemand":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- running -----------------------------------------------------------------------------------------------

def simulate(scenario: Scenario, out_dir: Path, *, seed: int, mode: str, faults: FaultSchedule | None,
             splits: Splits | None = None, generated_by: str = "local") -> dict:
    """``simulate_scenario``, on precomputed ``splits`` when given; the summary's ``workload.generated_by`` says
    where they came from."""
    from barriersim.simulate import simulate_scenario
    from barriersim.summary import write_json_atomically

    summary = simulate_scenario(scenario, out_dir=out_dir, seed=seed, mode=mode, faults=faults, splits=splits)
    if summary.get("workload", {}).get("generated_by") != generated_by:
        summary["workload"]["generated_by"] = generated_by
        write_json_atomically(out_dir / "summary.json", summary)
    return summary


def _run_on_ray(scenario: Scenario, out: Path, *, seed: int, modes: list[str], nest_modes: bool,
                faults: FaultSchedule | None, address: str | None, progress: Callable | None) -> list[dict]:
    """The Ray backend: one mode into ``out`` (``run_scenario``), or several on one Spark-generated workload and
    one start of Ray and Spark, each into ``out/<mode>/`` (``run_scenario_modes``)."""
    from barriersim.run import run_scenario, run_scenario_modes

    if nest_modes or len(modes) > 1:
        if faults is not None:
            scenario = with_overrides(scenario, faults=faults)
        results = run_scenario_modes(scenario, modes, out_dir=out, seed=seed, address=address, progress=progress)
    else:
        results = [run_scenario(scenario, out_dir=out, seed=seed, address=address, progress=progress,
                                mode=modes[0], faults=faults)]
    return [r.summary for r in results]


@dataclass(frozen=True)
class Plan:
    """A checked request: the scenario with its overrides, the seed, modes, faults, backend and workload."""

    scenario: Scenario
    seed: int
    modes: list[str]
    faults: FaultSchedule | None
    backend: str
    workload: str


def plan(scenario, *, backend: str = "sim", mode=None, seed=None, faults=None, overrides=None,
         workload: str | None = None) -> Plan:
    """Check everything the caller gave, before anything slow starts."""
    _check_choice("backend", backend, BACKENDS)
    if workload is None:
        workload = "spark" if backend == "ray" else "local"
    _check_choice("workload", workload, WORKLOADS)
    s = apply_overrides(as_scenario(scenario), overrides)
    if backend == "ray" and workload == "local":
        from barriersim.run import UnsupportedScenario

        raise UnsupportedScenario(f"{s.path}: workload: the Ray backend generates its workload in Spark on Ray; "
                                  "workload=\"local\" applies to the sim backend")
    return Plan(s, check_seed(s, seed), modes_of(s, mode), as_faults(faults), backend, workload)


def execute(p: Plan, out: Path, *, nest_modes: bool, spark=None, address: str | None = None,
            progress: Callable | None = None, splits: Splits | None = None) -> dict[str, RunResult]:
    """Run a plan: each mode into ``out/<mode>/`` (or ``out`` itself when ``nest_modes`` is false and there is
    one mode). On the sim backend with the Spark workload the splits are generated once for all modes."""
    nest = nest_modes or len(p.modes) > 1
    if p.backend == "ray":
        summaries = _run_on_ray(p.scenario, out, seed=p.seed, modes=p.modes, nest_modes=nest, faults=p.faults,
                                address=address, progress=progress)
        return {m: RunResult(out_dir=out / m if nest else out, summary=s) for m, s in zip(p.modes, summaries)}
    if p.workload == "spark" and splits is None:
        with SparkOnDemand(spark, address) as session:
            splits = spark_workload_splits(session.get(), p.scenario, p.seed)
    results = {}
    for m in p.modes:
        target = out / m if nest else out
        summary = simulate(p.scenario, target, seed=p.seed, mode=m, faults=p.faults, splits=splits,
                           generated_by=p.workload)
        results[m] = RunResult(out_dir=target, summary=summary)
    return results


def run(scenario: str | os.PathLike | Scenario, *, backend: str = "sim", mode: str | None = None,
        seed: int | None = None, out: str | os.PathLike | None = None, faults=None, address: str | None = None,
        overrides: Mapping[str, Any] | None = None, workload: str | None = None, spark=None,
        progress: Callable[[str, float | None], None] | None = None) -> RunResult | RunResults:
    """Run a scenario and return its results.

    ``scenario``: a scenario file's path or a loaded ``Scenario``. ``backend``: ``"sim"`` (the deterministic
    simulator, default) or ``"ray"`` (Ray actors, Spark on Ray). ``mode``: a checkpointing mode overriding the
    scenario's, or ``"all"`` (aligned, unaligned, at-least-once side by side: returns ``RunResults``).
    ``seed``: overrides the scenario's. ``out``: the run directory (default ``runs/<scenario>-<UTC stamp>``).
    ``faults``: a fault schedule (``FaultSchedule``, its plain list or its JSON) replacing the scenario's.
    ``address``: an existing Ray cluster. ``overrides``: ``{"section.key": value}`` for workload, checkpointing
    and network keys. ``workload``: ``"local"`` or ``"spark"`` (sim backend; the Ray backend always uses Spark).
    ``spark``: a live SparkSession on Ray to use instead of starting one. ``progress``: ``(stage, fraction)``
    callback of the Ray backend.

    Raises ``ScenarioError`` / ``FaultScheduleError`` / ``UnsupportedScenario`` (one-line messages naming the file
    and key) for bad input, ``ValueError`` for an unknown backend or workload.
    """
    p = plan(scenario, backend=backend, mode=mode, seed=seed, faults=faults, overrides=overrides, workload=workload)
    out_dir = Path(out) if out is not None else default_out(p.scenario)
    results = execute(p, out_dir, nest_modes=mode == "all", spark=spark, address=address, progress=progress)
    if mode == "all" or len(results) > 1:
        return RunResults(out_dir, results)
    return next(iter(results.values()))
