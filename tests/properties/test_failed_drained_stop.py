"""A drained stop whose savepoint fails, found by the rescale property (at-least-once, 1,000 random examples per
mode): a stop-with-savepoint with ``--drain`` advances event time to its end before the savepoint's barrier
(Flink's ``StreamTask.endData(DRAIN)``), so every open window fires with the records it has; the savepoint then
expires (its union's acknowledgement is lost), the stop fails, the job fails over to its latest checkpoint and runs
to its end. A direct-writing (at-least-once) sink keeps the early, partial window results, as Flink's would; a
two-phase-commit sink aborts them with the savepoint's transaction. The reference (``runtime.verification.snapshot.
verify_run``) tolerates, after a failed drained stop, a partial result of a window whose full result is there too;
before it did, it counted the partial result as wrong and the rescale property failed on this case."""

from pathlib import Path

import numpy as np

from barriersim.runtime.record_batch import RecordBatch
from barriersim.runtime.verification.snapshot import failed_drained_stop, without_early_window_results
from barriersim.scenarios.loader import load_scenario
from tests.simulated_runs import simulate_and_verify

DRAINED_STOP_FAILS = Path(__file__).parent / "drained_stop" / "drained-stop-fails-after-windows-fired.toml"


def _run_drained_stop_that_fails():
    job, result, verdict, _ = simulate_and_verify(load_scenario(DRAINED_STOP_FAILS))
    assert not job.config.checkpointing.mode.exactly_once
    return job, result, verdict


def test_a_drained_stop_whose_savepoint_fails_leaves_its_early_window_results_in_a_direct_sink():
    job, result, _ = _run_drained_stop_that_fails()
    stop = [a for a in job.report.actions if a["type"] == "stop_with_savepoint" and a["job"] == 1]
    assert [(s["drain"], s["status"], s["failure"]) for s in stop] == [(True, "FAILED", "CHECKPOINT_EXPIRED")]
    assert failed_drained_stop(job.report.operations)
    rows = sorted(tuple(int(x) for x in row) for row in RecordBatch.of(result.committed_output).to_rows())
    # (window_start, key, sum, count): window [20, 40) fired at the drain with 400 of its 800 records, then in full
    # after the failover; window [0, 20) twice in full (at-least-once)
    assert rows == [
        (0, 0, 40802, 800),
        (0, 0, 40802, 800),
        (20, 0, 20343, 400),
        (20, 0, 41044, 800),
        (40, 0, 20635, 400),
    ]


def test_the_reference_tolerates_the_early_window_results_of_a_failed_drained_stop():
    _, _, verdict = _run_drained_stop_that_fails()
    assert verdict.lost == 0 and verdict.wrong == 0, verdict
    assert verdict.duplicated == 1  # window [0, 20) twice: at-least-once
    assert verdict.verdict.value == "at-least-once"


def test_only_a_partial_result_beside_its_window_s_full_result_is_tolerated():
    reference = np.array([[0, 20, 20], [7, 7, 8], [50, 90, 10], [5, 9, 1]])  # (window_start, key, sum, count) columns
    committed = RecordBatch.from_rows(
        [
            (0, 7, 50, 5),  # a full result
            (20, 7, 40, 4),  # an early result of window (20, 7), whose full result follows: tolerated
            (20, 7, 90, 9),
            (20, 8, 3, 1),  # an early result of window (20, 8), whose full result never came: still wrong
            (40, 7, 1, 1),  # a window the reference does not have: still wrong
        ]
    )
    kept = sorted(tuple(int(x) for x in row) for row in without_early_window_results(reference, committed).to_rows())
    assert kept == [(0, 7, 50, 5), (20, 7, 90, 9), (20, 8, 3, 1), (40, 7, 1, 1)]


def test_only_a_failed_stop_with_drain_counts():
    def op(operation, drain, status):
        return {"operation": operation, "drain": drain, "status": status}

    assert failed_drained_stop([op("savepoint", None, "COMPLETED"), op("stop_with_savepoint", True, "FAILED")])
    assert not failed_drained_stop(
        [
            op("stop_with_savepoint", False, "FAILED"),
            op("stop_with_savepoint", True, "COMPLETED"),
            op("cancel", None, "FAILED"),
        ]
    )
