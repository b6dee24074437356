"""The run's statistics as both drivers report them (``stats_tracker.job_statistics``): a subtask's
``ack_timestamp`` is the coordinator's clock when the acknowledgement arrived (Flink's
``PendingCheckpoint.acknowledgeTask``), only acknowledgements that reached a pending checkpoint have a row, a
task that had finished before the trigger (FLIP-147) has one as Flink's ``CheckpointCoordinator.reportFinishedTasks``
reports it (acknowledged at the trigger, every figure 0), and the trackers of every coordinator of a run are
summed."""

from barriersim.runtime.checkpoint_cost import CheckpointCostModel
from barriersim.runtime.coordinator.configuration import CheckpointingConfig
from barriersim.runtime.coordinator.stats_tracker import CheckpointStatsTracker, job_statistics
from barriersim.runtime.failure_reason import CheckpointFailureReason
from barriersim.runtime.faults.fault_schedule import FaultSchedule
from barriersim.runtime.job.config import JobConfig, JobOutcome, WorkloadConfig
from barriersim.runtime.job.restart_strategy import RestartStrategyConfig
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.runtime.task.actions import TaskCheckpointMetrics
from barriersim.scenarios.loader import quickstart_graph
from barriersim.scenarios.workload import local_splits


def test_rows_per_acknowledgement_sums_per_checkpoint_and_counts_over_every_coordinator():
    first, second = CheckpointStatsTracker(), CheckpointStatsTracker()
    first.report_pending_checkpoint(1, 100, False, "CHECKPOINT", 3)
    first.report_subtask_stats(1, "source#0@0", 100, 0, finished=True)  # finished before the trigger (FLIP-147)
    first.report_subtask_stats(
        1,
        "sum#1@0",
        130,
        64,
        TaskCheckpointMetrics(
            1, alignment_duration_ms=7, bytes_processed_during_alignment=500, checkpoint_start_delay_ms=3
        ),
    )
    first.report_subtask_stats(
        1,
        "sink#0@0",
        142,
        8,
        TaskCheckpointMetrics(
            1, bytes_persisted_during_alignment=40, persisted_output_bytes=2, unaligned_checkpoint=True
        ),
    )
    first.report_completed_checkpoint(1, 150)
    first.report_pending_checkpoint(2, 200, False, "CHECKPOINT", 3)
    first.report_failed_checkpoint(2, 210, CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN)
    second.report_pending_checkpoint(3, 300, False, "CHECKPOINT", 1)
    second.report_subtask_stats(3, "sum#1@1", 333, 64, TaskCheckpointMetrics(3, sync_duration_ms=2))

    checkpoints, subtasks, counts = job_statistics([first, second])

    assert [c["id"] for c in checkpoints] == [1, 2, 3]
    assert [c["status"] for c in checkpoints] == ["COMPLETED", "FAILED", "IN_PROGRESS"]
    assert (checkpoints[0]["processed_data"], checkpoints[0]["persisted_data"]) == (500, 42)
    assert (checkpoints[1]["processed_data"], checkpoints[1]["persisted_data"]) == (0, 0)
    assert [(r["id"], r["task"], r["ack_timestamp"], r["finished"]) for r in subtasks] == [
        (1, "source#0", 100, True),
        (1, "sum#1", 130, False),
        (1, "sink#0", 142, False),
        (3, "sum#1", 333, False),
    ]
    finished = subtasks.pop(0)  # Flink's new SubtaskStateStats(index, now): every size and duration 0
    assert all(
        finished[f] == 0
        for f in (
            "state_size",
            "checkpointed_size",
            "checkpoint_sync",
            "checkpoint_async",
            "alignment_duration",
            "start_delay",
            "alignment_persisted",
        )
    )
    assert not finished["unaligned_checkpoint"] and not finished["aborted"]
    sum_row = subtasks[0]
    assert (sum_row["alignment_duration"], sum_row["start_delay"], sum_row["state_size"]) == (7, 3, 64)
    assert subtasks[1]["unaligned_checkpoint"] and subtasks[2]["checkpoint_sync"] == 2
    assert counts == {"restored": 0, "total": 3, "in_progress": 1, "completed": 1, "failed": 1}


