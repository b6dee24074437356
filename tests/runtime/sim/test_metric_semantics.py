"""Flink's checkpoint metrics as Flink takes them (``SingleCheckpointBarrierHandler`` / ``CheckpointMetricsBuilder``):
a subtask's alignment duration runs from its first barrier to its last, also for an unaligned checkpoint, which is
triggered on the first barrier (Flink reports it through a future completed when the last barrier arrives); the
start delay is the trigger-to-first-barrier time."""

from barriersim.runtime.coordinator.configuration import CheckpointingConfig
from barriersim.runtime.faults.fault_schedule import FaultSchedule
from barriersim.runtime.job.config import JobConfig, WorkloadConfig
from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobVertex
from barriersim.runtime.jobgraph import OperatorKind as K
from barriersim.runtime.jobgraph import Partitioner as P
from barriersim.runtime.network.config import NetworkConfig
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.scenarios.workload import local_splits

# a skewed keyed sum: one hot key makes one subtask slow, so the barriers reach the sink at different times
GRAPH = JobGraph(
    (
        JobVertex("source", K.SOURCE, 2),
        JobVertex("sum", K.KEYED_SUM, 4, params={"hot_key": 0, "hot_key_extra_us": 200.0}),
        JobVertex("sink", K.TWO_PHASE_COMMIT_SINK, 1),
    ),
    (JobEdge("source", "sum", P.HASH), JobEdge("sum", "sink", P.REBALANCE)),
)


def run(mode: str):
    splits = {"source": local_splits(30_000, 64, 1.2, 100, 2, seed=4)}
    config = JobConfig(
        GRAPH,
        checkpointing=CheckpointingConfig(mode=mode, interval_ms=100),
        workload=WorkloadConfig(rate_per_source=20_000),
        faults=FaultSchedule(),
    )
    return JobSimulation(config, splits, 5).run()


def test_an_unaligned_subtask_reports_its_alignment_from_first_to_last_barrier():
    """Spread over four TaskManagers, the sink reads three of the sums through remote channels whose latency
    (2 ms, give or take 1 ms) brings their barriers at different times."""
    from barriersim.runtime.job.placement import ClusterConfig

    splits = {"source": local_splits(30_000, 64, 1.2, 100, 2, seed=4)}
    config = JobConfig(
        GRAPH,
        checkpointing=CheckpointingConfig(mode="unaligned", interval_ms=100),
        workload=WorkloadConfig(rate_per_source=20_000),
        faults=FaultSchedule(),
        cluster=ClusterConfig(taskmanagers=4, slots_per_taskmanager=1),
        network=NetworkConfig(latency_us_mean=2_000.0, latency_us_jitter=1_000.0),
    )
    result = JobSimulation(config, splits, 5).run()
    completed = {c["id"]: c for c in result.checkpoints if c["status"] == "COMPLETED"}
    sink_rows = [r for r in result.subtasks if r["task"] == "sink#0" and r["id"] in completed]
    # Flink 1.16+: the flag says whether the subtask persisted in-flight data (FLINK-31588), not its options
    assert sink_rows and all(r["unaligned_checkpoint"] is (r["alignment_persisted"] > 0) for r in sink_rows)
    assert any(r["alignment_duration"] > 0 for r in sink_rows)  # read when the last barrier came, not at the trigger
    for r in sink_rows:
        # the alignment ended by the acknowledgement (the channel state waits for the last barrier)
        assert (
            r["start_delay"] + r["alignment_duration"] <= r["ack_timestamp"] - completed[r["id"]]["trigger_timestamp"]
        )


def test_a_single_input_subtask_never_aligns():
    result = run("aligned")
    rows = [r for r in result.subtasks if r["task"].startswith("source#")]
    assert rows and all(r["alignment_duration"] == 0 for r in rows)


