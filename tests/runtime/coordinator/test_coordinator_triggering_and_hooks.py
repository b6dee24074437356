"""Ports of Flink's CheckpointCoordinatorTriggeringTest and CheckpointCoordinatorMasterHooksTest, and of the
tests of Flink's CheckpointCoordinatorTest on the trigger's phases (operator coordinators, master hooks, then the
tasks). Flink's ManuallyTriggeredScheduledExecutor runs the futures between the phases; here a phase with nothing
to wait for ends within the event, and what Flink's tests hold back (a master hook's future, an operator
coordinator's answer) is a hook that answers ``MASTER_STATE_PENDING`` and finishes with ``MasterHookCompleted``,
or a coordinator that answers ``TriggerCoordinatorCheckpoint`` with ``AcknowledgeCoordinatorState``."""

from __future__ import annotations

import pytest
from coordinator_test_harness import JOB, Harness, make, of, triggered_ids

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.id_counter import StandaloneCheckpointIDCounter
from barriersim.runtime.coordinator.master_hooks import MASTER_STATE_PENDING, MasterHookError
from barriersim.runtime.coordinator.pending_checkpoint import CompletedCheckpoint
from barriersim.runtime.coordinator.plan import JobVertexInfo
from barriersim.runtime.coordinator.properties import CheckpointProperties, JobStatus
from barriersim.runtime.failure_reason import CheckpointFailureReason as R
from barriersim.runtime.state.snapshot import MasterState

BIG = 2**31 - 1


def failed_reasons(actions) -> list:
    return [a.reason for a in of(m.TriggerRequestFailed, actions)]


def fire_periodic(h: Harness) -> list:
    periodic = [t for t in h.timers.active_timers if t.at_ms < h.timers.now_ms + 10**6]
    assert periodic, "no periodic trigger scheduled"
    h.timers.advance_to(periodic[0].at_ms)
    out, h.sink[:] = list(h.sink), []
    return out


def one_vertex(**config) -> Harness:
    return make([JobVertexInfo("v", 1)], **config)


def test_periodic_triggering():
    """Port of Flink CheckpointCoordinatorTriggeringTest.testPeriodicTriggering."""
    h = one_vertex(
        checkpoint_interval=10, checkpoint_timeout=200_000, max_concurrent_checkpoints=BIG, max_retained_checkpoints=2
    )

    def check(triggers):
        assert len(triggers) == 5
        ids = [t.checkpoint_id for t in triggers]
        stamps = [t.timestamp for t in triggers]
        assert ids == sorted(ids) and len(set(ids)) == 5 and stamps == sorted(stamps) and stamps[0] >= 0

    h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))
    triggers = []
    for _ in range(5):
        triggers += of(m.TriggerCheckpointOnSources, fire_periodic(h))
    check(triggers)
    h.call(m.StopCheckpointScheduler())
    h.timers.advance(1000)
    assert of(m.TriggerCheckpointOnSources, h.sink) == []  # no further calls may come
    assert h.call(m.StartCheckpointScheduler())
    triggers = []
    for _ in range(5):
        triggers += of(m.TriggerCheckpointOnSources, fire_periodic(h))
    check(triggers)
    h.call(m.StopCheckpointScheduler())
    h.timers.advance(1000)
    assert of(m.TriggerCheckpointOnSources, h.sink) == []


def test_min_time_between_checkpoints_interval():
    """Port of Flink CheckpointCoordinatorTriggeringTest.testMinTimeBetweenCheckpointsInterval."""
    delay, interval = 50, 12
    h = one_vertex(
        checkpoint_interval=interval,
        checkpoint_timeout=200_000,
        min_pause_between_checkpoints=delay,
        max_concurrent_checkpoints=1,
        max_retained_checkpoints=2,
    )
    h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))
    assert triggered_ids(fire_periodic(h)) == [1]
    h.ack(h.attempt("v"), 1)
    ack_time = h.timers.now_ms
    next_ids: list[int] = []
    while not next_ids:
        next_ids = triggered_ids(fire_periodic(h))
    assert next_ids == [2]
    assert h.timers.now_ms - ack_time >= delay


def test_stop_periodic_scheduler():
    """Port of Flink CheckpointCoordinatorTriggeringTest.testStopPeriodicScheduler."""
    h = one_vertex()
    assert failed_reasons(h.trigger(is_periodic=True)) == [R.PERIODIC_SCHEDULER_SHUTDOWN]
    actions = h.trigger(is_periodic=False)
    assert failed_reasons(actions) == [] and triggered_ids(actions) == [1]


