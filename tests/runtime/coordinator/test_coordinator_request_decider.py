"""Ports of Flink's CheckpointRequestDeciderTest."""

from __future__ import annotations

from barriersim.runtime.coordinator.properties import CheckpointProperties, CheckpointRetentionPolicy
from barriersim.runtime.coordinator.request_decider import CheckpointRequestDecider, CheckpointTriggerRequest
from barriersim.runtime.failure_reason import CheckpointFailureReason

DAY_MS = 24 * 3600 * 1000


class Box:
    def __init__(self, v: int):
        self.v = v

    def __call__(self) -> int:
        return self.v


def decider(
    max_queued: int,
    max_pending: int = 1,
    min_pause: int = 1,
    pending: Box | None = None,
    cleaning: Box | None = None,
    failed: dict | None = None,
    clock=lambda: DAY_MS,
) -> CheckpointRequestDecider:
    failed = {} if failed is None else failed
    return CheckpointRequestDecider(
        max_pending,
        lambda delay: None,
        clock,
        min_pause,
        pending or Box(0),
        cleaning or Box(0),
        max_queued,
        lambda r, reason: failed.__setitem__(r.seq, reason),
    )


def regular_checkpoint() -> CheckpointTriggerRequest:
    return CheckpointTriggerRequest(
        CheckpointProperties.for_checkpoint(CheckpointRetentionPolicy.NEVER_RETAIN_AFTER_TERMINATION), True
    )


def manual_checkpoint() -> CheckpointTriggerRequest:
    return CheckpointTriggerRequest(
        CheckpointProperties.for_checkpoint(CheckpointRetentionPolicy.NEVER_RETAIN_AFTER_TERMINATION), False
    )


def savepoint_request(force: bool, periodic: bool) -> CheckpointTriggerRequest:
    return CheckpointTriggerRequest(CheckpointProperties.for_savepoint(force), periodic)


def regular_savepoint():
    return savepoint_request(True, False)


def periodic_savepoint():
    return savepoint_request(True, True)


def non_forced_periodic_savepoint():
    return savepoint_request(False, True)


def non_forced_savepoint():
    return savepoint_request(False, False)


def test_force():
    """Port of Flink CheckpointRequestDeciderTest.testForce."""
    d = decider(1, 1, 2**31 - 1, Box(1), Box(0))
    request = periodic_savepoint()
    assert d.choose_request_to_execute(request, False, 123) == request


def test_enqueue_on_too_many_pending():
    """Port of Flink CheckpointRequestDeciderTest.testEnqueueOnTooManyPending."""
    pending = Box(1)
    d = decider(2**31 - 1, 1, 1, pending)
    request = regular_checkpoint()
    assert d.choose_request_to_execute(request, False, 0) is None
    pending.v = 0
    assert d.choose_queued_request_to_execute(False, 0) == request


def test_non_forced_enqueue_on_too_many_pending():
    """Port of Flink CheckpointRequestDeciderTest.testNonForcedEnqueueOnTooManyPending."""
    pending = Box(1)
    d = decider(2**31 - 1, 1, 1, pending, Box(0))
    request = non_forced_savepoint()
    assert d.choose_request_to_execute(request, False, 0) is None
    pending.v = 0
    assert d.choose_queued_request_to_execute(False, 0) == request


def test_enqueue_on_too_many_cleaning():
    """Port of Flink CheckpointRequestDeciderTest.testEnqueueOnTooManyCleaning."""
    cleaning = Box(10 + 1)  # the threshold is max concurrent checkpoint attempts
    d = decider(10, 10, 1, Box(0), cleaning)
    request = regular_checkpoint()
    assert d.choose_request_to_execute(request, False, 0) is None
    cleaning.v -= 1
    assert d.choose_queued_request_to_execute(False, 0) == request


def requests_ordering(requests, expected_order):
    d = decider(10)
    for r in requests:
        assert d.choose_request_to_execute(r, True, 123) is None
    for r in expected_order:
        assert d.choose_queued_request_to_execute(False, 123) == r


