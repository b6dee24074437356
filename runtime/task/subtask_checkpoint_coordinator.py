"""The checkpoint steps of one subtask, from a triggered barrier to the acknowledgement (or decline): the operator's
pre-barrier step, the barrier broadcast to the result partitions (with the output alignment timer of a timeoutable
barrier), the in-flight data the barrier overtook for the channel state writer, the synchronous snapshot, and the
asynchronous part (``AsyncCheckpointRunnable``) that acknowledges; aborts, notifications and cancellation. Sans-IO:
methods return the actions (``runtime/task/actions.py``) in order. Mirrors Flink's
``SubtaskCheckpointCoordinatorImpl``. See ``docs/architecture.md``, "The data plane".
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence

from barriersim.runtime.channel_state.writer import ChannelStateWriter, ChannelStateWriterImpl
from barriersim.runtime.checkpoint_cost import FREE, NO_WORK, CostCharger, SnapshotWork
from barriersim.runtime.checkpointing.barrier_handler import Cancellable, CheckpointMetrics, Clock, TimerService
from barriersim.runtime.events import (
    AlignmentType,
    Buffer,
    CancelCheckpointMarker,
    ChannelElement,
    CheckpointBarrier,
    CheckpointOptions,
    ResultSubpartitionInfo,
)
from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason
from barriersim.runtime.faults.fault_schedule import ProtocolPoint
from barriersim.runtime.faults.mutations import PlantedBug, is_planted
from barriersim.runtime.ids import OperatorID
from barriersim.runtime.network.output.result_partition import ResultPartition
from barriersim.runtime.state.snapshot import OperatorSubtaskState
from barriersim.runtime.task.actions import (
    AsyncCheckpointStarted,
    AsyncPart,
    BroadcastEvent,
    CheckpointSkipped,
    DeclineCheckpoint,
    ReportIncompleteSnapshotStats,
    SkipReason,
    SyncSnapshotTaken,
    TaskCheckpointAction,
)
from barriersim.runtime.task.async_checkpoint_runnable import AsyncCheckpointRunnable
from barriersim.runtime.task.crash_points import NO_CRASH_POINTS, CrashPoints

DEFAULT_MAX_RECORD_ABORTED_CHECKPOINTS = 128


class AsyncCompletion(enum.Enum):
    IMMEDIATE = "IMMEDIATE"
    DRIVER = "DRIVER"


class CheckpointCancelled(Exception):
    """Flink's ``CancellationException`` given to the channel state writer when a checkpoint is dropped."""


SnapshotState = Callable[[int, CheckpointOptions], OperatorSubtaskState]
SnapshotWorkOf = Callable[[OperatorSubtaskState], SnapshotWork]