def test_trigger_checkpoint_with_shutting_down_coordinator():
    """Port of Flink CheckpointCoordinatorTriggeringTest.testTriggerCheckpointWithShuttingDownCoordinator.

    Adapted: the periodic request waits in the queue (one checkpoint already pending) when the coordinator
    shuts down; it fails with CHECKPOINT_COORDINATOR_SHUTDOWN, as does any later request."""
    h = one_vertex(checkpoint_interval=10_000, max_concurrent_checkpoints=1)
    h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))
    h.trigger()
    assert h.trigger(is_periodic=True, request_id=2) == []
    h.call(m.Shutdown(JobStatus.FINISHED))
    actions = h.take()
    assert m.TriggerRequestFailed(2, None, R.CHECKPOINT_COORDINATOR_SHUTDOWN) in actions
    assert failed_reasons(h.trigger()) == [R.CHECKPOINT_COORDINATOR_SHUTDOWN]


def test_shutting_down_while_a_trigger_is_in_flight():
    """The other half of Flink's testTriggerCheckpointWithShuttingDownCoordinator: the coordinator shuts down
    while the request is being triggered (its master hook has not answered); it fails with
    CHECKPOINT_COORDINATOR_SHUTDOWN, the trigger ends and the hook's late answer changes nothing."""
    h = one_vertex(checkpoint_interval=10_000)
    h.coord.add_master_hook(Hook("testing master hook", pending=True))
    h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))
    h.trigger(is_periodic=True, request_id=2)
    assert h.coord.is_triggering
    h.call(m.Shutdown(JobStatus.FINISHED))
    actions = h.take()
    assert m.TriggerRequestFailed(2, 1, R.CHECKPOINT_COORDINATOR_SHUTDOWN) in actions
    assert not h.coord.is_triggering
    assert triggered_ids(actions + h.coord.handle(m.MasterHookCompleted(1, "testing master hook", b"late"))) == []


def test_trigger_checkpoint_before_previous_one_completed():
    """Port of Flink CheckpointCoordinatorTriggeringTest.testTriggerCheckpointBeforePreviousOneCompleted: a
    request made while another is being triggered waits in the queue and starts when that trigger finished.
    (Flink's test holds the trigger back in its executor; here a master hook answers later.)"""
    h = one_vertex(checkpoint_interval=10_000, max_concurrent_checkpoints=BIG)
    h.coord.add_master_hook(Hook("testing master hook", pending=True))
    h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))
    actions = h.trigger(is_periodic=True, request_id=1)
    assert h.coord.is_triggering and h.coord.num_queued_requests() == 0
    actions += h.trigger(is_periodic=True, request_id=2)  # another trigger before the prior one finished
    assert h.coord.is_triggering and h.coord.num_queued_requests() == 1
    assert triggered_ids(actions) == []
    actions += h.coord.handle(m.MasterHookCompleted(1, "testing master hook", b"one"))
    assert triggered_ids(actions) == [1] and h.coord.is_triggering  # the second one is triggering now
    actions += h.coord.handle(m.MasterHookCompleted(2, "testing master hook", b"two"))
    assert failed_reasons(actions) == []
    assert not h.coord.is_triggering and h.coord.num_queued_requests() == 0
    assert triggered_ids(actions) == [1, 2]


def test_trigger_without_operator_coordinators_or_pending_hooks_ends_within_the_event():
    """Without operator coordinators and hooks that answer later, every phase ends at once (Flink: a few
    executor hops, no time): two requests in a row are both triggered, nothing waits in the queue."""
    h = one_vertex(checkpoint_interval=10_000, max_concurrent_checkpoints=BIG)
    h.coord.add_master_hook(Hook("answers at once", b"state"))
    h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))
    first = h.trigger(is_periodic=True)
    assert triggered_ids(first) == [1] and not h.coord.is_triggering
    second = h.trigger(is_periodic=True)
    assert triggered_ids(second) == [2] and h.coord.num_queued_requests() == 0