def test_the_simulator_charges_the_cost_model_as_flink_reports_sync_and_async():
    from barriersim.runtime.checkpoint_cost import CheckpointCostModel

    flat = CheckpointCostModel(
        snapshot_fixed_ms=3.0, async_fixed_ms=11.0, file_latency_ms=0.0, latency_sigma=0.0, channel_state_fixed_ms=0.0
    )
    splits = {"source": local_splits(6_000, 64, 1.2, 100, 2, seed=4)}
    config = JobConfig(
        GRAPH,
        checkpointing=CheckpointingConfig(mode="aligned", interval_ms=100),
        workload=WorkloadConfig(rate_per_source=20_000),
        storage=flat,
    )
    result = JobSimulation(config, splits, 5).run()
    completed = {c["id"]: c for c in result.checkpoints if c["status"] == "COMPLETED"}
    rows = [r for r in result.subtasks if r["id"] in completed and not r["finished"]]  # finished: no snapshot
    assert rows
    # the state here is tiny: the sync part is its fixed 3 ms, the async part its 11 ms (rounded to the clock's ms)
    assert {r["checkpoint_sync"] for r in rows} == {3}
    assert all(11 <= r["checkpoint_async"] <= 12 for r in rows)
    for r in rows:  # nobody acknowledges before its sync and async parts ended
        assert r["ack_timestamp"] - completed[r["id"]]["trigger_timestamp"] >= r["start_delay"] + 14


def test_the_start_delay_holds_the_coordinator_trigger_path():
    """A source's start delay is the coordinator's trigger path and the trigger RPC: the model's trigger_fixed_ms
    (and under a millisecond without it); every later subtask's barrier comes after its sources'."""
    from barriersim.runtime.checkpoint_cost import CheckpointCostModel

    splits = {"source": local_splits(6_000, 64, 1.2, 100, 2, seed=4)}
    delays = {}
    for trigger_ms in (0.0, 9.0):
        model = CheckpointCostModel(trigger_fixed_ms=trigger_ms, trigger_constant_ms=0.0, latency_sigma=0.0)
        config = JobConfig(
            GRAPH,
            checkpointing=CheckpointingConfig(mode="unaligned", interval_ms=100),
            workload=WorkloadConfig(rate_per_source=20_000),
            storage=model,
        )
        result = JobSimulation(config, splits, 5).run()
        completed = {c["id"] for c in result.checkpoints if c["status"] == "COMPLETED"}
        delays[trigger_ms] = {r["task"].partition("#")[0] == "source": [] for r in result.subtasks}
        for r in result.subtasks:
            if r["id"] in completed and not r["finished"]:  # a task finished before the trigger had no barrier
                delays[trigger_ms][r["task"].startswith("source#")].append(r["start_delay"])
        assert delays[trigger_ms][True] and delays[trigger_ms][False]
    assert set(delays[0.0][True]) <= {0, 1}
    assert set(delays[9.0][True]) <= {9, 10} and min(delays[9.0][False]) >= 9


