"""A family configuration as a barriersim scenario, or the reason barriersim cannot express it.

``to_scenario_document`` maps the description onto the scenario schema (``scenarios/schema.py``): the source at
the offered rate per subtask, each record emitted when due and a sleep on the task thread in between (``pacing``);
a ``keyed_sum`` behind a hash exchange, a ``map`` (factor 1) behind the others, the last vertex an
``at_least_once_sink``, each with its spin plus Flink's own work per record as ``cost_us_per_record``; the hot key's
sleep and its overshoot as ``hot_key_extra_us``; the cluster and the machine's shared cores, buffers, debloating,
checkpointing, the Java job's restart strategy and checkpoint path (``calibration``, one for all); the rest at
barriersim's defaults. ``convert`` loads it: a valid scenario or ``NotExpressible`` with the reason.
docs/fidelity-family.md lists what the mapping leaves out."""

from __future__ import annotations

from dataclasses import dataclass

from barriersim.scenarios.loader import Scenario, ScenarioError, parse_scenario
from benchmarks.flink_family import calibration
from benchmarks.flink_family.description import HOT_KEY, Config, loads

# the virtual run: the Flink run's length at the rate the job can take (at most 1.5 x its nominal capacity, so that
# an overloaded job's backlog does not stretch the simulation far beyond the Flink run)
OVERLOAD_RECORDS = 1.5


@dataclass(frozen=True)
class NotExpressible:
    name: str
    reason: str


def records_per_source(config: Config) -> int:
    job = loads(config)
    return max(1, int(min(config.rate, OVERLOAD_RECORDS * job.capacity) * config.seconds))


def to_scenario_document(config: Config) -> dict:
    """The scenario as the TOML document's tables would hold it."""
    vertices, edges = [], []
    for i, v in enumerate(config.vertices):
        if i == 0:
            vertices.append({"name": v.name, "operator": "source", "parallelism": v.parallelism})
            continue
        operator = "at_least_once_sink" if i == len(config.vertices) - 1 else ("keyed_sum" if v.keyed else "map")
        vertex = {
            "name": v.name,
            "operator": operator,
            "parallelism": v.parallelism,
            "cost_us_per_record": v.spin_us + calibration.RECORD_OVERHEAD_US,
            "record_size": config.record_bytes,
        }
        if operator == "map":
            vertex["factor"] = 1
        if v.name == config.hot_vertex and config.hot_key_share > 0 and config.hot_key_extra_us > 0:
            sleep_us = calibration.sleep_with_overshoot_us(config.hot_key_extra_us)
            vertex.update(hot_key=HOT_KEY, hot_key_extra_us=sleep_us)
        vertices.append(vertex)
        edges.append({"from": config.vertices[i - 1].name, "to": v.name, "partitioner": v.input})
    return {
        "scenario": {
            "name": config.name,
            "seed": config.seed,
            "description": f"family configuration {config.name} (benchmarks/flink/family/family.json)",
        },
        "workload": {
            "records": records_per_source(config),
            "keys": config.keys,
            "zipf_exponent": config.zipf_exponent,
            "hot_key_share": config.hot_key_share,
            "max_value": 100,
            "rate_per_source": max(1, round(config.rate / config.source.parallelism)),
            # FamilyJob's pacing map sleeps on the source's task thread until each record is due
            "source_emission": "exact",
            "pacing": "sleep",
        },
        "network": {
            "buffer_size": config.buffer_kib * 1024,
            "record_size": config.record_bytes,
            "buffer_debloat": config.debloat,
            "buffer_debloat_target_ms": config.debloat_target_ms,
        },
        "cluster": {
            "taskmanagers": config.taskmanagers,
            "slots_per_taskmanager": config.slots_per_taskmanager,
            "cpu_cores": calibration.CPU_CORES,
            "jvm_share_start": calibration.JVM_SHARE_START,
            "jvm_share_steady": calibration.JVM_SHARE_STEADY,
            "jvm_share_decay_ms": calibration.JVM_SHARE_DECAY_MS,
        },
        "checkpointing": {
            "mode": config.mode,
            "interval_ms": config.interval_ms,
            "aligned_checkpoint_timeout_ms": config.aligned_timeout_ms,
        },
        "restart": {"strategy": "fixed-delay", "attempts": 3, "delay_ms": 1000},
        "storage": {
            "trigger_fixed_ms": calibration.TRIGGER_FIXED_MS,
            "trigger_constant_ms": calibration.TRIGGER_CONSTANT_MS,
            "snapshot_fixed_ms": calibration.SNAPSHOT_FIXED_MS,
            "async_fixed_ms": calibration.ASYNC_FIXED_MS,
        },
        "job": {"vertex": vertices, "edge": edges},
    }


def expressible(config: Config) -> str | None:
    """Why barriersim cannot run ``config``, or None."""
    if config.sink.keyed:
        return (
            "a keyed sink: barriersim's job graph takes a hash exchange only into a keyed operator, "
            "and its sinks are not"
        )
    return None


def convert(config: Config) -> Scenario | NotExpressible:
    reason = expressible(config)
    if reason is not None:
        return NotExpressible(config.name, reason)
    try:
        return parse_scenario(to_scenario_document(config), f"<family {config.name}>")
    except ScenarioError as err:
        return NotExpressible(config.name, str(err))
