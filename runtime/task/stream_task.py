"""One subtask of a job, sans-IO, composed as Flink's ``StreamTask``: its input (a ``SourceInput``, or a
``StreamTaskNetworkInput`` over its input gates and barrier handler), its ``OperatorChain`` with the result partitions,
its checkpoint steps (``SubtaskCheckpointCoordinator``, driven by ``TaskCheckpointing``), its restore
(``TaskRestore``) and the end of its data (``TaskEndOfData``). The driver (the simulator or a Ray actor) hands it what
arrives (``on_element``, ``on_credit``, ..., the coordinator's RPCs), asks it for one unit of work (``process_next``),
and collects what its partitions may send (``poll_sendable``) and its messages for others (``drain_actions``). See
``docs/architecture.md``, "The data plane".
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from barriersim.runtime.checkpoint_cost import FREE, CostCharger
from barriersim.runtime.checkpointing.api import GateSpec, InputSide
from barriersim.runtime.checkpointing.barrier_handler import GATE_ACTION_TYPES
from barriersim.runtime.checkpointing_mode import CheckpointingMode
from barriersim.runtime.events import (
    CheckpointOptions,
    CheckpointType,
    InputChannelInfo,
    ResultSubpartitionInfo,
)
from barriersim.runtime.faults.fault_schedule import ProtocolPoint
from barriersim.runtime.faults.mutations import PlantedBug, is_planted
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.jobgraph import JobGraph
from barriersim.runtime.network.config import NetworkConfig
from barriersim.runtime.network.input.input_channel import UPSTREAM_MESSAGES
from barriersim.runtime.network.output.subpartition import BufferAndBacklog
from barriersim.runtime.operators.factory import create_operator
from barriersim.runtime.operators.sinks import SinkStore
from barriersim.runtime.state.backend import StateBackendConfig
from barriersim.runtime.state.snapshot import TaskStateSnapshot
from barriersim.runtime.task.actions import (
    AsyncPart,
    ReportIncompleteSnapshotStats,
    TaskFailed,
    TaskFinished,
)
from barriersim.runtime.task.crash_points import CrashedAtProtocolPoint, CrashPoints, TaskCrashed
from barriersim.runtime.task.end_of_data import TaskEndOfData
from barriersim.runtime.task.network_input import StreamTaskNetworkInput
from barriersim.runtime.task.operator_chain import OperatorChain
from barriersim.runtime.task.record_writers import RecordWriters
from barriersim.runtime.task.result_partition_factory import result_partitions
from barriersim.runtime.task.source_input import UNPACED_SOURCE_BATCH_RECORDS, SourceInput
from barriersim.runtime.task.step_result import StepOutcome, StepResult
from barriersim.runtime.task.subtask_checkpoint_coordinator import AsyncCompletion, SubtaskCheckpointCoordinator
from barriersim.runtime.task.task_checkpointing import TaskCheckpointing
from barriersim.runtime.task.task_restore import TaskRestore

if TYPE_CHECKING:
    from barriersim.runtime.event_timers import Cancellable, TimerService
    from barriersim.runtime.events import ChannelElement
    from barriersim.runtime.operators.source import SplitSourceReader
    from barriersim.runtime.record_batch import RecordsLike
    from barriersim.runtime.state.snapshot import OperatorSubtaskState
    from barriersim.runtime.task.end_of_data import TaskInput

    class _SourceOperator(Protocol):
        """A source task's operator (``is_source``), which reads through its split reader."""

        reader: SplitSourceReader


__all__ = ["StepOutcome", "StepResult", "StreamTask", "UNPACED_SOURCE_BATCH_RECORDS"]

_IDLE = StepResult(StepOutcome.IDLE)
_BACKPRESSURED = StepResult(StepOutcome.BACKPRESSURED)


class _WakingTimers:
    """The driver's timer service, calling ``wakeup`` after each of the task's timers fired; a timer that
    runs into a crash point (an alignment timeout checkpointing) hands the crash to ``on_crash``."""

    def __init__(
        self, timer_service: TimerService, wakeup: Callable[[], None], on_crash: Callable[[TaskCrashed], None]
    ) -> None:
        self._timers = timer_service
        self._wakeup = wakeup
        self._on_crash = on_crash

    def register_timer(self, at_ms: int, callback: Callable[[], None]) -> Cancellable:
        def fire() -> None:
            try:
                callback()
            except TaskCrashed as crash:
                self._on_crash(crash)
            self._wakeup()

        return self._timers.register_timer(at_ms, fire)


