"""Scenario files: TOML, validated against a declarative schema, loaded into frozen dataclasses.

How this works: ``SCHEMA`` lists every section and key a scenario may hold, each with its type, default and
allowed range. ``load_scenario(path)`` reads the file with ``tomllib``, rejects unknown sections and keys,
wrong types and out-of-range values with a ``ScenarioError`` whose one-line message names the file and the
key (``scenarios/x.toml: workload.records: must be an integer >= 1, got 0``), then checks rules that span
keys (e.g. unaligned checkpoints need exactly-once). The CLI prints that line and exits with status 2.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable

MODES = ("aligned", "unaligned", "aligned-with-timeout", "at-least-once")


class ScenarioError(Exception):
    """A scenario file that cannot be used; ``str()`` is the one-line message for the user."""

    def __init__(self, path: str | Path, key: str | None, problem: str):
        self.path = str(path)
        self.key = key
        self.problem = problem
        super().__init__(f"{self.path}: {key}: {problem}" if key else f"{self.path}: {problem}")


@dataclass(frozen=True)
class Field:
    kind: type
    default: Any
    check: Callable[[Any], str | None] = lambda v: None


def _at_least(low: float) -> Callable[[Any], str | None]:
    return lambda v: None if v >= low else f"must be >= {low}, got {v}"


def _between(low: float, high: float) -> Callable[[Any], str | None]:
    return lambda v: None if low <= v <= high else f"must be between {low} and {high}, got {v}"


def _one_of(*choices: str) -> Callable[[Any], str | None]:
    return lambda v: None if v in choices else f"must be one of {', '.join(choices)}, got {v!r}"


SCHEMA: dict[str, dict[str, Field]] = {
    "scenario": {
        "name": Field(str, None),
        "description": Field(str, ""),
        "seed": Field(int, 0, _at_least(0)),
    },
    "workload": {
        "records": Field(int, 100_000, _at_least(1)),
        "keys": Field(int, 1000, _at_least(1)),
        "zipf_exponent": Field(float, 1.0, _between(0.0, 3.0)),
        "max_value": Field(int, 100, _at_least(1)),
        "rate_per_source": Field(int, 0, _at_least(0)),
    },
    "job": {
        "source_parallelism": Field(int, 2, _between(1, 64)),
        "keyed_sum_parallelism": Field(int, 2, _between(1, 64)),
        "sink_parallelism": Field(int, 1, _between(1, 1)),
        "records_per_buffer": Field(int, 200, _between(1, 100_000)),
    },
    "checkpointing": {
        "mode": Field(str, "aligned", _one_of(*MODES)),
        "interval_ms": Field(int, 1000, _at_least(10)),
        "timeout_ms": Field(int, 600_000, _at_least(1)),
    },
}


@dataclass(frozen=True)
class WorkloadSpec:
    records: int
    keys: int
    zipf_exponent: float
    max_value: int
    rate_per_source: int


@dataclass(frozen=True)
class JobSpec:
    source_parallelism: int
    keyed_sum_parallelism: int
    sink_parallelism: int
    records_per_buffer: int


@dataclass(frozen=True)
class CheckpointingSpec:
    mode: str
    interval_ms: int
    timeout_ms: int


@dataclass(frozen=True)
class Scenario:
    path: str
    name: str
    description: str
    seed: int
    workload: WorkloadSpec
    job: JobSpec
    checkpointing: CheckpointingSpec


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


def parse_scenario(data: dict[str, Any], path: str = "<scenario>") -> Scenario:
    """Validate an already-parsed TOML document."""
    values: dict[str, dict[str, Any]] = {}
    for section in data:
        if section not in SCHEMA:
            raise ScenarioError(path, section, f"unknown section (known: {', '.join(SCHEMA)})")
        if not isinstance(data[section], dict):
            raise ScenarioError(path, section, "must be a table")
    for section, spec in SCHEMA.items():
        given = data.get(section, {})
        for key in given:
            if key not in spec:
                raise ScenarioError(path, f"{section}.{key}", f"unknown key (known: {', '.join(spec)})")
        out: dict[str, Any] = {}
        for key, field_spec in spec.items():
            if key in given:
                out[key] = _coerce(path, f"{section}.{key}", field_spec, given[key])
            elif field_spec.default is None:
                raise ScenarioError(path, f"{section}.{key}", "is required")
            else:
                out[key] = field_spec.default
        values[section] = out
    scenario = Scenario(
        path=path,
        name=values["scenario"]["name"],
        description=values["scenario"]["description"],
        seed=values["scenario"]["seed"],
        workload=WorkloadSpec(**values["workload"]),
        job=JobSpec(**values["job"]),
        checkpointing=CheckpointingSpec(**values["checkpointing"]),
    )
    if scenario.workload.keys > scenario.workload.records * 1000:
        raise ScenarioError(path, "workload.keys", "is far larger than the number of records")
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
