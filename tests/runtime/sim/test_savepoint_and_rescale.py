"""Savepoints, stop-with-savepoint and rescaling on the simulator, each run verified by the exactly-once oracle
(``runtime.verification.snapshot.verify_run``: against the whole workload when the last job ran to its end,
against what its last snapshot accounts for when it was stopped or cancelled).

The job is the library's ``rescale.toml`` (two paced sources, a keyed running sum behind a hash edge, an
exactly-once sink behind a rebalance edge, under backpressure) with its parallelism and actions set per test:
a savepoint then a stop-with-savepoint and a restore with the same parallelism, scaled up (2 -> 4) and scaled
down (4 -> 2) in aligned, unaligned and at-least-once mode; in unaligned mode also a retained unaligned
checkpoint taken with data in flight, restored with rescaling (its in-flight data redistributed, Flink 1.13+);
stop-with-savepoint with and without ``--drain`` on a tumbling event-time window."""

import tomllib
from pathlib import Path

import pytest

from barriersim.runtime.faults.experiment import (
    ActionSchedule,
    Cancel,
    Restore,
    RestoreSource,
    Savepoint,
    StopWithSavepoint,
)
from barriersim.runtime.verification.reference import Verdict
from barriersim.scenarios.loader import effective_scenario, parse_scenario
from tests.modes import in_test_mode
from tests.simulated_runs import simulate_and_verify

RESCALE = Path(__file__).resolve().parents[3] / "scenarios" / "rescale.toml"
SEED = 17


def scenario(
    mode: str,
    parallelism: dict[str, int],
    actions,
    *,
    retain: bool = False,
    keyed_operator=None,
    state: dict | None = None,
):
    document = tomllib.loads(RESCALE.read_text())
    document.pop("actions")
    if state is not None:
        document["state"] = state
    for vertex in document["job"]["vertex"]:
        vertex["parallelism"] = parallelism.get(vertex["name"], vertex["parallelism"])
        if keyed_operator is not None and vertex["name"] == "keyed":
            vertex.update(keyed_operator)
    if retain:
        document["checkpointing"]["externalized_checkpoint_retention"] = "RETAIN_ON_CANCELLATION"
    return effective_scenario(
        in_test_mode(parse_scenario(document, str(RESCALE)), mode), seed=SEED, actions=ActionSchedule(tuple(actions))
    )


def assert_verified(mode: str, verification) -> None:
    assert verification.lost == 0 and verification.wrong == 0 and verification.final_sum_mismatched_keys == 0, (
        verification
    )
    if mode != "at-least-once":
        assert verification.verdict is Verdict.EXACTLY_ONCE, verification
    else:
        assert verification.verdict in (Verdict.EXACTLY_ONCE, Verdict.AT_LEAST_ONCE), verification


SCALINGS = {
    "same": ({"keyed": 2, "sink": 1}, {"keyed": 2, "sink": 1}),
    "up 2->4": ({"keyed": 2, "sink": 1}, {"keyed": 4, "sink": 2}),
    "down 4->2": ({"keyed": 4, "sink": 2}, {"keyed": 2, "sink": 1}),
}


