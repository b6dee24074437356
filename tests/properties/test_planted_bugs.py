"""Mutation check: with each known historical bug planted (``runtime.faults.mutations``), the property suite, at its
default budget, fails. The whole-job suite (``test_whole_job_properties``: every property that runs in a mode, at
its default budget, derandomized as in CI) must find each bug in every mode whose protocol can meet it; the
input-side unit properties must find the bugs of the input side too.

Where each bug can show in a whole job on the simulator:
- the late barrier of a cancelled checkpoint: only when a barrier can arrive after the next checkpoint started
  on its channel, i.e. with an alignment timeout (aligned barriers wait behind data; the next checkpoint turns
  unaligned). In unaligned mode every task takes a priority barrier the moment it arrives, so a cancelled
  checkpoint's barrier is never late there;
- channels not unblocked on cancel: only an aligned alignment blocks channels that a cancellation must release
  (with an alignment timeout the alternating handler releases them on its own path);
- the tracker triggering on the first barrier: only at-least-once checkpoints use the tracker;
- a source snapshotting after its barrier, a checkpoint completed one acknowledgement short, a savepoint's barrier
  overtaking the output: every mode;
- a task finishing without its final checkpoint, a restore from an older retained checkpoint, a restore taking the
  sources' positions from the checkpoint before: only where a transactional sink commits on checkpoints (the
  exactly-once modes; an at-least-once sink writes at once and may repeat records).
docs/bug-zoo.md names each bug's Flink issue and says why the suite finds it."""

import sys
from pathlib import Path

import pytest

from barriersim.runtime.checkpointing.api import CheckpointingMode
from barriersim.runtime.faults.mutations import PlantedBug, is_planted, planted
from barriersim.strategies import MODES
from tests.properties.test_whole_job_properties import (
    IN_FLIGHT_MODES,
    in_flight_property,
    jobmanager_property,
    random_faults_property,
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
}


def whole_job_suite(mode: str) -> list:
    """Every whole-job property that runs in ``mode``, each at its default budget (a failure is not shrunk)."""
    suite = [random_faults_property(mode, planted_check=True), jobmanager_property(mode, planted_check=True)]
    if mode in IN_FLIGHT_MODES:
        suite.append(in_flight_property(mode, planted_check=True))
    return suite


def first_failure(properties) -> Exception | None:
    for property_ in properties:
        try:
            property_()
        except Exception as failure:  # a falsified property (AssertionError, or the error the bug caused)
            return failure
    return None


@pytest.mark.parametrize(("bug", "mode"), [(bug, mode) for bug, modes in WHOLE_JOB_MODES.items() for mode in modes],
                         ids=lambda v: getattr(v, "value", v))
def test_the_whole_job_suite_finds_each_planted_bug_in_every_mode_it_can_show_in(bug, mode):
    with planted(bug):
        assert is_planted(bug)
        failure = first_failure(whole_job_suite(mode))
    assert not is_planted(bug)
    assert failure is not None, f"the whole-job suite in {mode} mode did not find the planted bug {bug.value}"


UNIT_CATCHERS = {
    PlantedBug.LATE_BARRIER_OF_CANCELLED_CHECKPOINT: [
        input_side.test_snapshot_property_unaligned,
        lambda: input_side.test_input_side_properties(mode=CheckpointingMode.UNALIGNED)],
    PlantedBug.CHANNELS_NOT_UNBLOCKED_ON_CANCEL: [
        lambda: input_side.test_input_side_properties(mode=CheckpointingMode.ALIGNED)],
    PlantedBug.TRACKER_TRIGGERS_ON_FIRST_BARRIER: [
        lambda: input_side.test_input_side_properties(mode=CheckpointingMode.AT_LEAST_ONCE)],
}


@pytest.mark.parametrize("bug", list(UNIT_CATCHERS), ids=lambda b: b.value)
def test_the_input_side_properties_find_the_planted_bugs_of_the_input_side(bug):
    with planted(bug):
        failure = first_failure(UNIT_CATCHERS[bug])
    assert failure is not None, f"no input-side property found the planted bug {bug.value}"