def test_trigger_checkpoint_request_cancelled():
    """Port of Flink CheckpointCoordinatorTriggeringTest.testTriggerCheckpointRequestCancelled: a checkpoint
    whose master hook has not answered expires; its trigger stays in flight (``isTriggering``) until the trigger's
    failure is handled on the timer's next turn (Flink's ``onTriggerFailure``, run by the trigger's failed future),
    then it ends and its tasks are never triggered."""
    h = one_vertex(checkpoint_interval=10_000, checkpoint_timeout=200)
    h.coord.add_master_hook(Hook("testing master hook", pending=True))
    h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))
    # checkpoint trigger will not finish since master hook checkpoint is not finished yet
    actions = h.trigger(is_periodic=True, request_id=1)
    assert h.coord.is_triggering
    # trigger cancellation: the expiry timer alone (Flink's triggerNonPeriodicScheduledTasks), the earliest one
    assert h.timers.trigger_next()
    actions += h.sink
    h.sink.clear()
    assert h.coord.is_triggering
    assert of(m.TriggerRequestFailed, actions) == [m.TriggerRequestFailed(1, 1, R.CHECKPOINT_EXPIRED)]
    # continue triggering: the hook answers, then the timer's next turn (Flink's triggerAll)
    h.call(m.MasterHookCompleted(1, "testing master hook", b"late"))
    actions += h.advance(0)
    assert not h.coord.is_triggering
    assert triggered_ids(actions + h.take()) == []  # it doesn't really trigger the tasks
    assert h.coord.num_queued_requests() == 0


def test_checkpoint_aborted_while_triggering_is_reported_again_as_flink_does():
    """Flink's onTriggerFailure for a checkpoint that ended while it was being triggered reports it once more to
    the failure manager (which counts a checkpoint once) without its statistics: the statistics count one more
    failed checkpoint without one in progress."""
    h = one_vertex(checkpoint_timeout=200, tolerable_checkpoint_failure_number=5)
    h.coord.add_master_hook(Hook("testing master hook", pending=True))
    h.trigger(request_id=1)
    actions = h.advance(200)
    assert failed_reasons(actions) == [R.CHECKPOINT_EXPIRED]  # the request fails once
    assert h.coord.continuous_failure_count() == 1
    assert h.coord.checkpoint_stats().history[1]["status"] == "FAILED"
    assert h.coord.checkpoint_counts()["total"] == 2 and h.coord.checkpoint_counts()["failed"] == 2


class UnstableCheckpointIDCounter(StandaloneCheckpointIDCounter):
    """Fails ``get_and_increment`` for the calls whose (0-based) index is in ``failing``."""

    def __init__(self, failing: set[int]):
        super().__init__()
        self.calls = 0
        self.failing = failing

    def get_and_increment(self) -> int:
        call, self.calls = self.calls, self.calls + 1
        if call in self.failing:
            raise RuntimeError("CheckpointIDCounter#getAndIncrement fails by design")
        return super().get_and_increment()


def unstable(counter, **config) -> Harness:
    import random

    from barriersim.runtime.coordinator.checkpoint_coordinator import (
        CheckpointCoordinator,
        CheckpointCoordinatorConfiguration,
    )
    from barriersim.runtime.coordinator.manual_time import ManualTimerService
    from barriersim.runtime.event_timers import DeliveringTimers

    timers, sink = ManualTimerService(), []
    coord = CheckpointCoordinator(
        JOB,
        [JobVertexInfo("v", 1)],
        CheckpointCoordinatorConfiguration(**config),
        clock=timers.clock,
        timers=DeliveringTimers(timers, lambda event: sink.extend(coord.handle(event))),
        rng=random.Random(0),
        checkpoint_id_counter=counter,
    )
    return Harness(coord, timers, sink)


def test_trigger_checkpoint_request_queued_with_failure():
    """Port of Flink CheckpointCoordinatorTriggeringTest.testTriggerCheckpointRequestQueuedWithFailure."""
    h = unstable(UnstableCheckpointIDCounter({0}), max_concurrent_checkpoints=BIG)
    h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))
    a1 = h.trigger(request_id=1)
    a2 = h.trigger(request_id=2)
    a3 = h.trigger(request_id=3)
    assert of(m.TriggerRequestFailed, a1) == [m.TriggerRequestFailed(1, None, R.TRIGGER_CHECKPOINT_FAILURE)]
    assert failed_reasons(a2 + a3) == []
    assert h.coord.num_queued_requests() == 0
    assert len(triggered_ids(a1 + a2 + a3)) == 2


