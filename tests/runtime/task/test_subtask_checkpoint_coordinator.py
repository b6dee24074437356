"""Ports of Flink's SubtaskCheckpointCoordinatorTest and tests of the task's checkpoint steps.

Flink's mocks become: a recording operator (prepare/snapshot/notify callbacks), real result partitions
(what is broadcast is read back from them), the real channel state writer, a manual clock and a manual
timer service. Flink's "async checkpoint runnable" is the pending asynchronous part
(``AsyncCompletion.DRIVER``).
"""

import pytest

from barriersim.runtime.channel_state.writer import ChannelStateWriterImpl
from barriersim.runtime.checkpointing.barrier_handler import CheckpointMetrics
from barriersim.runtime.events import (
    Buffer,
    CancelCheckpointMarker,
    CheckpointBarrier,
    CheckpointOptions,
    CheckpointType,
    InputChannelInfo,
    ResultSubpartitionInfo,
)
from barriersim.runtime.failure_reason import CheckpointFailureReason
from barriersim.runtime.network.output.result_partition import ResultPartition
from barriersim.runtime.state.snapshot import OperatorStateHandle, OperatorSubtaskState
from barriersim.runtime.task.actions import (
    UNSET,
    AcknowledgeCheckpoint,
    AsyncCheckpointStarted,
    BroadcastEvent,
    CheckpointSkipped,
    DeclineCheckpoint,
    ReportIncompleteSnapshotStats,
    SkipReason,
)
from barriersim.runtime.task.subtask_checkpoint_coordinator import AsyncCompletion, SubtaskCheckpointCoordinator

STATE = OperatorSubtaskState(managed_operator_state=(OperatorStateHandle({"s": (b"abcd",)}),))


class _Clock:
    def __init__(self):
        self.now = 1_000

    def __call__(self):
        return self.now


class _Timers:
    def __init__(self):
        self.timers = []

    def register_timer(self, at_ms, callback):
        timers = self.timers

        class _Handle:
            def cancel(self_inner):
                if entry in timers:
                    timers.remove(entry)

        entry = (at_ms, callback)
        timers.append(entry)
        return _Handle()

    def fire_until(self, now):
        for entry in sorted(self.timers, key=lambda e: e[0]):
            if entry[0] <= now and entry in self.timers:
                self.timers.remove(entry)
                entry[1]()


class _Operator:
    def __init__(self, clock=None, sync_cost_ms=0, fail=False):
        self.calls = []
        self.clock = clock
        self.sync_cost_ms = sync_cost_ms
        self.fail = fail

    def prepare_snapshot_pre_barrier(self, cid):
        self.calls.append(("prepare", cid))

    def snapshot(self, cid, options):
        self.calls.append(("snapshot", cid))
        if self.fail:
            raise RuntimeError("state backend broke")
        if self.clock:
            self.clock.now += self.sync_cost_ms
        return STATE

    def notify_checkpoint_complete(self, cid):
        self.calls.append(("complete", cid))

    def notify_checkpoint_aborted(self, cid):
        self.calls.append(("aborted", cid))

    def notify_checkpoint_subsumed(self, cid):
        self.calls.append(("subsumed", cid))

    @property
    def checkpointed(self):
        return any(c[0] == "snapshot" for c in self.calls)


def _coordinator(
    *,
    partitions=(),
    writer=None,
    async_completion=AsyncCompletion.IMMEDIATE,
    operator=None,
    clock=None,
    timers=None,
    has_inputs=True,
    max_aborted=128,
):
    clock = clock or _Clock()
    operator = operator or _Operator(clock)
    return SubtaskCheckpointCoordinator(
        operator_id="op",
        snapshot_state=operator.snapshot,
        clock=clock,
        partitions=partitions,
        channel_state_writer=writer,
        timer_service=timers,
        operator=operator,
        has_inputs=has_inputs,
        async_completion=async_completion,
        max_record_aborted_checkpoints=max_aborted,
    ), operator


