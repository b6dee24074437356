"""Links between task actors on one Ray node (``actors.socket_links``: Unix domain sockets): which pairs get one,
that a job over them moves the same records as over actor calls and keeps exactly-once through a failover, and
that a job whose TaskManagers spread over Ray nodes links only the pairs that share a node."""

import pytest

from barriersim.actors.graph_runner import run_graph_on_ray
from barriersim.actors.socket_links import plan_links
from barriersim.runtime.coordinator.configuration import CheckpointingConfig
from barriersim.runtime.faults.fault_schedule import CrashTask, FaultSchedule
from barriersim.runtime.job.config import JobConfig, WorkloadConfig
from barriersim.runtime.job.placement import ClusterConfig
from barriersim.runtime.job.restart_strategy import RestartStrategyConfig
from barriersim.runtime.job.wiring import Wiring
from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobVertex
from barriersim.runtime.jobgraph import OperatorKind as K
from barriersim.runtime.jobgraph import Partitioner as P
from barriersim.runtime.verification.reference import Verdict, expected_sink_input, verify
from barriersim.scenarios.loader import quickstart_graph
from barriersim.scenarios.workload import local_splits


def _keys(graph: JobGraph) -> list:
    return [(v.name, i) for v in graph.vertices for i in range(v.parallelism)]


def test_plan_links_pairs_the_subtasks_that_exchange_messages_on_one_node_in_both_directions():
    graph = quickstart_graph(2, 2)  # source(2) -hash-> keyed-sum(2) -rebalance-> sink(1)
    node_of = {key: "head" for key in _keys(graph)}
    plan = plan_links(Wiring(graph), node_of)
    sums, sources, sink = [("keyed-sum", 0), ("keyed-sum", 1)], [("source", 0), ("source", 1)], ("sink", 0)
    assert plan[("source", 0)] == plan[("source", 1)] == sums  # data down
    assert plan[("keyed-sum", 0)] == plan[("keyed-sum", 1)] == sorted([*sources, sink])  # data down, credit up
    assert plan[sink] == sums  # credit up
    # a subtask on another node: none of its pairs is linked, the rest stay
    node_of[("keyed-sum", 1)] = "worker"
    plan = plan_links(Wiring(graph), node_of)
    assert ("keyed-sum", 1) not in plan
    assert plan[("source", 0)] == [("keyed-sum", 0)] and plan[sink] == [("keyed-sum", 0)]


def _links(result) -> dict:
    return {run["task"]: run["link_writes_sent"] for run in result.task_runs}


@pytest.mark.ray
@pytest.mark.usefixtures("ray_cluster")
def test_a_job_over_links_commits_what_it_commits_over_calls_and_its_messages_went_by_the_links(tmp_path):
    graph = quickstart_graph(2, 2)
    splits = {"source": local_splits(20_000, 100, 1.0, 100, 2, seed=3)}
    config = JobConfig(
        graph,
        checkpointing=CheckpointingConfig(mode="aligned", interval_ms=100),
        workload=WorkloadConfig(rate_per_source=10_000),
    )
    results = {
        links: run_graph_on_ray(
            config, splits, str(tmp_path / str(links)), f"links-{links}", timeout_seconds=180, socket_links=links
        )
        for links in (True, False)
    }
    expected = expected_sink_input(graph, splits)
    for result in results.values():
        assert result.outcome == "finished" and result.restarts == 0, result.failures
        assert verify(expected, result.committed_output).verdict is Verdict.EXACTLY_ONCE
        assert result.counts["completed"] >= 1
    over_links, over_calls = _links(results[True]), _links(results[False])
    # one TaskManager: every pair shares the head node, so every task that sends sends over links; the sink
    # sends credit only
    assert all(over_links[task] > 0 for task in over_links), over_links
    assert set(over_calls.values()) == {0}
    # the same records (id, key, value); each one's running sum depends on how the two sources' records interleave
    # at a keyed sum, which differs from run to run on either transport
    committed = [sorted(tuple(record)[:3] for record in results[links].committed_output) for links in (True, False)]
    assert len(committed[0]) == 20_000 and committed[0] == committed[1]


@pytest.mark.ray
@pytest.mark.usefixtures("ray_cluster")
def test_the_job_managers_messages_and_the_tasks_reports_go_by_links_on_its_node_and_as_calls_without_links(tmp_path):
    # one TaskManager on the head node, where the job manager runs: every task shares its node
    graph = quickstart_graph(2, 2)
    splits = {"source": local_splits(6_000, 100, 1.0, 100, 2, seed=4)}
    config = JobConfig(
        graph,
        checkpointing=CheckpointingConfig(mode="aligned", interval_ms=50),
        workload=WorkloadConfig(rate_per_source=10_000),
    )
    results = {
        links: run_graph_on_ray(
            config, splits, str(tmp_path / str(links)), f"control-{links}", timeout_seconds=180, socket_links=links
        )
        for links in (True, False)
    }
    expected = expected_sink_input(graph, splits)
    for links, result in results.items():
        assert result.outcome == "finished" and result.restarts == 0, result.failures
        assert verify(expected, result.committed_output).verdict is Verdict.EXACTLY_ONCE
        completed = result.counts["completed"]
        used, unused = ("link", "call") if links else ("call", "link")
        assert completed >= 2
        sent, told = result.control_messages["to_tasks"], result.control_messages["from_tasks"]
        # every trigger and every completion notice by one transport only: at least one trigger per completed
        # checkpoint and a notice for each but the last (a task that finished before the last completed is not
        # told, as in Flink), so the count's floor does not depend on when the tasks finish
        assert sent[unused] == 0 and sent[used] >= 2 * completed - 1, sent
        # every acknowledgement (at least one per checkpoint) and the 5 finished notices, by one transport only
        assert told[unused] == 0 and told[used] >= completed + 5, told


