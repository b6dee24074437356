"""A scenario as a TOML document: the effective scenario of a run written beside it, and generated cases saved as
scenario files.

How this works: ``scenario_document`` turns a loaded ``Scenario`` back into the dict a scenario file parses to,
every setting written out (defaults included; each section through the schema, ``Section.plain``), the job in its
own form (the quickstart shorthand or ``[[job.vertex]]``/``[[job.edge]]``), the restore, faults, actions and sweep,
so that ``parse_scenario`` of it gives the same scenario: a run directory's ``scenario.toml`` is exactly what the
run ran, and ``barriersim replay`` of it runs it again. ``generated_document`` builds a generated case's document
(the Hypothesis strategies). Files are written with tomli-w, through a temporary file renamed into place.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomli_w

from barriersim.runtime.jobgraph import JobGraph
from barriersim.runtime.storage.atomic_file import AtomicFileWriter
from barriersim.scenarios.loader import Scenario
from barriersim.scenarios.schema import SCHEMA, SECTIONS, VERTEX_FIELDS


def graph_document(graph: JobGraph) -> dict:
    vertices = []
    for v in graph.vertices:
        doc = {
            "name": v.name,
            "operator": v.operator.value,
            "parallelism": v.parallelism,
            "max_parallelism": v.max_parallelism,
        }
        doc.update({k: val for k, val in v.params.items() if k in VERTEX_FIELDS})
        vertices.append(doc)
    edges = [
        {"from": e.source, "to": e.target, "partitioner": e.partitioner.value, "input": e.target_input}
        for e in graph.edges
    ]
    return {"vertex": vertices, "edge": edges}


def scenario_document(scenario: Scenario) -> dict:
    """The document ``parse_scenario`` reads back as ``scenario`` (its path aside)."""
    job = scenario.job
    shorthand = {k: getattr(job, k) for k in SCHEMA["job"]}
    if not job.is_quickstart_shape:
        shorthand = {
            k: v
            for k, v in shorthand.items()
            if k not in ("source_parallelism", "keyed_sum_parallelism", "sink_parallelism")
        }
        shorthand.update(graph_document(job.graph))
    doc: dict[str, Any] = {
        "scenario": {"name": scenario.name, "description": scenario.description, "seed": scenario.seed},
        "job": shorthand,
        **{name: section.plain(getattr(scenario, name)) for name, section in SECTIONS.items()},
    }
    if scenario.restore is not None:
        doc["restore"] = scenario.restore.to_plain()
    if len(scenario.faults):
        doc["faults"] = scenario.faults.to_plain()
    if len(scenario.actions):
        doc["actions"] = scenario.actions.to_plain()
    if scenario.sweep:
        doc["sweep"] = {key: list(values) for key, values in scenario.sweep}
    return doc


def generated_document(
    name: str,
    graph: JobGraph,
    *,
    records: int,
    keys: int,
    zipf_exponent: float,
    rate_per_source: int,
    checkpointing: dict,
    seed: int = 0,
    cluster: dict | None = None,
) -> dict:
    """The document of a generated case: a job graph, its checkpointing table, the workload's size and, if given,
    the TaskManagers it is placed in (``[cluster]``; else the default, one TaskManager)."""
    document = {
        "scenario": {"name": name, "seed": seed},
        "workload": {
            "records": records,
            "keys": keys,
            "zipf_exponent": float(zipf_exponent),
            "rate_per_source": rate_per_source,
        },
        "checkpointing": checkpointing,
        "job": graph_document(graph),
    }
    if cluster:
        document["cluster"] = cluster
    return document


def dumps(document: dict) -> str:
    return tomli_w.dumps(document)


def save_scenario(document: dict, path: Path) -> Path:
    """Write ``document`` as a TOML file (atomically: a temporary file renamed into place)."""
    path = Path(path)
    AtomicFileWriter().write(path, dumps(document).encode("utf-8"))
    return path


def write_scenario(scenario: Scenario, path: Path) -> Path:
    return save_scenario(scenario_document(scenario), path)