def _drain(partition):
    out = []
    for info in partition.subpartition_infos:
        partition.add_credit(info, 100)
        while (n := partition.poll_next(info)) is not None:
            out.append((info, n.element))
    return out


class _RecordingWriter(ChannelStateWriterImpl):
    def __init__(self):
        super().__init__()
        self.started = []
        self.open()

    def start(self, checkpoint_id, options):
        self.started.append(checkpoint_id)
        return super().start(checkpoint_id, options)


# -- ports -------------------------------------------------------------------------------------------


def test_init_checkpoint():
    """Port of Flink SubtaskCheckpointCoordinatorTest.testInitCheckpoint."""

    def started(options):
        w = _RecordingWriter()
        c, _ = _coordinator(writer=w)
        c.init_inputs_checkpoint(1, options)
        return bool(w.started)

    assert started(CheckpointOptions.unaligned(CheckpointType.CHECKPOINT))
    assert not started(CheckpointOptions.aligned(CheckpointType.CHECKPOINT))
    assert not started(CheckpointOptions.aligned(CheckpointType.SAVEPOINT))


def test_notify_checkpoint_complete():
    """Port of Flink SubtaskCheckpointCoordinatorTest.testNotifyCheckpointComplete."""
    c, op = _coordinator()
    c.notify_checkpoint_complete(42)
    assert c.last_completed_checkpoint_id == 42 and ("complete", 42) in op.calls
    c.notify_checkpoint_complete(43)
    assert c.last_completed_checkpoint_id == 43


def test_savepoint_not_resulting_in_priority_events():
    """Port of Flink SubtaskCheckpointCoordinatorTest.testSavepointNotResultingInPriorityEvents."""
    part = ResultPartition(0, 1)
    c, _ = _coordinator(partitions=[part])
    actions = c.checkpoint_state(0, 0, CheckpointOptions.aligned(CheckpointType.SAVEPOINT))
    broadcast = [a for a in actions if isinstance(a, BroadcastEvent)]
    assert len(broadcast) == 1 and broadcast[0].is_priority_event is False


def test_force_aligned_checkpoint_resulting_in_priority_events():
    """Port of Flink SubtaskCheckpointCoordinatorTest.testForceAlignedCheckpointResultingInPriorityEvents."""
    part = ResultPartition(0, 1)
    part.emit_record("x", 0, 500)
    c, _ = _coordinator(partitions=[part])
    forced = CheckpointOptions.unaligned().with_unaligned_unsupported()
    actions = c.checkpoint_state(42, 0, forced)
    assert actions[0].is_priority_event is True and actions[0].overtaken_bytes == 500
    (ack,) = c.on_all_barriers_received(42)
    # Flink counts a persisted buffer as the channel-state file holds it: a 4-byte length and its bytes
    assert isinstance(ack, AcknowledgeCheckpoint) and ack.metrics.persisted_output_bytes == 4 + 500


def test_skip_channel_state_for_savepoints():
    """Port of Flink SubtaskCheckpointCoordinatorTest.testSkipChannelStateForSavepoints."""
    w = _RecordingWriter()
    c, _ = _coordinator(writer=w)
    actions = c.checkpoint_state(0, 0, CheckpointOptions.aligned(CheckpointType.SAVEPOINT))
    assert w.started == []
    assert isinstance(actions[-1], AcknowledgeCheckpoint)


def test_notify_checkpoint_subsumed():
    """Port of Flink SubtaskCheckpointCoordinatorTest.testNotifyCheckpointSubsumed."""
    c, op = _coordinator()
    c.checkpoint_state(42, 0, CheckpointOptions.for_checkpoint_with_default_location())
    c.notify_checkpoint_subsumed(43)
    assert op.calls[-1] == ("subsumed", 43)


