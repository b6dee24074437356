"""What a task tells of a checkpoint, on its way to the coordinator: ``TaskCheckpointReports``, a collaborator of
``JobMaster`` that turns an acknowledgement, a decline or a closed asynchronous part's figures into the message of
the current JobManager generation's coordinator, through the fault schedule (crash points, failed state writes,
injected declines, dropped or delayed messages). Mirrors the checkpoint calls of Flink's ``ExecutionGraphHandler``
(``acknowledgeCheckpoint``, ``declineCheckpoint``, ``reportCheckpointMetrics``)."""

from __future__ import annotations

from collections.abc import Callable

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason
from barriersim.runtime.faults.fault_schedule import MessageKind, ProtocolPoint
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.job import events as je
from barriersim.runtime.job.actions import CoordinatorMessage, subtask_name
from barriersim.runtime.job.checkpointing import JobCheckpointing
from barriersim.runtime.job.execution_deployer import ExecutionDeployer
from barriersim.runtime.job.fault_injection import FaultInjector
from barriersim.runtime.jobgraph import JobGraph


class TaskCheckpointReports:
    """A task's acknowledgements, declines and incomplete statistics, to the coordinator (see the module)."""

    def __init__(
        self,
        job_id: str,
        graph: JobGraph,
        *,
        checkpointing: JobCheckpointing,
        deployer: ExecutionDeployer,
        injector: FaultInjector,
        job_ms: Callable[[], int],
    ):
        """``checkpointing``: whose generation's coordinator the messages are for; ``deployer``: which attempts run
        (a crash point strikes only a running task); ``injector``: the fault schedule the messages pass."""
        self._job_id = job_id
        self._first_source = subtask_name((graph.sources[0].name, 0))  # where fail_checkpoints counts checkpoints
        self._checkpointing = checkpointing
        self._deployer = deployer
        self._injector = injector
        self._job_ms = job_ms

    def acknowledge(self, event: je.CheckpointAcknowledged) -> None:
        """An acknowledgement meets, in this order, a crash ``after_sync_snapshot_before_ack`` (it is lost with the
        task), a failed state write (it becomes a ``CHECKPOINT_ASYNC_EXCEPTION`` decline), a ``fail_checkpoints``
        decline, then its fate (dropped, or delayed), and after it a crash ``after_ack_before_completion_notice``."""
        attempt, checkpoint_id = event.attempt, event.checkpoint_id
        injector, job_ms = self._injector, self._job_ms()
        name = subtask_name((attempt.vertex_id, attempt.subtask_index))
        current = self._deployer.is_current(attempt)
        if current and injector.crash_point(name, ProtocolPoint.AFTER_SYNC_SNAPSHOT_BEFORE_ACK, checkpoint_id):
            return  # the task died before its acknowledgement left it
        if injector.fault_log.fails_state_write(name, checkpoint_id, job_ms):
            # Flink's AsyncCheckpointRunnable: the asynchronous part failed, so the task declines
            self._decline(
                attempt,
                checkpoint_id,
                CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION,
                f"{name}: injected by fail_storage_write: the state write failed",
            )
        elif injector.fault_log.declines(name, checkpoint_id, self._first_source, job_ms):
            self._decline(
                attempt, checkpoint_id, CheckpointFailureReason.CHECKPOINT_DECLINED, "injected by fail_checkpoints"
            )
        else:
            injector.to_coordinator(
                MessageKind.ACKNOWLEDGE,
                name,
                checkpoint_id,
                CoordinatorMessage(
                    self._checkpointing.generation,
                    m.AcknowledgeCheckpoint(self._job_id, attempt, checkpoint_id, event.snapshot, event.metrics),
                ),
            )
            if current:
                injector.crash_point(name, ProtocolPoint.AFTER_ACK_BEFORE_COMPLETION_NOTICE, checkpoint_id)

    def decline(self, event: je.CheckpointDeclined) -> None:
        self._decline(event.attempt, event.checkpoint_id, event.reason, event.detail)

    def _decline(
        self, attempt: ExecutionAttemptID, checkpoint_id: int, reason: CheckpointFailureReason, detail: str
    ) -> None:
        name = subtask_name((attempt.vertex_id, attempt.subtask_index))
        exception = CheckpointException(reason, checkpoint_id, detail)
        self._injector.to_coordinator(
            MessageKind.DECLINE,
            name,
            checkpoint_id,
            CoordinatorMessage(
                self._checkpointing.generation, m.DeclineCheckpoint(self._job_id, attempt, checkpoint_id, exception)
            ),
        )

    def report_incomplete_snapshot_stats(self, event: je.IncompleteStatsReported) -> None:
        """A cancelled or failed task's closed asynchronous part reports its figures (Flink's
        ``reportIncompleteTaskStateSnapshots``): they go to the coordinator, whose statistics take them for a
        checkpoint pending or failed. A task the fault schedule killed or crashed reports nothing: it is gone."""
        attempt, report = event.attempt, event.report
        if not self._injector.was_killed(attempt):
            name = subtask_name((attempt.vertex_id, attempt.subtask_index))
            self._injector.to_coordinator(
                None,
                name,
                report.checkpoint_id,
                CoordinatorMessage(
                    self._checkpointing.generation,
                    m.ReportCheckpointMetrics(
                        self._job_id,
                        attempt,
                        report.checkpoint_id,
                        report.metrics,
                        report.state_size,
                        report.checkpointed_size,
                    ),
                ),
            )
