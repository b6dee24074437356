"""A window that fires again after a restore with only replayed records, found by the whole-job property (at-least-once,
1,000 random examples per mode): sources -> union -> hash -> 5 ms windows -> a direct sink; a declined checkpoint
fails the job over to checkpoint 1. Without alignment, records after a source's offset pass the barriers of the
channels ahead, so the window [20, 25) fired in full before the window task's snapshot of checkpoint 1. After the
restore the records after the offsets are replayed and the window fires a second time with only them, as Flink's
at-least-once mode lets it. The reference (``runtime.verification.reference``, at-least-once over aggregates) counts
that smaller row as a duplicate because the window's full row is there too; before it did, it counted it as wrong and
the property failed on this case. (Its re-timings:
``test_a_window_fires_again_after_the_restore_with_only_the_replayed_records``.)"""

from pathlib import Path

import numpy as np

from barriersim.runtime.operators.records import EVENT_TIME, KEY, VALUE
from barriersim.runtime.operators.source import split_offsets
from barriersim.runtime.record_batch import RecordBatch
from barriersim.scenarios.loader import load_scenario
from tests.simulated_runs import simulate_and_verify

REFIRED_WINDOW = Path(__file__).parent / "refired_window" / "window-fired-again-with-replayed-records.toml"
WINDOW_START, WINDOW_MS, HOT_KEY = 20, 5, 0


def _replayed_sum(job, checkpoint_id: int) -> int:
    """The values of the window's records that lie after the sources' offsets in checkpoint ``checkpoint_id``."""
    _, metadata = job.dispatcher.completed_in_epoch()[checkpoint_id]
    total = 0
    for operator in metadata.operator_states:
        if operator.operator_id not in job.splits:
            continue
        for state in operator.subtask_states.values():
            for split, offset in split_offsets(state).items():
                c = RecordBatch.of(job.splits[operator.operator_id][split]).columns
                replayed = (np.arange(c.shape[1]) >= offset) & (c[KEY] == HOT_KEY)
                in_window = (c[EVENT_TIME] >= WINDOW_START) & (c[EVENT_TIME] < WINDOW_START + WINDOW_MS)
                total += int(c[VALUE][replayed & in_window].sum())
    return total


def test_a_window_fires_again_after_the_restore_with_only_the_replayed_records():
    """The case was re-timed, its seed and slowdown, when a paced source's step became
    what its rate allows in 10 ms at every rate, and ends where an output is backpressured; its slowdown again, to x30
    until 28 ms, when a step became slowed only for its part inside a slowdown's window. Its file keeps the flushers
    starting with the checkpoint timer (``network.task_initialization_ms = 0``) and identical subtask speeds
    (``cluster.subtask_speed_sigma = 0``), the model it was found in."""
    job, result, _, _ = simulate_and_verify(load_scenario(REFIRED_WINDOW))
    assert not job.config.checkpointing.mode.exactly_once and result.restored_checkpoint_ids == [1]
    rows = sorted(
        tuple(int(x) for x in row[:3])
        for row in RecordBatch.of(result.committed_output).to_rows()
        if row[0] == WINDOW_START and row[1] == HOT_KEY
    )
    full, replayed = 40708, _replayed_sum(job, 1)
    assert replayed == 24296
    assert rows == [(WINDOW_START, HOT_KEY, replayed), (WINDOW_START, HOT_KEY, full)]


def test_the_reference_counts_the_second_firing_as_a_duplicate():
    _, _, verdict, covers = simulate_and_verify(load_scenario(REFIRED_WINDOW))
    assert covers == "workload"
    assert (verdict.lost, verdict.wrong) == (0, 0), verdict
    assert verdict.duplicated == 3  # window [15, 20) fired again in full, [20, 25) and [25, 30) with replayed records
    assert verdict.verdict.value == "at-least-once"
