"""On real Ray actors, a JobManager failover that meets a damaged checkpoint (its ``_metadata`` deleted from the
filesystem checkpoint storage while the JobManager is down) ends the job FAILED with the reason, naming the
checkpoint and the file; the job manager actor returns normally."""

import pytest

from barriersim.actors.graph_runner import run_graph_on_ray
from barriersim.runtime.coordinator.configuration import CheckpointingConfig
from barriersim.runtime.faults.fault_schedule import FaultSchedule
from barriersim.runtime.job.config import JobConfig, WorkloadConfig
from barriersim.runtime.job.restart_strategy import RestartStrategyConfig
from barriersim.scenarios.loader import quickstart_graph
from barriersim.scenarios.workload import local_splits

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_cluster")]


def test_a_jobmanager_failover_after_a_damaged_checkpoint_ends_the_job_failed(tmp_path):
    graph = quickstart_graph(2, 2)
    splits = {"source": local_splits(30_000, 100, 1.0, 100, 2, seed=5)}
    schedule = FaultSchedule.from_json(
        '[{"type":"damage_checkpoint","at_ms":1200,"damage":"delete"},{"type":"crash_coordinator","at_ms":1200}]'
    )
    # paced at 10k records/s per source: the job runs at least 1.5 s, so both faults land mid-run, after several
    # of the 100 ms checkpoints completed
    config = JobConfig(
        graph,
        checkpointing=CheckpointingConfig(mode="aligned", interval_ms=100, max_retained=3),
        workload=WorkloadConfig(rate_per_source=10_000),
        restart=RestartStrategyConfig(delay_ms=100),
        faults=schedule,
    )
    result = run_graph_on_ray(config, splits, str(tmp_path / "checkpoints"), "damaged", timeout_seconds=240)

    assert result.outcome == "failed"
    assert [e["fired"] for e in result.fault_log] == [1, 1], result.fault_log
    assert result.failure_reason.startswith("JobManager failover: job damaged: could not retrieve checkpoint ")
    assert (
        "/chk-" in result.failure_reason
        and "_metadata, which the completed-checkpoint list names: missing" in result.failure_reason
    )
    assert result.coordinator_failovers == 1 and result.restored_checkpoint_ids == []