@pytest.mark.ray
@pytest.mark.usefixtures("ray_cluster")
@pytest.mark.parametrize("mode", ["aligned", "unaligned"])
def test_a_task_killed_mid_run_fails_over_and_the_job_over_links_keeps_exactly_once(mode, tmp_path):
    graph = quickstart_graph(2, 2)
    splits = {"source": local_splits(40_000, 100, 1.0, 100, 2, seed=8)}
    config = JobConfig(
        graph,
        checkpointing=CheckpointingConfig(mode=mode, interval_ms=100),
        workload=WorkloadConfig(rate_per_source=10_000),
        restart=RestartStrategyConfig(delay_ms=100),
        faults=FaultSchedule((CrashTask("keyed-sum#0", at_ms=1200),)),
    )
    result = run_graph_on_ray(
        config, splits, str(tmp_path / "checkpoints"), f"links-kill-{mode}", timeout_seconds=240, socket_links=True
    )
    assert result.outcome == "finished" and result.restarts == 1, result.failures
    assert result.killed == ["keyed-sum#0@0"]
    assert verify(expected_sink_input(graph, splits), result.committed_output).verdict is Verdict.EXACTLY_ONCE
    assert all(writes > 0 for writes in _links(result).values())  # the second deployment's links carried it


@pytest.mark.ray
@pytest.mark.usefixtures("ray_cluster")
def test_over_several_ray_nodes_only_the_pairs_on_one_node_are_linked(tmp_path):
    # source -> map -> sink, each vertex in a slot sharing group of its own: 3 TaskManagers of one slot, which the
    # placement spreads over the cluster's 3 nodes, so no two tasks share a node and every message is a call
    graph = JobGraph(
        tuple(
            JobVertex(name, kind, 1, params={"slot_sharing_group": name})
            for name, kind in (("source", K.SOURCE), ("map", K.MAP), ("sink", K.AT_LEAST_ONCE_SINK))
        ),
        (JobEdge("source", "map", P.FORWARD), JobEdge("map", "sink", P.FORWARD)),
    )
    splits = {"source": local_splits(10_000, 100, 1.0, 100, 1, seed=2)}
    config = JobConfig(
        graph,
        checkpointing=CheckpointingConfig(mode="aligned", interval_ms=100),
        workload=WorkloadConfig(rate_per_source=10_000),
        cluster=ClusterConfig(taskmanagers=3, slots_per_taskmanager=1),
    )
    result = run_graph_on_ray(
        config, splits, str(tmp_path / "checkpoints"), "links-nodes", timeout_seconds=180, socket_links=True
    )
    assert result.outcome == "finished", result.failures
    nodes = {row["task"]: row["ray_node_id"] for row in result.placement}
    assert len(set(nodes.values())) == 3, nodes
    assert set(_links(result).values()) == {0}
    # the job manager (on the driver's head node) shares a node with one task at most: the others' messages are calls
    sent, told = result.control_messages["to_tasks"], result.control_messages["from_tasks"]
    assert sent["call"] > 0 and told["call"] > 0, result.control_messages
    verdict = verify(expected_sink_input(graph, splits), result.committed_output)
    assert verdict.lost == 0 and verdict.wrong == 0, verdict


def _linked_pair(secret: bytes):
    """A reader and a writer ``SocketLinks`` in this process; the reader accepts one link on a thread of its own
    (what it raised lands in ``failures``)."""
    import queue
    import threading

    from barriersim.actors.socket_links import SocketLinks

    arrived, written, failures = queue.Queue(), queue.Queue(), []
    reader = SocketLinks("reader", lambda kind, payload: arrived.put((kind, payload)), lambda token: None)
    writer = SocketLinks("writer", lambda kind, payload: None, written.put)
    address = reader.listen(secret)

    def accept() -> None:
        try:
            reader.accept(1)
        except Exception as err:  # noqa: BLE001 - the test looks at it
            failures.append(err)

    accepting = threading.Thread(target=accept)
    accepting.start()
    return reader, writer, address, accepting, arrived, written, failures


def test_a_link_carries_its_values_in_order_and_tells_the_writer_each_one_is_written():
    from barriersim.actors.socket_links import new_secret

    secret = new_secret()
    reader, writer, address, accepting, arrived, written, failures = _linked_pair(secret)
    writer.connect_to({"reader": address}, secret)
    accepting.join(10)
    assert not failures and writer.has_link_to("reader") and not writer.has_link_to("other")
    values = [(0, (b"a" * 100_000, b"b")), (1, b"credit"), (0, (b"c",))] * 50
    for i, (kind, payload) in enumerate(values):
        writer.send("reader", kind, payload, i)
    got = [arrived.get(timeout=10) for _ in values]  # the reader thread hands each one over as it arrives
    assert [(kind, tuple(payload) if isinstance(payload, list) else payload) for kind, payload in got] == values
    # the network thread reported every value written, in the order they were handed over
    assert [written.get(timeout=10) for _ in values] == list(range(len(values)))
    writer.close()
    reader.close()


def test_a_link_with_the_wrong_secret_is_refused_at_both_ends():
    import multiprocessing

    from barriersim.actors.socket_links import new_secret

    reader, writer, address, accepting, _, _, failures = _linked_pair(new_secret())
    with pytest.raises(multiprocessing.AuthenticationError):
        writer.connect_to({"reader": address}, new_secret())
    accepting.join(10)
    assert [type(err) for err in failures] == [multiprocessing.AuthenticationError]
    assert not writer.has_link_to("reader")
    reader.close()
