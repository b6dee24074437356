"""The job graph model: Flink's channel layout per partitioner, and the graphs it refuses to run."""

import pytest

from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobGraphError, JobVertex
from barriersim.runtime.jobgraph import OperatorKind as K
from barriersim.runtime.jobgraph import Partitioner as P


def quickstart(sources=2, sums=2):
    return JobGraph(
        (
            JobVertex("source", K.SOURCE, sources),
            JobVertex("sum", K.KEYED_SUM, sums),
            JobVertex("sink", K.TWO_PHASE_COMMIT_SINK, 1),
        ),
        (JobEdge("source", "sum", P.HASH), JobEdge("sum", "sink", P.REBALANCE)),
    )


def test_channel_layout_all_to_all_and_forward():
    g = quickstart(sources=3, sums=2).validate()
    assert g.channels_in_gate("sum", 0, 1) == [0, 1, 2]
    assert g.channels_in_gate("sink", 0, 0) == [0, 1]
    assert g.subpartitions_of(g.edges[0], 2) == [0, 1]
    fwd = JobGraph(
        (JobVertex("s", K.SOURCE, 4), JobVertex("m", K.MAP, 4), JobVertex("k", K.AT_LEAST_ONCE_SINK, 4)),
        (JobEdge("s", "m", P.FORWARD), JobEdge("m", "k", P.FORWARD)),
    ).validate()
    assert fwd.channels_in_gate("m", 0, 2) == [2]
    assert fwd.subpartitions_of(fwd.edges[0], 3) == [3]
    assert fwd.stages() == 3 and fwd.topological_order() == ["s", "m", "k"]


def test_every_input_edge_is_a_gate_and_a_join_groups_gates_by_input():
    g = JobGraph(
        (
            JobVertex("a", K.SOURCE, 2),
            JobVertex("b", K.SOURCE, 1),
            JobVertex("j", K.JOIN, 2),
            JobVertex("u", K.UNION, 1),
            JobVertex("k", K.TWO_PHASE_COMMIT_SINK, 1),
        ),
        (
            JobEdge("a", "j", P.HASH, 0),
            JobEdge("b", "j", P.HASH, 1),
            JobEdge("j", "u", P.REBALANCE),
            JobEdge("a", "u", P.REBALANCE),
            JobEdge("u", "k", P.FORWARD),
        ),
    ).validate()
    assert [(e.source, e.target_input) for e in g.gates_of("j")] == [("a", 0), ("b", 1)]
    assert [e.source for e in g.gates_of("u")] == ["j", "a"]
    assert g.channels_in_gate("u", 0, 0) == [0, 1] and g.channels_in_gate("u", 1, 0) == [0, 1]


@pytest.mark.parametrize(
    "vertices, edges, message",
    [
        (
            [("s", K.SOURCE, 2), ("m", K.MAP, 3), ("k", K.AT_LEAST_ONCE_SINK, 1)],
            [("s", "m", P.FORWARD), ("m", "k", P.REBALANCE)],
            "forward needs equal parallelism",
        ),
        (
            [("s", K.SOURCE, 1), ("m", K.MAP, 1), ("k", K.AT_LEAST_ONCE_SINK, 1)],
            [("s", "m", P.HASH), ("m", "k", P.REBALANCE)],
            "hash partitioning needs a keyed operator",
        ),
        (
            [("s", K.SOURCE, 1), ("m", K.KEYED_SUM, 1), ("k", K.AT_LEAST_ONCE_SINK, 1)],
            [("s", "m", P.REBALANCE), ("m", "k", P.REBALANCE)],
            "must be fed by a hash partitioner",
        ),
        ([("s", K.SOURCE, 0), ("k", K.AT_LEAST_ONCE_SINK, 1)], [("s", "k", P.REBALANCE)], "parallelism must be >= 1"),
        (
            [("s", K.SOURCE, 1), ("a", K.MAP, 1), ("b", K.MAP, 1), ("k", K.AT_LEAST_ONCE_SINK, 1)],
            [("s", "a", P.REBALANCE), ("a", "b", P.REBALANCE), ("b", "a", P.REBALANCE), ("b", "k", P.REBALANCE)],
            "cycle",
        ),
        ([("s", K.SOURCE, 1), ("k", K.AT_LEAST_ONCE_SINK, 1)], [("k", "s", P.REBALANCE)], "cannot have outputs"),
        (
            [("s", K.SOURCE, 1), ("j", K.JOIN, 1), ("k", K.AT_LEAST_ONCE_SINK, 1)],
            [("s", "j", P.HASH), ("j", "k", P.REBALANCE)],
            r"takes input\(s\) \[0, 1\], fed \[0\]",
        ),
        ([("s", K.SOURCE, 1), ("m", K.MAP, 1)], [("s", "m", P.REBALANCE)], "only sinks may have no outputs"),
        ([("s", K.SOURCE, 1), ("k", K.AT_LEAST_ONCE_SINK, 1)], [("s", "x", P.REBALANCE)], "no vertex named 'x'"),
    ],
)
def test_invalid_graphs_are_refused_naming_the_culprit(vertices, edges, message):
    g = JobGraph(tuple(JobVertex(*v) for v in vertices), tuple(JobEdge(*e) for e in edges))
    with pytest.raises(JobGraphError, match=message):
        g.validate()


def test_pointwise_and_broadcast_edges_and_every_input_edge_beside_them_carry_no_unaligned_barriers():
    """Flink's StreamPartitioner.isSupportsUnalignedCheckpoint (all but pointwise and broadcast) and
    StreamGraphGenerator's rule: one such input edge takes unaligned barriers from every input edge of its vertex."""
    assert [p.supports_unaligned_checkpoints for p in (P.FORWARD, P.REBALANCE, P.HASH, P.BROADCAST)] == [
        False,
        True,
        True,
        False,
    ]
    g = JobGraph(
        (
            JobVertex("a", K.SOURCE, 2),
            JobVertex("b", K.SOURCE, 2),
            JobVertex("u", K.UNION, 2),
            JobVertex("s", K.AT_LEAST_ONCE_SINK, 1),
        ),
        (JobEdge("a", "u", P.FORWARD), JobEdge("b", "u", P.REBALANCE), JobEdge("u", "s", P.HASH)),
    )
    assert [g.supports_unaligned_checkpoints(e) for e in g.edges] == [False, False, True]