def test_trigger_checkpoint_initialization_failed():
    """Port of Flink CheckpointCoordinatorTriggeringTest.testTriggerCheckpointInitializationFailed."""
    h = unstable(UnstableCheckpointIDCounter({0}), checkpoint_interval=10_000)
    h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))
    assert failed_reasons(h.trigger(is_periodic=True)) == [R.TRIGGER_CHECKPOINT_FAILURE]
    assert h.coord.num_queued_requests() == 0
    actions = h.trigger(is_periodic=True)
    assert failed_reasons(actions) == [] and len(triggered_ids(actions)) == 1


class Hook:
    """A master hook for the tests: answers ``state`` at once, raises (``fail``), or answers later (``pending``)."""

    def __init__(
        self, identifier: str, state: bytes | None = None, version: int = 1, fail: bool = False, pending: bool = False
    ):
        self.identifier, self.state, self.version, self.fail, self.pending = identifier, state, version, fail, pending
        self.triggered: list[int] = []
        self.restored: list[tuple[int, bytes | None]] = []
        self.resets = 0
        self.closes = 0
        self.on_trigger = None

    def trigger_checkpoint(self, checkpoint_id: int, timestamp: int) -> bytes | None:
        self.triggered.append(checkpoint_id)
        if self.on_trigger is not None:
            self.on_trigger(checkpoint_id)
        if self.fail:
            raise RuntimeError("by design")
        return MASTER_STATE_PENDING if self.pending else self.state

    def restore_checkpoint(self, checkpoint_id: int, data: bytes | None) -> None:
        self.restored.append((checkpoint_id, data))

    def reset(self) -> None:
        self.resets += 1

    def close(self) -> None:
        self.closes += 1


def test_trigger_checkpoint_snapshot_master_hook_failed():
    """Port of Flink CheckpointCoordinatorTriggeringTest.testTriggerCheckpointSnapshotMasterHookFailed."""
    h = one_vertex(checkpoint_interval=10_000)
    h.coord.add_master_hook(Hook("testing master hook", pending=True))
    h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING))
    actions = h.trigger(is_periodic=True)
    assert h.coord.is_triggering  # the trigger waits for the master hook
    actions += h.coord.handle(m.MasterHookCompleted(1, "testing master hook", failure="by design"))
    assert not h.coord.is_triggering
    assert failed_reasons(actions) == [R.TRIGGER_CHECKPOINT_FAILURE]
    assert of(m.TriggerCheckpointOnSources, actions) == []  # the tasks are not triggered
    assert h.coord.num_queued_requests() == 0


def test_master_hook_failing_at_once_fails_the_trigger():
    """A hook that raises in ``trigger_checkpoint`` (Flink's MasterHooks.triggerHook turns it into a failed
    future): every hook is still called, the trigger fails, the tasks are not triggered."""
    h = one_vertex()
    failing, other = Hook("failing", fail=True), Hook("other", b"state")
    h.coord.add_master_hook(failing)
    h.coord.add_master_hook(other)
    actions = h.trigger()
    assert failing.triggered == other.triggered == [1]
    assert failed_reasons(actions) == [R.TRIGGER_CHECKPOINT_FAILURE] and triggered_ids(actions) == []
    assert not h.coord.is_triggering and h.coord.number_of_pending_checkpoints == 0


def test_deduplicate_on_register():
    """Port of Flink CheckpointCoordinatorMasterHooksTest.testDeduplicateOnRegister."""
    h = one_vertex()
    assert h.coord.add_master_hook(Hook("test id"))
    assert not h.coord.add_master_hook(Hook("test id"))
    assert h.coord.add_master_hook(Hook("anotherId"))


def test_null_or_invalid_id():
    """Port of Flink CheckpointCoordinatorMasterHooksTest.testNullOrInvalidId."""
    h = one_vertex()
    for bad in (None, "", "        "):
        with pytest.raises(MasterHookError, match="invalid identifier"):
            h.coord.add_master_hook(Hook(bad))  # type: ignore[arg-type]


def test_hook_reset():
    """Port of Flink CheckpointCoordinatorMasterHooksTest.testHookReset."""
    h = one_vertex()
    hook1, hook2 = Hook("id1"), Hook("id2")
    h.coord.add_master_hook(hook1)
    h.coord.add_master_hook(hook2)
    assert h.call(m.RestoreLatestCheckpoint()) is None
    assert (hook1.resets, hook2.resets) == (1, 1)
    h.call(m.Shutdown(JobStatus.FINISHED))
    assert (hook1.closes, hook2.closes) == (1, 1)


