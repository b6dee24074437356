"""JobManager failover (``crash_coordinator``) and failed storage writes (``fail_storage_write``) in whole simulated
jobs: the job recovers from the completed checkpoints the storage holds with ids that keep increasing; a failed
task-side state write declines as CHECKPOINT_ASYNC_EXCEPTION, a failed ``_metadata`` write aborts as
FINALIZE_CHECKPOINT_FAILURE; both count against the tolerable failures, and past them the job fails over."""

import pytest

from barriersim.runtime.coordinator.configuration import CheckpointingConfig
from barriersim.runtime.faults.fault_schedule import FaultSchedule
from barriersim.runtime.job.config import JobConfig, JobOutcome, WorkloadConfig
from barriersim.runtime.job.restart_strategy import RestartStrategyConfig
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.runtime.verification.reference import Verdict, expected_sink_input, verify
from barriersim.scenarios.loader import quickstart_graph
from barriersim.scenarios.workload import local_splits

MODES = ["aligned", "unaligned", "aligned-with-timeout", "at-least-once"]


def simulate(mode, faults, records=30_000, seed=3, checkpoint_directory=None, **extra):
    graph = quickstart_graph(2, 2)
    splits = {"source": local_splits(records, 100, 1.0, 100, 2, seed=1)}
    timeout = 20 if mode == "aligned-with-timeout" else 0
    config = JobConfig(
        graph,
        checkpointing=CheckpointingConfig(mode=mode, interval_ms=50, aligned_checkpoint_timeout_ms=timeout, **extra),
        workload=WorkloadConfig(rate_per_source=100_000),
        restart=RestartStrategyConfig(delay_ms=50),
        faults=FaultSchedule.from_json(faults),
    )
    job = JobSimulation(config, splits, seed, checkpoint_directory=checkpoint_directory)
    result = job.run()
    return job, result, verify(expected_sink_input(graph, splits), result.committed_output)


def assert_guarantee(mode, result, verdict):
    assert result.outcome is JobOutcome.FINISHED
    assert verdict.lost == 0 and verdict.wrong == 0
    if mode != "at-least-once":
        assert verdict.verdict is Verdict.EXACTLY_ONCE, verdict


def rows(result, status=None):
    return [c for c in result.checkpoints if status is None or c["status"] == status]


@pytest.mark.parametrize("mode", MODES)
def test_a_crashed_coordinator_recovers_the_completed_checkpoints_and_restarts_the_job(mode):
    job, result, verdict = simulate(mode, '[{"type":"crash_coordinator","at_ms":130}]', records=50_000)
    assert_guarantee(mode, result, verdict)
    assert result.coordinator_failovers == 1 and result.restarts == 1
    old, new = job.dispatcher.retired_stats()[0], job.dispatcher.checkpoint_stats()
    assert old.counts["completed"] >= 1 and result.restored_checkpoint_ids == [
        max(cid for cid, r in old.history.items() if r["status"] == "COMPLETED")
    ]
    assert min(new.history) > max(old.history)  # the persisted counter: no id is used twice
    assert old.counts["in_progress"] == 0  # the dead coordinator's pending checkpoints are lost (failed)
    ids = [c["id"] for c in result.checkpoints]
    assert ids == sorted(set(ids))


def test_pending_checkpoints_of_a_crashed_coordinator_are_lost_and_never_complete():
    # a long acknowledgement delay keeps checkpoint 2 pending; the coordinator dies 10 ms after triggering it
    delay = '{"type":"delay_message","kind":"acknowledge","delay_ms":40,"checkpoint_id":2}'
    _, undisturbed, _ = simulate("aligned", f"[{delay}]")
    at = next(c for c in undisturbed.checkpoints if c["id"] == 2)["trigger_timestamp"] + 10
    job, result, verdict = simulate("aligned", f'[{delay},{{"type":"crash_coordinator","at_ms":{at}}}]')
    assert_guarantee("aligned", result, verdict)
    lost = job.dispatcher.retired_stats()[0].history[2]
    assert lost["status"] == "FAILED" and lost["failure_reason"] == "CHECKPOINT_COORDINATOR_SHUTDOWN"
    assert result.restored_checkpoint_ids == [1] and min(job.dispatcher.checkpoint_stats().history) == 3