def test_notify_checkpoint_aborted_many_times():
    """Port of Flink SubtaskCheckpointCoordinatorTest.testNotifyCheckpointAbortedManyTimes."""
    max_record = 256
    c, _ = _coordinator(max_aborted=max_record)
    for i in range(1, max_record + 42):
        c.notify_checkpoint_aborted(i)
        assert c.aborted_checkpoint_size == min(max_record, i)


def test_notify_checkpoint_aborted_before_async_phase():
    """Port of Flink SubtaskCheckpointCoordinatorTest.testNotifyCheckpointAbortedBeforeAsyncPhase."""
    c, op = _coordinator(async_completion=AsyncCompletion.DRIVER)
    c.notify_checkpoint_aborted(42)
    assert c.aborted_checkpoint_size == 1
    actions = c.checkpoint_state(42, 0, CheckpointOptions.for_checkpoint_with_default_location())
    assert not op.checkpointed
    assert not any(isinstance(a, (AcknowledgeCheckpoint, AsyncCheckpointStarted)) for a in actions)
    assert c.aborted_checkpoint_size == 0
    assert c.async_checkpoint_runnable_size == 0


def test_broadcast_cancel_checkpoint_marker_on_aborting_from_coordinator():
    """Port of Flink SubtaskCheckpointCoordinatorTest.testBroadcastCancelCheckpointMarkerOnAbortingFromCoordinator."""
    part = ResultPartition(0, 1)
    c, _ = _coordinator(partitions=[part])
    c.notify_checkpoint_aborted(42)
    actions = c.checkpoint_state(42, 0, CheckpointOptions.for_checkpoint_with_default_location())
    assert actions == [
        BroadcastEvent(CancelCheckpointMarker(42)),
        CheckpointSkipped(42, SkipReason.ABORTED_BEFORE_TRIGGER),
    ]
    assert [e for _, e in _drain(part)] == [CancelCheckpointMarker(42)]


def test_notify_checkpoint_aborted_during_async_phase():
    """Port of Flink SubtaskCheckpointCoordinatorTest.testNotifyCheckpointAbortedDuringAsyncPhase."""
    c, _ = _coordinator(async_completion=AsyncCompletion.DRIVER)
    actions = c.checkpoint_state(42, 0, CheckpointOptions.for_checkpoint_with_default_location())
    assert isinstance(actions[-1], AsyncCheckpointStarted)
    assert c.async_checkpoint_runnable_size == 1
    c.notify_checkpoint_aborted(42)
    assert c.async_checkpoint_runnable_size == 0
    assert c.complete_async_part(42) == []  # cancelled: nothing is reported


def test_notify_checkpoint_aborted_after_async_phase():
    """Port of Flink SubtaskCheckpointCoordinatorTest.testNotifyCheckpointAbortedAfterAsyncPhase."""
    c, op = _coordinator()
    c.checkpoint_state(42, 0, CheckpointOptions.for_checkpoint_with_default_location())
    c.notify_checkpoint_aborted(42)
    assert c.aborted_checkpoint_size == 0
    assert op.calls[-1] == ("aborted", 42)


def test_timeoutable_aligned_barrier_not_priority_and_channel_state_result():
    """Port of Flink SubtaskCheckpointCoordinatorTest.testTimeoutableAlignedBarrierNotPriorityAndChannelStateResult."""
    part = ResultPartition(0, 1)
    w = _RecordingWriter()
    c, _ = _coordinator(partitions=[part], writer=w)
    options = CheckpointOptions.aligned_with_timeout(CheckpointType.CHECKPOINT, 200)
    c.init_inputs_checkpoint(66, options)
    actions = c.checkpoint_state(66, 0, options)
    assert actions[0].is_priority_event is False
    assert w.started == [66]
    assert c.async_checkpoint_runnable_size == 1  # waits for its channel state result


