"""The backpressured rescale cases the strategies draw: a keyed bottleneck's (FLINK-31963) or, moved by the
case's seed, a forward edge's (FLINK-21945, FLINK-33693): the edge's consumer is slowed until after the cancel,
and the job is restored from its retained checkpoint with the rescaled side's forward group at a new parallelism."""

import random

from hypothesis import given
from hypothesis import strategies as st

from barriersim.runtime.faults.experiment import Cancel, Restore, RestoreSource
from barriersim.runtime.faults.fault_schedule import SlowTask
from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobVertex, OperatorKind, Partitioner
from barriersim.strategies import backpressured_rescale_schedules, forward_backpressured_rescale, forward_groups


def _graph(forward: bool) -> JobGraph:
    return JobGraph(
        (
            JobVertex("source", OperatorKind.SOURCE, 2),
            JobVertex("map0", OperatorKind.MAP, 2, params={"factor": 2}),
            JobVertex("keyed_sum", OperatorKind.KEYED_SUM, 3),
            JobVertex("sink", OperatorKind.TWO_PHASE_COMMIT_SINK, 1),
        ),
        (
            JobEdge("source", "map0", Partitioner.FORWARD if forward else Partitioner.REBALANCE),
            JobEdge("map0", "keyed_sum", Partitioner.HASH),
            JobEdge("keyed_sum", "sink", Partitioner.REBALANCE),
        ),
    ).validate()


@given(backpressured_rescale_schedules(_graph(forward=True)), st.integers(0, 2**32 - 1))
def test_a_forward_edges_consumer_is_slowed_too_and_its_forward_group_rescaled(drawn, seed):
    graph = _graph(forward=True)
    schedule, slowdowns = drawn
    moved, faults = forward_backpressured_rescale(graph, schedule, slowdowns, random.Random(seed), 5_000, 100)
    (cancel, restore), (drawn_cancel, drawn_restore) = moved.actions, schedule.actions
    assert isinstance(cancel, Cancel) and isinstance(drawn_cancel, Cancel)
    assert isinstance(restore, Restore) and isinstance(drawn_restore, Restore)
    assert restore.source is RestoreSource.CHECKPOINT
    assert 100 <= cancel.at_ms <= 150  # after the sources' 100 ms unslowed need
    parallelism, drawn_parallelism = dict(restore.parallelism), dict(drawn_restore.parallelism)
    group = next(g for g in forward_groups(graph) if "map0" in g)
    assert set(group) == {"source", "map0"} and set(parallelism) == set(drawn_parallelism) | set(group)
    assert parallelism["source"] == parallelism["map0"] != 2  # the forward group at a new parallelism
    assert all(parallelism[v] == p for v, p in drawn_parallelism.items() if v not in group)
    assert all(isinstance(f, SlowTask) for f in faults.faults)
    # the drawn slowdowns, moved with the cancel, then map0's
    kept, added = faults.faults[: len(slowdowns.faults)], faults.faults[len(slowdowns.faults) :]
    shift = cancel.at_ms - drawn_cancel.at_ms
    assert [(f.task, f.factor, f.from_ms, f.until_ms) for f in kept] == [
        (f.task, f.factor, max(0, f.from_ms + shift), f.until_ms + shift) for f in slowdowns.faults
    ]
    assert sorted(f.task for f in added) == ["map0#0", "map0#1"]
    # 2 sources at 5,000 records/s offer each map0 subtask 5,000: 200 µs between records, slowed 4-8 ×
    assert {f.factor for f in added} in ({800.0}, {1600.0})
    assert all(f.from_ms == 0 and f.until_ms > cancel.at_ms for f in added)  # backpressured until the cancel


@given(backpressured_rescale_schedules(_graph(forward=False)), st.integers(0, 2**32 - 1))
def test_without_a_forward_edge_the_keyed_case_stays(drawn, seed):
    schedule, slowdowns = drawn
    assert (
        forward_backpressured_rescale(_graph(forward=False), schedule, slowdowns, random.Random(seed), 5_000, 100)
        == drawn
    )