@pytest.mark.parametrize("scaling", sorted(SCALINGS))
@pytest.mark.parametrize("mode", ["aligned", "unaligned", "at-least-once"])
def test_savepoint_stop_and_restore_with_new_parallelism_is_verified(mode, scaling):
    before, after = SCALINGS[scaling]
    job, result, verification, covers = simulate_and_verify(
        scenario(mode, before, [Savepoint(1200), StopWithSavepoint(2500), Restore(RestoreSource.SAVEPOINT, after)])
    )
    assert_verified(mode, verification)
    assert covers == "workload" and verification.expected_records == 30000
    assert not job.consistent_cut_violations()
    first, restored = job.report.jobs
    assert first.final_state == "FINISHED" and [(o["operation"], o["status"]) for o in first.operations] == [
        ("savepoint", "COMPLETED"),
        ("stop_with_savepoint", "COMPLETED"),
    ]
    assert {k: first.parallelism[k] for k in before} == before
    assert restored.final_state == "FINISHED" and {k: restored.parallelism[k] for k in after} == after
    stop = first.operations[1]
    # Flink's latest.restored: the stop's savepoint, restored as a savepoint, at its external path
    assert restored.latest_restored["id"] == stop["checkpoint_id"] and restored.latest_restored["is_savepoint"]
    assert restored.latest_restored["external_path"] == stop["path"]
    savepoints = [c for c in job.report.checkpoints if c["is_savepoint"]]
    # Flink's REST checkpoint_type: a stop-with-savepoint's is SYNC_SAVEPOINT
    assert [c["checkpoint_type"] for c in savepoints] == ["SAVEPOINT", "SYNC_SAVEPOINT"]
    assert all(c["savepointFormat"] == "CANONICAL" and c["external_path"] for c in savepoints)
    # the restored job's checkpoint ids continue past the savepoint's (Flink sets the counter to its id + 1)
    assert min(c["id"] for c in job.report.checkpoints if c["job"] == 1) > stop["checkpoint_id"]
    assert result.restored_in_flight_bytes == 0  # a savepoint is aligned: it has no in-flight data


@pytest.mark.parametrize("scaling", ["same", "up 2->4"])
def test_savepoints_of_the_incremental_backend_are_full_and_restore(scaling):
    """With the incremental (RocksDB-like) backend a savepoint is written in full, in the canonical format, and refers
    to no checkpoint's file (the checkpoints' shared files are not registered for it and may go before it does);
    the checkpoints around it stay incremental. Restored with the same parallelism or rescaled, the job's state
    comes back whole and the output is exactly once."""
    before, after = SCALINGS[scaling]
    state = {"backend": "incremental", "entry_bytes": 1000}
    job, result, verification, covers = simulate_and_verify(
        scenario(
            "aligned",
            before,
            [Savepoint(700), StopWithSavepoint(2500), Restore(RestoreSource.SAVEPOINT, after)],
            state=state,
        )
    )
    assert_verified("aligned", verification)
    assert covers == "workload" and verification.expected_records == 30000
    first, restored = job.report.jobs
    assert first.final_state == "FINISHED" and restored.final_state == "FINISHED"
    rows = [c for c in job.report.checkpoints if c["job"] == 0 and c["status"] == "COMPLETED"]
    savepoints = [c for c in rows if c["is_savepoint"]]
    assert [c["checkpoint_type"] for c in savepoints] == ["SAVEPOINT", "SYNC_SAVEPOINT"]
    assert all(c["checkpointed_size"] == c["state_size"] > 0 for c in savepoints)  # every entry written
    after_savepoint = [c for c in rows if not c["is_savepoint"] and c["id"] > savepoints[0]["id"]]
    assert after_savepoint and after_savepoint[0]["checkpointed_size"] < after_savepoint[0]["state_size"]
    assert not job.consistent_cut_violations()


