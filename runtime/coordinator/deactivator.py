"""When the periodic checkpoint trigger runs: Flink 2.3's ``ExecutionTrackingCheckpointCoordinatorDeActivator`` and
the RUNNING rule of ``DefaultExecutionGraph``. See docs/coordinator.md, "When the periodic trigger runs". What this
gives through a job's deployment and its failovers: docs/flink-2.3-divergences.md, section 1.
"""

from __future__ import annotations

from collections.abc import Callable

from barriersim.runtime.coordinator.plan import ExecutionState
from barriersim.runtime.coordinator.properties import JobStatus
from barriersim.runtime.ids import ExecutionAttemptID

_LEAVES_PENDING = (ExecutionState.RUNNING, ExecutionState.FINISHED)


class ExecutionTrackingDeActivator:
    """Mirrors Flink's ``ExecutionTrackingCheckpointCoordinatorDeActivator``."""

    def __init__(self, start: Callable[[], object], stop: Callable[[], object]) -> None:
        self._start = start
        self._stop = stop
        self.pending_executions: set[ExecutionAttemptID] = set()
        self.job_status: JobStatus | None = None
        self.started = False

    def job_status_changes(self, status: JobStatus) -> None:
        self.job_status = status
        self._maybe_start_or_stop()

    def on_state_update(self, attempt: ExecutionAttemptID, new_state: ExecutionState) -> None:
        if new_state in _LEAVES_PENDING:
            self.pending_executions.discard(attempt)
        else:
            self.pending_executions.add(attempt)
        self._maybe_start_or_stop()

    def _maybe_start_or_stop(self) -> None:
        if self.job_status is JobStatus.RUNNING and not self.pending_executions:
            if not self.started:
                self.started = True
                self._start()
        elif self.started:
            self.started = False
            self._stop()
