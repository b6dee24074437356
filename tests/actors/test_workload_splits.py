"""The per-subtask splits the Ray backend cuts from the Spark workload's Arrow blocks are exactly the splits the
simulator draws locally (``simulation_inputs.workload_splits``), for a graph with two source vertices of
different parallelism; no Ray or Spark needed (the Spark batch function and the cutting task are plain
functions)."""

import numpy as np
import pyarrow as pa

from barriersim.runtime.records_codec import decode_records
from barriersim.scenarios.loader import parse_scenario
from barriersim.scenarios.simulation_inputs import workload_splits
from barriersim.scenarios.workload import zipf_cdf
from barriersim.spark.workload import _cut_splits_of, source_batch

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


def test_splits_cut_from_arrow_blocks_equal_the_simulators_local_splits():
    scenario = parse_scenario(SCENARIO)
    w = scenario.workload
    cdf = zipf_cdf(w.keys, w.zipf_exponent)
    blocks = []
    for k, vertex in enumerate(scenario.job.graph.sources):
        ms_per_record = 1000.0 / (w.rate_per_source * vertex.parallelism)
        # Spark's partitions: uneven, out of order, sources interleaved in the block list
        for lo, hi in ((600, 1_000), (0, 250), (250, 600)):
            batch = source_batch(np.arange(lo, hi), k, scenario.seed, cdf, w.max_value, vertex.parallelism,
                                 ms_per_record)
            blocks.append(pa.Table.from_batches([batch]))
    blocks = blocks[1::2] + blocks[::2]

    expected = workload_splits(scenario)
    assert set(expected) == {"left", "right"}
    for k, vertex in enumerate(scenario.job.graph.sources):
        cut = _cut_splits_of(k, vertex.parallelism, *blocks)
        cut = [cut] if vertex.parallelism == 1 else list(cut)
        assert [decode_records(data) for data in cut] == expected[vertex.name]
