"""The scenario schema: every section and key a scenario file may hold, each with its type, default, allowed values
and description, generated from the runtime's section classes.

How this works: ``SECTIONS`` maps each configuration section to the runtime's frozen dataclass it is parsed into;
its ``Field``s come from the class's settings (``runtime.settings``), an enum becoming a string of its values.
The file's own tables (``[scenario]``, the ``[job]`` shorthand, ``[[job.vertex]]``, ``[[job.edge]]``) are declared
here. ``SETTABLE_SECTIONS`` are what overrides and sweeps may set as ``section.key``; ``reference_markdown()``
renders it all as the scenario reference. The loader (``scenarios.loader``) applies the schema.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from barriersim.runtime.checkpoint_cost import CheckpointCostModel
from barriersim.runtime.coordinator.configuration import CheckpointingConfig
from barriersim.runtime.job.config import WorkloadConfig
from barriersim.runtime.job.placement import ClusterConfig
from barriersim.runtime.job.restart_strategy import RestartStrategyConfig
from barriersim.runtime.jobgraph import OperatorKind, Partitioner
from barriersim.runtime.network.config import NetworkConfig
from barriersim.runtime.settings import ANY, PLAIN_NAME, AtLeast, Between, Check, settings_of
from barriersim.runtime.state.backend import StateBackendConfig

REQUIRED = None  # a Field's default when the key must be given


@dataclass(frozen=True)
class Field:
    """One key: ``kind`` is its type in the file (int, float, str or bool), ``default`` its value there when left
    out (``REQUIRED``: none), ``choices`` the strings it may be (empty: any), ``parse`` what turns the file's value
    into the section's (an enum member)."""

    kind: type
    default: Any
    description: str
    check: Check = ANY
    choices: tuple[str, ...] = ()
    parse: Callable[[Any], Any] = lambda v: v

    def problem(self, value: Any) -> str | None:
        """What is wrong with a value of the right type, or None."""
        if self.choices and value not in self.choices:
            return f"must be one of {', '.join(self.choices)}, got {value!r}"
        return self.check.problem(value)

    def plain(self, value: Any) -> Any:
        """A section's value as the file holds it."""
        return value.value if isinstance(value, enum.Enum) else value

    @property
    def allowed(self) -> str:
        return ", ".join(self.choices) if self.choices else self.check.allowed


def _choice(kind: type[enum.Enum], default: Any, description: str) -> Field:
    return Field(
        str,
        default.value if default is not REQUIRED else REQUIRED,
        description,
        choices=tuple(m.value for m in kind),
        parse=kind,
    )


def _field(s) -> Field:
    if isinstance(s.kind, type) and issubclass(s.kind, enum.Enum):
        return _choice(s.kind, s.default, s.description)
    return Field(s.kind, s.default, s.description, s.check)


@dataclass(frozen=True)
class Section:
    """A configuration section: the runtime class it is parsed into, and what it is about."""

    cls: type
    description: str

    @cached_property
    def fields(self) -> dict[str, Field]:
        return {s.name: _field(s) for s in settings_of(self.cls)}

    def build(self, values: dict[str, Any]) -> Any:
        """The section's object from the file's checked values (each key of the section)."""
        return self.cls(**{k: self.fields[k].parse(v) for k, v in values.items()})

    def plain(self, obj: Any) -> dict[str, Any]:
        """``obj``'s values as the file holds them."""
        return {k: f.plain(getattr(obj, k)) for k, f in self.fields.items()}


