"""When the periodic checkpoint trigger runs: Flink 2.3's ``ExecutionTrackingCheckpointCoordinatorDeActivator``
and the RUNNING rule of ``DefaultExecutionGraph``.

How this works: the deactivator hears the job's status and every execution's state change. An execution enters its
pending set on any state but RUNNING and FINISHED and leaves it only on those two; while the job is RUNNING and the
set is empty the trigger is started (once, until it is stopped), otherwise a trigger the deactivator started is
stopped. An attempt that ended CANCELED or FAILED never leaves the set, so after a job's first failover the
deactivator neither starts nor stops the trigger again. Separately, an execution that reports RUNNING starts the
trigger if it is not running (``DefaultExecutionGraph.updateStateInternal``, ``case RUNNING``). Together, in a
streaming job whose tasks report RUNNING one after another: the job's RUNNING starts the trigger (its random
initial delay is spent there) and the first deployment's state changes stop it; the first task's RUNNING starts it
with the min pause (0 by default), and that trigger fails its pre-flight check (``NOT_ALL_REQUIRED_TASKS_RUNNING``,
a failed checkpoint in the statistics) when the other tasks are not running yet; the last task's RUNNING starts it
again, and checkpoint 1 is triggered at once. At the job's first failover the job's RESTARTING stops it (the pending
checkpoints and queued requests are aborted); the first restarted task's RUNNING starts it (the trigger fails the same
way) and the next trigger comes one interval later. From then on the old attempts keep the pending set non-empty and
the deactivator did not start the trigger: it runs on through every later failover and restart (its requests fail
their pre-flight check while the tasks do not run, or wait behind the checkpoints still pending, which the restart
aborts). ``start`` and ``stop`` are the coordinator's ``startCheckpointScheduler`` / ``stopCheckpointScheduler``.
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
