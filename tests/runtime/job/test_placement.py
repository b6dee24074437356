"""TaskManagers, slots and channel kinds: Flink's default slot sharing places subtask i of every vertex in slot
i, slots fill the TaskManagers in order, and a channel is local when one TaskManager runs both ends."""

import statistics

import pytest

from barriersim.runtime.coordinator.configuration import CheckpointingConfig
from barriersim.runtime.faults.fault_schedule import FaultSchedule
from barriersim.runtime.job.config import JobConfig, JobConfigError, WorkloadConfig
from barriersim.runtime.job.placement import ChannelKind, ClusterConfig, PlacementError, place
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.runtime.verification.reference import Verdict, expected_sink_input, verify
from barriersim.scenarios.loader import ScenarioError, parse_scenario, quickstart_graph
from barriersim.scenarios.workload import local_splits

GRAPH = quickstart_graph(4, 4)  # source p=4 -> hash -> keyed-sum p=4 -> rebalance -> sink p=1


def test_the_default_is_one_taskmanager_so_every_channel_is_local():
    p = place(GRAPH)
    assert set(p.taskmanager_of.values()) == {0} and p.slots_per_taskmanager == 4
    assert p.slot_of[("source", 2)] == p.slot_of[("keyed-sum", 2)] == 2  # slot sharing: one of each vertex
    assert p.gate_specs(GRAPH, "keyed-sum", 1) == [["local"] * 4]


def test_two_taskmanagers_split_the_slots_and_make_the_cross_channels_remote():
    p = place(GRAPH, ClusterConfig(taskmanagers=2, slots_per_taskmanager=2))
    assert [p.taskmanager_of[("source", i)] for i in range(4)] == [0, 0, 1, 1]
    assert p.channel_kind(("source", 0), ("keyed-sum", 1)) is ChannelKind.LOCAL
    assert p.channel_kind(("source", 0), ("keyed-sum", 2)) is ChannelKind.REMOTE
    assert p.gate_specs(GRAPH, "keyed-sum", 3) == [["remote", "remote", "local", "local"]]
    assert p.gate_specs(GRAPH, "sink", 0) == [["local", "local", "remote", "remote"]]


def test_a_cluster_too_small_for_the_job_is_refused_with_the_key():
    with pytest.raises(PlacementError, match="needs 4 slots .* offer 2"):
        place(GRAPH, ClusterConfig(taskmanagers=1, slots_per_taskmanager=2))
    with pytest.raises(JobConfigError) as info:
        JobConfig(GRAPH, cluster=ClusterConfig(2, 1))
    assert info.value.key == "cluster.slots_per_taskmanager"
    doc = {
        "scenario": {"name": "x"},
        "job": {"source_parallelism": 4, "keyed_sum_parallelism": 4},
        "cluster": {"taskmanagers": 3, "slots_per_taskmanager": 1},
    }
    with pytest.raises(ScenarioError, match=r"<s>: cluster\.slots_per_taskmanager: the job needs 4 slots"):
        parse_scenario(doc, "<s>")


@pytest.mark.parametrize("mode", ["aligned", "unaligned"])
def test_remote_channels_hold_receiver_buffers_that_local_channels_do_not(mode):
    """Under sustained backpressure (a sink slower than the sources, 6 MB of records: more than the channels hold)
    an unaligned checkpoint persists the in-flight data of its channels: remote channels add their receiver-side
    exclusive and floating buffers to what the producers queue, local channels do not; both runs stay
    exactly-once."""
    from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobVertex
    from barriersim.runtime.jobgraph import OperatorKind as K
    from barriersim.runtime.jobgraph import Partitioner as P

    graph = JobGraph(
        (
            JobVertex("source", K.SOURCE, 4),
            JobVertex("keyed-sum", K.KEYED_SUM, 4),
            JobVertex("sink", K.TWO_PHASE_COMMIT_SINK, 1, params={"cost_us_per_record": 20.0}),
        ),
        (JobEdge("source", "keyed-sum", P.HASH), JobEdge("keyed-sum", "sink", P.REBALANCE)),
    )
    splits = {"source": local_splits(200_000, 50, 1.5, 100, 4, seed=1)}
    persisted = {}
    for cluster in (ClusterConfig(1), ClusterConfig(4, 1)):
        config = JobConfig(
            graph,
            checkpointing=CheckpointingConfig(mode=mode, interval_ms=200),
            workload=WorkloadConfig(rate_per_source=200_000),
            cluster=cluster,
            faults=FaultSchedule(),
        )
        result = JobSimulation(config, splits, 3).run()
        assert (
            verify(expected_sink_input(config.graph, splits), result.committed_output).verdict is Verdict.EXACTLY_ONCE
        )
        completed = [c["persisted_data"] for c in result.checkpoints if c["status"] == "COMPLETED"]
        assert len(completed) >= 3
        persisted[cluster.taskmanagers] = statistics.median(completed)
    if mode == "aligned":
        assert persisted == {1: 0, 4: 0}
    else:
        assert persisted[4] > 1.2 * persisted[1] > 0