def simulate(faults: str, first_source_share: float = 1.0):
    """``first_source_share``: the part of its split source#0 reads (the rest of the job reads all of it)."""
    graph = quickstart_graph(2, 2)
    splits = {"source": local_splits(20_000, 100, 1.0, 100, 2, seed=1)}
    first = splits["source"][0]
    splits["source"][0] = first[: int(len(first) * first_source_share)]
    config = JobConfig(
        graph,
        checkpointing=CheckpointingConfig(mode="aligned", interval_ms=50),
        workload=WorkloadConfig(rate_per_source=100_000),
        restart=RestartStrategyConfig(delay_ms=50),
        faults=FaultSchedule.from_json(faults),
    )
    result = JobSimulation(config, splits, seed=3).run()
    assert result.outcome is JobOutcome.FINISHED
    return result


def test_a_delayed_acknowledgement_is_stamped_when_the_coordinator_receives_it():
    undelayed = simulate("[]")
    result = simulate(
        '[{"type":"delay_message","kind":"acknowledge","delay_ms":40,"task":"keyed-sum#1","checkpoint_id":2}]'
    )
    before = {(r["id"], r["task"]): r["ack_timestamp"] for r in undelayed.subtasks}
    after = {(r["id"], r["task"]): r["ack_timestamp"] for r in result.subtasks}
    assert after[(2, "keyed-sum#1")] >= before[(2, "keyed-sum#1")] + 40
    second = next(c for c in result.checkpoints if c["id"] == 2)
    assert second["status"] == "COMPLETED"
    assert (
        after[(2, "keyed-sum#1")]
        == second["latest_ack_timestamp"]
        == max(t for (cid, _), t in after.items() if cid == 2)
    )


def test_a_lost_acknowledgement_has_no_row():
    result = simulate('[{"type":"drop_message","kind":"acknowledge","task":"keyed-sum#1","checkpoint_id":2}]')
    second = next(c for c in result.checkpoints if c["id"] == 2)
    assert second["status"] == "FAILED"  # it expires without the acknowledgement
    tasks_of_2 = {r["task"] for r in result.subtasks if r["id"] == 2}
    assert "keyed-sum#1" not in tasks_of_2 and tasks_of_2  # the others did reach the pending checkpoint
    assert second["num_acknowledged_subtasks"] == len(tasks_of_2)


def test_a_checkpoint_no_subtask_acknowledged_reports_minus_one_as_flink_does():
    """Flink's AbstractCheckpointStats: ``getLatestAckTimestamp`` and, while pending, ``getEndToEndDuration`` are -1
    until a subtask acknowledged; a failure sets the end-to-end duration to failure - trigger, the latest
    acknowledgement stays -1."""
    stats = CheckpointStatsTracker()
    stats.report_pending_checkpoint(1, 1_000, False, "CHECKPOINT", 2)
    assert (stats.history[1]["latest_ack_timestamp"], stats.history[1]["end_to_end_duration"]) == (-1, -1)
    stats.report_failed_checkpoint(1, 1_070, CheckpointFailureReason.CHECKPOINT_EXPIRED)
    assert (stats.history[1]["latest_ack_timestamp"], stats.history[1]["end_to_end_duration"]) == (-1, 70)


def test_end_to_end_duration_runs_to_the_latest_acknowledgement_or_to_the_failure():
    """Flink's AbstractCheckpointStats.getEndToEndDuration (latest ack - trigger) and FailedCheckpointStats's
    (failure - trigger): finalizing a completed checkpoint after its last acknowledgement is not counted."""
    stats = CheckpointStatsTracker()
    stats.report_pending_checkpoint(1, 1_000, False, "CHECKPOINT", 1)
    stats.report_subtask_stats(1, "sink#0@0", 1_012, 0, TaskCheckpointMetrics(1))
    stats.report_completed_checkpoint(1, 1_030)  # the metadata write took 18 ms
    assert (stats.history[1]["end_to_end_duration"], stats.history[1]["latest_ack_timestamp"]) == (12, 1_012)
    stats.report_pending_checkpoint(2, 2_000, False, "CHECKPOINT", 2)
    stats.report_subtask_stats(2, "sink#0@0", 2_005, 0, TaskCheckpointMetrics(2))
    stats.report_failed_checkpoint(2, 2_040, CheckpointFailureReason.CHECKPOINT_EXPIRED)
    assert stats.history[2]["end_to_end_duration"] == 40