def test_an_unaligned_job_sends_forced_aligned_barriers_over_a_forward_edge():
    """Over a forward edge the barrier cannot overtake (Flink's withUnalignedUnsupported): the sources, whose only
    output is that edge, persist no in-flight data; the map behind it turns its checkpoint back to unaligned
    (checkpointState's withUnalignedSupported) and its barrier overtakes its output towards the keyed sum, which
    is persisted; the job stays exactly-once."""
    from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobVertex, OperatorKind, Partitioner
    from barriersim.runtime.verification.reference import Verdict, expected_sink_input, verify

    graph = JobGraph(
        (
            JobVertex("source", OperatorKind.SOURCE, 2),
            JobVertex("map", OperatorKind.MAP, 2, params={"factor": 2}),
            JobVertex("sum", OperatorKind.KEYED_SUM, 2, params={"cost_us_per_record": 40.0}),
            JobVertex("sink", OperatorKind.TWO_PHASE_COMMIT_SINK, 1),
        ),
        (
            JobEdge("source", "map", Partitioner.FORWARD),
            JobEdge("map", "sum", Partitioner.HASH),
            JobEdge("sum", "sink", Partitioner.REBALANCE),
        ),
    )
    splits = {"source": local_splits(20_000, 64, 1.2, 100, 2, seed=4)}
    config = JobConfig(
        graph,
        checkpointing=CheckpointingConfig(mode="unaligned", interval_ms=50),
        workload=WorkloadConfig(rate_per_source=50_000),
    )
    result = JobSimulation(config, splits, 5).run()
    completed = {c["id"] for c in result.checkpoints if c["status"] == "COMPLETED"}
    rows = {(r["task"], r["id"]): r for r in result.subtasks if r["id"] in completed and not r["finished"]}
    of = {name: [r for (task, _), r in rows.items() if task.startswith(name + "#")] for name in ("source", "map")}
    assert of["source"] and all(r["alignment_persisted"] == 0 and not r["unaligned_checkpoint"] for r in of["source"])
    assert of["map"] and all(r["unaligned_checkpoint"] is (r["alignment_persisted"] > 0) for r in of["map"])
    assert sum(r["alignment_persisted"] for r in of["map"]) > 0
    assert verify(expected_sink_input(graph, splits), result.committed_output).verdict is Verdict.EXACTLY_ONCE


def _discarded(result) -> dict[int, bool]:
    return {c["id"]: c["discarded"] for c in result.checkpoints if c["status"] == "COMPLETED"}


def test_a_completed_checkpoint_reports_discarded_once_it_was_subsumed_or_discarded_at_the_end():
    """Flink's REST ``discarded`` (``CompletedCheckpoint.markAsDiscarded`` -> ``CompletedCheckpointStats.discard``):
    a finished job discards every checkpoint it kept, whatever the retention, so all of them report it; a job
    cancelled with RETAIN_ON_CANCELLATION keeps its latest (max_retained 1), which alone reports false."""
    from barriersim.runtime.coordinator.properties import ExternalizedCheckpointRetention
    from barriersim.runtime.faults.experiment import ActionSchedule, Cancel

    finished = run("aligned")
    assert len(_discarded(finished)) >= 3 and all(_discarded(finished).values())
    splits = {"source": local_splits(30_000, 64, 1.2, 100, 2, seed=4)}
    retain = ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
    config = JobConfig(
        GRAPH,
        checkpointing=CheckpointingConfig(mode="aligned", interval_ms=100, externalized_checkpoint_retention=retain),
        workload=WorkloadConfig(rate_per_source=20_000),
        actions=ActionSchedule((Cancel(450),)),
    )
    cancelled = _discarded(JobSimulation(config, splits, 5).run())
    latest = max(cancelled)
    assert len(cancelled) >= 2 and cancelled[latest] is False
    assert all(cancelled[i] for i in cancelled if i != latest)


def test_a_checkpoint_an_earlier_jobmanager_completed_reports_discarded_once_the_new_one_subsumed_it():
    """The JobManager fails over at 450 ms: the new coordinator recovers the retained checkpoint, subsumes it with
    its first completed one, and discards it; the run's statistics (the dead coordinator's record of it) say so."""
    splits = {"source": local_splits(30_000, 64, 1.2, 100, 2, seed=4)}
    config = JobConfig(
        GRAPH,
        checkpointing=CheckpointingConfig(mode="aligned", interval_ms=100),
        workload=WorkloadConfig(rate_per_source=20_000),
        faults=FaultSchedule.from_json('[{"type": "crash_coordinator", "at_ms": 450}]'),
    )
    result = JobSimulation(config, splits, 5).run()
    assert result.coordinator_failovers == 1
    before = [c for c in result.checkpoints if c["status"] == "COMPLETED" and c["trigger_timestamp"] < 450]
    assert before and all(_discarded(result).values())
