"""Mutation check: with each known historical bug planted (``runtime.mutations``), the property suite, at its
default budget, fails. Each bug names the properties expected to catch it; the test passes when one does."""

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from barriersim.runtime.checkpointing.api import CheckpointingMode
from barriersim.runtime.mutations import PlantedBug, is_planted, planted
from barriersim.strategies import simulated_cases
from tests.properties.test_whole_job_properties import DERANDOMIZE, EXAMPLES_PER_MODE, check

sys.path.insert(0, str(Path(__file__).parents[1] / "runtime" / "checkpointing"))  # its helper modules
from tests.runtime.checkpointing import test_input_side_properties as input_side  # noqa: E402


def whole_job(mode):
    @settings(max_examples=EXAMPLES_PER_MODE, deadline=None, database=None, phases=[Phase.generate],
              derandomize=DERANDOMIZE,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(simulated_cases(mode=mode))
    def property_(case):
        check(case, case.run())

    return property_


PROPERTIES = {
    "input side, unaligned": lambda: input_side.test_input_side_properties(mode=CheckpointingMode.UNALIGNED),
    "input side, aligned": lambda: input_side.test_input_side_properties(mode=CheckpointingMode.ALIGNED),
    "input side, at-least-once": lambda: input_side.test_input_side_properties(mode=CheckpointingMode.AT_LEAST_ONCE),
    "unaligned snapshot": input_side.test_snapshot_property_unaligned,
    "whole job, aligned": whole_job("aligned"),
    "whole job, unaligned": whole_job("unaligned"),
}

CATCHERS = {
    PlantedBug.LATE_BARRIER_OF_CANCELLED_CHECKPOINT: ["unaligned snapshot", "input side, unaligned"],
    PlantedBug.CHANNELS_NOT_UNBLOCKED_ON_CANCEL: ["input side, aligned"],
    PlantedBug.TRACKER_TRIGGERS_ON_FIRST_BARRIER: ["input side, at-least-once"],
    PlantedBug.SOURCE_SNAPSHOT_AFTER_BARRIER: ["whole job, aligned", "whole job, unaligned"],
}


@pytest.mark.parametrize("bug", list(PlantedBug), ids=lambda b: b.value)
def test_the_property_suite_finds_each_planted_bug(bug):
    failures = {}
    with planted(bug):
        assert is_planted(bug)
        for name in CATCHERS[bug]:
            try:
                PROPERTIES[name]()
            except Exception as failure:  # a falsified property (AssertionError, or the error the bug caused)
                failures[name] = failure
                break
    assert not is_planted(bug)
    assert failures, f"no property found the planted bug {bug.value}"