def checkpointed_input_side(
    gates: Sequence[GateSpec],
    mode: CheckpointingMode,
    clock: Callable[[], int],
    timers: _WakingTimers,
    task_name: str,
    network: NetworkConfig,
    checkpoints_after_tasks_finish: bool,
    sink: Callable[[Any], None],
) -> InputSide:
    """A subtask's input gates with their barrier handler, whose actions go to ``sink`` (Flink's
    ``InputProcessorUtil.createCheckpointedMultipleInputGate``)."""
    return InputSide(
        gates,
        mode,
        clock,
        timers,
        task_name=task_name,
        enable_checkpoint_after_tasks_finished=checkpoints_after_tasks_finish,
        exclusive_buffers_per_channel=network.exclusive_buffers_per_channel,
        floating_buffers_per_gate=network.floating_buffers_per_gate,
        sink=sink,
        buffer_debloat=network.debloat_configuration(),
        max_buffer_size=network.buffer_size,
        keep_history=False,
    )


class StreamTask:
    def __init__(
        self,
        graph: JobGraph,
        vertex_name: str,
        subtask_index: int,
        attempt_id: ExecutionAttemptID,
        *,
        mode: CheckpointingMode,
        clock: Callable[[], int],
        timer_service: TimerService,
        rng: random.Random,
        wakeup: Callable[[], None] = lambda: None,
        network: NetworkConfig = NetworkConfig(),
        split: RecordsLike = (),
        splits: Mapping[int, RecordsLike] | None = None,
        store: SinkStore | None = None,
        emit_watermarks: bool = False,
        checkpoints_after_tasks_finish: bool = True,
        crash_points: Iterable[tuple[ProtocolPoint, int]] = (),
        input_channel_kinds: Sequence[Sequence[str]] | None = None,
        local_subpartitions: Sequence[Sequence[bool]] | None = None,
        cost: CostCharger | None = None,
        memory_threshold: int = 20 * 1024,
        state_backend: StateBackendConfig = StateBackendConfig(),
        source_min_checkpoints: int = 0,
        source_batch_records: int | None = None,
    ):
        """``input_channel_kinds``: per input gate, ``"local"`` or ``"remote"`` per channel (default every channel
        remote); ``local_subpartitions``: per output edge, whether each subpartition's consumer reads it through a
        local channel (default: none). ``cost``: what checkpoints cost (``runtime.checkpoint_cost``); with one, the
        driver completes the asynchronous parts (``AsyncCheckpointStarted``, then ``complete_async_part``), without
        one they cost nothing. ``memory_threshold``: state streams at or above it are files of their own.
        ``source_min_checkpoints``: a source at the end of its splits holds its end of input until it was notified
        of that many completed checkpoints (Flink's ``UnalignedCheckpointTestBase.LongSource``; ``docs/
        architecture.md``). ``source_batch_records``: records a source reads per step, at most
        (``JobConfig.source_batch_records``; None: ``UNPACED_SOURCE_BATCH_RECORDS``)."""
        self.graph = graph
        self.vertex = graph.vertex(vertex_name)
        self.subtask_index = subtask_index
        self.attempt_id = attempt_id
        self.name = f"{vertex_name}#{subtask_index}"
        self._clock = clock
        self._actions: list[Any] = []
        self.finished = False
        self.failed = False
        self._crash_points = CrashPoints(self.name, crash_points)
        self._crash_mid_alignment = self._crash_points.is_armed(ProtocolPoint.MID_ALIGNMENT)
        timers = self._timers = _WakingTimers(timer_service, wakeup, self._crashed)
        self.operator = create_operator(
            self.vertex,
            subtask_index,
            split=split,
            splits=splits,
            store=store,
            attempt=attempt_id.attempt_number,
            state_backend=state_backend,
            memory_threshold=memory_threshold,
            rng=rng,
        )

        output_edges = graph.outputs_of(vertex_name)
        self.partitions = result_partitions(graph, output_edges, subtask_index, network, local_subpartitions)
        self._only_partition = self.partitions[0] if len(self.partitions) == 1 else None  # (``poll_sendable``)
        # the bytes of each record this task emits: its vertex's output record size, else the network's
        record_size = self.vertex.params.get("record_size") or network.record_size
        self.record_writers = RecordWriters(graph, output_edges, self.partitions, record_size, rng)
        self._chain = OperatorChain(
            self.operator,
            self.partitions,
            self.record_writers,
            hot_key=self.vertex.params.get("hot_key", -1),
            memory_threshold=memory_threshold,
        )

        self._deployed_as_finished = False
        # the task's input: a source's splits, or its input gates with their barrier handler
        self.input_side: InputSide | None = None
        self._source: SourceInput | None = None
        self._network_input: StreamTaskNetworkInput | None = None
        if self.operator.is_source:
            self._source = SourceInput(
                cast("_SourceOperator", self.operator).reader,
                self._chain,
                self.record_writers,
                batch_records=source_batch_records,
                emit_watermarks=emit_watermarks,
            )
        else:
            gates = (
                input_channel_kinds
                if input_channel_kinds is not None
                else [
                    len(graph.channels_in_gate(vertex_name, g, subtask_index))
                    for g in range(len(graph.gates_of(vertex_name)))
                ]
            )
            self.input_side = checkpointed_input_side(
                gates, mode, clock, timers, self.name, network, checkpoints_after_tasks_finish, self._on_input_action
            )
            # a two-input operator (the window join) is told which logical input each buffer came from
            input_of_gate = (
                [edge.target_input for edge in graph.gates_of(vertex_name)]
                if self.vertex.operator.logical_inputs == 2
                else None
            )
            self._network_input = StreamTaskNetworkInput(
                self.input_side,
                self._chain,
                task_name=self.name,
                input_of_gate=input_of_gate,
                upstream=self._send,
                end_of_data=self._on_input_data_ended,
                end_of_input=self._finish,
            )
        # buffer debloating starts once the task runs (its first step), as Flink's invoke() schedules it after
        # the restore: announcements must not reach upstream tasks that are still being deployed
        self._debloat_period_ms = (
            network.buffer_debloat_period_ms if (network.buffer_debloat and self.input_side is not None) else 0
        )
        checkpoints = self.checkpoints = SubtaskCheckpointCoordinator(
            operator_id=vertex_name,
            snapshot_state=lambda checkpoint_id, options: self._snapshot(checkpoint_id, options.checkpoint_type),
            clock=clock,
            partitions=self.partitions,
            timer_service=timers,
            has_inputs=not self.operator.is_source,
            sink=lambda action: self._checkpointing.carry_out([action]),
            task_name=self.name,
            subtask_index=subtask_index,
            crash_points=self._crash_points,
            async_completion=AsyncCompletion.IMMEDIATE if cost is None else AsyncCompletion.DRIVER,
            cost=cost or FREE,
            snapshot_work=self._chain.snapshot_work,
            memory_threshold=memory_threshold,
        )
        end = self._end = TaskEndOfData(
            self._chain,
            cast("TaskInput", self._source or self._network_input),
            self.checkpoints,
            checkpoints_after_tasks_finish=checkpoints_after_tasks_finish,
            end_partitions=self._end_partitions,
        )
        self._checkpointing = TaskCheckpointing(
            checkpoints, end, self.operator, self._network_input, self.name, clock, self._send, source_min_checkpoints
        )
        self._restore = TaskRestore(
            self.vertex, graph.gates_of(vertex_name), subtask_index, self.operator, self.partitions, self._network_input
        )

    def restore(self, snapshot: TaskStateSnapshot | None) -> dict[str, int]:
        """Load the operator state and re-inject in-flight data (channel state) before any new data
        (``TaskRestore``); the bytes of recovered input and output."""
        restored = self._restore.restore(snapshot)
        if restored.deployed_as_finished:
            self._deployed_as_finished = True
        return {"input_bytes": restored.input_bytes, "output_bytes": restored.output_bytes}

    @property
    def deployed_as_finished(self) -> bool:
        """Restored from a snapshot in which this task had finished (FLIP-147): it finishes at its first step."""
        return self._deployed_as_finished

    def _snapshot(self, checkpoint_id: int, checkpoint_type: CheckpointType) -> OperatorSubtaskState:
        if self.operator.is_source and is_planted(PlantedBug.SOURCE_SNAPSHOT_AFTER_BARRIER):
            self._read_source()  # the historical bug: records go out behind the barrier before the offset is taken
        return self._chain.snapshot_state(checkpoint_id, checkpoint_type)

    # -- inputs from the driver ----------------------------------------------------------------------

    # A failed task is a dead process: what still reaches it (data, credit, resume, notifications) is dropped,
    # as Flink drops network messages for released channels and readers and ignores checkpoint notifications
    # for a task that is not running (``Task.notifyCheckpoint``).

    def on_element(
        self, channel: InputChannelInfo, element: ChannelElement, sequence_number: int, backlog: int | None
    ) -> None:
        if self.failed:
            return
        network_input = self._network_input
        assert network_input is not None  # (not ``cast``, a call per element) a task with input channels
        try:
            network_input.on_element(channel, element, sequence_number, backlog)
            if self._crash_mid_alignment:
                self._check_mid_alignment()
        except TaskCrashed as crash:
            self._crashed(crash)

    def on_credit(self, info: ResultSubpartitionInfo, credit: int) -> None:
        if self.failed:
            return
        self.partitions[info.partition_idx].add_credit(info, credit)

    def on_new_buffer_size(self, info: ResultSubpartitionInfo, buffer_size: int) -> None:
        """The consumer's debloated buffer size for subpartition ``info`` (``AnnounceBufferSize``)."""
        if self.failed:
            return
        self.partitions[info.partition_idx].set_buffer_size(info, buffer_size)

    def on_resume_consumption(self, info: ResultSubpartitionInfo) -> None:
        if self.failed:
            return
        self.partitions[info.partition_idx].resume_consumption(info)

    def on_all_records_processed(self, info: ResultSubpartitionInfo) -> None:
        """The consumer of subpartition ``info`` processed all its records (``AcknowledgeAllRecordsProcessed``)."""
        if self.failed:
            return
        self.partitions[info.partition_idx].on_subpartition_all_data_processed(info)
        self._end.finish_after_final_checkpoint()

    def fail(self) -> list[ReportIncompleteSnapshotStats]:
        """The task dies (failover) and releases what it holds, as Flink's ``Task.releaseResources``: external
        transactions aborted, result partitions released (nothing they queue is sent), input gates and barrier
        handler closed, checkpoint steps cancelled. Returns what the closed asynchronous parts report (for the
        JobMaster's ``report_incomplete_snapshot_stats``; nothing the second time, nothing for a task that had
        finished). Idempotent."""
        if self.failed:
            return []
        was_finished = self.finished
        self._chain.close_on_failover()
        self.failed = True
        self.finished = True
        if self.input_side is not None:
            self.input_side.close()
        reports = self.checkpoints.cancel()
        return [] if was_finished else reports  # a finished task is not cancelled (Flink's FINISHED is final)

    # -- work ----------------------------------------------------------------------------------------

    def is_backpressured(self) -> bool:
        for p in self.partitions:  # (a loop, not ``any`` over a generator: asked at every step)
            if p.is_backpressured():
                return True
        return False

    def process_next(self, source_records: int | None = None) -> StepResult:
        """One unit of work: one input buffer or event, or one batch read from the source split (``source_records``
        records at most, if given: the records a paced source's driver says are due; else the configured batch)."""
        try:
            if self._debloat_period_ms:
                self._schedule_debloat(self._debloat_period_ms)
                self._debloat_period_ms = 0
            result = self._process_next(source_records)
            if self._crash_mid_alignment and not self.failed:
                self._check_mid_alignment()
            return result
        except TaskCrashed as crash:
            self._crashed(crash)
            return StepResult(StepOutcome.FINISHED)

    def _process_next(self, source_records: int | None = None) -> StepResult:
        if self.finished:
            return StepResult(StepOutcome.FINISHED)
        if self._deployed_as_finished:
            self._end_partitions()
            return StepResult(StepOutcome.FINISHED)
        if self.input_side is not None:
            self.input_side.release_processed()  # the previous step processed its buffer, whatever comes next
        end = self._end
        if end.final_checkpoint_min_id is not None and (end.mode is None or self._source is not None):
            return _IDLE  # data ended; waiting for the final checkpoint
        if self.is_backpressured():
            return _BACKPRESSURED
        network_input = self._network_input
        if network_input is None:  # a source
            return self._read_source(source_records)
        return network_input.emit_next()

    def reads_source(self) -> bool:
        """Whether this is a source task whose next step reads records: it runs, its data did not end (a stop
        with a drained savepoint ends it) and its reader has records left."""
        return (
            self.operator.is_source
            and not self.finished
            and not self._deployed_as_finished
            and self._end.final_checkpoint_min_id is None
            and not cast("_SourceOperator", self.operator).reader.is_finished
        )

    def is_source(self) -> bool:
        return self.operator.is_source

    def checkpointed_input(self) -> InputSide | None:
        """The task's input gates with their barrier handler (None for a source), e.g. to watch its alignments."""
        return self.input_side

    def source_records_read(self) -> int | None:
        """How far a source's reader got (its split offsets, in records); None for a task that is not a source."""
        return cast("_SourceOperator", self.operator).reader.records_read if self.operator.is_source else None

    def source_input_ended(self) -> bool:
        """Whether this is a source task whose reader has no records left."""
        return self.operator.is_source and cast("_SourceOperator", self.operator).reader.is_finished

    def source_records_until_buffer_finishes(self, max_records: int) -> int:
        """``SourceInput.records_until_buffer_finishes``: of the source's next records, how many until the one that
        finishes a buffer of one of its outputs (``max_records`` at most)."""
        return cast(SourceInput, self._source).records_until_buffer_finishes(max_records)

    def _read_source(self, max_records: int | None = None) -> StepResult:
        """Up to ``max_records`` records (else the configured batch) of the source's splits, written to its outputs;
        at the end of its splits, the end of input (held until ``source_min_checkpoints`` completed)."""
        if cast("_SourceOperator", self.operator).reader.is_finished:
            if self._checkpointing.holds_source_end():
                return StepResult(StepOutcome.IDLE)  # the end of input waits for a completed checkpoint's notice
            self._finish()
            return StepResult(StepOutcome.IDLE if not self.finished else StepOutcome.FINISHED)
        return cast(SourceInput, self._source).emit_next(max_records)

    def flush_outputs(self) -> None:
        """Flink's output flusher (``execution.buffer-timeout``, 100 ms by default) finishing open buffers."""
        self._chain.flush_outputs()

    def _schedule_debloat(self, period_ms: int) -> None:
        """Flink's ``scheduleBufferDebloater``: every period, each input gate recalculates its buffer size and
        announces a changed one upstream (``AnnounceBufferSize`` actions)."""

        def debloat() -> None:
            if self.failed or self.finished:
                return
            cast(InputSide, self.input_side).trigger_debloating()
            self._schedule_debloat(period_ms)

        self._timers.register_timer(self._clock() + period_ms, debloat)

    # -- outputs to the driver -----------------------------------------------------------------------

    def poll_sendable(self) -> list[tuple[ResultSubpartitionInfo, BufferAndBacklog]]:
        """What the partitions may send now. A timeoutable aligned barrier that just left its last partition
        finishes its checkpoint's output side at once, as Flink's ``PipelinedSubpartition.pollBuffer`` does
        (``completeTimeoutableCheckpointBarrier``): the acknowledgement does not wait for the alignment timer."""
        only = self._only_partition
        if only is not None:
            out = only.poll_sendable()
        else:
            out = [x for p in self.partitions for x in p.poll_sendable()]
        if out:
            self._checkpointing.notify_output_progress()
        return out

    def _send(self, action: Any) -> None:
        self._actions.append(action)

    def drain_actions(self) -> list[Any]:
        actions, self._actions = self._actions, []
        return actions

    # -- the coordinator's checkpoint RPCs ----------------------------------------------------------------

    def trigger_checkpoint(self, checkpoint_id: int, timestamp: int, options: CheckpointOptions) -> None:
        """A checkpoint triggered by the coordinator (Flink's ``triggerCheckpointAsync``; ``TaskCheckpointing``)."""
        try:
            if self._checkpointing.trigger(checkpoint_id, timestamp, options, task_finished=self.finished):
                if self._crash_mid_alignment:
                    self._check_mid_alignment()
        except TaskCrashed as crash:
            self._crashed(crash)

    def complete_async_part(self, checkpoint_id: int, part: AsyncPart = AsyncPart.SNAPSHOT) -> None:
        """The driver finished ``part`` of ``checkpoint_id`` (an ``AsyncCheckpointStarted`` it was given): the
        acknowledgement may follow. Nothing happens for a task that failed meanwhile."""
        if self.failed:
            return
        self._checkpointing.complete_async_part(checkpoint_id, part)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        if self.failed:
            return
        self._checkpointing.notify_checkpoint_complete(checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int, latest_completed_checkpoint_id: int) -> None:
        if self.failed:
            return
        if self._checkpointing.notify_checkpoint_aborted(checkpoint_id, latest_completed_checkpoint_id):
            # Flink's StreamTask: a task that stopped for a synchronous savepoint cannot go on without it
            self._actions.extend(self.fail())  # Flink's failing task closes its asynchronous parts too
            self._actions.append(
                TaskFailed(f"{self.name}: Stop-with-savepoint failed (savepoint {checkpoint_id} was aborted)")
            )

    def _on_input_action(self, action: Any) -> None:
        if type(action) in GATE_ACTION_TYPES:
            return  # applied by the input side already (see the end)
        if isinstance(action, UPSTREAM_MESSAGES):
            self._actions.append(action)  # credits and announcements for upstream tasks, from the gates' setup on
        else:
            self._checkpointing.on_input_action(action)

    # -- the end of the task's data and its finishing (``TaskEndOfData``) ---------------------------------

    def _on_input_data_ended(self) -> None:
        self._end.on_input_data_ended()

    def _finish(self) -> None:
        """End of all input (``TaskEndOfData.end_of_input``), unless the task finished."""
        if not self.finished:
            self._end.end_of_input()

    def _end_partitions(self) -> None:
        if self.finished:
            return
        self._chain.finish_partitions()
        self.finished = True
        self._actions.append(TaskFinished(self.attempt_id))

    def lifecycle_report(self) -> dict[str, Any]:
        """Where the task stands on its way to finishing, for a driver's report of a job that did not end in time:
        its data ended (``END_OF_DATA``, how), its latest checkpoint and whether its final one completed, its
        input channels that ended (``END_OF_INPUT`` once all did), its partitions whose consumers processed
        all its data, and how many completed checkpoints it was notified of (what a source holding its end for
        ``source_min_checkpoints`` counts)."""
        ended_channels = channels = 0
        if self.input_side is not None:
            channels = len(self.input_side.channel_infos())
            ended_channels = channels - len(self.input_side.unfinished_channels())
        return {
            "finished": self.finished,
            "failed": self.failed,
            "data_ended": None if self._end.mode is None else self._end.mode.name,
            "latest_checkpoint_id": self.checkpoints.last_checkpoint_id,
            "final_checkpoint_completed": self._end.final_checkpoint_completed,
            "input_channels_ended": f"{ended_channels}/{channels}",
            "partitions_all_data_processed": f"{sum(p.all_data_processed for p in self.partitions)}/"
            f"{len(self.partitions)}",
            "completed_checkpoints_notified": self._checkpointing.completed_checkpoints_notified,
        }

    # -- crash points of the fault schedule (runtime.task.crash_points) ------------------------------------

    def _check_mid_alignment(self) -> None:
        if self.input_side is None:
            return  # a source has no alignment (FaultSchedule.check_against refuses such a fault)
        checkpoint_id = self.input_side.alignment_checkpoint_id()
        if checkpoint_id is not None:
            self._crash_points.reached(ProtocolPoint.MID_ALIGNMENT, checkpoint_id)

    def _crashed(self, crash: TaskCrashed) -> None:
        """The task stopped at a crash point: it dies as a process dies (nothing it queued is sent, nothing
        that arrives is taken) and tells its driver, which fails the job over."""
        self.fail()  # a dead process reports no closed asynchronous part
        self._actions.append(CrashedAtProtocolPoint(crash.point, crash.checkpoint_id))