def test_channel_state_write_result_leak_and_not_fail_after_checkpoint_aborted():
    """Port of Flink
    SubtaskCheckpointCoordinatorTest.testChannelStateWriteResultLeakAndNotFailAfterCheckpointAborted."""
    w = ChannelStateWriterImpl(0, "test", 5)
    w.open()
    c, _ = _coordinator(writer=w)
    c.notify_checkpoint_aborted(1)
    c.init_inputs_checkpoint(1, CheckpointOptions.unaligned())
    assert w.num_results == 1
    c.checkpoint_state(1, 0, CheckpointOptions.for_checkpoint_with_default_location())
    assert w.num_results == 0  # removed, not leaked
    assert w.is_aborted(1)


def test_abort_old_and_start_new_checkpoint():
    """Port of Flink SubtaskCheckpointCoordinatorTest.testAbortOldAndStartNewCheckpoint."""
    w = ChannelStateWriterImpl(0, "test", 5)
    w.open()
    c, _ = _coordinator(writer=w, has_inputs=False)
    unaligned = CheckpointOptions.unaligned()
    c.init_inputs_checkpoint(42, unaligned)
    c.notify_checkpoint_aborted(42)
    c.init_inputs_checkpoint(43, unaligned)
    result42 = w.get_and_remove_write_result(42)
    assert result42.is_done() and result42.input_channel_state_handles.is_completed_exceptionally()
    actions = c.checkpoint_state(43, 0, unaligned)
    assert isinstance(actions[-1], AcknowledgeCheckpoint)


# -- the steps -----------------------------------------------------------------------------------------


def test_steps_in_order_and_ack_carries_state_and_metrics():
    clock = _Clock()
    op = _Operator(clock, sync_cost_ms=7)
    part = ResultPartition(0, 2)
    part.emit_record("a", 0, 100)
    c, _ = _coordinator(partitions=[part], operator=op, clock=clock)
    metrics_in = CheckpointMetrics(
        5, alignment_duration_ms=30, bytes_processed_during_alignment=400, checkpoint_start_delay_ms=12
    )
    actions = c.checkpoint_state(5, 900, CheckpointOptions.aligned(), metrics_in)
    assert op.calls == [("prepare", 5), ("snapshot", 5)]
    assert isinstance(actions[0], BroadcastEvent) and isinstance(actions[1], AcknowledgeCheckpoint)
    ack = actions[1]
    assert ack.task_state_snapshot.subtask_states_by_operator["op"] == STATE
    m = ack.metrics
    assert (m.sync_duration_ms, m.alignment_duration_ms, m.checkpoint_start_delay_ms) == (7, 30, 12)
    assert m.bytes_processed_during_alignment == 400 and m.persisted_output_bytes == 0
    # the record written before the barrier is queued before it
    assert [e for _, e in _drain(part)][:2] == [
        Buffer(("a",), 100, 0),
        CheckpointBarrier(5, 900, CheckpointOptions.aligned()),
    ]


def test_out_of_order_barrier_is_skipped():
    c, op = _coordinator()
    c.checkpoint_state(5, 0, CheckpointOptions.aligned())
    assert c.checkpoint_state(4, 0, CheckpointOptions.aligned()) == [CheckpointSkipped(4, SkipReason.OUT_OF_ORDER)]
    assert op.calls.count(("snapshot", 4)) == 0


