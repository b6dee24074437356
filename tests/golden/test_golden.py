"""The simulator's golden results hold: every library scenario in every mode and the kept generated cases give
the same trace, statistics and output as recorded in ``golden.json`` (``tests.golden.golden_runs``). A change
that is meant to alter them regenerates the file (``python -m tests.golden.golden_runs``) in a commit that says
why."""

import json

import pytest

from tests.golden.golden_runs import GOLDEN, generated_cases, golden_entry, library_cases

RECORDED = json.loads(GOLDEN.read_text())["entries"]
CASES = {
    name: (scenario, mode, seed, faults)
    for name, scenario, mode, seed, faults in [*library_cases(), *generated_cases()]
}


def test_every_case_is_recorded_and_every_recorded_case_still_exists():
    assert sorted(CASES) == sorted(RECORDED)


@pytest.mark.parametrize("name", sorted(CASES))
def test_simulator_gives_the_golden_result(name):
    scenario, mode, seed, faults = CASES[name]
    got = golden_entry(scenario, mode, seed, faults)
    want = RECORDED[name]
    different = sorted(k for k in want if got.get(k) != want[k])
    assert not different, f"{name}: differs in {different}"
    assert got["trace_sha256"] == want["trace_sha256"]