def test_a_coordinator_crash_before_any_checkpoint_completed_restarts_from_scratch():
    job, result, verdict = simulate("unaligned", '[{"type":"crash_coordinator","at_ms":5}]', records=10_000)
    assert_guarantee("unaligned", result, verdict)
    assert result.restored_checkpoint_ids == [] and result.coordinator_failovers == 1


@pytest.mark.parametrize("mode", MODES)
def test_a_coordinator_crash_after_a_checkpoint_completed_follows_that_checkpoint_not_the_clock(mode):
    # with a failing _metadata write at checkpoint 2 and the crash tied to checkpoint 3's completion, checkpoint 2
    # always ends as FINALIZE_CHECKPOINT_FAILURE and the new JobManager restores checkpoint 3, however long they take
    faults = (
        '[{"type":"fail_storage_write","checkpoint_id":2},'
        '{"type":"crash_coordinator","point":"after_checkpoint_completed","checkpoint_id":3}]'
    )
    job, result, verdict = simulate(mode, faults, records=50_000, tolerable_failures=10)
    assert_guarantee(mode, result, verdict)
    assert result.coordinator_failovers == 1 and result.restored_checkpoint_ids == [3]
    old = job.dispatcher.retired_stats()[0]
    assert max(old.history) == 3 and old.history[3]["status"] == "COMPLETED"
    assert old.history[2]["failure_reason"] == "FINALIZE_CHECKPOINT_FAILURE"
    assert [e["fired"] for e in result.fault_log] == [1, 1]


def test_a_coordinator_crash_delay_counts_from_the_checkpoint_and_fires_once():
    faults = '[{"type":"crash_coordinator","point":"after_checkpoint_completed","checkpoint_id":2,"delay_ms":7}]'
    job, result, _ = simulate("aligned", faults, records=50_000)
    last_ack = job.dispatcher.retired_stats()[0].history[2]["latest_ack_timestamp"]
    assert result.coordinator_failovers == 1 and result.restored_checkpoint_ids == [2]
    assert result.fault_log[0]["fired"] == 1
    # completion follows the last acknowledgement by the _metadata write (a few ms of the cost model)
    assert last_ack + 7 <= result.fault_log[0]["first_at_ms"] <= last_ack + 7 + 5


def test_two_coordinator_crashes_and_a_task_crash_keep_exactly_once_and_attempt_ids_fresh():
    job, result, verdict = simulate(
        "aligned",
        '[{"type":"crash_coordinator","at_ms":90},{"type":"crash_task","task":"keyed-sum#0","at_ms":200},'
        '{"type":"crash_coordinator","at_ms":320}]',
        records=60_000,
    )
    assert_guarantee("aligned", result, verdict)
    assert result.coordinator_failovers == 2 and result.restarts == 3
    assert {t.attempt_id.attempt_number for t in job.tasks.values()} == {3}
    assert len(result.restored_checkpoint_ids) == 3 and result.restored_checkpoint_ids == sorted(
        result.restored_checkpoint_ids
    )


@pytest.mark.parametrize("mode", ["aligned", "unaligned"])
def test_a_failed_state_write_declines_the_checkpoint_as_an_async_exception(mode):
    job, result, verdict = simulate(
        mode, '[{"type":"fail_storage_write","checkpoint_id":2,"task":"keyed-sum#1"}]', tolerable_failures=3
    )
    assert_guarantee(mode, result, verdict)
    failed = rows(result, "FAILED")
    assert [(c["id"], c["failure_reason"]) for c in failed] == [(2, "CHECKPOINT_ASYNC_EXCEPTION")]
    assert "keyed-sum#1" in failed[0]["failure_message"] and result.restarts == 0


def test_failed_state_writes_past_the_tolerable_number_fail_the_job_over():
    faults = (
        '[{"type":"fail_storage_write","checkpoint_id":2,"task":"source#0"},'
        '{"type":"fail_storage_write","checkpoint_id":3,"task":"sink#0"}]'
    )
    _, tolerant, _ = simulate("aligned", faults, tolerable_failures=2)
    job, strict, verdict = simulate("aligned", faults, tolerable_failures=1)
    # the two failed writes, and the first task's RUNNING trigger at the start (not counted against the threshold)
    assert tolerant.restarts == 0 and tolerant.counts["failed"] == 3
    assert strict.restarts == 1 and verdict.verdict is Verdict.EXACTLY_ONCE
    assert [c["failure_reason"] for c in rows(strict, "FAILED")][:2] == ["CHECKPOINT_ASYNC_EXCEPTION"] * 2