def test_unaligned_checkpoint_persists_overtaken_output_and_input_then_acks():
    part = ResultPartition(0, 2)
    part.emit_record("x", 0, 10)
    part.emit_record("y", 1, 20)
    w = ChannelStateWriterImpl(3)
    w.open()
    c, _ = _coordinator(partitions=[part], writer=w)
    c.init_inputs_checkpoint(7, CheckpointOptions.unaligned())
    w.add_input_data(7, InputChannelInfo(0, 0), -1, [Buffer(("in",), 5, 9)])
    actions = c.checkpoint_state(7, 0, CheckpointOptions.unaligned())
    assert actions[0].is_priority_event and actions[0].overtaken_bytes == 30
    assert not any(isinstance(a, AcknowledgeCheckpoint) for a in actions)  # input side still open
    (ack,) = c.on_all_barriers_received(7)
    state = ack.task_state_snapshot.subtask_states_by_operator["op"]
    assert [h.info for h in state.result_subpartition_state] == [
        ResultSubpartitionInfo(0, 0),
        ResultSubpartitionInfo(0, 1),
    ]
    assert state.result_subpartition_state[0].buffers == (Buffer(("x",), 10, 0),)
    assert state.input_channel_state[0].buffers == (Buffer(("in",), 5, 9),)
    # each persisted buffer with its 4-byte length (ChannelStateSerializerImpl.writeData): 2 output buffers, 1 input
    assert ack.metrics.persisted_output_bytes == 2 * 4 + 30 and ack.metrics.bytes_persisted_during_alignment == 4 + 5
    assert ack.metrics.unaligned_checkpoint and ack.metrics.total_bytes_persisted == 4 + 3 * 4 + 35
    # overtaken buffers are still sent, after the barrier
    els = [e for info, e in _drain(part) if info.subpartition_idx == 0]
    assert isinstance(els[0], CheckpointBarrier) and els[1] == Buffer(("x",), 10, 0)


def test_timeoutable_barrier_times_out_on_the_output_and_acks_with_overtaken_data():
    clock, timers = _Clock(), _Timers()
    part = ResultPartition(0, 1)
    part.emit_record("q", 0, 64)
    c, _ = _coordinator(partitions=[part], clock=clock, timers=timers, has_inputs=False)
    options = CheckpointOptions.aligned_with_timeout(CheckpointType.CHECKPOINT, 50)
    actions = c.checkpoint_state(3, clock.now, options)
    assert not actions[0].is_priority_event and not any(isinstance(a, AcknowledgeCheckpoint) for a in actions)
    clock.now += 50
    timers.fire_until(clock.now)
    (ack,) = c.drain_timer_actions()
    assert isinstance(ack, AcknowledgeCheckpoint) and ack.metrics.persisted_output_bytes == 4 + 64  # its length
    # Flink 1.16+ (FLINK-31588): the checkpoint that timed out in the output persisted data, so it reports unaligned
    assert ack.metrics.unaligned_checkpoint
    els = [e for _, e in _drain(part)]
    assert els[0].options.is_unaligned_checkpoint and els[1] == Buffer(("q",), 64, 0)


def test_timeoutable_barrier_sent_in_time_acks_without_channel_state():
    clock, timers = _Clock(), _Timers()
    part = ResultPartition(0, 1)
    c, _ = _coordinator(partitions=[part], clock=clock, timers=timers, has_inputs=False)
    c.checkpoint_state(3, clock.now, CheckpointOptions.aligned_with_timeout(CheckpointType.CHECKPOINT, 50))
    _drain(part)  # announcement and barrier leave before the timeout
    (ack,) = c.notify_output_progress()
    assert ack.metrics.persisted_output_bytes == 0 and timers.timers == []
    assert not ack.metrics.unaligned_checkpoint


def test_unaligned_checkpoint_type_is_whether_in_flight_data_was_persisted():
    """Flink's ``CheckpointMetricsBuilderTest.testUnalignedCheckpointType`` (FLINK-31588): a subtask reports
    ``unaligned_checkpoint`` when it persisted more than 0 bytes of in-flight data (its input channels' and output
    subpartitions' state, ``AsyncCheckpointRunnable.finalizeNonFinishedSnapshots``), whatever its options: an
    unaligned checkpoint with nothing in flight reports false; one byte of input or of output makes it true."""

    def ack_of(output_bytes: int, input_bytes: int):
        part = ResultPartition(0, 1)
        if output_bytes:
            part.emit_record("x", 0, output_bytes)
        w = ChannelStateWriterImpl(3)
        w.open()
        c, _ = _coordinator(partitions=[part], writer=w)
        c.init_inputs_checkpoint(7, CheckpointOptions.unaligned())
        if input_bytes:
            w.add_input_data(7, InputChannelInfo(0, 0), -1, [Buffer(("in",), input_bytes, 9)])
        c.checkpoint_state(7, 0, CheckpointOptions.unaligned())
        (ack,) = c.on_all_barriers_received(7)
        return ack.metrics

    for output_bytes, input_bytes in ((0, 0), (1, 0), (0, 1), (10, 100)):
        metrics = ack_of(output_bytes, input_bytes)
        # one buffer each, counted with its 4-byte length as Flink's channel-state file holds it
        assert metrics.persisted_output_bytes == (4 + output_bytes if output_bytes else 0)
        assert metrics.bytes_persisted_during_alignment == (4 + input_bytes if input_bytes else 0)
        assert metrics.unaligned_checkpoint is (output_bytes + input_bytes > 0)