@pytest.mark.parametrize("keyed", [2, 4, 1])
def test_a_retained_incremental_checkpoint_restores_and_the_first_checkpoint_after_it_is_full(keyed):
    """Restored in Flink's default ``NO_CLAIM`` mode, the retained checkpoint's shared files stay its owner's: the new
    job registers them (it may fail over to that checkpoint) but its first checkpoint is a ``FULL_CHECKPOINT`` that
    uploads every file again, and the checkpoints after it are incremental on top of it. Rescaled, each new subtask
    gets every incremental handle that overlaps its key groups whole (an incremental handle cannot be cut) and reads
    only its own key groups from it."""
    state = {"backend": "incremental", "entry_bytes": 1000}
    job, result, verification, covers = simulate_and_verify(
        scenario(
            "aligned",
            {"keyed": 2, "sink": 1},
            [Cancel(2500), Restore(RestoreSource.CHECKPOINT, {"keyed": keyed})],
            retain=True,
            state=state,
        )
    )
    assert_verified("aligned", verification)
    assert covers == "workload" and verification.expected_records == 30000
    first, restored = job.report.jobs
    assert restored.parallelism["keyed"] == keyed
    assert first.final_state == "CANCELED" and restored.final_state == "FINISHED"
    before = [c for c in job.report.checkpoints if c["job"] == 0 and c["status"] == "COMPLETED"]
    after = [c for c in job.report.checkpoints if c["job"] == 1 and c["status"] == "COMPLETED"]
    assert before[-1]["checkpointed_size"] < before[-1]["state_size"]  # incremental before the restore
    assert len(after) >= 2 and after[0]["checkpoint_type"] == "CHECKPOINT"
    assert after[0]["checkpointed_size"] == after[0]["state_size"]  # the full checkpoint
    assert any(c["checkpointed_size"] < c["state_size"] for c in after[1:])  # incremental again after it
    assert not job.consistent_cut_violations()


@pytest.mark.parametrize("keyed", [4, 1])
def test_a_retained_unaligned_checkpoint_with_data_in_flight_restores_rescaled(keyed):
    """Cancelled under backpressure, the job keeps its last unaligned checkpoint (retain on cancellation); a new
    job restores it with the keyed sum rescaled: the in-flight data of the hash edge is redistributed by key group
    range, that of the rebalance edge round robin (Flink's TaskStateAssignment), and the oracle finds every record
    exactly once."""
    job, result, verification, covers = simulate_and_verify(
        scenario(
            "unaligned",
            {"keyed": 2, "sink": 1},
            [Cancel(2500), Restore(RestoreSource.CHECKPOINT, {"keyed": keyed})],
            retain=True,
        )
    )
    assert_verified("unaligned", verification)
    assert covers == "workload" and verification.expected_records == 30000
    first, restored = job.report.jobs
    assert first.final_state == "CANCELED" and first.retained_checkpoint is not None
    assert restored.parallelism["keyed"] == keyed and restored.final_state == "FINISHED"
    assert restored.latest_restored["external_path"] == first.retained_checkpoint
    assert restored.restored_in_flight_bytes > 0  # the checkpoint held in-flight data and it was restored
    assert not job.consistent_cut_violations()


def test_stop_with_savepoint_with_and_without_drain():
    """Flink 1.14+: the stop's savepoint is the job's final checkpoint and the job ends FINISHED. With ``--drain``
    the sources emit MAX_WATERMARK first, so every event-time window fires before the savepoint; without it the
    open windows stay in the savepoint's state and are not emitted. Either way the output is what the savepoint
    accounts for, exactly once."""
    window = {"operator": "tumbling_window", "window_ms": 500}
    outputs = {}
    for drain in (False, True):
        job, result, verification, covers = simulate_and_verify(
            scenario("aligned", {}, [StopWithSavepoint(1500, drain=drain)], keyed_operator=window)
        )
        assert_verified("aligned", verification)
        assert covers == "snapshot" and verification.expected_records == len(result.committed_output) > 0
        (only,) = job.report.jobs
        assert only.final_state == "FINISHED" and result.outcome.value == "finished"
        (stop,) = only.operations
        assert stop["operation"] == "stop_with_savepoint" and stop["status"] == "COMPLETED"
        final = job.report.checkpoints[-1]
        # Flink's REST shows SYNC_SAVEPOINT either way (RestAPICheckpointType); the operation tells the drain
        assert final["checkpoint_type"] == "SYNC_SAVEPOINT" and stop["drain"] is drain
        assert final["id"] == stop["checkpoint_id"] and final["external_path"] == stop["path"]
        outputs[drain] = set(result.committed_output)  # (window start, key, sum, count)
    # the same windows fired before the stop; drained, the windows still open at the stop fired too
    assert outputs[False] < outputs[True]
    assert min(r[0] for r in outputs[True] - outputs[False]) >= max(r[0] for r in outputs[False])


