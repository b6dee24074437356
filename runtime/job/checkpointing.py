"""The JobMaster's checkpoint coordinator: ``JobCheckpointing``, a collaborator of ``JobMaster`` that owns the
coordinator of the current JobManager generation (and the statistics of those that died), the id counter high
availability keeps, and carries out what the coordinator asks: triggers and notifications to the tasks, discards
and ``_metadata`` writes in the checkpoint storage, the restore it decides, the results of trigger requests and
``FailJob`` (queued until the coordinator's call is over, as Flink queues ``failJob`` on the JobMaster's main
thread). Mirrors how Flink's ``DefaultScheduler`` wires its ``CheckpointCoordinator``."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

from barriersim.runtime.checkpoint_cost import CostCharger
from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.checkpoint_coordinator import CheckpointCoordinator
from barriersim.runtime.coordinator.checkpoint_recovery import retire_coordinator
from barriersim.runtime.coordinator.completed_store import (
    DefaultCompletedCheckpointStore,
    StandaloneCompletedCheckpointStore,
)
from barriersim.runtime.coordinator.id_counter import StandaloneCheckpointIDCounter
from barriersim.runtime.coordinator.pending_checkpoint import CompletedCheckpoint
from barriersim.runtime.coordinator.plan import vertices_from_job_graph
from barriersim.runtime.coordinator.stats_tracker import CheckpointStatsTracker
from barriersim.runtime.event_timers import EventTimers, WrappingTimers
from barriersim.runtime.faults.fault_log import FaultLog
from barriersim.runtime.faults.fault_schedule import MessageKind, ProtocolPoint
from barriersim.runtime.ids import ExecutionAttemptID, JobVertexID
from barriersim.runtime.job.actions import (
    NotifyCheckpointAborted,
    NotifyCheckpointComplete,
    TriggerCheckpoint,
    subtask_name,
)
from barriersim.runtime.job.config import JobConfig
from barriersim.runtime.job.events import CoordinatorTimerFired
from barriersim.runtime.state.snapshot import CheckpointMetadata, metadata_bytes_estimate
from barriersim.runtime.storage.atomic_file import WriteFault
from barriersim.runtime.storage.checkpoint_storage import CheckpointStorage, CompletedCheckpointStorageLocation
from barriersim.runtime.storage.errors import CheckpointStorageError


class JobCheckpointing:
    """The coordinator of each JobManager generation and what it asks (see the module)."""

    def __init__(
        self,
        config: JobConfig,
        job_id: str,
        *,
        storage: CheckpointStorage,
        savepoint_storage: CheckpointStorage,
        clock: Callable[[], int],
        timers: EventTimers,
        coordinator_rng: Callable[[], random.Random],
        cost: CostCharger,
        keep_completed_metadata: bool,
        first_attempt_number: int,
        fault_log: FaultLog,
        job_ms: Callable[[], int],
        epoch: Callable[[], int],
        trace: Callable[[str, str], None],
        to_task: Callable[..., None],
        crash_point: Callable[[str, ProtocolPoint, int], bool],
        request_completed: Callable[[int, int], None],
        checkpoint_completed: Callable[[int], None],
        request_failed: Callable[[int, int | None, str], None],
        savepoint_written: Callable[[int, str, CheckpointMetadata], None],
        fail_over: Callable[[str, str], None],
        job_ended: Callable[[], bool],
        failing_over: Callable[[], bool],
    ):
        """``timers``: the JobMaster's, each coordinator's timer wrapped with its generation
        (``CoordinatorTimerFired``); ``to_task``: a message to a task, through its faults' fate; ``crash_point``: the
        JobMaster-side crash points; ``request_completed`` / ``request_failed`` / ``savepoint_written``: the
        results of trigger requests (the JobMaster's operations); ``checkpoint_completed``: every checkpoint or
        savepoint the coordinator completed (the JobMaster-side crash after it); ``fail_over(task, why)``: a queued
        ``FailJob`` fails the job over, unless it ``job_ended()`` or is ``failing_over()`` (then it waits for the
        failover's end, ``fail_over_queued``)."""
        self._config = config
        self.job_id = job_id
        self._graph = config.graph
        self._storage = storage
        self._savepoint_storage = savepoint_storage
        self._clock = clock
        self._timers = timers
        self._coordinator_rng = coordinator_rng
        self._cost = cost
        self._fault_log = fault_log
        self._job_ms = job_ms
        self._epoch = epoch
        self._trace = trace
        self._to_task = to_task
        self._crash_point = crash_point
        self._request_completed = request_completed
        self._checkpoint_completed = checkpoint_completed
        self._request_failed = request_failed
        self._savepoint_written = savepoint_written
        self._fail_over = fail_over
        self._job_ended = job_ended
        self._failing_over = failing_over
        self.storage_errors: list[str] = []  # storage faults the job went on after (as in Flink), never silent
        self.completed_in_epoch: dict[int, tuple[int, CheckpointMetadata]] | None = (
            {} if keep_completed_metadata else None
        )
        # the deployment each checkpoint's tasks were triggered in: a failover can end a _metadata write still in
        # progress after the deployment was cancelled, and the checkpoint still belongs to the one it snapshotted
        self._triggered_in_epoch: dict[int, int] = {}
        self._restore_from: m.RestoreFrom | None = None
        self._queued_failures: list[m.FailJob] = []
        self._calls = 0  # how deep the carrying out of coordinator actions is nested (a failover sends events)
        # what high availability keeps across a JobManager failover: the checkpoint id counter (the completed
        # checkpoints are recovered from the checkpoint storage)
        self.id_counter = StandaloneCheckpointIDCounter()
        self.generation = 0
        self.down = False  # the JobManager died; a new one has not recovered yet
        self.retired_stats: list[CheckpointStatsTracker] = []  # the statistics of coordinators that died
        self.coordinator = self._new_coordinator(None, first_attempt_number)

    def _new_coordinator(
        self, store: StandaloneCompletedCheckpointStore | None, first_attempt_number: int
    ) -> CheckpointCoordinator:
        if store is None:
            store = DefaultCompletedCheckpointStore(
                self._config.checkpointing.max_retained, self._storage, on_error=self.storage_error
            )
        generation = self.generation
        return CheckpointCoordinator(
            self.job_id,
            vertices_from_job_graph(self._graph),
            self._config.checkpointing.coordinator_configuration(),
            clock=self._clock,
            timers=WrappingTimers(self._timers, lambda event: CoordinatorTimerFired(generation, event)),
            rng=self._coordinator_rng(),
            tasks_running=False,
            completed_checkpoint_store=store,
            checkpoint_id_counter=self.id_counter,
            checkpoint_writer=self._write_metadata,
            first_attempt_number=first_attempt_number,
            metadata_write_ms=lambda states: self._cost.metadata_ms(
                metadata_bytes_estimate(states, self._config.checkpointing.memory_threshold_bytes)
            ),
            claim_mode=self._config.checkpointing.recovery_claim_mode,
        )

    # -- queries --------------------------------------------------------------------------------------------------

    def latest_completed_checkpoint(self) -> CompletedCheckpoint | None:
        return self.coordinator.latest_completed_checkpoint()

    def current_attempt(self, vertex: JobVertexID, index: int) -> ExecutionAttemptID:
        return self.coordinator.current_attempt(vertex, index)

    def statistics(self) -> list[CheckpointStatsTracker]:
        """The checkpoint statistics of every coordinator the job had, oldest first (while the JobManager is down,
        its dead coordinator's are among the retired ones already)."""
        return self.retired_stats + ([] if self.down else [self.coordinator.checkpoint_stats()])

    # -- the JobManager's generations -----------------------------------------------------------------------------

    def crash(self) -> None:
        """The JobManager dies: its coordinator's memory is lost (its timers never fire, messages to it are lost)."""
        self.retired_stats.append(retire_coordinator(self.coordinator, self._clock()))
        self.generation += 1
        self.down = True

    def recover(self, store: StandaloneCompletedCheckpointStore, first_attempt_number: int) -> None:
        """A new JobManager's coordinator, over the recovered completed checkpoint store."""
        self.coordinator = self._new_coordinator(store, first_attempt_number)
        self.down = False

    def timer_fired(self, event: CoordinatorTimerFired) -> None:
        """A timer of the coordinator of a JobManager generation: a crashed coordinator's never fire."""
        if event.generation == self.generation:
            self.send(event.event)

    def receives(self, generation: int, event: m.CoordinatorEvent) -> None:
        """A task's message reaches the coordinator it was sent to, unless that one died meanwhile."""
        if generation == self.generation and not self.down:
            self.send(event)

    # -- the coordinator's actions --------------------------------------------------------------------------------

    def send(self, event: m.CoordinatorEvent) -> None:
        """The coordinator handles ``event``; what it asks is carried out."""
        self.carry_out(self.coordinator.handle(event))

    def restore(self, event: m.CoordinatorEvent) -> m.RestoreFrom | None:
        """The coordinator handles a restore (or a restart): the ``RestoreFrom`` it decided, if any."""
        self._restore_from = None
        self.send(event)
        return self._restore_from

    def carry_out(self, actions: Iterable[m.CoordinatorAction]) -> None:
        """Carry out the coordinator's actions in order. A ``FailJob`` among them fails the job over only after the
        rest of them went out, as Flink's ``failJob`` is queued on the JobMaster's main thread while the coordinator's
        call goes on: a queued request the same call started has triggered its tasks before the failover cancels
        them, not after (a trigger of a checkpoint the failover already aborted, to a cancelled deployment)."""
        self._calls += 1
        try:
            for action in actions:
                self._carry_out(action)
        finally:
            self._calls -= 1
        self.fail_over_queued()

    def _carry_out(self, action: m.CoordinatorAction) -> None:
        self._trace("coordinator", type(action).__name__ + " " + str(getattr(action, "checkpoint_id", "")))
        if isinstance(action, m.TriggerCheckpointOnSources):
            if self.completed_in_epoch is not None:
                self._triggered_in_epoch[action.checkpoint_id] = self._epoch()
            trigger_ms = round(self._cost.trigger_ms())  # the trigger path, before the RPCs leave
            for attempt in action.tasks:
                self._to_task(
                    None,
                    attempt,
                    action.checkpoint_id,
                    TriggerCheckpoint(action.checkpoint_id, action.timestamp, action.options),
                    trigger_ms,
                )
        elif isinstance(action, m.NotifyCheckpointComplete):
            if not self._crash_point(
                subtask_name((action.task.vertex_id, action.task.subtask_index)),
                ProtocolPoint.AFTER_ACK_BEFORE_COMPLETION_NOTICE,
                action.checkpoint_id,
            ):
                self._to_task(
                    MessageKind.NOTIFY_COMPLETE,
                    action.task,
                    action.checkpoint_id,
                    NotifyCheckpointComplete(action.checkpoint_id),
                )
        elif isinstance(action, m.NotifyCheckpointAborted):
            self._to_task(
                MessageKind.NOTIFY_ABORTED,
                action.task,
                action.checkpoint_id,
                NotifyCheckpointAborted(action.checkpoint_id, action.latest_completed_checkpoint_id),
            )
        elif isinstance(action, m.DiscardCheckpoint):
            # a checkpoint an earlier JobManager completed (recovered, then subsumed): its statistics are that
            # coordinator's, so the run's report says it was discarded there (the current one marked its own)
            for stats in self.retired_stats:
                stats.report_discarded_checkpoint(action.checkpoint_id)
            try:
                self._storage.discard_checkpoint(action.checkpoint_id)
            except CheckpointStorageError as err:  # Flink's CheckpointsCleaner logs it; the job goes on
                self.storage_error(f"discarding checkpoint {action.checkpoint_id}: {err}")
        elif isinstance(action, m.DiscardSharedState):
            try:
                self._storage.discard_shared_state([h.key for h in action.handles])
            except CheckpointStorageError as err:  # as a failed discard of a checkpoint: the job goes on
                self.storage_error(f"discarding shared state: {err}")
        elif isinstance(action, m.AcknowledgementRejected):  # Flink's JobMaster logs it; the job goes on
            task = subtask_name((action.task.vertex_id, action.task.subtask_index))
            self.storage_error(
                f"checkpoint {action.checkpoint_id}: the acknowledgement of {task} was dropped: {action.detail}"
            )
        elif isinstance(action, m.RestoreFrom):
            self._restore_from = action
        elif isinstance(action, m.TriggerRequestCompleted):
            if action.request_id:
                self._request_completed(action.request_id, action.checkpoint_id)
            self._checkpoint_completed(action.checkpoint_id)
        elif isinstance(action, m.TriggerRequestFailed):
            if action.request_id:
                self._request_failed(action.request_id, action.checkpoint_id, action.reason.name)
        elif isinstance(action, m.FailJob):
            self._queued_failures.append(action)

    def fail_over_queued(self) -> None:
        """Fail the job over for each queued ``FailJob``, in order, once no coordinator call is being handled and no
        failover runs (a ``FailJob`` made during a failover, as a ``_metadata`` write that the failover ended and that
        failed, waits for its end; the failover calls this when done). One that finds the job ended is dropped, as
        Flink's ``DefaultExecutionGraph.failJob`` returns at once for a job that is failing or ended."""
        while self._queued_failures and not self._calls and not self._failing_over():
            action = self._queued_failures.pop(0)
            if self._job_ended():
                continue
            failing = action.failing_task
            name = subtask_name((failing.vertex_id, failing.subtask_index)) if failing else "coordinator"
            self._fail_over(name, action.reason.name)

    def _write_metadata(self, metadata: CheckpointMetadata, is_savepoint: bool) -> CompletedCheckpointStorageLocation:
        """The coordinator's ``checkpoint_writer``: write ``_metadata`` to the checkpoint storage while the
        coordinator finalizes the checkpoint; a failure (``FailStorageWrite`` without a task) raises into the
        coordinator, which aborts the checkpoint as ``FINALIZE_CHECKPOINT_FAILURE``."""
        cid = metadata.checkpoint_id
        self._trace("coordinator", "PersistCheckpoint ")
        storage = self._savepoint_storage if is_savepoint else self._storage
        if self._fault_log.fails_storage_write(cid, self._job_ms()):
            storage.fail_next_write(WriteFault.FAIL_BEFORE_WRITE)
        try:
            location = storage.persist_checkpoint(metadata, is_savepoint=is_savepoint)
        except Exception as err:
            self._trace("storage-failed", f"{cid} {type(err).__name__}")
            self.storage_errors.append(f"{cid}: {type(err).__name__}: {err}")
            raise
        if is_savepoint:
            self._savepoint_written(cid, location.external_pointer, metadata)
        if self.completed_in_epoch is not None and not is_savepoint:
            self.completed_in_epoch[cid] = (self._triggered_in_epoch.pop(cid, self._epoch()), metadata)
        return location

    def storage_error(self, message: str) -> None:
        """A storage fault the job goes on after (as in Flink): reported, never silent."""
        self._trace("storage-error", message)
        self.storage_errors.append(message)
