"""Errors raised while a job deploys, restores or fails over end it ``FAILED`` with a one-line reason, whichever
phase raised them (``runtime.job.restore_failure``), never a traceback out of the simulation: a job started from a
savepoint of another program with allow-non-restored-state, whose state for an operator it lacks meets a failover
before its first checkpoint (Flink restores the savepoint again allowing the unmatched state: the job goes on) or a
JobManager failover (Flink's new JobMaster restores without allowing it: the job fails, with the reason)."""

from __future__ import annotations

import dataclasses

import pytest

from barriersim.runtime.faults.experiment import ActionSchedule, RestoreSettings, StopWithSavepoint
from barriersim.runtime.job.config import JobOutcome
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.scenarios.loader import effective_scenario, parse_scenario
from barriersim.scenarios.simulation_inputs import job_config, workload_splits


def program(keyed: str, faults=(), actions=()):
    return effective_scenario(
        parse_scenario(
            {
                "scenario": {"name": "program", "seed": 5},
                "workload": {"records": 20_000, "keys": 100, "rate_per_source": 20_000},
                "checkpointing": {"interval_ms": 200},
                "job": {
                    "vertex": [
                        {"name": "source", "operator": "source", "parallelism": 2},
                        {"name": keyed, "operator": "keyed_sum", "parallelism": 2},
                        {"name": "sink", "operator": "two_phase_commit_sink", "parallelism": 1},
                    ],
                    "edge": [
                        {"from": "source", "to": keyed, "partitioner": "hash"},
                        {"from": keyed, "to": "sink", "partitioner": "rebalance"},
                    ],
                },
                "faults": list(faults),
            }
        ),
        actions=ActionSchedule(tuple(actions)),
    )


@pytest.fixture(scope="module")
def savepoint(tmp_path_factory):
    """A savepoint of the program whose keyed sum is called ``sum``."""
    tmp = tmp_path_factory.mktemp("first")
    first = program("sum", actions=[StopWithSavepoint(300)])
    simulation = JobSimulation(
        job_config(first),
        workload_splits(first),
        first.seed,
        checkpoint_directory=tmp / "c",
        savepoint_directory=tmp / "s",
    )
    simulation.run()
    return simulation.report.operations[0]["path"]


def restored(savepoint, fault, tmp_path):
    """The program whose keyed sum is called ``total`` (the savepoint's ``sum`` is not restored), from the savepoint."""
    second = program("total", faults=[fault])
    config = dataclasses.replace(job_config(second), restore=RestoreSettings(savepoint, allow_non_restored_state=True))
    simulation = JobSimulation(config, workload_splits(second), second.seed, checkpoint_directory=tmp_path)
    return simulation, simulation.run()


def test_a_failover_before_the_first_checkpoint_restores_the_savepoint_again_allowing_its_unmatched_state(
    savepoint, tmp_path
):
    simulation, result = restored(
        savepoint, {"type": "crash_task", "task": "total#0", "point": "during_restore"}, tmp_path
    )
    assert result.outcome is JobOutcome.FINISHED, result.failure_reason
    assert result.restored_checkpoint_ids == [3, 3] and result.restarts == 1
    assert [row["restored_checkpoint_id"] for row in result.deployments] == [3, 3]


def test_a_jobmanager_failover_before_the_first_checkpoint_fails_the_job_with_the_reason(savepoint, tmp_path):
    _, result = restored(savepoint, {"type": "crash_coordinator", "at_ms": 1}, tmp_path)
    assert result.outcome is JobOutcome.FAILED
    assert result.failure_reason.startswith("JobManager failover: ") and "operator 'sum'" in result.failure_reason


@pytest.mark.parametrize(
    "fault, reason",
    [
        (
            {"type": "crash_task", "task": "total#0", "at_ms": 500},
            "the restart strategy gave up after 3 failures (at most 2 restarts); the last: restore: "
            "StateAssignmentError: ",
        ),
        ({"type": "crash_coordinator", "at_ms": 500}, "JobManager failover: StateAssignmentError: "),
    ],
)
def test_a_state_assignment_error_while_failing_over_ends_the_job_with_its_reason(monkeypatch, tmp_path, fault, reason):
    """The state of a failover's or a new JobManager's restore cannot be assigned (``execution_deployer``, e.g. the
    sources' splits): a global failure the restart strategy decides on, or the new JobManager's failure."""
    from barriersim.runtime.job import execution_deployer
    from barriersim.runtime.recovery.errors import StateAssignmentError

    def unassignable(metadata, *args, **kwargs):
        raise StateAssignmentError(
            f"checkpoint {metadata.checkpoint_id}: source 'source' holds the offsets of "
            "splits [0, 7], but its workload has 2 split(s) (0..1)"
        )

    monkeypatch.setattr(execution_deployer, "assign_states", unassignable)
    job = program("total", faults=[fault])
    config = job_config(job)
    config = dataclasses.replace(config, restart=dataclasses.replace(config.restart, attempts=2))
    result = JobSimulation(config, workload_splits(job), job.seed, checkpoint_directory=tmp_path).run()
    assert result.outcome is JobOutcome.FAILED and result.restored_checkpoint_ids == []
    assert result.failure_reason.startswith(reason) and "holds the offsets of splits [0, 7]" in result.failure_reason