def test_slot_sharing_groups_take_slots_of_their_own():
    """Flink's ``slotSharingGroup(name)``: the CheckpointingTimeBenchmark puts source, map and sink in groups of
    their own on 12 one-slot TaskManagers, so every channel is remote."""
    from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobVertex
    from barriersim.runtime.jobgraph import OperatorKind as K
    from barriersim.runtime.jobgraph import Partitioner as P

    graph = JobGraph(
        (
            JobVertex("source", K.SOURCE, 4, params={"slot_sharing_group": "source"}),
            JobVertex("map", K.MAP, 4, params={"slot_sharing_group": "map"}),
            JobVertex("sink", K.AT_LEAST_ONCE_SINK, 4, params={"slot_sharing_group": "sink"}),
        ),
        (JobEdge("source", "map", P.REBALANCE), JobEdge("map", "sink", P.REBALANCE)),
    )
    p = place(graph, ClusterConfig(taskmanagers=12, slots_per_taskmanager=1))
    assert sorted(p.slot_of.values()) == list(range(12))
    assert all(kind == "remote" for gate in p.gate_specs(graph, "map", 0) for kind in gate)
    with pytest.raises(PlacementError, match="needs 12 slots"):
        place(graph, ClusterConfig(taskmanagers=4, slots_per_taskmanager=2))
    assert place(graph).gate_specs(graph, "sink", 3) == [["local"] * 4]  # one TaskManager with 12 slots


def test_taskmanagers_spread_over_nodes_and_a_lost_nodes_move_to_the_survivors():
    p = place(GRAPH, ClusterConfig(taskmanagers=4, slots_per_taskmanager=1, nodes=3))
    assert p.nodes == 3 and p.taskmanager_nodes() == (0, 1, 2, 0)
    # node 1 lost: its TaskManager 1 goes to the survivors' turn (1 % 2 -> node 2); the others stay
    assert p.taskmanager_nodes({1}) == (0, 2, 2, 0)
    assert p.taskmanager_nodes({1, 2}) == (0, 0, 0, 0)
    with pytest.raises(PlacementError, match="every one of the 3 node"):
        p.node_of_taskmanager(0, {0, 1, 2})
    assert place(GRAPH).nodes == 1 and place(GRAPH, ClusterConfig(nodes=0)).taskmanager_nodes() == (0,)


def test_the_run_directory_rows_name_taskmanager_slot_node_and_the_channel_kinds():
    p = place(GRAPH, ClusterConfig(taskmanagers=2, slots_per_taskmanager=2, nodes=2))
    rows = {r["task"]: r for r in p.describe(GRAPH)}
    assert rows["keyed-sum#3"] == {
        "task": "keyed-sum#3",
        "taskmanager": 1,
        "slot": 3,
        "node": 1,
        "local_input_channels": 2,
        "remote_input_channels": 2,
    }
    assert rows["sink#0"]["local_input_channels"] == 2 and rows["sink#0"]["remote_input_channels"] == 2
    assert rows["source#0"]["local_input_channels"] == rows["source#0"]["remote_input_channels"] == 0
    # a later deployment's nodes (node 1 lost)
    assert {r["node"] for r in p.describe(GRAPH, (0, 0))} == {0}
