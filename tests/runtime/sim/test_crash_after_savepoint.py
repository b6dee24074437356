"""A crash ``delay_ms`` after a savepoint completed (``after_savepoint_completed``): it fires after the savepoint,
fails the job over to the checkpoint before it (savepoints are not in the completed-checkpoint store) and keeps
exactly-once; with FLINK-10354's bug planted (the savepoint commits the sinks' transactions) it duplicates."""

import pytest

from barriersim.runtime.faults.experiment import Savepoint
from barriersim.runtime.faults.fault_schedule import CrashTask, FaultSchedule, ProtocolPoint
from barriersim.runtime.faults.mutations import PlantedBug, planted
from barriersim.runtime.verification.reference import Verdict
from barriersim.scenarios.loader import effective_scenario
from tests.runtime.sim.test_savepoint_and_rescale import scenario
from tests.simulated_runs import simulate_and_verify

DELAY_MS = 5


def run_with_crash_after_savepoint():
    base = scenario("aligned", {}, [Savepoint(1200)])
    crash = CrashTask("keyed#0", point=ProtocolPoint.AFTER_SAVEPOINT_COMPLETED, delay_ms=DELAY_MS)
    job, result, verification, _ = simulate_and_verify(effective_scenario(base, faults=FaultSchedule((crash,))))
    return job, result, verification


def test_the_crash_comes_delay_ms_after_the_savepoint_completed_and_keeps_exactly_once():
    job, result, verification = run_with_crash_after_savepoint()
    savepoints = [c for c in job.report.checkpoints if c["is_savepoint"] and c["status"] == "COMPLETED"]
    assert len(savepoints) == 1
    (entry,) = [f for f in result.fault_log if f["type"] == "crash_task"]
    assert entry["fired"] == 1
    assert entry["first_at_ms"] >= savepoints[0]["latest_ack_timestamp"] + DELAY_MS
    assert result.restarts >= 1
    assert verification.verdict is Verdict.EXACTLY_ONCE, verification


def test_with_flink_10354_planted_the_failure_after_the_savepoint_duplicates():
    with planted(PlantedBug.SAVEPOINT_COMMITS_OUTSIDE_STORE):
        _, _, verification = run_with_crash_after_savepoint()
    assert verification.duplicated > 0, verification


@pytest.mark.parametrize("checkpoint_id", [None, 10_000])
def test_a_crash_after_a_savepoint_that_never_completes_never_fires(checkpoint_id):
    base = scenario("aligned", {}, [])
    crash = CrashTask("keyed#0", point=ProtocolPoint.AFTER_SAVEPOINT_COMPLETED, checkpoint_id=checkpoint_id, delay_ms=1)
    _, result, verification, _ = simulate_and_verify(effective_scenario(base, faults=FaultSchedule((crash,))))
    (entry,) = [f for f in result.fault_log if f["type"] == "crash_task"]
    assert entry["fired"] == 0 and result.restarts == 0
    assert verification.verdict is Verdict.EXACTLY_ONCE
