"""A real run on the local three-node Ray cluster whose checkpoint storage is ``s3://`` on a real S3-compatible
server (``tests.s3_server``, the bucket versioned to keep what was deleted): its checkpoints (every state stream an
object of its own) are written there, a
killed task restores from the latest, a JobManager failover recovers the completed checkpoints from the
completed-checkpoint list there, and the run verifies exactly once."""

import pytest

from barriersim.actors.graph_runner import run_graph_on_ray
from barriersim.runtime.coordinator.configuration import CheckpointingConfig
from barriersim.runtime.faults.fault_schedule import CrashCoordinator, CrashTask, FaultSchedule, ProtocolPoint
from barriersim.runtime.job.config import JobConfig, WorkloadConfig
from barriersim.runtime.job.placement import ClusterConfig
from barriersim.runtime.job.restart_strategy import RestartStrategyConfig
from barriersim.runtime.storage.object_storage import ObjectStoreCheckpointStorage, checkpoint_storage_for
from barriersim.runtime.verification.reference import Verdict, expected_sink_input, verify
from barriersim.scenarios.loader import quickstart_graph
from barriersim.scenarios.workload import local_splits

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_cluster")]


def test_checkpoints_restores_and_a_jobmanager_failover_go_through_s3(s3_server):
    uri = s3_server.versioned_bucket_uri()
    graph = quickstart_graph(2, 2)
    splits = {"source": local_splits(60_000, 100, 1.0, 100, 2, seed=3)}
    # each fault at a point of the protocol, not a time, so that a loaded machine cannot merge them into one restart
    # (a JobManager killed at 2.2 s did, once checkpoint 3 came that late): the task crashes once it took its
    # snapshot of checkpoint 3 (1 and 2 completed), the JobManager once checkpoint 5 completed after that restart;
    # every source attempt holds its end of input until 3 checkpoints completed, so both come before the end
    config = JobConfig(
        graph,
        checkpointing=CheckpointingConfig(mode="aligned", interval_ms=100, max_retained=2, memory_threshold_bytes=0),
        workload=WorkloadConfig(rate_per_source=10_000, min_checkpoints=3),
        restart=RestartStrategyConfig(delay_ms=100),
        cluster=ClusterConfig(taskmanagers=2, slots_per_taskmanager=1, nodes=2),
        faults=FaultSchedule(
            (
                CrashTask("keyed-sum#1", point=ProtocolPoint.AFTER_SYNC_SNAPSHOT_BEFORE_ACK, checkpoint_id=3),
                CrashCoordinator(point=ProtocolPoint.AFTER_CHECKPOINT_COMPLETED, checkpoint_id=5),
            )
        ),
    )
    result = run_graph_on_ray(config, splits, uri, "on-s3", timeout_seconds=300)

    verdict = verify(expected_sink_input(graph, splits), result.committed_output)
    assert result.outcome == "finished", result.failures
    assert result.storage_errors == []
    assert (verdict.lost, verdict.duplicated, verdict.wrong, verdict.verdict) == (0, 0, 0, Verdict.EXACTLY_ONCE), (
        verdict
    )
    assert result.coordinator_failovers == 1 and result.restarts == 2, result.failures
    completed = [c["id"] for c in result.checkpoints if c["status"] == "COMPLETED"]
    assert len(result.restored_checkpoint_ids) == 2 and set(result.restored_checkpoint_ids) <= set(completed)
    # Flink's external_path: each completed checkpoint's directory in the bucket
    bucket = uri.split("/")[2]
    assert [c["external_path"] for c in result.checkpoints if c["status"] == "COMPLETED"] == [
        f"s3://{bucket}/checkpoints/on-s3/chk-{c}" for c in completed
    ]

    # the bucket keeps every version of every object (versioning on): each completed checkpoint's _metadata, its
    # state objects and the completed-checkpoint list were written there, and all were deleted at the end
    keys = s3_server.written_keys(uri)
    job = "checkpoints/on-s3"
    assert {f"{job}/chk-{c}/_metadata" for c in completed} <= keys, sorted(keys)[:20]
    assert f"{job}/_completed_checkpoints" in keys
    assert all(any(k.startswith(f"{job}/chk-{c}/") and not k.endswith("_metadata") for k in keys) for c in completed)

    # the job FINISHED: Flink's default retention (NEVER_RETAIN_AFTER_TERMINATION) discarded every checkpoint
    storage = checkpoint_storage_for(uri, "on-s3")
    assert isinstance(storage, ObjectStoreCheckpointStorage)
    assert storage.list_retained_checkpoints() == () and not storage.completed_checkpoint_pointers()


def test_a_savepoint_stop_and_rescaled_restore_go_through_s3(s3_server):
    """Savepoints on the object store too: a savepoint, a stop with a savepoint and the restore of a new job from
    it with the keyed sum rescaled 2 -> 4, every savepoint a directory of objects in the bucket."""
    from barriersim.runtime.faults.experiment import Restore, RestoreSource, Savepoint, StopWithSavepoint
    from barriersim.runtime.storage.object_storage import object_store_filesystem
    from barriersim.scenarios.simulation_inputs import job_config, workload_splits
    from tests.actors.test_savepoint_rescale_on_ray import assert_savepoint_then_stop
    from tests.runtime.sim.test_savepoint_and_rescale import SCALINGS, scenario

    uri = s3_server.versioned_bucket_uri()
    _, base = object_store_filesystem(uri)
    bucket = base.split("/")[0]
    before, after = SCALINGS["up 2->4"]
    sc = scenario("aligned", before, [Savepoint(600), StopWithSavepoint(1200), Restore(RestoreSource.SAVEPOINT, after)])
    config, splits = job_config(sc), workload_splits(sc)
    result = run_graph_on_ray(
        config,
        splits,
        uri,
        "savepoints-on-s3",
        seed=sc.seed,
        timeout_seconds=300,
        savepoint_root=f"{bucket}/savepoints",
    )

    assert result.outcome == "finished", result.failures
    first, restored = result.jobs
    savepoint, stop = assert_savepoint_then_stop(first["operations"])
    assert stop["path"].startswith(f"s3://{bucket}/savepoints/savepoint-"), stop["path"]
    assert restored["latest_restored"]["external_path"] == stop["path"] and restored["latest_restored"]["is_savepoint"]
    assert {k: restored["parallelism"][k] for k in after} == after
    keys = s3_server.written_keys(uri)
    savepoint_metadata = {k for k in keys if k.startswith("savepoints/savepoint-") and k.endswith("/_metadata")}
    # the stop's, and the first savepoint's unless the stop aborted it while it was pending (no _metadata then)
    assert len(savepoint_metadata) == (2 if savepoint["status"] == "COMPLETED" else 1), sorted(keys)[:20]
    verdict = verify(expected_sink_input(config.graph, splits), result.committed_output)
    assert (verdict.lost, verdict.duplicated, verdict.wrong, verdict.verdict) == (0, 0, 0, Verdict.EXACTLY_ONCE), (
        verdict
    )
