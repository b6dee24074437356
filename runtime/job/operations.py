"""The JobMaster's operations on a running job: a savepoint, a stop-with-savepoint and a cancel, and what a job
that ended by one of them ended with.

How this works: ``JobOperations`` is the part of ``runtime.job.job_master.JobMaster`` (a base class of it, sharing
its state: the coordinator, the operations, the outgoing actions) that carries out a user's operations. A savepoint
is a trigger request of the coordinator (Flink's ``triggerSavepoint``, canonical format); a stop-with-savepoint a
synchronous one (``stopWithSavepoint``: ``SAVEPOINT_TERMINATE`` with ``--drain``, else ``SAVEPOINT_SUSPEND``), after
which the tasks finish and the job ends FINISHED. Each operation is recorded (``operations``) with its request id;
the JobMaster marks it completed or failed when the coordinator answers the request
(``TriggerRequestCompleted`` / ``TriggerRequestFailed``). A cancel ends the job CANCELED at once: every task is
cancelled, the coordinator shuts down, and its checkpoints are kept only if the retention policy retains them on
cancellation. An operation on a job that has ended, or during a JobManager's recovery, fails at once.
"""

from __future__ import annotations

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.properties import JobStatus
from barriersim.runtime.events import CheckpointType
from barriersim.runtime.job.actions import JobEnded
from barriersim.runtime.job.config import JobOutcome
from barriersim.runtime.job.report import Operation
from barriersim.runtime.state.snapshot import CheckpointMetadata


class JobOperations:
    """Savepoints, stop-with-savepoint and cancel of ``JobMaster`` (a part of it, not used alone)."""

    @property
    def stopped_with_savepoint(self) -> Operation | None:
        """The stop-with-savepoint whose savepoint completed, if the job ended by it."""
        for op in self.operations:
            if op.operation == "stop_with_savepoint" and op.status == "COMPLETED":
                return op
        return None

    @property
    def ending_snapshot(self) -> tuple[bool, CheckpointMetadata | None]:
        """Whether the job ended by a snapshot a restore would resume from (a completed stop-with-savepoint, a stop
        whose savepoint completed before the job failed, or a cancel), and that snapshot: the stop's savepoint, or the
        latest checkpoint completed when it was cancelled (None if there was none, or the JobManager was down)."""
        stop = self.stopped_with_savepoint
        if self.outcome is JobOutcome.FINISHED and stop is not None:
            return True, self._savepoint_metadata.get(stop.checkpoint_id)
        if self.outcome is JobOutcome.FAILED and self.failed_stop is not None:  # its savepoint is what to resume from
            return True, self._savepoint_metadata.get(self.failed_stop.checkpoint_id)
        if self.outcome is JobOutcome.CANCELED:
            return True, self._cancelled_at
        return False, None

    @property
    def savepoints(self) -> list[Operation]:
        """The savepoints of the job that completed (of savepoint and stop-with-savepoint operations)."""
        return [op for op in self.operations if op.path is not None and op.status == "COMPLETED"]

    def _trigger_savepoint(self) -> None:
        """Flink's ``triggerSavepoint`` (canonical format); the job goes on."""
        self._request_savepoint(Operation("savepoint", self.job_ms(), savepoint_format="CANONICAL"),
                                CheckpointType.SAVEPOINT)

    def _stop_with_savepoint(self, drain: bool) -> None:
        """Flink's ``stopWithSavepoint``: a synchronous savepoint (``drain``: ``SAVEPOINT_TERMINATE``, else
        ``SAVEPOINT_SUSPEND``), after which the tasks finish and the job ends FINISHED."""
        self._request_savepoint(Operation("stop_with_savepoint", self.job_ms(), drain=drain, savepoint_format="CANONICAL"),
                                CheckpointType.SAVEPOINT_TERMINATE if drain else CheckpointType.SAVEPOINT_SUSPEND)

    def _request_savepoint(self, op: Operation, checkpoint_type: CheckpointType) -> None:
        self.operations.append(op)
        if self.outcome is not None or self.coordinator_down:
            op.status, op.failure = "FAILED", ("the job has ended" if self.outcome is not None
                                               else "the JobManager is recovering")
            return
        op.request_id = self._next_request_id
        self._next_request_id += 1
        self._operation_of_request[op.request_id] = op
        self._trace("operation", f"{op.operation} request {op.request_id}")
        self._handle_coordinator(self.coordinator.handle(m.TriggerRequest(checkpoint_type, op.request_id)))

    def _cancel(self) -> None:
        """Flink's ``cancel``: every task is cancelled and the job ends CANCELED; the coordinator shuts down and
        its completed checkpoints are discarded unless the retention policy retains them on cancellation."""
        op = Operation("cancel", self.job_ms())
        self.operations.append(op)
        if self.outcome is not None:
            op.status, op.failure = "FAILED", "the job has ended"
            return
        op.status = "COMPLETED"
        self._trace("operation", "cancel")
        if not self.coordinator_down:
            latest = self.coordinator.latest_completed_checkpoint()
            self._cancelled_at = latest.metadata if latest is not None else None
        self._cancel_deployment()
        self.outcome = JobOutcome.CANCELED
        if not self.coordinator_down:
            self._handle_coordinator(self.coordinator.handle(m.JobStatusChanged(JobStatus.CANCELED)))
        retained = self.storage.list_retained_checkpoints()
        self.retained_checkpoint = retained[0].external_pointer if retained else None
        self._out.append(JobEnded(JobOutcome.CANCELED))
