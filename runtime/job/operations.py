"""The user's operations on a running job: ``JobOperations``, a collaborator of ``JobMaster`` that owns them (a
savepoint, a stop-with-savepoint, a cancel: ``Operation``, each with how it ended), the savepoints written and
what a job that ended by one of them ended with. A savepoint is a trigger request of the coordinator (Flink's
``triggerSavepoint``, canonical format); a stop-with-savepoint a synchronous one (``stopWithSavepoint``); a cancel
ends the job CANCELED at once, its checkpoints kept only if the retention policy retains them on cancellation.
An operation on a job that has ended, or during a JobManager's recovery, fails at once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.properties import JobStatus
from barriersim.runtime.events import CheckpointType
from barriersim.runtime.job.actions import JobEnded
from barriersim.runtime.job.checkpointing import JobCheckpointing
from barriersim.runtime.job.config import JobOutcome
from barriersim.runtime.job.execution_deployer import ExecutionDeployer
from barriersim.runtime.job.report import Operation
from barriersim.runtime.state.snapshot import CheckpointMetadata
from barriersim.runtime.storage.checkpoint_storage import CheckpointStorage


class JobOperations:
    """Savepoints, stop-with-savepoint and cancel (see the module)."""

    def __init__(
        self,
        *,
        storage: CheckpointStorage,
        checkpointing: JobCheckpointing,
        deployer: ExecutionDeployer,
        job_ms: Callable[[], int],
        outcome: Callable[[], JobOutcome | None],
        cancelled: Callable[[], None],
        trace: Callable[[str, str], None],
        emit: Callable[[Any], None],
    ):
        """``checkpointing``: the JobMaster's ``JobCheckpointing`` (its coordinator takes the requests);
        ``outcome()``: the job's; ``cancelled()``: the job's outcome becomes CANCELED."""
        self._storage = storage
        self._checkpointing = checkpointing
        self._deployer = deployer
        self._job_ms = job_ms
        self._outcome = outcome
        self._cancelled = cancelled
        self._trace = trace
        self._emit = emit
        self.operations: list[Operation] = []
        self._operation_of_request: dict[int, Operation] = {}
        self._next_request_id = 1
        self._savepoint_paths: dict[int, str] = {}
        self._savepoint_metadata: dict[int, CheckpointMetadata] = {}
        self.retained_checkpoint: str | None = None  # the checkpoint a cancelled job retained
        self._cancelled_at: CheckpointMetadata | None = None  # the latest completed checkpoint when cancelled
        # a stop-with-savepoint whose savepoint completed, after which the job failed before its tasks finished
        # (Flink's StopWithSavepointStoppingException: the job fails, the savepoint is what to restart from)
        self.failed_stop: Operation | None = None

    # -- queries --------------------------------------------------------------------------------------------------

    def stopped_with_savepoint(self) -> Operation | None:
        """The stop-with-savepoint whose savepoint completed, if the job ended by it."""
        for op in self.operations:
            if op.operation == "stop_with_savepoint" and op.status == "COMPLETED":
                return op
        return None

    def ending_snapshot(self) -> tuple[bool, CheckpointMetadata | None]:
        """Whether the job ended by a snapshot a restore would resume from (a completed stop-with-savepoint, a stop
        whose savepoint completed before the job failed, or a cancel), and that snapshot: the stop's savepoint, or the
        latest checkpoint completed when it was cancelled (None if there was none, or the JobManager was down)."""
        outcome = self._outcome()
        stop = self.stopped_with_savepoint()
        if outcome is JobOutcome.FINISHED and stop is not None:
            return True, self._savepoint_of(stop)
        if outcome is JobOutcome.FAILED and self.failed_stop is not None:  # its savepoint is what to resume from
            return True, self._savepoint_of(self.failed_stop)
        if outcome is JobOutcome.CANCELED:
            return True, self._cancelled_at
        return False, None

    def _savepoint_of(self, op: Operation) -> CheckpointMetadata | None:
        return self._savepoint_metadata.get(op.checkpoint_id) if op.checkpoint_id is not None else None

    def savepoints(self) -> list[Operation]:
        """The savepoints of the job that completed (of savepoint and stop-with-savepoint operations)."""
        return [op for op in self.operations if op.path is not None and op.status == "COMPLETED"]

    # -- what the coordinator answers -----------------------------------------------------------------------------

    def request_completed(self, request_id: int, checkpoint_id: int) -> Operation | None:
        """The savepoint of request ``request_id`` completed: its operation, now COMPLETED (None if none)."""
        op = self._operation_of_request.pop(request_id, None)
        if op is not None:
            op.status, op.checkpoint_id = "COMPLETED", checkpoint_id
            op.path = self._savepoint_paths.get(checkpoint_id)
        return op

    def request_failed(self, request_id: int, checkpoint_id: int | None, reason: str) -> None:
        op = self._operation_of_request.pop(request_id, None)
        if op is not None:
            op.status, op.checkpoint_id, op.failure = "FAILED", checkpoint_id, reason

    def savepoint_written(self, checkpoint_id: int, path: str, metadata: CheckpointMetadata) -> None:
        self._savepoint_paths[checkpoint_id] = path
        self._savepoint_metadata[checkpoint_id] = metadata

    def stop_failed(self, stop: Operation, message: str) -> None:
        """The job failed after ``stop``'s savepoint completed (``JobFailover``): the savepoint is what to restart
        from."""
        stop.status, stop.failure = "FAILED", message
        self.failed_stop = stop

    # -- the operations -------------------------------------------------------------------------------------------

    def trigger_savepoint(self) -> None:
        """Flink's ``triggerSavepoint`` (canonical format); the job goes on."""
        self._request_savepoint(
            Operation("savepoint", self._job_ms(), savepoint_format="CANONICAL"), CheckpointType.SAVEPOINT
        )

    def stop_with_savepoint(self, drain: bool) -> None:
        """Flink's ``stopWithSavepoint``: a synchronous savepoint (``drain``: ``SAVEPOINT_TERMINATE``, else
        ``SAVEPOINT_SUSPEND``), after which the tasks finish and the job ends FINISHED."""
        self._request_savepoint(
            Operation("stop_with_savepoint", self._job_ms(), drain=drain, savepoint_format="CANONICAL"),
            CheckpointType.SAVEPOINT_TERMINATE if drain else CheckpointType.SAVEPOINT_SUSPEND,
        )

    def _request_savepoint(self, op: Operation, checkpoint_type: CheckpointType) -> None:
        self.operations.append(op)
        ended = self._outcome() is not None
        if ended or self._checkpointing.down:
            op.status, op.failure = "FAILED", ("the job has ended" if ended else "the JobManager is recovering")
            return
        op.request_id = self._next_request_id
        self._next_request_id += 1
        self._operation_of_request[op.request_id] = op
        self._trace("operation", f"{op.operation} request {op.request_id}")
        self._checkpointing.send(m.TriggerRequest(checkpoint_type, op.request_id))

    def cancel(self) -> None:
        """Flink's ``cancel``: every task is cancelled and the job ends CANCELED; the coordinator shuts down and
        its completed checkpoints are discarded unless the retention policy retains them on cancellation."""
        op = Operation("cancel", self._job_ms())
        self.operations.append(op)
        if self._outcome() is not None:
            op.status, op.failure = "FAILED", "the job has ended"
            return
        op.status = "COMPLETED"
        self._trace("operation", "cancel")
        checkpointing = self._checkpointing
        if not checkpointing.down:
            latest = checkpointing.latest_completed_checkpoint()
            self._cancelled_at = latest.metadata if latest is not None else None
        self._deployer.cancel()
        self._cancelled()
        if not checkpointing.down:
            checkpointing.send(m.JobStatusChanged(JobStatus.CANCELED))
        retained = self._storage.list_retained_checkpoints()
        self.retained_checkpoint = retained[0].external_pointer if retained else None
        self._emit(JobEnded(JobOutcome.CANCELED))