FOUND_CASES = sorted((Path(__file__).parent / "cases").glob("stop-without-drain-*.toml"))


@pytest.mark.parametrize("path", FOUND_CASES, ids=[p.stem for p in FOUND_CASES])
def test_the_found_stops_without_drain_fire_no_window_twice(path):
    """The rescale property's cases of a stop-with-savepoint without ``--drain`` while some sources had already
    read their splits (at-least-once, a direct-writing sink): every window reaches the sink once, in full."""
    from barriersim.scenarios.loader import load_scenario

    job, result, verification, covers = simulate_and_verify(load_scenario(path))
    assert not job.config.checkpointing.mode.exactly_once
    assert [a["status"] for a in job.report.actions if a["type"] != "savepoint"] == ["COMPLETED", "COMPLETED"]
    assert covers == "workload" and verification.wrong == verification.lost == 0, verification
    assert verification.duplicated == 0 and len(result.committed_output) == verification.expected_records
    assert not job.consistent_cut_violations()


def test_a_late_acknowledgement_that_refers_to_a_released_file_is_dropped_and_reported():
    """The late acknowledgement of a subsumed incremental checkpoint names, by a placeholder, a file the shared-state
    registry released when a later checkpoint completed: it is dropped and reported as a storage error, as Flink's
    JobMaster logs it, and the run goes on to its verdict (it crashed the driver before)."""
    from barriersim.scenarios.loader import load_scenario

    path = Path(__file__).parent / "cases" / "late-ack-of-subsumed-incremental-checkpoint.toml"
    job, result, verification, covers = simulate_and_verify(load_scenario(path))
    assert (
        verification.lost == 0
        and verification.wrong == 0
        and verification.verdict in (Verdict.EXACTLY_ONCE, Verdict.AT_LEAST_ONCE)
    ), verification
    dropped = [e for e in result.storage_errors if "was dropped" in e]
    assert dropped and "keyed_sum#1" in dropped[0] and "unknown shared state" in dropped[0], result.storage_errors
    assert not job.consistent_cut_violations()


STOP_FAILED_AFTER_ITS_SAVEPOINT = Path(__file__).parent / "cases" / "stop-failed-after-its-savepoint.toml"


@pytest.mark.parametrize("restore", [False, True], ids=["no restore", "restored from the savepoint"])
def test_a_job_that_fails_after_its_stop_savepoint_completed_fails_and_its_savepoint_is_what_to_resume(restore):
    """The rescale property's case (found by the exact-source campaign; unaligned): a stop-with-savepoint without
    drain whose savepoint completes, one source never told (its notification dropped), then a task crashes. Flink
    1.15+ (FLINK-26783, ``StopWithSavepointStoppingException``, a ``NonRecoverableError``) fails the job: a restart
    would restore the latest checkpoint, older than the savepoint whose completion the sink committed, and commit its
    records again (barriersim did, 2,000 records twice). The savepoint is consistent: the run is verified against it,
    and a restore from it goes on to the end."""
    from barriersim.scenarios.loader import load_scenario

    base = load_scenario(STOP_FAILED_AFTER_ITS_SAVEPOINT)
    actions = tuple(base.actions) + ((Restore(RestoreSource.SAVEPOINT),) if restore else ())
    job, result, verification, covers = simulate_and_verify(effective_scenario(base, actions=ActionSchedule(actions)))
    assert verification.duplicated == verification.lost == verification.wrong == 0, verification
    first = job.report.jobs[0]
    (stop,) = first.operations
    assert first.final_state == "FAILED" and first.restarts == 1  # the crash counted as a restart, as in Flink
    assert stop["status"] == "FAILED" and stop["path"] is not None
    assert stop["failure"].startswith(f"A savepoint has been created at: {stop['path']}, but the corresponding job")
    if restore:
        assert len(job.report.jobs) == 2 and job.report.jobs[1].final_state == "FINISHED"
        assert covers == "workload"
    else:
        assert result.outcome.value == "failed" and covers == "snapshot"