@pytest.mark.parametrize("mode", ["aligned", "unaligned", "at-least-once"])
def test_a_failed_metadata_write_aborts_as_finalize_checkpoint_failure_and_is_never_restored(mode):
    job, result, verdict = simulate(
        mode,
        '[{"type":"fail_storage_write","checkpoint_id":2},{"type":"crash_task","task":"keyed-sum#0","at_ms":125}]',
        tolerable_failures=3,
    )
    assert_guarantee(mode, result, verdict)
    row = next(c for c in result.checkpoints if c["id"] == 2)
    assert row["status"] == "FAILED" and row["failure_reason"] == "FINALIZE_CHECKPOINT_FAILURE"
    assert 2 not in result.restored_checkpoint_ids and result.restarts == 1
    assert all(loc.checkpoint_id != 2 for loc in job.storage.list_retained_checkpoints())


def test_a_failed_metadata_write_past_the_tolerable_number_fails_the_job_over():
    job, result, verdict = simulate("aligned", '[{"type":"fail_storage_write","checkpoint_id":2}]')
    assert_guarantee("aligned", result, verdict)
    assert result.restarts == 1 and result.restored_checkpoint_ids == [1]


STORAGES = ["memory", "files"]


def _directory(storage, tmp_path):
    return tmp_path if storage == "files" else None


def _completed(job):
    return sorted(
        cid
        for stats in job.dispatcher.retired_stats()
        for cid, row in stats.history.items()
        if row["status"] == "COMPLETED"
    )


@pytest.mark.parametrize("storage", STORAGES)
def test_a_deleted_completed_checkpoint_list_fails_the_jobmanager_recovery_naming_the_checkpoints_beside_it(
    storage, tmp_path
):
    """The completed-checkpoint store is not the only witness: a new JobManager that finds no list while completed
    checkpoints lie in the job's directory fails (it restarted from the sources, committing everything again)."""
    job, result, verdict = simulate(
        "aligned",
        '[{"type":"damage_checkpoint","at_ms":200,"damage":"delete",'
        '"target":"completed_list"},{"type":"crash_coordinator","at_ms":200}]',
        records=50_000,
        checkpoint_directory=_directory(storage, tmp_path),
    )
    newest = _completed(job)[-1]
    assert result.outcome is JobOutcome.FAILED and result.restored_checkpoint_ids == []
    reason = result.failure_reason
    assert reason.startswith("JobManager failover: ") and "_completed_checkpoints" in reason, reason
    assert "is missing" in reason and f"chk-{newest}/_metadata" in reason, reason
    assert verdict.duplicated == 0


@pytest.mark.parametrize("storage", STORAGES)
def test_a_completed_checkpoint_list_rolled_back_to_an_older_intact_one_fails_the_jobmanager_recovery(
    storage, tmp_path
):
    """With 20 retained, a list rolled back by one completion still loads (every checkpoint it names is intact): the
    newer checkpoint's ``_metadata`` beside it shows what it lost, and the recovery fails naming both."""
    job, result, verdict = simulate(
        "aligned",
        '[{"type":"damage_checkpoint","at_ms":200,"damage":"roll_back",'
        '"target":"completed_list"},{"type":"crash_coordinator","at_ms":200}]',
        records=50_000,
        checkpoint_directory=_directory(storage, tmp_path),
        max_retained=20,
    )
    completed = _completed(job)
    assert len(completed) >= 2
    assert result.outcome is JobOutcome.FAILED and result.restored_checkpoint_ids == []
    reason = result.failure_reason
    assert "_completed_checkpoints" in reason and f"newest: checkpoint {completed[-2]}" in reason, reason
    assert f"chk-{completed[-1]}/_metadata" in reason, reason
    assert verdict.duplicated == 0


@pytest.mark.parametrize("storage", STORAGES)
def test_a_jobmanager_recovery_after_subsumed_checkpoints_were_discarded_restores_the_latest(storage, tmp_path):
    job, result, verdict = simulate(
        "aligned",
        '[{"type":"crash_coordinator","at_ms":200}]',
        records=50_000,
        checkpoint_directory=_directory(storage, tmp_path),
    )
    assert_guarantee("aligned", result, verdict)
    assert result.restored_checkpoint_ids == [_completed(job)[-1]]