def test_hooks_are_called_on_trigger():
    """Port of Flink CheckpointCoordinatorMasterHooksTest.testHooksAreCalledOnTrigger."""
    h = one_vertex()
    stateful1, stateful2 = Hook("id1", b"the-test-string-state", 1), Hook("id2", b"987654321", 2)
    stateless = Hook("some-id", None)
    for hook in (stateful1, stateless, stateful2):
        h.coord.add_master_hook(hook)
    h.trigger()
    assert h.coord.number_of_pending_checkpoints == 1
    assert stateful1.triggered == stateful2.triggered == stateless.triggered == [1]
    h.ack(h.attempt("v"), 1)
    assert h.coord.number_of_pending_checkpoints == 0
    assert h.coord.number_of_retained_successful_checkpoints == 1
    states = {s.name: s for s in h.coord.completed_checkpoint_store().get_latest_checkpoint().master_states}
    assert states == {
        "id1": MasterState("id1", 1, b"the-test-string-state"),
        "id2": MasterState("id2", 2, b"987654321"),
    }


def stored_checkpoint(checkpoint_id: int, master_states) -> CompletedCheckpoint:
    return CompletedCheckpoint(
        JOB, checkpoint_id, 123, 125, {}, tuple(master_states), CheckpointProperties.for_standard_checkpoint()
    )


def test_hooks_are_called_on_restore():
    """Port of Flink CheckpointCoordinatorMasterHooksTest.testHooksAreCalledOnRestore."""
    h = one_vertex()
    stateful1, stateful2, stateless = Hook("id1", fail=True), Hook("id2", fail=True), Hook("some-id")
    for hook in (stateful1, stateless, stateful2):
        h.coord.add_master_hook(hook)
    h.coord.completed_checkpoint_store().add_checkpoint_and_subsume_oldest_one(
        stored_checkpoint(13, [MasterState("id1", 1, b"state1"), MasterState("id2", 2, b"state2")])
    )
    h.call(m.RestoreLatestCheckpoint())
    assert stateful1.restored == [(13, b"state1")]
    assert stateful2.restored == [(13, b"state2")]
    assert stateless.restored == [(13, None)]


def test_check_un_matched_state_on_restore():
    """Port of Flink CheckpointCoordinatorMasterHooksTest.checkUnMatchedStateOnRestore."""
    h = one_vertex()
    stateful, stateless = Hook("id1", fail=True), Hook("some-id")
    h.coord.add_master_hook(stateful)
    h.coord.add_master_hook(stateless)
    h.coord.completed_checkpoint_store().add_checkpoint_and_subsume_oldest_one(
        stored_checkpoint(44, [MasterState("id1", 1, b"state1"), MasterState("id2", 2, b"state2")])
    )
    with pytest.raises(MasterHookError, match="'id2'"):
        h.call(m.RestoreLatestCheckpoint(False))
    h.call(m.RestoreLatestCheckpoint(True))
    assert stateful.restored == [(44, b"state1")]
    assert stateless.restored == [(44, None)]


def test_ensure_registered_at_hook_time():
    """Port of Flink CheckpointCoordinatorMasterHooksTest.ensureRegisteredAtHookTime."""
    h = one_vertex()
    hook = Hook("id")
    seen = []
    hook.on_trigger = lambda cid: seen.append(
        (h.coord.number_of_pending_checkpoints, cid in h.coord.pending_checkpoints())
    )
    h.coord.add_master_hook(hook)
    assert failed_reasons(h.trigger()) == []
    assert seen == [(1, True)]


def test_the_restart_restores_the_master_hook_not_the_failure():
    """Flink's ``DefaultSchedulerTest.restoreStateWhenRestartingTasks``: a stateful master hook, one completed
    checkpoint, a task failure, then the restart: the hook is restored once, and only by the restart (the restore is
    ``SchedulerBase.restoreState``, after the restart delay)."""
    h = make()
    hook = Hook("testHook", b"hook state")
    assert h.coord.add_master_hook(hook)
    [checkpoint_id] = triggered_ids(h.trigger())
    h.ack_all(checkpoint_id)
    assert h.coord.completed_checkpoint_store().get_latest_checkpoint_id() == checkpoint_id
    h.coord.handle(m.TaskFailed(h.attempt("src"), "by design"))
    assert hook.restored == []
    h.coord.handle(m.RestartTasks())
    assert hook.restored == [(checkpoint_id, b"hook state")]
