"""Cases the property suite once found, kept as scenario files and replayed in every mode (exactly-once output,
and every completed checkpoint a consistent cut)."""

from pathlib import Path

import pytest

from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.runtime.verification.reference import Verdict, expected_sink_input, verify
from barriersim.scenarios.loader import load_scenario
from barriersim.scenarios.simulation_inputs import job_config, workload_splits
from tests.modes import in_test_mode

CASES = sorted((Path(__file__).parent / "cases").glob("*.toml"))


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
@pytest.mark.parametrize("mode", ["aligned", "unaligned", "aligned-with-timeout", "at-least-once"])
def test_found_cases_stay_fixed(path, mode):
    scenario = load_scenario(path)
    scenario = in_test_mode(scenario, mode)
    config = job_config(scenario)
    splits = workload_splits(scenario)
    job = JobSimulation(config, splits, scenario.seed, record_cuts=True)
    result = job.run()
    assert verify(expected_sink_input(config.graph, splits), result.committed_output).verdict is Verdict.EXACTLY_ONCE
    assert job.consistent_cut_violations() == []
