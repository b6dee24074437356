"""What the strategies put into a generated case, without running it: savepoints between faults are followed by a
crash a few ms after the first one completed (FLINK-10354's window); with an alignment timeout, a forward edge
fed by a source can be backpressured for longer than the slowed job runs (FLINK-33693's situation)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from barriersim.runtime.faults.fault_schedule import CrashTask, ProtocolPoint, SlowTask
from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobVertex
from barriersim.runtime.jobgraph import OperatorKind as K
from barriersim.runtime.jobgraph import Partitioner as P
from barriersim.strategies import protocol_situations, simulated_cases

# source (3) -forward-> map (3) -rebalance-> sink: the map is offered 20,000 records/s per subtask
FORWARD_FROM_SOURCE = JobGraph(
    (
        JobVertex("source", K.SOURCE, 3),
        JobVertex("map", K.MAP, 3, params={"factor": 2, "cost_us_per_record": 5.0}),
        JobVertex("sink", K.TWO_PHASE_COMMIT_SINK, 1),
    ),
    (JobEdge("source", "map", P.FORWARD), JobEdge("map", "sink", P.REBALANCE)),
).validate()


@settings(max_examples=60, deadline=None)
@given(simulated_cases())
def test_savepoints_between_faults_are_followed_by_a_crash_after_the_first(case):
    after = [f for f in case.faults.faults if getattr(f, "point", None) is ProtocolPoint.AFTER_SAVEPOINT_COMPLETED]
    if not case.document.get("actions"):
        assert after == []
        return
    assert len(after) == 1
    (crash,) = after
    assert isinstance(crash, CrashTask) and crash.checkpoint_id is None and 3 <= crash.delay_ms <= 12
    vertices = {v["name"]: v["parallelism"] for v in case.document["job"]["vertex"]}
    name, _, index = crash.task.partition("#")
    assert 0 <= int(index) < vertices[name]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_backpressured_forward_edge_slows_its_consumer_below_its_offered_rate(data):
    situations = protocol_situations(FORWARD_FROM_SOURCE, 100, "aligned-with-timeout", 20_000)
    situation = data.draw(situations.filter(lambda s: s and all(isinstance(f, SlowTask) for f in s)))
    # every map subtask needs 4 or 8 times the 50 us between the records it is offered, from the start for twice
    # as long as the slowed job needs (4 or 8 times the sources' 100 ms)
    assert sorted(f.task for f in situation) == ["map#0", "map#1", "map#2"]
    assert {(f.from_ms, f.factor * 5.0, f.until_ms) for f in situation} <= {(0, 200.0, 800), (0, 400.0, 1600)}


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_no_backpressured_forward_edge_without_a_timeout_or_a_paced_source(data):
    for mode, rate in (("aligned", 20_000), ("unaligned", 20_000), ("aligned-with-timeout", 0)):
        situation = data.draw(protocol_situations(FORWARD_FROM_SOURCE, 100, mode, rate))
        assert not (situation and all(isinstance(f, SlowTask) for f in situation))