def test_a_source_that_finished_before_the_trigger_is_reported_acknowledged_at_the_trigger():
    """FLIP-147 in a whole run: the checkpoints triggered after a task finished list it once, acknowledged at the
    trigger with nothing in it; while it ran, its rows are its acknowledgements."""
    result = simulate("[]", first_source_share=0.2)
    trigger = {c["id"]: c["trigger_timestamp"] for c in result.checkpoints}
    finished = [r for r in result.subtasks if r["finished"]]
    assert {r["task"] for r in finished} == {"source#0"}  # its short split ends first; the others end together
    assert all(r["ack_timestamp"] == trigger[r["id"]] and r["start_delay"] == 0 for r in finished)
    for task in {r["task"] for r in finished}:
        mine = sorted((r["id"], r["finished"]) for r in result.subtasks if r["task"] == task)
        flags = [flag for _, flag in mine]
        assert flags == sorted(flags) and not flags[0]  # acknowledged while running, then reported finished
        assert len({cid for cid, _ in mine}) == len(mine)  # one row per checkpoint


def test_a_cancelled_task_reports_its_closed_asynchronous_parts_to_the_failed_or_pending_checkpoint():
    """Flink 2.3: a cancelled task closes its running asynchronous parts, each reporting its figures
    (``AsyncCheckpointRunnable.close`` -> ``reportAbortedSnapshotStats``), and the statistics take them
    (``DefaultCheckpointStatsTracker.reportIncompleteStats``) for a checkpoint still pending or already failed
    (``FailedCheckpointStats`` is a ``PendingCheckpointStats``). At the first failover the deactivator aborted the
    pending checkpoint before the reports arrive, at the second it waits for the restart: either way the cancelled
    tasks' rows show, ``aborted``, no acknowledgement, as do acknowledgements that arrive after the failure; the
    crashed task, whose process is gone, reports nothing."""
    graph = quickstart_graph(2, 2)
    splits = {"source": local_splits(100_000, 100, 1.0, 100, 2, seed=1)}
    faults = FaultSchedule.from_json(
        '[{"type":"crash_task","task":"keyed-sum#0","at_ms":65},{"type":"crash_task","task":"keyed-sum#1","at_ms":220}]'
    )
    config = JobConfig(
        graph,
        checkpointing=CheckpointingConfig(mode="unaligned", interval_ms=20),
        workload=WorkloadConfig(rate_per_source=100_000),
        restart=RestartStrategyConfig(delay_ms=50),
        faults=faults,
        # the crash times meet checkpoints in these states with the trigger path drawn whole around 8.5 ms
        storage=CheckpointCostModel(trigger_fixed_ms=8.5, trigger_constant_ms=0.0),
    )
    result = JobSimulation(config, splits, seed=3).run()
    assert result.outcome is JobOutcome.FINISHED and result.restarts == 2
    failed = {c["failure_reason"]: c for c in result.checkpoints if c["status"] == "FAILED"}
    everyone = {"source#0", "source#1", "keyed-sum#0", "keyed-sum#1", "sink#0"}
    for reason, crashed in (("CHECKPOINT_COORDINATOR_SUSPEND", "keyed-sum#0"), ("JOB_FAILOVER_REGION", "keyed-sum#1")):
        checkpoint = failed[reason]
        rows = [r for r in result.subtasks if r["id"] == checkpoint["id"]]
        assert rows and all(r["aborted"] for r in rows) and checkpoint["num_acknowledged_subtasks"] == 0
        assert {r["task"] for r in rows} == everyone - {crashed}
        # a closed part's row (-1 for what it did not know yet) or an acknowledgement that arrived after the
        # failure (receiveAcknowledgeMessage reports a late one's figures, not completed)
        closed = [r for r in rows if r["checkpoint_async"] == -1]
        assert closed and all(r["alignment_persisted"] == -1 and not r["unaligned_checkpoint"] for r in closed)
        assert checkpoint["state_size"] == sum(r["state_size"] for r in rows)