STOP_SAVEPOINT_COMPLETES_AT_A_FAILOVER = Path(__file__).parent / "cases" / "stop-savepoint-completes-at-a-failover.toml"


@pytest.mark.parametrize("mode", ["aligned", "unaligned", "aligned-with-timeout"])
@pytest.mark.parametrize("rescale", [True, False], ids=["restored with source at 3", "restored as it was"])
def test_a_stop_whose_savepoint_completes_at_a_failover_fails_the_job_and_a_restore_is_exactly_once(mode, rescale):
    """The generated case of the bug zoo (no bug planted): a stop-with-savepoint without drain whose savepoint,
    acknowledged by every task, is writing its _metadata when ``join#0`` crashes. The failover's first call to the
    coordinator completes it (Flink's lock, taken after the write), then the tasks end FAILED/CANCELED: as after a
    failure that follows the savepoint, Flink 1.15+ fails the job (``StopWithSavepointTerminationHandlerImpl``, a
    ``StopWithSavepointStoppingException``). barriersim restarted it from scratch instead (its savepoint is not in
    the store, no checkpoint had completed): the restarted job committed its whole output, and the restore from the
    savepoint committed what followed the savepoint once more (4 records duplicated). A second stop right after the
    restore fails (NOT_ALL_REQUIRED_TASKS_RUNNING) and the restored job runs to its end."""
    from barriersim.scenarios.loader import load_scenario

    base = in_test_mode(load_scenario(STOP_SAVEPOINT_COMPLETES_AT_A_FAILOVER), mode)
    if not rescale:
        actions = tuple(
            Restore(RestoreSource.SAVEPOINT) if isinstance(action, Restore) else action for action in base.actions
        )
        base = effective_scenario(base, actions=ActionSchedule(actions))
    job, result, verification, covers = simulate_and_verify(base)
    assert verification.duplicated == verification.lost == verification.wrong == 0, verification
    assert verification.verdict is Verdict.EXACTLY_ONCE and covers == "workload"
    first, restored = job.report.jobs
    (stop,) = first.operations
    assert first.final_state == "FAILED" and first.restarts == 1  # the crash counted as a restart, as in Flink
    assert stop["status"] == "FAILED" and stop["path"] is not None
    assert stop["failure"].startswith(f"A savepoint has been created at: {stop['path']}, but the corresponding job")
    assert restored.latest_restored["external_path"] == stop["path"] and restored.final_state == "FINISHED"
    (second_stop,) = restored.operations
    assert second_stop["status"] == "FAILED" and second_stop["failure"] == "NOT_ALL_REQUIRED_TASKS_RUNNING"
    assert not job.consistent_cut_violations()


def test_a_cancelled_job_with_incremental_window_state_is_verified_against_its_checkpoint():
    """The rescale property's case (found by the exact-source campaign): a job with a window join on the incremental
    backend is cancelled (its savepoint failed), so the run is verified against its latest checkpoint, whose window
    state is incremental handles. The oracle reads the open windows from them merged (``as_full_snapshot``), as a
    restore does; it used to read only full handles and the run ended in a traceback."""
    from barriersim.runtime.state.snapshot import IncrementalKeyedStateHandle
    from barriersim.scenarios.loader import load_scenario

    job, result, verification, covers = simulate_and_verify(
        load_scenario(Path(__file__).parent / "cases" / "cancel-with-incremental-window-state.toml")
    )
    ended_by_snapshot, metadata = job.dispatcher.ending_snapshot()
    assert result.outcome.value == "canceled" and ended_by_snapshot and covers == "snapshot"
    join = next(s for s in metadata.operator_states if s.operator_id == "join")
    assert any(
        isinstance(h, IncrementalKeyedStateHandle)
        for st in join.subtask_states.values()
        for h in st.managed_keyed_state
    )
    assert_verified("unaligned", verification)