class SubtaskCheckpointCoordinator:
    def __init__(
        self,
        *,
        operator_id: OperatorID,
        snapshot_state: SnapshotState,
        clock: Clock,
        partitions: Sequence[ResultPartition] = (),
        channel_state_writer: ChannelStateWriter | None = None,
        timer_service: TimerService | None = None,
        operator: object = None,
        has_inputs: bool = True,
        async_completion: AsyncCompletion = AsyncCompletion.IMMEDIATE,
        max_record_aborted_checkpoints: int = DEFAULT_MAX_RECORD_ABORTED_CHECKPOINTS,
        sink: Callable[[TaskCheckpointAction], None] | None = None,
        task_name: str = "",
        subtask_index: int = 0,
        crash_points: CrashPoints = NO_CRASH_POINTS,
        cost: CostCharger = FREE,
        snapshot_work: SnapshotWorkOf | None = None,
        memory_threshold: int = 20 * 1024,
    ):
        """``cost``: what the checkpoint's parts cost (``runtime.checkpoint_cost``); ``snapshot_work``: what a
        snapshot did (default: nothing to copy or upload); ``memory_threshold``: channel state at or above it is
        written to a file of its own (Flink's ``state.storage.fs.memory-threshold``)."""
        self.operator_id = operator_id
        self._cost = cost
        self._snapshot_work = snapshot_work or (lambda state: NO_WORK)
        self.memory_threshold = memory_threshold
        self._crash_points = crash_points
        self._snapshot_state = snapshot_state
        self._clock = clock
        self.partitions = list(partitions)
        if channel_state_writer is None:
            channel_state_writer = ChannelStateWriterImpl(subtask_index, task_name)
            channel_state_writer.open()
        self.channel_state_writer = channel_state_writer
        self._timer_service = timer_service
        self._operator = operator
        self.has_inputs = has_inputs
        self.async_completion = async_completion
        self.max_record_aborted_checkpoints = max_record_aborted_checkpoints
        self._sink = sink
        self._timer_actions: list[TaskCheckpointAction] = []
        self.task_name = task_name

        self.last_checkpoint_id = -1
        self.last_completed_checkpoint_id = -1
        self._aborted_checkpoint_ids: dict[int, None] = {}  # ordered set, oldest first
        self._pending: dict[int, AsyncCheckpointRunnable] = {}
        self._started_writes: set[int] = set()
        self._all_barriers_received: set[int] = set()
        # the alignment metrics as they stood when the last barrier arrived (Flink completes the metric
        # builder's alignment-duration future there): what the acknowledgement reports
        self._final_input_metrics: dict[int, CheckpointMetrics] = {}
        self._inputs_finished: set[int] = set()
        self._alignment_timer: tuple[int, Cancellable] | None = None

    # -- helpers ----------------------------------------------------------------------------------

    def _call_operator(self, name: str, *args: object) -> None:
        method = getattr(self._operator, name, None)
        if method is not None:
            method(*args)

    def _broadcast(
        self, event: ChannelElement, is_priority: bool
    ) -> tuple[BroadcastEvent, dict[ResultSubpartitionInfo, tuple[Buffer, ...]]]:
        overtaken: dict[ResultSubpartitionInfo, tuple[Buffer, ...]] = {}
        for partition in self.partitions:
            if not partition.is_finished:
                overtaken.update(partition.broadcast_event(event, is_priority))
        size = sum(b.size for bufs in overtaken.values() for b in bufs)
        return BroadcastEvent(event, is_priority, size), overtaken

    def _start_write(self, checkpoint_id: int, options: CheckpointOptions) -> None:
        if checkpoint_id not in self._started_writes:
            self._started_writes.add(checkpoint_id)
            self.channel_state_writer.start(checkpoint_id, options)
            if checkpoint_id in self._all_barriers_received:  # the input side completed before the start
                self._finish_input(checkpoint_id)

    def _forget_write(self, checkpoint_id: int) -> None:
        self._started_writes.discard(checkpoint_id)
        self._all_barriers_received.discard(checkpoint_id)
        self._inputs_finished.discard(checkpoint_id)

    def _finish_input(self, checkpoint_id: int) -> None:
        if checkpoint_id not in self._inputs_finished and not self.channel_state_writer_is_aborted(checkpoint_id):
            self._inputs_finished.add(checkpoint_id)
            self.channel_state_writer.finish_input(checkpoint_id)

    def _check_and_clear_aborted_status(self, checkpoint_id: int) -> bool:
        if checkpoint_id in self._aborted_checkpoint_ids:
            del self._aborted_checkpoint_ids[checkpoint_id]
            return True
        return False

    def _cancel_alignment_timer(self, checkpoint_id: int | None = None) -> None:
        if self._alignment_timer is not None and checkpoint_id in (None, self._alignment_timer[0]):
            self._alignment_timer[1].cancel()
            self._alignment_timer = None

    def _output_pending(self, checkpoint_id: int) -> bool:
        return any(p.has_pending_timeoutable_barrier(checkpoint_id) for p in self.partitions)

    # -- input side ----------------------------------------------------------------------------------

    def init_inputs_checkpoint(self, checkpoint_id: int, options: CheckpointOptions) -> list[TaskCheckpointAction]:
        """Flink's ``initInputsCheckpoint`` (the handler's ``InitInputsCheckpoint``): start the channel state
        write of an unaligned or timeoutable checkpoint before input data is added to it. Unlike Flink, a
        timeoutable checkpoint keeps its input side open until ``on_all_barriers_received``, so that a
        switch to unaligned on the input side can still persist input data."""
        if options.is_unaligned_checkpoint or options.is_timeoutable:
            self._start_write(checkpoint_id, options)
        return []

    def on_all_barriers_received(
        self, checkpoint_id: int, metrics: CheckpointMetrics | None = None
    ) -> list[TaskCheckpointAction]:
        """The barrier handler's ``AllBarriersReceived``: the input side of the channel state is complete, and
        ``metrics`` are the alignment's final figures (an unaligned checkpoint was triggered on its first
        barrier, before the alignment ended: Flink's alignment duration runs from the first barrier to the last)."""
        if metrics is not None and (checkpoint_id > self.last_checkpoint_id or checkpoint_id in self._pending):
            self._final_input_metrics[checkpoint_id] = metrics
            for old in [c for c in self._final_input_metrics if c < self.last_checkpoint_id and c not in self._pending]:
                del self._final_input_metrics[old]
        if checkpoint_id in self._started_writes:
            self._finish_input(checkpoint_id)
        elif checkpoint_id > self.last_checkpoint_id or checkpoint_id in self._pending:
            self._all_barriers_received.add(checkpoint_id)
            for old in [c for c in self._all_barriers_received if c < self.last_checkpoint_id]:
                self._all_barriers_received.discard(old)
        return self._try_complete(checkpoint_id)

    def channel_state_writer_is_aborted(self, checkpoint_id: int) -> bool:
        is_aborted = getattr(self.channel_state_writer, "is_aborted", None)
        return bool(is_aborted and is_aborted(checkpoint_id))

    # -- the steps ------------------------------------------------------------------------------------

    def checkpoint_state(
        self,
        checkpoint_id: int,
        timestamp: int,
        options: CheckpointOptions,
        input_metrics: CheckpointMetrics | None = None,
        *,
        is_task_finished: bool = False,
        is_running: bool = True,
    ) -> list[TaskCheckpointAction]:
        """Flink's ``checkpointState`` for the barrier of ``checkpoint_id`` created at ``timestamp``."""
        if self.last_checkpoint_id >= checkpoint_id:
            self.channel_state_writer.abort(checkpoint_id, CheckpointCancelled("out of order barrier"), True)
            self._forget_write(checkpoint_id)
            self._check_and_clear_aborted_status(checkpoint_id)
            return [CheckpointSkipped(checkpoint_id, SkipReason.OUT_OF_ORDER)]

        # Step (0)
        self.last_checkpoint_id = checkpoint_id
        if self._check_and_clear_aborted_status(checkpoint_id):
            cancel, _ = self._broadcast(CancelCheckpointMarker(checkpoint_id), False)
            self.channel_state_writer.abort(
                checkpoint_id, CheckpointCancelled("checkpoint aborted via notification"), True
            )
            self._forget_write(checkpoint_id)
            return [cancel, CheckpointSkipped(checkpoint_id, SkipReason.ABORTED_BEFORE_TRIGGER)]

        if options.alignment is AlignmentType.FORCED_ALIGNED:
            # a checkpoint forced aligned on a pointwise input may still overtake the output
            options = options.with_unaligned_supported()
            self.init_inputs_checkpoint(checkpoint_id, options)

        # Step (1)
        self._call_operator("prepare_snapshot_pre_barrier", checkpoint_id)
        if self._crash_points:  # a fault schedule's crash before_forwarding_barrier raises TaskCrashed here
            self._crash_points.reached(ProtocolPoint.BEFORE_FORWARDING_BARRIER, checkpoint_id)

        # Step (2)
        actions: list[TaskCheckpointAction] = []
        priority = options.is_unaligned_checkpoint or (  # FLINK-18252: a savepoint's barrier overtakes the output
            options.checkpoint_type.is_savepoint and is_planted(PlantedBug.SAVEPOINT_BARRIER_OVERTAKES_OUTPUT)
        )
        broadcast, overtaken = self._broadcast(CheckpointBarrier(checkpoint_id, timestamp, options), priority)
        actions.append(broadcast)
        if options.is_timeoutable:
            self._register_alignment_timer(checkpoint_id, timestamp + options.aligned_checkpoint_timeout)

        # Step (3)
        needs_channel_state = options.is_unaligned_checkpoint or options.is_timeoutable
        waiting_for_output = False
        if needs_channel_state:
            self._start_write(checkpoint_id, options)
            if not self.has_inputs:
                self._finish_input(checkpoint_id)
            for info, buffers in sorted(overtaken.items()):
                self.channel_state_writer.add_output_data(checkpoint_id, info, buffers[0].sequence_number, buffers)
            if options.is_unaligned_checkpoint or not self._output_pending(checkpoint_id):
                self.channel_state_writer.finish_output(checkpoint_id)
            else:
                waiting_for_output = True

        # Step (4): synchronous part
        if not is_running:
            return actions + self._cleanup(
                checkpoint_id, CheckpointFailureReason.CHECKPOINT_DECLINED_TASK_NOT_READY, "task not running"
            )
        start = self._clock()
        try:
            state = self._snapshot_state(checkpoint_id, options)
        except Exception as e:  # the operator's snapshot failed
            return actions + self._cleanup(checkpoint_id, CheckpointFailureReason.TASK_CHECKPOINT_FAILURE, repr(e))
        end = self._clock()
        work = self._snapshot_work(state)
        sync_charge = self._cost.sync_ms(work.copied_bytes)
        if sync_charge > 0:
            actions.append(SyncSnapshotTaken(checkpoint_id, sync_charge))
        channel_state = None
        if needs_channel_state:
            channel_state = self.channel_state_writer.get_and_remove_write_result(checkpoint_id)
        self._pending[checkpoint_id] = AsyncCheckpointRunnable(
            checkpoint_id,
            options,
            state,
            channel_state,
            input_metrics,
            end - start + sync_charge,
            end + sync_charge,
            is_task_finished,
            waiting_for_output,
        )
        # asynchronous part
        if self.async_completion is AsyncCompletion.DRIVER:
            delay = sync_charge + self._cost.async_ms(work.uploaded_bytes, work.files)
            actions.append(AsyncCheckpointStarted(checkpoint_id, state.state_size, AsyncPart.SNAPSHOT, delay))
            return actions + self._try_complete(checkpoint_id)  # a channel state already complete starts its write
        self._pending[checkpoint_id].async_done = True
        return actions + self._try_complete(checkpoint_id)

    def _cleanup(self, checkpoint_id: int, reason: CheckpointFailureReason, detail: str) -> list[TaskCheckpointAction]:
        self.channel_state_writer.abort(checkpoint_id, CheckpointException(reason, checkpoint_id, detail), True)
        self._forget_write(checkpoint_id)
        self._cancel_alignment_timer(checkpoint_id)
        return [DeclineCheckpoint(checkpoint_id, reason, detail)]

    # -- alignment timer (output side of timeoutable barriers) --------------------------------------------

    def _register_alignment_timer(self, checkpoint_id: int, at_ms: int) -> None:
        self._cancel_alignment_timer()
        if self._timer_service is None or not self.partitions:
            return
        handle = self._timer_service.register_timer(
            max(at_ms, self._clock()), lambda: self._emit(self.aligned_barrier_timeout(checkpoint_id))
        )
        self._alignment_timer = (checkpoint_id, handle)

    def _emit(self, actions: list[TaskCheckpointAction]) -> None:
        for action in actions:
            if self._sink is not None:
                self._sink(action)
            else:
                self._timer_actions.append(action)

    def drain_timer_actions(self) -> list[TaskCheckpointAction]:
        """Actions produced by timers since the last call (when no sink was injected)."""
        out, self._timer_actions = self._timer_actions, []
        return out

    def aligned_barrier_timeout(self, checkpoint_id: int) -> list[TaskCheckpointAction]:
        """Flink's ``alignedBarrierTimeout`` (the alignment timer fired): still queued barriers of
        ``checkpoint_id`` become unaligned and the data they overtake is output channel state."""
        if self._alignment_timer is not None and self._alignment_timer[0] == checkpoint_id:
            self._alignment_timer = None
        converted: dict[ResultSubpartitionInfo, tuple[Buffer, ...]] = {}
        for partition in self.partitions:
            converted.update(partition.aligned_barrier_timeout(checkpoint_id))
        if (
            converted
            and checkpoint_id in self._started_writes
            and not self.channel_state_writer_is_aborted(checkpoint_id)
        ):
            for info, buffers in sorted(converted.items()):
                if buffers:
                    self.channel_state_writer.add_output_data(checkpoint_id, info, buffers[0].sequence_number, buffers)
        return self.notify_output_progress()

    @property
    def waits_for_output(self) -> bool:
        """Whether a timeoutable barrier of a pending checkpoint is still queued in a partition."""
        for p in self._pending.values():  # (read after every send: a loop, no generator)
            if p.waiting_for_output:
                return True
        return False

    def notify_output_progress(self) -> list[TaskCheckpointAction]:
        """The driver sent elements from the partitions: a timeoutable barrier that left every partition
        finishes its checkpoint's output channel state (empty if it was sent aligned)."""
        actions: list[TaskCheckpointAction] = []
        for checkpoint_id in sorted(self._pending):
            actions += self._try_complete(checkpoint_id)
        return actions

    # -- completing the asynchronous part ---------------------------------------------------------------

    def complete_async_part(
        self, checkpoint_id: int, part: AsyncPart = AsyncPart.SNAPSHOT
    ) -> list[TaskCheckpointAction]:
        pending = self._pending.get(checkpoint_id)
        if pending is None:  # cancelled meanwhile (aborted): nothing to report
            return []
        pending.complete_part(part)
        return self._try_complete(checkpoint_id)

    def fail_async_part(self, checkpoint_id: int, cause: str = "") -> list[TaskCheckpointAction]:
        if self._pending.pop(checkpoint_id, None) is None:
            return []
        self._cancel_alignment_timer(checkpoint_id)
        return [DeclineCheckpoint(checkpoint_id, CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION, cause)]

    def _try_complete(self, checkpoint_id: int) -> list[TaskCheckpointAction]:
        p = self._pending.get(checkpoint_id)
        if p is None:
            return []
        if p.waiting_for_output and not self._output_pending(checkpoint_id):
            p.waiting_for_output = False
            self._cancel_alignment_timer(checkpoint_id)
            if not self.channel_state_writer_is_aborted(checkpoint_id):
                self.channel_state_writer.finish_output(checkpoint_id)
        if p.waiting_for_output:
            return []
        started: list[TaskCheckpointAction] = []
        if self.async_completion is AsyncCompletion.DRIVER:
            written = p.start_channel_state_write(self._cost, self.memory_threshold)
            if written is not None:
                started.append(written)
        if not p.is_done:
            return started
        del self._pending[checkpoint_id]
        self._forget_write(checkpoint_id)
        decline = p.failure()
        if decline is not None:
            return [decline]
        return [p.acknowledgement(self.operator_id, self._final_input_metrics.pop(checkpoint_id, None), self._clock())]

    # -- aborts and notifications ------------------------------------------------------------------------

    def abort_checkpoint_on_barrier(
        self, checkpoint_id: int, reason: CheckpointFailureReason
    ) -> list[TaskCheckpointAction]:
        """Flink's ``abortCheckpointOnBarrier``: decline, and tell downstream not to wait for our barrier.
        A running asynchronous part of the checkpoint (an unaligned checkpoint triggered on its first
        barrier) is dropped, so the checkpoint is declined once (Flink's runnable would fail later and
        decline again, which the coordinator ignores)."""
        self._pending.pop(checkpoint_id, None)
        self.last_checkpoint_id = max(self.last_checkpoint_id, checkpoint_id)
        for old in [c for c in self._aborted_checkpoint_ids if c < self.last_checkpoint_id]:
            del self._aborted_checkpoint_ids[old]
        self.channel_state_writer.abort(checkpoint_id, CheckpointException(reason, checkpoint_id), True)
        self._forget_write(checkpoint_id)
        self._cancel_alignment_timer(checkpoint_id)
        cancel, _ = self._broadcast(CancelCheckpointMarker(checkpoint_id), False)
        return [DeclineCheckpoint(checkpoint_id, reason), cancel]

    def notify_checkpoint_complete(self, checkpoint_id: int) -> list[TaskCheckpointAction]:
        self.last_completed_checkpoint_id = max(self.last_completed_checkpoint_id, checkpoint_id)
        self._call_operator("notify_checkpoint_complete", checkpoint_id)
        return []

    def notify_checkpoint_subsumed(self, checkpoint_id: int) -> list[TaskCheckpointAction]:
        self._call_operator("notify_checkpoint_subsumed", checkpoint_id)
        return []

    def notify_checkpoint_aborted(
        self, checkpoint_id: int, latest_completed_checkpoint_id: int = -1
    ) -> list[TaskCheckpointAction]:
        """Flink's ``notifyCheckpointAbortAsync`` + ``notifyCheckpointAborted``: first the completion of
        ``latest_completed_checkpoint_id`` (if any) is notified; then a running asynchronous part is
        cancelled, or a checkpoint this task has not started yet is remembered as aborted (so its barrier
        becomes a cancel marker)."""
        actions: list[TaskCheckpointAction] = []
        if latest_completed_checkpoint_id > 0:
            actions += self.notify_checkpoint_complete(latest_completed_checkpoint_id)
        cancelled = self._pending.pop(checkpoint_id, None) is not None
        if not cancelled and checkpoint_id > self.last_checkpoint_id:
            self._aborted_checkpoint_ids[checkpoint_id] = None
            if len(self._aborted_checkpoint_ids) > self.max_record_aborted_checkpoints:
                del self._aborted_checkpoint_ids[next(iter(self._aborted_checkpoint_ids))]
        self.channel_state_writer.abort(
            checkpoint_id, CheckpointCancelled("checkpoint aborted via notification"), False
        )
        self._cancel_alignment_timer(checkpoint_id)
        self._call_operator("notify_checkpoint_aborted", checkpoint_id)
        return actions

    # -- introspection (Flink's @VisibleForTesting getters) ---------------------------------------------

    @property
    def aborted_checkpoint_size(self) -> int:
        return len(self._aborted_checkpoint_ids)

    @property
    def async_checkpoint_runnable_size(self) -> int:
        return len(self._pending)

    def cancel(self) -> list[ReportIncompleteSnapshotStats]:
        """Flink's ``cancel`` (the task failed or is cancelled): running asynchronous parts are closed and the
        alignment timer is cancelled, so a dead task neither acknowledges nor converts barriers any more. Each
        closed part reports what it had (``AsyncCheckpointRunnable.close`` -> ``reportAbortedSnapshotStats``),
        in checkpoint order; a part is running from the end of its synchronous part to the acknowledgement."""
        self._cancel_alignment_timer()
        reports = [
            p.report_incomplete(self._final_input_metrics.get(p.checkpoint_id))
            for _, p in sorted(self._pending.items())
        ]
        self._pending.clear()
        return reports

    def close(self) -> None:
        self._cancel_alignment_timer()
        self._pending.clear()
        self.channel_state_writer.close()
