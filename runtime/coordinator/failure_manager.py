"""Counts checkpoint failures and decides when the job must fail over because of them. Mirrors Flink's
``CheckpointFailureManager``. See docs/coordinator.md, "Checkpoint failures that fail the job".
"""

from __future__ import annotations

import enum

from barriersim.runtime.coordinator.properties import CheckpointProperties
from barriersim.runtime.failure_reason import CheckpointException
from barriersim.runtime.ids import ExecutionAttemptID

UNKNOWN_CHECKPOINT_ID = -1
UNLIMITED_TOLERABLE_FAILURE_NUMBER = 2**31 - 1
EXCEEDED_CHECKPOINT_TOLERABLE_FAILURE_MESSAGE = "Exceeded checkpoint tolerable failure threshold."


class FailureOutcome(enum.Enum):
    IGNORED = "IGNORED"  # not counted (reason, savepoint, id older than the last success, or already counted)
    COUNTED = "COUNTED"  # counted, still tolerable
    FAIL_JOB = "FAIL_JOB"  # threshold exceeded: fail the job (over)


class CheckpointFailureManager:
    def __init__(self, tolerable_failure_number: int = 0) -> None:
        if tolerable_failure_number == -1:  # Flink's UNDEFINED_TOLERABLE_CHECKPOINT_NUMBER
            tolerable_failure_number = 0
        if tolerable_failure_number < 0:
            raise ValueError(
                f"tolerable checkpoint failure number {tolerable_failure_number} is illegal: it must be >= 0 (or -1)"
            )
        self.tolerable_failure_number = tolerable_failure_number
        self.continuous_failure_counter = 0
        self._counted_checkpoint_ids: set[int] = set()
        self.last_succeeded_checkpoint_id: int | None = None
        self.fail_job_invocations = 0

    def handle_checkpoint_exception(
        self,
        props: CheckpointProperties,
        exception: CheckpointException,
        checkpoint_id: int,
        failing_task: ExecutionAttemptID | None,
    ) -> FailureOutcome:
        """Flink's ``handleCheckpointException``: a pre-flight failure or one without a task is job level."""
        if exception.reason.pre_flight or failing_task is None:
            return self.handle_job_level_checkpoint_exception(props, exception, checkpoint_id)
        return self.handle_task_level_checkpoint_exception(props, exception, checkpoint_id)

    def handle_job_level_checkpoint_exception(
        self, props: CheckpointProperties, exception: CheckpointException, checkpoint_id: int
    ) -> FailureOutcome:
        if props.is_savepoint:
            return FailureOutcome.IGNORED
        return self._check_failure_against_counter(exception, checkpoint_id)

    def handle_task_level_checkpoint_exception(
        self, props: CheckpointProperties, exception: CheckpointException, checkpoint_id: int
    ) -> FailureOutcome:
        if props.is_savepoint and props.is_synchronous:
            self.fail_job_invocations += 1
            return FailureOutcome.FAIL_JOB
        return self._check_failure_against_counter(exception, checkpoint_id)

    def handle_checkpoint_success(self, checkpoint_id: int) -> None:
        if self.last_succeeded_checkpoint_id is None or checkpoint_id > self.last_succeeded_checkpoint_id:
            self.last_succeeded_checkpoint_id = checkpoint_id
            self._clear_count()

    def check_failure_counter(self, exception: CheckpointException, checkpoint_id: int) -> bool:
        """Count the failure if its reason counts and its id was not counted yet; True if counted."""
        if self.tolerable_failure_number == UNLIMITED_TOLERABLE_FAILURE_NUMBER:
            return False
        if not exception.reason.counted_against_failure_threshold:
            return False
        if checkpoint_id == UNKNOWN_CHECKPOINT_ID or checkpoint_id not in self._counted_checkpoint_ids:
            self._counted_checkpoint_ids.add(checkpoint_id)
            self.continuous_failure_counter += 1
            return True
        return False

    def _check_failure_against_counter(self, exception: CheckpointException, checkpoint_id: int) -> FailureOutcome:
        newer = (
            checkpoint_id == UNKNOWN_CHECKPOINT_ID
            or self.last_succeeded_checkpoint_id is None
            or checkpoint_id > self.last_succeeded_checkpoint_id
        )
        if not newer:
            return FailureOutcome.IGNORED
        counted = self.check_failure_counter(exception, checkpoint_id)
        if self.continuous_failure_counter > self.tolerable_failure_number:
            self._clear_count()
            self.fail_job_invocations += 1
            return FailureOutcome.FAIL_JOB
        return FailureOutcome.COUNTED if counted else FailureOutcome.IGNORED

    def _clear_count(self) -> None:
        self.continuous_failure_counter = 0
        self._counted_checkpoint_ids.clear()
