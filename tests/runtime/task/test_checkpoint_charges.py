"""A subtask's checkpoint charged by the cost model (``runtime.checkpoint_cost``): the synchronous part is reported
to the driver and counts in ``checkpoint_sync``; the asynchronous part's delay is the synchronous and asynchronous
charges; a checkpoint that persisted in-flight data also waits for its channel-state write, which runs beside the
asynchronous part; ``checkpoint_async`` runs from the end of the synchronous part to the acknowledgement, as Flink's
``AsyncCheckpointRunnable`` measures it."""

from __future__ import annotations

import random

import pytest
from test_subtask_checkpoint_coordinator import STATE, _Clock

from barriersim.runtime.checkpoint_cost import Charging, CheckpointCostModel, CostCharger, SnapshotWork
from barriersim.runtime.events import Buffer, CheckpointOptions, InputChannelInfo
from barriersim.runtime.task.actions import AcknowledgeCheckpoint, AsyncCheckpointStarted, AsyncPart, SyncSnapshotTaken
from barriersim.runtime.task.subtask_checkpoint_coordinator import AsyncCompletion, SubtaskCheckpointCoordinator

MODEL = CheckpointCostModel(
    snapshot_fixed_ms=2.0,
    snapshot_mib_per_s=1.0,
    async_fixed_ms=5.0,
    upload_mib_per_s=1.0,
    file_latency_ms=1.0,
    channel_state_fixed_ms=4.0,
    latency_sigma=0.0,
)
MIB = 1024 * 1024


def _coordinator(clock, partitions=(), work=SnapshotWork(copied_bytes=MIB // 2, uploaded_bytes=MIB, files=2)):
    return SubtaskCheckpointCoordinator(
        operator_id="op",
        snapshot_state=lambda cid, options: STATE,
        clock=clock,
        partitions=partitions,
        async_completion=AsyncCompletion.DRIVER,
        cost=CostCharger(MODEL, Charging.VIRTUAL, random.Random(0)),
        snapshot_work=lambda state: work,
        memory_threshold=100,
    )


def test_the_sync_part_is_charged_and_the_async_part_waits_for_its_upload():
    clock = _Clock()
    c = _coordinator(clock)
    actions = c.checkpoint_state(1, 0, CheckpointOptions.aligned())
    sync = [a for a in actions if isinstance(a, SyncSnapshotTaken)]
    started = [a for a in actions if isinstance(a, AsyncCheckpointStarted)]
    assert [s.duration_ms for s in sync] == [pytest.approx(2.0 + 500.0)]  # fixed + half a MiB at 1 MiB/s
    # the driver completes the asynchronous part after the sync part and the upload (5 + 2 files + 1 MiB at 1 MiB/s)
    assert [(a.part, a.delay_ms) for a in started] == [(AsyncPart.SNAPSHOT, pytest.approx(502.0 + 1007.0))]
    clock.now += 1509
    (ack,) = c.complete_async_part(1)
    assert isinstance(ack, AcknowledgeCheckpoint)
    assert (ack.metrics.sync_duration_ms, ack.metrics.async_duration_ms) == (502, 1007)


def test_an_unaligned_checkpoint_waits_for_its_channel_state_write_beside_the_upload():
    clock = _Clock()
    c = _coordinator(clock, work=SnapshotWork())
    c.init_inputs_checkpoint(2, CheckpointOptions.unaligned())
    actions = c.checkpoint_state(2, 0, CheckpointOptions.unaligned())
    # in-flight input data of a channel whose barrier comes later
    c.channel_state_writer.add_input_data(2, InputChannelInfo(0, 0), -1, (Buffer(((5, 6, 7, 8),), 200, 0),))
    actions += c.on_all_barriers_received(2)
    parts = {a.part: a for a in actions if isinstance(a, AsyncCheckpointStarted)}
    assert set(parts) == {AsyncPart.SNAPSHOT, AsyncPart.CHANNEL_STATE}
    # 200 bytes and the buffer's 4-byte length, at or over the 100-byte memory threshold: one file
    assert parts[AsyncPart.CHANNEL_STATE].state_size == 4 + 200
    assert parts[AsyncPart.CHANNEL_STATE].delay_ms == pytest.approx(4.0 + 1.0 + (4 + 200) / MIB * 1000)
    assert c.complete_async_part(2) == []  # the upload is done, the channel state is still being written
    clock.now += 10
    (ack,) = c.complete_async_part(2, AsyncPart.CHANNEL_STATE)
    assert ack.metrics.async_duration_ms == 8  # from the end of the sync part (2 ms charged) to now
    assert ack.metrics.bytes_persisted_during_alignment == 4 + 200


def test_a_checkpoint_that_persisted_nothing_writes_no_channel_state():
    c = _coordinator(_Clock(), work=SnapshotWork())
    c.init_inputs_checkpoint(3, CheckpointOptions.unaligned())
    actions = c.checkpoint_state(3, 0, CheckpointOptions.unaligned()) + c.on_all_barriers_received(3)
    assert [a.part for a in actions if isinstance(a, AsyncCheckpointStarted)] == [AsyncPart.SNAPSHOT]
    (ack,) = c.complete_async_part(3)
    assert isinstance(ack, AcknowledgeCheckpoint)


def test_a_cancelled_checkpoint_ignores_its_late_parts():
    c = _coordinator(_Clock())
    c.checkpoint_state(4, 0, CheckpointOptions.aligned())
    c.notify_checkpoint_aborted(4)
    assert c.complete_async_part(4) == [] and c.complete_async_part(4, AsyncPart.CHANNEL_STATE) == []