def test_abort_checkpoint_on_barrier_declines_and_broadcasts_cancel_marker():
    part = ResultPartition(0, 1)
    c, _ = _coordinator(partitions=[part])
    actions = c.abort_checkpoint_on_barrier(9, CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER)
    assert actions == [
        DeclineCheckpoint(9, CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER),
        BroadcastEvent(CancelCheckpointMarker(9)),
    ]
    assert c.last_checkpoint_id == 9


def test_sync_failure_declines_and_async_failure_declines():
    c, _ = _coordinator(operator=_Operator(fail=True))
    actions = c.checkpoint_state(1, 0, CheckpointOptions.aligned())
    assert isinstance(actions[-1], DeclineCheckpoint)
    assert actions[-1].reason is CheckpointFailureReason.TASK_CHECKPOINT_FAILURE
    c2, _ = _coordinator(async_completion=AsyncCompletion.DRIVER)
    c2.checkpoint_state(1, 0, CheckpointOptions.aligned())
    assert c2.fail_async_part(1, "upload failed") == [
        DeclineCheckpoint(1, CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION, "upload failed")
    ]


def test_not_running_declines_task_not_ready():
    c, op = _coordinator()
    actions = c.checkpoint_state(1, 0, CheckpointOptions.aligned(), is_running=False)
    assert actions[-1].reason is CheckpointFailureReason.CHECKPOINT_DECLINED_TASK_NOT_READY
    assert not op.checkpointed


def test_driver_async_completion_measures_async_duration():
    clock = _Clock()
    c, _ = _coordinator(async_completion=AsyncCompletion.DRIVER, clock=clock)
    actions = c.checkpoint_state(2, 0, CheckpointOptions.aligned(), is_task_finished=True)
    assert actions[-1] == AsyncCheckpointStarted(2, STATE.state_size)
    clock.now += 250
    (ack,) = c.complete_async_part(2)
    assert ack.metrics.async_duration_ms == 250 and ack.task_state_snapshot.is_task_finished


def test_notify_aborted_with_latest_completed_notifies_completion_first():
    c, op = _coordinator()
    c.notify_checkpoint_aborted(8, latest_completed_checkpoint_id=7)
    assert op.calls == [("complete", 7), ("aborted", 8)]


def test_invalid_writer_use_surfaces():
    w = ChannelStateWriterImpl()  # never opened
    c, _ = _coordinator(writer=w)
    with pytest.raises(RuntimeError):
        c.checkpoint_state(1, 0, CheckpointOptions.unaligned())


def test_abort_on_barrier_after_unaligned_trigger_declines_once():
    part = ResultPartition(0, 1)
    c, _ = _coordinator(partitions=[part])
    c.init_inputs_checkpoint(4, CheckpointOptions.unaligned())
    c.checkpoint_state(4, 0, CheckpointOptions.unaligned())
    assert c.async_checkpoint_runnable_size == 1  # waits for the input side
    actions = c.abort_checkpoint_on_barrier(4, CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER)
    assert [type(a) for a in actions] == [DeclineCheckpoint, BroadcastEvent]
    assert c.on_all_barriers_received(4) == [] and c.async_checkpoint_runnable_size == 0


