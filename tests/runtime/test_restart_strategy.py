"""Flink's FixedDelayRestartBackoffTimeStrategy: up to max_attempts restarts, then the job fails; one per JobMaster."""

import pytest

from barriersim.runtime.coordinator.configuration import CheckpointingConfig
from barriersim.runtime.faults.fault_schedule import FaultSchedule
from barriersim.runtime.job.config import JobConfig, JobOutcome, WorkloadConfig
from barriersim.runtime.job.restart_strategy import FixedDelayRestartStrategy, RestartDecision, RestartStrategyConfig
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.scenarios.loader import quickstart_graph
from barriersim.scenarios.workload import local_splits


def test_restarts_up_to_max_attempts_then_fails_the_job():
    strategy = FixedDelayRestartStrategy(max_attempts=2, delay_ms=500)
    assert [strategy.on_failure() for _ in range(3)] == [
        RestartDecision.RESTART,
        RestartDecision.RESTART,
        RestartDecision.FAIL_JOB,
    ]
    assert strategy.delay_ms == 500 and strategy.failures == 3
    assert FixedDelayRestartStrategy(0, 0).on_failure() is RestartDecision.FAIL_JOB


@pytest.mark.parametrize("max_attempts, delay_ms", [(-1, 0), (0, -5)])
def test_negative_settings_are_refused(max_attempts, delay_ms):
    with pytest.raises(ValueError, match="restart strategy"):
        FixedDelayRestartStrategy(max_attempts, delay_ms)


def simulate(faults: str, max_restarts: int):
    graph = quickstart_graph(2, 2)
    splits = {"source": local_splits(40_000, 100, 1.0, 100, 2, seed=1)}
    config = JobConfig(
        graph,
        checkpointing=CheckpointingConfig(mode="aligned", interval_ms=50),
        workload=WorkloadConfig(rate_per_source=100_000),
        restart=RestartStrategyConfig(delay_ms=20, attempts=max_restarts),
        faults=FaultSchedule.from_json(faults),
    )
    return JobSimulation(config, splits, seed=3).run()


TWO_CRASHES = (
    '[{"type":"crash_task","task":"keyed-sum#0","at_ms":60},{"type":"crash_task","task":"keyed-sum#1","at_ms":150}]'
)


def test_the_simulated_job_fails_after_more_failures_than_its_restart_strategy_allows():
    assert simulate(TWO_CRASHES, max_restarts=2).outcome is JobOutcome.FINISHED
    failed = simulate(TWO_CRASHES, max_restarts=1)
    # the first crash restarted the job; the second failed it, and Flink's numRestarts counts only restarts
    assert failed.outcome is JobOutcome.FAILED and failed.restarts == 1


def test_a_new_jobmaster_starts_a_new_restart_strategy():
    # one failure before a JobManager failover and one after: each JobMaster counts one, so max 1 is enough
    faults = (
        '[{"type":"crash_task","task":"keyed-sum#0","at_ms":60},{"type":"crash_coordinator","at_ms":150},'
        '{"type":"crash_task","task":"keyed-sum#1","at_ms":300}]'
    )
    result = simulate(faults, max_restarts=1)
    assert result.outcome is JobOutcome.FINISHED
    assert (result.restarts, result.coordinator_failovers) == (3, 1)