SECTIONS: dict[str, Section] = {  # in the order overrides and sweeps list them
    "workload": Section(WorkloadConfig, "What the sources read and how fast (``runtime.job.config.WorkloadConfig``)."),
    "checkpointing": Section(
        CheckpointingConfig,
        "The checkpointing mode and the coordinator's settings "
        "(``runtime.coordinator.configuration.CheckpointingConfig``).",
    ),
    "network": Section(
        NetworkConfig,
        "Network buffers, credit, the output flusher, buffer debloating and the "
        "simulated channel latency (``runtime.network.config.NetworkConfig``).",
    ),
    "cluster": Section(
        ClusterConfig,
        "The TaskManagers and slots the job is placed in and the hosts they are "
        "spread over; the default is Flink's MiniCluster, one TaskManager with a "
        "slot per parallel instance (``runtime.job.placement.ClusterConfig``).",
    ),
    "storage": Section(
        CheckpointCostModel,
        "What checkpoint work costs; the simulator charges it on its virtual "
        "clock, Ray only with emulate_remote_store "
        "(``runtime.checkpoint_cost.CheckpointCostModel``).",
    ),
    "state": Section(
        StateBackendConfig,
        "The keyed state backend: heap or incremental (``runtime.state.backend.StateBackendConfig``).",
    ),
    "restart": Section(
        RestartStrategyConfig,
        "The restart strategy: fixed-delay or exponential-delay "
        "(``runtime.job.restart_strategy.RestartStrategyConfig``).",
    ),
}
SETTABLE_SECTIONS = tuple(SECTIONS)  # what overrides and sweeps may set, as "section.key"

OPERATORS = tuple(k.value for k in OperatorKind)
PARTITIONERS = tuple(p.value for p in Partitioner)

SCENARIO_FIELDS: dict[str, Field] = {
    "name": Field(str, REQUIRED, "the scenario's name (run directories, tables)", PLAIN_NAME),
    "description": Field(str, "", "what the scenario shows"),
    "seed": Field(int, 0, "the one seed of the run: workload draws, latencies, costs", AtLeast(0)),
}
# the quickstart shorthand: a source, a keyed sum and a sink; a general DAG uses [[job.vertex]] and [[job.edge]]
JOB_FIELDS: dict[str, Field] = {
    "source_parallelism": Field(int, 2, "quickstart: the source's parallelism", Between(1, 128)),
    "keyed_sum_parallelism": Field(int, 2, "quickstart: the keyed sum's parallelism", Between(1, 128)),
    "sink_parallelism": Field(int, 1, "quickstart: the sink's parallelism (one)", Between(1, 1)),
    "records_per_buffer": Field(
        int,
        200,
        "unused: how many records a buffer holds follows from network.buffer_size and record_size",
        Between(1, 100_000),
    ),
    "max_parallelism": Field(int, 128, "the vertices' max parallelism (key groups)", Between(1, 32768)),
}
VERTEX_FIELDS: dict[str, Field] = {
    "name": Field(str, REQUIRED, "the vertex's name (subtasks are name#index)", PLAIN_NAME),
    "operator": _choice(OperatorKind, REQUIRED, "what the vertex does (runtime.jobgraph.OperatorKind)"),
    "parallelism": Field(int, REQUIRED, "its parallel subtasks", Between(1, 128)),
    "max_parallelism": Field(int, 128, "its key groups; at least parallelism", Between(1, 32768)),
    "cost_us_per_record": Field(float, 1.0, "simulated processing time per record, in microseconds", Between(0.0, 1e9)),
    "hot_key": Field(int, -1, "a key whose records cost hot_key_extra_us more; -1: none", AtLeast(-1)),
    "hot_key_extra_us": Field(
        float, 0.0, "extra simulated time per record of hot_key, in microseconds", Between(0.0, 1e9)
    ),
    "factor": Field(int, 2, "map: multiplies each value by this", Between(-1_000_000, 1_000_000)),
    "modulus": Field(int, 3, "filter: drops values divisible by this", Between(1, 1_000_000)),
    "window_ms": Field(int, 1000, "window operators: the tumbling window's size in event time", Between(1, 10**12)),
    "record_size": Field(
        int,
        0,
        "bytes each record this vertex emits occupies in a network buffer; 0: the network's record_size",
        Between(0, 1 << 20),
    ),
    "slot_sharing_group": Field(
        str, "default", "subtasks of one group share slots (Flink's slotSharingGroup)", PLAIN_NAME
    ),
}
EDGE_FIELDS: dict[str, Field] = {
    "from": Field(str, REQUIRED, "the producing vertex"),
    "to": Field(str, REQUIRED, "the consuming vertex"),
    "partitioner": _choice(Partitioner, REQUIRED, "how records are distributed (runtime.jobgraph.Partitioner)"),
    "input": Field(int, 0, "the consumer's logical input (1: a two-input operator's second)", Between(0, 1)),
}

