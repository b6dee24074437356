"""Property-based failure testing of whole jobs on the simulator: random topologies, configurations and fault
schedules; every mode keeps its guarantee, every completed checkpoint is a consistent cut, checkpoint ids are
never reused and every job finishes once faults stop. A failing example is saved as
a scenario file and its one-line ``barriersim replay`` command is printed with its seed."""

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, note, settings

from barriersim.runtime.job.config import JobOutcome
from barriersim.runtime.verification import Verdict
from barriersim.strategies import MODES, simulated_cases

CASES_DIR = Path(os.environ.get("BARRIERSIM_CASES_DIR", ".hypothesis/barriersim-cases"))
EXAMPLES_PER_MODE = int(os.environ.get("BARRIERSIM_PROPERTY_EXAMPLES", "40"))
JOBMANAGER_EXAMPLES_PER_MODE = max(1, EXAMPLES_PER_MODE // 2)
TASKMANAGER_EXAMPLES_PER_MODE = max(1, EXAMPLES_PER_MODE // 4)
# CI runs a fixed, reproducible set of examples; BARRIERSIM_PROPERTY_RANDOM=1 explores new ones (a bug hunt).
DERANDOMIZE = os.environ.get("BARRIERSIM_PROPERTY_RANDOM", "") != "1"


def check(case, outcome) -> None:
    sim, verdict = outcome.simulation, outcome.verdict
    assert sim.outcome is JobOutcome.FINISHED, f"the job did not finish once faults stopped: {sim.outcome.value}"
    assert verdict.lost == 0, f"lost {verdict.lost} records"
    assert verdict.wrong == 0, f"{verdict.wrong} wrong records"
    if case.mode != "at-least-once":
        assert verdict.verdict is Verdict.EXACTLY_ONCE, verdict
    completed = [c["id"] for c in sim.checkpoints if c["status"] == "COMPLETED"]
    assert completed == sorted(completed), f"checkpoints completed out of order: {completed}"
    ids = [c["id"] for c in sim.checkpoints]
    assert len(ids) == len(set(ids)), f"a checkpoint id was used twice: {ids}"
    assert not outcome.cut_violations, "not a consistent cut: " + "; ".join(map(str, outcome.cut_violations[:3]))


def check_with_replay(case) -> None:
    try:
        check(case, case.run())
    except Exception:  # a violated guarantee, or an error the run raised
        path, command = case.save(CASES_DIR)
        message = f"seed {case.seed}; replay: {command}"
        note(message)
        print(message)
        raise


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_keeps_its_guarantee_under_random_faults(mode):
    @settings(max_examples=EXAMPLES_PER_MODE, deadline=None, database=None, derandomize=DERANDOMIZE,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(simulated_cases(mode=mode))
    def property_(case):
        check_with_replay(case)

    property_()


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_keeps_its_guarantee_through_jobmanager_failovers_and_storage_failures(mode):
    """Coordinator crashes (a JobManager failover: the new coordinator recovers the completed checkpoints from
    storage) and failed storage writes (task state or ``_metadata``) on top of the task faults."""
    @settings(max_examples=JOBMANAGER_EXAMPLES_PER_MODE, deadline=None, database=None, derandomize=DERANDOMIZE,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(simulated_cases(mode=mode, jobmanager_faults=True))
    def property_(case):
        check_with_replay(case)

    property_()


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_keeps_its_guarantee_through_taskmanager_and_node_loss(mode):
    """Jobs placed in 2-4 TaskManagers on 1-3 nodes: TaskManager crashes and node losses (every subtask of them
    dies at once; a lost node's TaskManagers restart on the survivors) on top of the task faults."""
    @settings(max_examples=TASKMANAGER_EXAMPLES_PER_MODE, deadline=None, database=None, derandomize=DERANDOMIZE,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(simulated_cases(mode=mode, taskmanager_faults=True))
    def property_(case):
        check_with_replay(case)

    property_()
