"""A scenario as a TOML document, for cases that were generated rather than written (property tests).

How this works: ``scenario_document`` turns a job graph, the checkpointing settings and the workload size into
the same dict a scenario file parses to (``[[job.vertex]]``/``[[job.edge]]`` form), so ``save_scenario`` can
write it next to the run and ``barriersim replay FILE --seed N --mode M --faults JSON`` re-runs it exactly.
"""

from __future__ import annotations

from pathlib import Path

from barriersim.runtime.jobgraph import JobGraph
from barriersim.scenarios.loader import VERTEX_FIELDS
from barriersim.scenarios.toml_writer import dumps


def scenario_document(name: str, graph: JobGraph, *, records: int, keys: int, zipf_exponent: float,
                      rate_per_source: int, checkpointing: dict, seed: int = 0) -> dict:
    vertices = []
    for v in graph.vertices:
        doc = {"name": v.name, "operator": v.operator.value, "parallelism": v.parallelism,
               "max_parallelism": v.max_parallelism}
        doc.update({k: val for k, val in v.params.items() if k in VERTEX_FIELDS})
        vertices.append(doc)
    edges = [{"from": e.source, "to": e.target, "partitioner": e.partitioner.value, "input": e.target_input}
             for e in graph.edges]
    return {
        "scenario": {"name": name, "seed": seed},
        "workload": {"records": records, "keys": keys, "zipf_exponent": float(zipf_exponent),
                     "rate_per_source": rate_per_source},
        "checkpointing": checkpointing,
        "job": {"vertex": vertices, "edge": edges},
    }


def save_scenario(document: dict, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(document), encoding="utf-8")
    return path
