"""Decides whether a checkpoint trigger request runs now, waits in the queue, or is dropped. Mirrors Flink's
``CheckpointRequestDecider`` (and ``CheckpointCoordinator.CheckpointTriggerRequest``). See docs/coordinator.md,
"Trigger requests: run, queue or drop".
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from barriersim.runtime.coordinator.properties import CheckpointProperties
from barriersim.runtime.failure_reason import CheckpointFailureReason

DEFAULT_MAX_QUEUED_REQUESTS = 1000

_seq = itertools.count()


@dataclass(frozen=True)
class CheckpointTriggerRequest:
    """Flink's ``CheckpointTriggerRequest``: ``timestamp`` is the submission time (ms); ``seq`` breaks ties
    deterministically (Flink uses the identity hash code)."""

    props: CheckpointProperties
    is_periodic: bool
    timestamp: int = 0
    request_id: int | None = None
    seq: int = field(default_factory=lambda: next(_seq))

    @property
    def is_force(self) -> bool:
        return self.props.forced

    def sort_key(self) -> tuple[object, ...]:
        return (not self.props.is_savepoint, not self.is_force, self.is_periodic, self.timestamp, self.seq)


class CheckpointRequestDecider:
    def __init__(
        self,
        max_concurrent_checkpoint_attempts: int,
        reschedule_trigger: Callable[[int], None],
        clock: Callable[[], int],
        min_pause_between_checkpoints: int,
        pending_checkpoints_size: Callable[[], int],
        number_of_cleaning_checkpoints: Callable[[], int] = lambda: 0,
        max_queued_requests: int = DEFAULT_MAX_QUEUED_REQUESTS,
        fail_request: Callable[[CheckpointTriggerRequest, CheckpointFailureReason], None] = lambda r, e: None,
    ) -> None:
        if max_concurrent_checkpoint_attempts <= 0:
            raise ValueError(
                f"max_concurrent_checkpoint_attempts must be > 0, got {max_concurrent_checkpoint_attempts}"
            )
        if max_queued_requests <= 0:
            raise ValueError(f"max_queued_requests must be > 0, got {max_queued_requests}")
        self.max_concurrent_checkpoint_attempts = max_concurrent_checkpoint_attempts
        self._reschedule_trigger = reschedule_trigger
        self._clock = clock
        self.min_pause_between_checkpoints = min_pause_between_checkpoints
        self._pending_size = pending_checkpoints_size
        self._cleaning = number_of_cleaning_checkpoints
        self.max_queued_requests = max_queued_requests
        self._fail_request = fail_request
        self._queued: list[CheckpointTriggerRequest] = []  # kept sorted by sort_key

    # -- API, as Flink's ----------------------------------------------------------------------

    def choose_request_to_execute(
        self, new_request: CheckpointTriggerRequest, is_triggering: bool, last_completion_ms: int
    ) -> CheckpointTriggerRequest | None:
        """Submit ``new_request`` and return the request to execute now, if any."""
        if len(self._queued) >= self.max_queued_requests and not self._queued[-1].is_periodic:
            # only user-submitted requests queued: keep them, drop the new one
            self._fail_request(new_request, CheckpointFailureReason.TOO_MANY_CHECKPOINT_REQUESTS)
            return None
        self._insert(new_request)
        if len(self._queued) > self.max_queued_requests:
            self._fail_request(self._queued.pop(), CheckpointFailureReason.TOO_MANY_CHECKPOINT_REQUESTS)
        return self._choose(is_triggering, last_completion_ms)

    def choose_queued_request_to_execute(
        self, is_triggering: bool, last_completion_ms: int
    ) -> CheckpointTriggerRequest | None:
        return self._choose(is_triggering, last_completion_ms)

    def abort_all(self, reason: CheckpointFailureReason) -> list[CheckpointTriggerRequest]:
        aborted, self._queued = self._queued, []
        for request in aborted:
            self._fail_request(request, reason)
        return aborted

    @property
    def num_queued_requests(self) -> int:
        return len(self._queued)

    @property
    def queued_requests(self) -> tuple[CheckpointTriggerRequest, ...]:
        return tuple(self._queued)

    # -- internals ---------------------------------------------------------------------------

    def _insert(self, request: CheckpointTriggerRequest) -> None:
        key = request.sort_key()
        i = len(self._queued)
        while i > 0 and self._queued[i - 1].sort_key() > key:
            i -= 1
        self._queued.insert(i, request)

    def _choose(self, is_triggering: bool, last_completion_ms: int) -> CheckpointTriggerRequest | None:
        if is_triggering or not self._queued or self._cleaning() > self.max_concurrent_checkpoint_attempts:
            return None
        if self._pending_size() >= self.max_concurrent_checkpoint_attempts:
            return self._queued.pop(0) if self._queued[0].is_force else None
        first = self._queued[0]
        if not first.is_force and first.is_periodic:
            delay = self.next_trigger_delay_millis(last_completion_ms)
            if delay > 0:
                self._fail_request(self._queued.pop(0), CheckpointFailureReason.MINIMUM_TIME_BETWEEN_CHECKPOINTS)
                self._reschedule_trigger(delay)
                return None
        return self._queued.pop(0)

    def next_trigger_delay_millis(self, last_completion_ms: int) -> int:
        return last_completion_ms - self._clock() + self.min_pause_between_checkpoints
