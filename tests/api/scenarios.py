"""Tiny scenario files for the API and sweep tests (a few hundred records: a simulated run takes well under a
second)."""

from __future__ import annotations

from pathlib import Path

TINY = """\
[scenario]
name = "tiny"
seed = 7

[workload]
records = 1200
keys = 40
rate_per_source = 20000

[job]
source_parallelism = 2
keyed_sum_parallelism = 2

[checkpointing]
mode = "aligned"
interval_ms = 10
"""

TWO_POINT_SWEEP = (
    TINY
    + """
[sweep]
"workload.zipf_exponent" = [0.0, 2.0]
"""
)

TWO_SOURCES = """\
[scenario]
name = "two-sources"
seed = 11

[workload]
records = 300
keys = 20
rate_per_source = 5000

[[job.vertex]]
name = "left"
operator = "source"
parallelism = 2

[[job.vertex]]
name = "right"
operator = "source"
parallelism = 3

[[job.vertex]]
name = "both"
operator = "union"
parallelism = 2

[[job.vertex]]
name = "sum"
operator = "keyed_sum"
parallelism = 2

[[job.vertex]]
name = "sink"
operator = "two_phase_commit_sink"
parallelism = 1

[[job.edge]]
from = "left"
to = "both"
partitioner = "rebalance"

[[job.edge]]
from = "right"
to = "both"
partitioner = "rebalance"

[[job.edge]]
from = "both"
to = "sum"
partitioner = "hash"

[[job.edge]]
from = "sum"
to = "sink"
partitioner = "rebalance"
"""


def write(tmp_path: Path, text: str, name: str = "scenario.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path
