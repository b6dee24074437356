"""TaskManager and node loss in whole simulated jobs: ``crash_taskmanager`` kills every running subtask of one
TaskManager at once (at a time, or when one of them reaches a protocol point), ``kill_node`` every TaskManager on
a node, which stays lost so that the next deployment places those TaskManagers on the surviving nodes. The job
fails over once per loss (the first death restarts it; the others are of attempts already cancelled), restores
the latest completed checkpoint, every completed checkpoint is a consistent cut, and every mode keeps its
guarantee."""

import pytest

from barriersim.runtime.coordinator.configuration import CheckpointingConfig
from barriersim.runtime.faults.fault_schedule import FaultSchedule
from barriersim.runtime.job.config import JobConfig, JobOutcome, WorkloadConfig
from barriersim.runtime.job.placement import ClusterConfig
from barriersim.runtime.job.restart_strategy import RestartStrategyConfig
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.runtime.verification.reference import Verdict, expected_sink_input, verify
from barriersim.scenarios.loader import ScenarioError, parse_scenario, quickstart_graph
from barriersim.scenarios.workload import local_splits

MODES = ["aligned", "unaligned", "aligned-with-timeout", "at-least-once"]
CLUSTER = ClusterConfig(taskmanagers=4, slots_per_taskmanager=2, nodes=3)  # TaskManagers 0..3 on nodes 0, 1, 2, 0
GRAPH = quickstart_graph(8, 8)  # TaskManager t runs source#2t, source#2t+1, keyed-sum#2t, keyed-sum#2t+1 (+ sink#0)


def subtasks_of(tm: int) -> set[str]:
    names = {f"{v}#{i}" for v in ("source", "keyed-sum") for i in (2 * tm, 2 * tm + 1)}
    return names | ({"sink#0"} if tm == 0 else set())


def simulate(mode, faults, seed=3, cluster=CLUSTER):
    splits = {"source": local_splits(24_000, 100, 1.0, 100, 8, seed=1)}
    timeout = 5 if mode == "aligned-with-timeout" else 0
    config = JobConfig(
        GRAPH,
        checkpointing=CheckpointingConfig(mode=mode, interval_ms=30, aligned_checkpoint_timeout_ms=timeout),
        workload=WorkloadConfig(rate_per_source=10_000),
        restart=RestartStrategyConfig(delay_ms=50),
        cluster=cluster,
        faults=FaultSchedule.from_json(faults),
    )
    job = JobSimulation(config, splits, seed, record_cuts=True)
    result = job.run()
    verdict = verify(
        expected_sink_input(GRAPH, splits),
        result.committed_output,
        at_least_once=not config.checkpointing.mode.exactly_once,
    )
    assert result.outcome is JobOutcome.FINISHED
    assert verdict.lost == 0 and verdict.wrong == 0, verdict
    if mode != "at-least-once":
        assert verdict.verdict is Verdict.EXACTLY_ONCE, verdict
    assert not job.consistent_cut_violations()
    return job, result


def killed_names(job) -> set[str]:
    return {k.partition("@")[0] for k in job.dispatcher.killed()}


@pytest.mark.parametrize("mode", MODES)
def test_a_crashed_taskmanager_takes_every_subtask_in_it_and_the_job_fails_over_once(mode):
    job, result = simulate(mode, '[{"type":"crash_taskmanager","taskmanager":1,"at_ms":200}]')
    assert killed_names(job) == subtasks_of(1)
    assert result.restarts == 1 and [e["fired"] for e in result.fault_log] == [1]
    assert result.fault_log[0]["first_at_ms"] == 200
    assert len(result.restored_checkpoint_ids) == 1 and result.counts["restored"] == 1
    # a TaskManager crash loses no node: the replacement runs where the old one did
    assert [d["taskmanager_nodes"] for d in result.deployments] == [[0, 1, 2, 0]] * 2


@pytest.mark.parametrize(
    "point",
    [
        "mid_alignment",
        "before_forwarding_barrier",
        "after_sync_snapshot_before_ack",
        "after_ack_before_completion_notice",
    ],
)
def test_a_taskmanager_crash_at_a_protocol_point_fires_once_when_one_of_its_subtasks_gets_there(point):
    job, result = simulate(
        "aligned", f'[{{"type":"crash_taskmanager","taskmanager":2,"point":"{point}","checkpoint_id":3}}]'
    )
    assert [e["fired"] for e in result.fault_log] == [1] and result.restarts == 1
    assert killed_names(job) == subtasks_of(2)
    # the first of its subtasks to get there takes the TaskManager down before the others acknowledge
    assert {c["id"]: c for c in result.checkpoints}[3]["status"] == "FAILED"


def test_a_taskmanager_crash_during_restore_hits_the_first_restart():
    job, result = simulate(
        "unaligned",
        '[{"type":"crash_task","task":"sink#0","at_ms":150},'
        '{"type":"crash_taskmanager","taskmanager":3,"point":"during_restore"}]',
    )
    assert [e["fired"] for e in result.fault_log] == [1, 1] and result.restarts == 2
    assert killed_names(job) == {"sink#0"} | subtasks_of(3)


@pytest.mark.parametrize("mode", ["aligned", "unaligned", "at-least-once"])
def test_a_killed_node_takes_its_taskmanagers_for_good_and_they_restart_on_the_survivors(mode):
    job, result = simulate(
        mode,
        '[{"type":"kill_node","node":1,"at_ms":150},'
        '{"type":"kill_node","node":2,"point":"after_sync_snapshot_before_ack","checkpoint_id":10}]',
    )
    assert [e["fired"] for e in result.fault_log] == [1, 1] and result.restarts == 2
    nodes = [d["taskmanager_nodes"] for d in result.deployments]
    # node 1 held TaskManager 1, which moves to node 2; then node 2 goes with TaskManagers 1 and 2
    assert nodes == [[0, 1, 2, 0], [0, 2, 2, 0], [0, 0, 0, 0]]
    assert killed_names(job) == subtasks_of(1) | subtasks_of(2)
    assert job.dispatcher.lost_nodes() == {1, 2}


def test_a_scenario_places_taskmanagers_on_nodes_and_its_node_faults_are_checked():
    doc = {
        "scenario": {"name": "s"},
        "job": {"source_parallelism": 4, "keyed_sum_parallelism": 4},
        "cluster": {"taskmanagers": 4, "slots_per_taskmanager": 1, "nodes": 3},
        "faults": [
            {"type": "kill_node", "node": 2, "at_ms": 100},
            {"type": "crash_taskmanager", "taskmanager": 3, "at_ms": 50},
        ],
    }
    scenario = parse_scenario(doc, "<s>")
    assert scenario.cluster == ClusterConfig(4, 1, 3)
    doc["faults"] = [{"type": "crash_taskmanager", "taskmanager": 4, "at_ms": 50}]
    with pytest.raises(ScenarioError, match=r"^<s>: faults\[0\].taskmanager: the job runs in 4 TaskManager"):
        parse_scenario(doc, "<s>")
    doc["faults"], doc["cluster"]["nodes"] = [{"type": "kill_node", "node": 1, "at_ms": 100}], 0
    with pytest.raises(ScenarioError, match=r"kill_node needs cluster.nodes >= 2"):
        parse_scenario(doc, "<s>")
