"""A ``_metadata`` write that takes time (the checkpoint cost model's): the file appears and the completion's rest
happens when it has passed, and what reaches the coordinator meanwhile waits, as under Flink's coordinator lock while
``completePendingCheckpoint`` runs ``finalizeCheckpoint``; a failover or a job status change ends the write at once,
so that it sees the completed checkpoint, as it would after taking the lock."""

from __future__ import annotations

from coordinator_test_harness import NO_PERIODIC_CHECKPOINTS, keyed_snapshot, make, of
from test_coordinator_finalize_and_recovery import FlakyWriter, complete

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.properties import JobStatus
from barriersim.runtime.failure_reason import CheckpointFailureReason as R

NO_PERIODIC = dict(checkpoint_interval=NO_PERIODIC_CHECKPOINTS)


def test_the_completion_waits_for_the_metadata_write_and_events_wait_with_it():
    writer = FlakyWriter()
    h = make(checkpoint_writer=writer, metadata_write_ms=lambda states: 7.4, **NO_PERIODIC)
    h.trigger()
    h.trigger()  # checkpoint 2 waits (one concurrent checkpoint) until 1 completes
    actions = complete(h, 1)
    # neither written nor stored nor notified yet: the write takes 7 ms, and its file appears when it ends
    assert writer.written == [] and h.coord.finalizing_checkpoint_id == 1
    assert (
        not of(m.NotifyCheckpointComplete, actions)
        and h.coord.completed_checkpoint_store().get_latest_checkpoint_id() == 0
    )
    # a late acknowledgement of checkpoint 1's task arrives meanwhile: it waits for the lock
    assert h.ack(h.attempt("src"), 1, keyed_snapshot("src")) == []
    assert h.advance(6) == []
    done = h.advance(1)
    assert writer.written == [1]
    assert (
        h.coord.finalizing_checkpoint_id is None
        and h.coord.completed_checkpoint_store().get_latest_checkpoint_id() == 1
    )
    assert sorted(a.task for a in of(m.NotifyCheckpointComplete, done)) == sorted(h.all_attempts)
    assert h.coord.checkpoint_stats().history[1]["status"] == "COMPLETED"
    assert h.coord.last_checkpoint_completion_relative_time == 7  # after the write, as Flink records it
    assert [a.checkpoint_id for a in of(m.TriggerCheckpointOnSources, done)] == [2]  # the queued trigger went on


def test_a_failover_during_the_write_restores_the_checkpoint_being_completed():
    writer = FlakyWriter()
    h = make(checkpoint_writer=writer, metadata_write_ms=lambda states: 5, **NO_PERIODIC)
    h.trigger()
    complete(h, 1)
    assert h.coord.finalizing_checkpoint_id == 1
    h.coord.handle(m.TaskFailed(h.attempt("map"), "lost"))
    assert (
        h.coord.finalizing_checkpoint_id is None
        and h.coord.completed_checkpoint_store().get_latest_checkpoint_id() == 1
    )
    assert h.advance(10) == []  # the write's timer finds nothing left to do
    actions = h.coord.handle(m.RestartTasks())  # after the restart delay
    assert [a.checkpoint_id for a in of(m.RestoreFrom, actions)] == [1]


def test_the_end_of_the_job_during_the_write_completes_it_first():
    h = make(checkpoint_writer=FlakyWriter(), metadata_write_ms=lambda states: 5, **NO_PERIODIC)
    h.trigger()
    complete(h, 1)
    h.coord.handle(m.JobStatusChanged(JobStatus.FINISHED))
    assert h.coord.checkpoint_stats().history[1]["status"] == "COMPLETED" and h.coord.is_shutdown


def test_no_write_time_completes_at_once():
    h = make(checkpoint_writer=FlakyWriter(), metadata_write_ms=lambda states: 0.0, **NO_PERIODIC)
    h.trigger()
    assert len(of(m.NotifyCheckpointComplete, complete(h, 1))) == 2


def test_a_write_that_fails_when_it_ends_aborts_the_checkpoint_then():
    writer = FlakyWriter(failing={1})
    h = make(
        checkpoint_writer=writer,
        metadata_write_ms=lambda states: 3,
        tolerable_checkpoint_failure_number=5,
        **NO_PERIODIC,
    )
    h.trigger()
    assert not of(m.NotifyCheckpointAborted, complete(h, 1))
    aborted = h.advance(3)
    assert sorted(a.task for a in of(m.NotifyCheckpointAborted, aborted)) == sorted(h.all_attempts)
    assert h.coord.checkpoint_stats().history[1]["failure_reason"] == "FINALIZE_CHECKPOINT_FAILURE"


def test_a_restart_during_the_write_does_not_trigger_the_queued_request_on_the_tasks_it_cancels():
    """Flink's ``completePendingCheckpoint`` only schedules the next queued request (``scheduleTriggerRequest``, on the
    timer thread) after the write under the lock; the JobMaster's RESTARTING, waiting for that lock, stops the periodic
    trigger and fails the queued requests first. Before, the completion triggered the queued checkpoint on the tasks
    the failover was cancelling, and the failover then aborted it (an id and a failed checkpoint that Flink does not
    have)."""
    h = make(checkpoint_writer=FlakyWriter(), metadata_write_ms=lambda states: 5, **NO_PERIODIC)
    h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))  # every task runs: the deactivator started the trigger
    h.trigger()
    h.trigger(request_id=9)  # waits (one concurrent checkpoint) until 1 completes
    complete(h, 1)
    actions = h.coord.handle(m.JobStatusChanged(JobStatus.RESTARTING))  # the job's first failover
    assert h.coord.checkpoint_stats().history[1]["status"] == "COMPLETED"
    assert not of(m.TriggerCheckpointOnSources, actions)
    assert of(m.TriggerRequestFailed, actions) == [m.TriggerRequestFailed(9, None, R.CHECKPOINT_COORDINATOR_SUSPEND)]
    assert 2 not in h.coord.checkpoint_stats().history


def test_a_task_failure_during_the_write_does_not_trigger_the_queued_request_on_the_failed_attempts():
    """A later failover, whose trigger runs on: the request the completion releases finds the attempts ended (its
    pre-flight check fails, as Flink's request on the timer thread would), and the restart restores checkpoint 1."""
    h = make(checkpoint_writer=FlakyWriter(), metadata_write_ms=lambda states: 5, **NO_PERIODIC)
    h.trigger()
    h.trigger(request_id=9)
    complete(h, 1)
    actions = h.coord.handle(m.TaskFailed(h.attempt("map"), "lost"))
    assert not of(m.TriggerCheckpointOnSources, actions)
    assert of(m.TriggerRequestFailed, actions) == [m.TriggerRequestFailed(9, None, R.NOT_ALL_REQUIRED_TASKS_RUNNING)]
    assert [a.checkpoint_id for a in of(m.RestoreFrom, h.coord.handle(m.RestartTasks()))] == [1]