def test_user_submitted_prioritized():
    """Port of Flink CheckpointRequestDeciderTest.testUserSubmittedPrioritized."""
    user, periodic = regular_savepoint(), periodic_savepoint()
    requests_ordering([periodic, user], [user, periodic])


def test_savepoint_prioritized():
    """Port of Flink CheckpointRequestDeciderTest.testSavepointPrioritized."""
    savepoint, checkpoint = regular_savepoint(), regular_checkpoint()
    requests_ordering([checkpoint, savepoint], [savepoint, checkpoint])


def test_non_forced_user_submitted_prioritized():
    """Port of Flink CheckpointRequestDeciderTest.testNonForcedUserSubmittedPrioritized."""
    user, periodic = non_forced_savepoint(), non_forced_periodic_savepoint()
    requests_ordering([periodic, user], [user, periodic])


def test_non_forced_savepoint_prioritized():
    """Port of Flink CheckpointRequestDeciderTest.testNonForcedSavepointPrioritized."""
    savepoint, checkpoint = non_forced_savepoint(), regular_checkpoint()
    requests_ordering([checkpoint, savepoint], [savepoint, checkpoint])


def test_queue_size_limit():
    """Port of Flink CheckpointRequestDeciderTest.testQueueSizeLimit."""
    max_queued = 10
    failed: dict = {}
    d = decider(max_queued, failed=failed)
    requests = [regular_checkpoint() for _ in range(max_queued + 1)]
    for n, request in enumerate(requests, start=1):
        assert d.choose_request_to_execute(request, True, 0) is None
        assert set(failed.values()) <= {CheckpointFailureReason.TOO_MANY_CHECKPOINT_REQUESTS}
        assert len(failed) == max(n - max_queued, 0)


def test_queue_size_limit_priority():
    """Port of Flink CheckpointRequestDeciderTest.testQueueSizeLimitPriority."""
    failed: dict = {}
    d = decider(1, failed=failed)
    checkpoint, savepoint = regular_checkpoint(), regular_savepoint()
    d.choose_request_to_execute(checkpoint, True, 0)
    d.choose_request_to_execute(savepoint, True, 0)
    assert failed == {checkpoint.seq: CheckpointFailureReason.TOO_MANY_CHECKPOINT_REQUESTS}
    assert savepoint.seq not in failed


def timing(request: CheckpointTriggerRequest, expectation: str) -> None:
    pause = 10
    now = [0]
    failed: dict = {}
    d = CheckpointRequestDecider(
        1,
        lambda delay: None,
        lambda: now[0],
        pause,
        lambda: 0,
        lambda: 0,
        2**31 - 1,
        lambda r, reason: failed.__setitem__(r.seq, reason),
    )
    last_completion = now[0]
    if expectation == "IMMEDIATELY":
        assert d.choose_request_to_execute(request, False, last_completion) is not None
    elif expectation == "AFTER_PAUSE":
        assert d.choose_request_to_execute(request, False, last_completion) is None
        now[0] += pause
        assert d.choose_queued_request_to_execute(False, last_completion) is not None
    else:
        assert d.choose_request_to_execute(request, False, last_completion) is None
        assert failed == {request.seq: CheckpointFailureReason.MINIMUM_TIME_BETWEEN_CHECKPOINTS}


def test_savepoint_timing():
    """Port of Flink CheckpointRequestDeciderTest.testSavepointTiming."""
    timing(regular_savepoint(), "IMMEDIATELY")
    timing(periodic_savepoint(), "IMMEDIATELY")
    timing(non_forced_savepoint(), "IMMEDIATELY")


def test_checkpoint_timing():
    """Port of Flink CheckpointRequestDeciderTest.testCheckpointTiming."""
    timing(regular_checkpoint(), "DROPPED")
    timing(manual_checkpoint(), "IMMEDIATELY")


def test_dropped_periodic_request_reschedules_the_trigger_after_the_remaining_pause():
    rescheduled: list[int] = []
    d = CheckpointRequestDecider(1, rescheduled.append, lambda: 105, 50, lambda: 0)
    assert d.choose_request_to_execute(regular_checkpoint(), False, 100) is None
    assert rescheduled == [45]
