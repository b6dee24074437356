"""The per-subtask splits the Ray backend hands over from the Spark workload's Arrow table are exactly the splits the
simulator draws locally (``simulation_inputs.workload_splits``), for a graph with two source vertices of
different parallelism; no Ray or Spark needed (Spark's batch function and the cutting are plain functions)."""

import pyarrow as pa

from barriersim.runtime.records_codec import SPLIT_COLUMNS, decode_split
from barriersim.scenarios.loader import parse_scenario
from barriersim.scenarios.simulation_inputs import workload_splits
from barriersim.spark import workload as spark_workload

SCENARIO = {
    "scenario": {"name": "two-sources", "seed": 11},
    "workload": {"records": 1_000, "keys": 50, "zipf_exponent": 1.2, "max_value": 9, "rate_per_source": 400},
    "job": {
        "vertex": [
            {"name": "left", "operator": "source", "parallelism": 2},
            {"name": "right", "operator": "source", "parallelism": 3},
            {"name": "both", "operator": "union", "parallelism": 2},
            {"name": "sum", "operator": "keyed_sum", "parallelism": 2},
            {"name": "sink", "operator": "two_phase_commit_sink", "parallelism": 1},
        ],
        "edge": [
            {"from": "left", "to": "both", "partitioner": "rebalance"},
            {"from": "right", "to": "both", "partitioner": "rebalance"},
            {"from": "both", "to": "sum", "partitioner": "hash"},
            {"from": "sum", "to": "sink", "partitioner": "rebalance"},
        ],
    },
}


def test_splits_handed_over_as_arrow_equal_the_simulators_local_splits(monkeypatch):
    scenario = parse_scenario(SCENARIO)
    plan = spark_workload.split_plan(scenario, scenario.seed)
    assert [(source, split) for source, _, split, _ in plan.splits] == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)]
    monkeypatch.setattr(spark_workload, "BATCH_RECORDS", 128)  # several Arrow batches per split
    # Spark's partitions, one per split, collected in any order
    partitions = [pa.Table.from_batches(list(spark_workload.split_batches(plan, p))) for p in (3, 0, 4, 2, 1)]
    table = pa.concat_tables(partitions)
    sources = tuple((v.name, v.parallelism) for v in scenario.job.graph.sources)
    tables = spark_workload.split_tables(table, sources)

    expected = workload_splits(scenario)
    assert set(expected) == set(tables) == {"left", "right"}
    for name, parts in tables.items():
        assert all(part.column_names == list(SPLIT_COLUMNS) for part in parts)
        assert [decode_split(part) for part in parts] == expected[name]
    assert sum(part.num_rows for parts in tables.values() for part in parts) == 2 * 1_000