def test_all_barriers_received_twice_or_before_the_trigger_is_harmless():
    c, _ = _coordinator(partitions=[ResultPartition(0, 1)], async_completion=AsyncCompletion.DRIVER)
    c.on_all_barriers_received(6)  # before the task started checkpoint 6 (input side finished first)
    c.checkpoint_state(6, 0, CheckpointOptions.unaligned())
    assert c.on_all_barriers_received(6) == []
    (ack,) = c.complete_async_part(6)
    assert isinstance(ack, AcknowledgeCheckpoint)


# -- a cancelled task's closed asynchronous parts (AsyncCheckpointRunnable.close -> reportAbortedSnapshotStats) ---


def test_report_incomplete_stats():
    """Port of Flink AsyncCheckpointRunnableTest.testReportIncompleteStats: closing a running asynchronous part
    (here by cancelling its task) reports its checkpoint's figures; a part that acknowledged reports nothing."""
    c, _ = _coordinator(async_completion=AsyncCompletion.DRIVER)
    c.checkpoint_state(999, 0, CheckpointOptions.aligned())
    c.complete_async_part(999)  # acknowledged: no longer running
    c.checkpoint_state(1000, 0, CheckpointOptions.aligned())
    (report,) = c.cancel()
    assert isinstance(report, ReportIncompleteSnapshotStats) and report.checkpoint_id == 1000
    assert c.async_checkpoint_runnable_size == 0
    assert c.cancel() == [] and c.complete_async_part(1000) == []  # closed once, and it never acknowledges


def test_incomplete_stats_are_built_as_checkpoint_metrics_builder_build_incomplete():
    """What ``CheckpointMetricsBuilder.buildIncomplete`` gives for a part closed mid-way: the start delay, the
    synchronous duration and an alignment that ended are known; the asynchronous duration and the persisted
    in-flight data are UNSET (so not unaligned, even for an unaligned checkpoint); an alignment that had not ended
    has its processed bytes UNSET and a duration of 0 (Flink's -1 ns in ms); the state is what was finished."""
    clock = _Clock()
    aligned, _ = _coordinator(async_completion=AsyncCompletion.DRIVER, clock=clock)
    aligned.checkpoint_state(
        5,
        0,
        CheckpointOptions.aligned(),
        CheckpointMetrics(
            5, alignment_duration_ms=30, bytes_processed_during_alignment=700, checkpoint_start_delay_ms=12
        ),
    )
    (report,) = aligned.cancel()
    m = report.metrics
    assert (m.alignment_duration_ms, m.bytes_processed_during_alignment, m.checkpoint_start_delay_ms) == (30, 700, 12)
    assert (m.async_duration_ms, m.bytes_persisted_during_alignment) == (UNSET, UNSET)
    assert not m.unaligned_checkpoint and (report.state_size, report.checkpointed_size) == (0, 0)

    part = ResultPartition(0, 1)
    part.emit_record("x", 0, 10)
    w = ChannelStateWriterImpl(3)
    w.open()
    unaligned, _ = _coordinator(partitions=[part], writer=w, async_completion=AsyncCompletion.DRIVER, clock=clock)
    unaligned.init_inputs_checkpoint(6, CheckpointOptions.unaligned())
    unaligned.checkpoint_state(
        6,
        0,
        CheckpointOptions.unaligned(),
        CheckpointMetrics(
            6,
            alignment_duration_ms=None,
            bytes_processed_during_alignment=None,
            checkpoint_start_delay_ms=4,
            unaligned=True,
        ),
    )
    unaligned.complete_async_part(6)  # the snapshot is uploaded; the input side still waits for barriers
    (report,) = unaligned.cancel()
    m = report.metrics
    assert (m.alignment_duration_ms, m.bytes_processed_during_alignment, m.checkpoint_start_delay_ms) == (0, UNSET, 4)
    assert not m.unaligned_checkpoint and m.bytes_persisted_during_alignment == UNSET
    assert report.state_size == report.checkpointed_size == STATE.state_size > 0
