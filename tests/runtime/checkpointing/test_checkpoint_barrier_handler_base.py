"""The handler interface: the shared alignment-metric bookkeeping of the abstract base class."""

from barriersim.runtime.checkpointing.barrier_handler import (
    AbortCheckpointOnBarrier,
    CheckpointBarrierHandler,
    TriggerCheckpointOnBarrier,
)
from barriersim.runtime.events import CheckpointBarrier, CheckpointOptions
from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason


class _Minimal(CheckpointBarrierHandler):
    def process_barrier(self, barrier, channel_info, is_rpc_trigger=False):
        self.mark_alignment_start_and_end(barrier.id, barrier.timestamp)
        self.notify_checkpoint(barrier)

    def process_barrier_announcement(self, announced_barrier, sequence_number, channel_info):
        pass

    def process_cancellation_barrier(self, marker, channel_info):
        self.notify_abort_on_cancellation_barrier(marker.checkpoint_id)

    def process_end_of_partition(self, channel_info):
        self.notify_abort(0, CheckpointException(CheckpointFailureReason.CHECKPOINT_DECLINED_INPUT_END_OF_STREAM))

    def get_latest_checkpoint_id(self):
        return -1

    def is_checkpoint_pending(self):
        return False


def test_base_class_metrics_and_notifications():
    now = [100]
    out = []
    h = _Minimal(out.append, lambda: now[0])
    h.process_barrier(CheckpointBarrier(3, 40, CheckpointOptions.aligned()), None)
    (trigger,) = out
    assert isinstance(trigger, TriggerCheckpointOnBarrier)
    assert trigger.metrics.checkpoint_start_delay_ms == 60
    assert trigger.metrics.alignment_duration_ms == 0
    assert not trigger.is_unaligned
    h.process_cancellation_barrier(type("M", (), {"checkpoint_id": 4})(), None)
    assert out[-1] == AbortCheckpointOnBarrier(4, CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER)


def test_bytes_processed_only_count_during_alignment():
    now = [0]
    h = _Minimal([].append, lambda: now[0])
    h.add_processed_bytes(10)
    h.mark_alignment_start(1, 0)
    h.add_processed_bytes(7)
    now[0] = 5
    h.mark_alignment_end()
    h.add_processed_bytes(100)
    assert h.get_bytes_processed_during_alignment() == 7
    assert h.get_alignment_duration_ms() == 5
