"""Mutation check: with each planted historical bug (``runtime.faults.mutations``), the whole-job property suite
(``suite_parts``, each property at its default budget, derandomized as in CI) fails in one of the modes whose
protocol can meet the bug (``WHOLE_JOB_MODES``); the input-side unit properties find the input-side bugs too.
docs/bug-zoo.md names each bug's Flink issue and fix version, where it is planted, the modes it can show in and
which check finds it."""

import sys
from pathlib import Path

import pytest

from barriersim.runtime.checkpointing.api import CheckpointingMode
from barriersim.runtime.faults.mutations import PlantedBug, is_planted, planted
from barriersim.strategies import MODES, cancelled_in_flight_cases, simulated_cases
from tests.properties.test_rescale_properties import RESCALE_EXAMPLES_PER_MODE, rescale_cases, rescale_property
from tests.properties.test_rescale_properties import check as rescale_check
from tests.properties.test_whole_job_properties import (
    EXAMPLES_PER_MODE,
    IN_FLIGHT_EXAMPLES_PER_MODE,
    IN_FLIGHT_MODES,
    JOBMANAGER_EXAMPLES_PER_MODE,
    TASKMANAGER_EXAMPLES_PER_MODE,
    check,
    in_flight_property,
    jobmanager_property,
    random_faults_property,
    taskmanager_property,
)

sys.path.insert(0, str(Path(__file__).parents[1] / "runtime" / "checkpointing"))  # its helper modules
from tests.runtime.checkpointing import test_input_side_properties as input_side  # noqa: E402

EXACTLY_ONCE_MODES = tuple(m for m in MODES if m != "at-least-once")  # a transactional sink commits

WHOLE_JOB_MODES = {
    PlantedBug.LATE_BARRIER_OF_CANCELLED_CHECKPOINT: ("aligned-with-timeout",),
    PlantedBug.CHANNELS_NOT_UNBLOCKED_ON_CANCEL: ("aligned",),
    PlantedBug.TRACKER_TRIGGERS_ON_FIRST_BARRIER: ("at-least-once",),
    PlantedBug.SOURCE_SNAPSHOT_AFTER_BARRIER: tuple(MODES),
    PlantedBug.FINISHED_WITHOUT_FINAL_CHECKPOINT: EXACTLY_ONCE_MODES,
    PlantedBug.RESTORE_FROM_OLDER_RETAINED_CHECKPOINT: EXACTLY_ONCE_MODES,
    PlantedBug.SOURCE_POSITIONS_FROM_PREVIOUS_CHECKPOINT: EXACTLY_ONCE_MODES,
    PlantedBug.COMPLETED_MISSING_ONE_ACKNOWLEDGEMENT: tuple(MODES),
    PlantedBug.SAVEPOINT_BARRIER_OVERTAKES_OUTPUT: tuple(MODES),
    PlantedBug.CANCEL_MARKER_IGNORED: ("aligned", "aligned-with-timeout"),
    PlantedBug.UNALIGNED_FLAG_FROM_OPTIONS: ("unaligned", "aligned-with-timeout"),
    PlantedBug.SAVEPOINT_COMMITS_OUTSIDE_STORE: EXACTLY_ONCE_MODES,
    PlantedBug.RESCALE_IGNORES_NEIGHBOURS_CHANNEL_STATE: ("unaligned", "aligned-with-timeout"),
    PlantedBug.INFLIGHT_DATA_OF_WRONG_CHANNELS: ("unaligned", "aligned-with-timeout"),
    PlantedBug.POINTWISE_EDGES_PERSIST_INFLIGHT_DATA: ("unaligned",),
    PlantedBug.SAVEPOINT_NOT_RESTORED_ON_RESTART: EXACTLY_ONCE_MODES,
    PlantedBug.STOPPING_JOB_RESTARTS_FROM_CHECKPOINT: EXACTLY_ONCE_MODES,
    PlantedBug.TIMEOUTABLE_BARRIER_NOT_FORCED_ALIGNED: ("aligned-with-timeout",),
}


def suite_parts(mode: str) -> list:
    """``(name, strategy, default budget, check)`` of each whole-job property that runs in ``mode``, in the order
    the check runs them (the cheapest first): random faults, JobManager faults, cancelled-in-flight checkpoints (in
    the modes that persist in-flight data), TaskManager and node loss, rescale sequences with savepoints and
    stops."""
    parts = [
        ("random faults", simulated_cases(mode=mode), EXAMPLES_PER_MODE, check),
        ("jobmanager", simulated_cases(mode=mode, jobmanager_faults=True), JOBMANAGER_EXAMPLES_PER_MODE, check),
    ]
    if mode in IN_FLIGHT_MODES:
        parts.append(("in flight", cancelled_in_flight_cases(mode=mode), IN_FLIGHT_EXAMPLES_PER_MODE, check))
    parts.append(
        ("taskmanager", simulated_cases(mode=mode, taskmanager_faults=True), TASKMANAGER_EXAMPLES_PER_MODE, check)
    )
    parts.append(("rescale", rescale_cases(mode), RESCALE_EXAMPLES_PER_MODE, rescale_check))
    return parts


def whole_job_suite(mode: str) -> list:
    """Every whole-job property that runs in ``mode``, each at its default budget (a failure is not shrunk)."""
    return (
        [random_faults_property(mode, planted_check=True), jobmanager_property(mode, planted_check=True)]
        + ([in_flight_property(mode, planted_check=True)] if mode in IN_FLIGHT_MODES else [])
        + [taskmanager_property(mode, planted_check=True), rescale_property(mode)]
    )


def first_failure(properties) -> Exception | None:
    for property_ in properties:
        try:
            property_()
        except Exception as failure:  # a falsified property (AssertionError, or the error the bug caused)
            return failure
    return None


@pytest.mark.parametrize("bug", list(WHOLE_JOB_MODES), ids=lambda bug: bug.value)
def test_the_whole_job_suite_finds_each_planted_bug(bug):
    """The suite runs mode after mode of those the bug can show in (``WHOLE_JOB_MODES``, the most telling first)
    until it fails: a bug is found when the whole-job suite finds it in some mode. ``benchmarks.planted_bugs``
    measures every mode, with random seeds."""
    failure, tried = None, []
    with planted(bug):
        assert is_planted(bug)
        for mode in WHOLE_JOB_MODES[bug]:
            tried.append(mode)
            failure = first_failure(whole_job_suite(mode))
            if failure is not None:
                break
    assert not is_planted(bug)
    assert failure is not None, f"the whole-job suite did not find the planted bug {bug.value} ({', '.join(tried)})"


UNIT_CATCHERS = {
    PlantedBug.LATE_BARRIER_OF_CANCELLED_CHECKPOINT: [
        input_side.test_snapshot_property_unaligned,
        lambda: input_side.test_input_side_properties(mode=CheckpointingMode.UNALIGNED),
    ],
    PlantedBug.CHANNELS_NOT_UNBLOCKED_ON_CANCEL: [
        lambda: input_side.test_input_side_properties(mode=CheckpointingMode.ALIGNED)
    ],
    PlantedBug.TRACKER_TRIGGERS_ON_FIRST_BARRIER: [
        lambda: input_side.test_input_side_properties(mode=CheckpointingMode.AT_LEAST_ONCE)
    ],
}


@pytest.mark.parametrize("bug", list(UNIT_CATCHERS), ids=lambda b: b.value)
def test_the_input_side_properties_find_the_planted_bugs_of_the_input_side(bug):
    with planted(bug):
        failure = first_failure(UNIT_CATCHERS[bug])
    assert failure is not None, f"no input-side property found the planted bug {bug.value}"