_FILE_ORDER = ("scenario", "workload", "job", "network", "cluster", "checkpointing", "restart", "state", "storage")
SCHEMA: dict[str, dict[str, Field]] = {  # every table of a file's, in the order the reference lists them
    name: {"scenario": SCENARIO_FIELDS, "job": JOB_FIELDS}.get(name) or SECTIONS[name].fields for name in _FILE_ORDER
}

VERTEX_TABLE, EDGE_TABLE = "job.vertex", "job.edge"
_TABLE_DESCRIPTIONS = {
    "scenario": "The scenario's name, description and seed.",
    "job": "The quickstart shorthand: a source, a keyed sum and a sink with these parallelisms. A general job graph "
    "uses ``[[job.vertex]]`` and ``[[job.edge]]`` instead (``max_parallelism`` applies to either form).",
    VERTEX_TABLE: "One vertex of a general job graph (an array of tables); its operator's parameters apply to the "
    "operators that read them.",
    EDGE_TABLE: "One edge of a general job graph (an array of tables).",
}
_OTHER_TABLES = {
    "[[faults]]": "the fault schedule (``runtime.faults.fault_schedule``: crashes, slow tasks, lost TaskManagers "
    "and nodes, storage faults)",
    "[[actions]]": "experiment actions (``runtime.faults.experiment``: savepoints, stop-with-savepoint, cancel, "
    "restores with new parallelisms)",
    "[restore]": "start from a savepoint or retained checkpoint: ``from`` (a path) and ``parallelism`` per vertex",
    "[sweep]": "dotted ``section.key`` settings of the sections above, each with a list of values: the run matrix",
}
_TYPE_NAMES = {int: "integer", float: "number", str: "string", bool: "boolean"}


def _toml_value(value: Any) -> str:
    if value is REQUIRED:
        return "required"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    return f'`"{value}"`' if isinstance(value, str) else f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("``", "`")


def _allowed(f: Field) -> str:
    if f.choices:
        return ", ".join(f"`{c}`" for c in f.choices)
    return _cell(f.allowed) or "any"


def reference_markdown() -> str:
    """The scenario reference as Markdown: every table of a scenario file, each key with its type, default, allowed
    values and description (generated from the schema, so it cannot drift from what the loader accepts)."""
    tables: list[tuple[str, str, dict[str, Field]]] = []
    for name, fields in SCHEMA.items():
        title = f"[{name}]"
        description = SECTIONS[name].description if name in SECTIONS else _TABLE_DESCRIPTIONS[name]
        tables.append((title, description, fields))
        if name == "job":
            tables.append((f"[[{VERTEX_TABLE}]]", _TABLE_DESCRIPTIONS[VERTEX_TABLE], VERTEX_FIELDS))
            tables.append((f"[[{EDGE_TABLE}]]", _TABLE_DESCRIPTIONS[EDGE_TABLE], EDGE_FIELDS))
    lines = [
        "# Scenario reference",
        "",
        "A scenario is a TOML file of the tables below; a key left out takes its default. "
        f"`--set` and `[sweep]` set keys of {', '.join(f'`[{s}]`' for s in SETTABLE_SECTIONS)} "
        "as `section.key`.",
        "",
    ]
    for title, description, fields in tables:
        lines += [
            f"## `{title}`",
            "",
            _cell(description),
            "",
            "| key | type | default | allowed | description |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| `{key}` | {_TYPE_NAMES[f.kind]} | {_toml_value(f.default)} | {_allowed(f)} | {_cell(f.description)} |"
            for key, f in fields.items()
        ]
        lines.append("")
    lines += ["## Other tables", ""]
    lines += [f"- `{title}`: {_cell(text)}" for title, text in _OTHER_TABLES.items()]
    return "\n".join(lines) + "\n"
