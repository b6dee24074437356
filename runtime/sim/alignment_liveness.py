"""Every alignment ends once each of its channels has delivered what ends it: checked while a simulated job runs.

An ``AlignmentMonitor`` wraps one task attempt's ``SingleCheckpointBarrierHandler`` (aligned, unaligned and
aligned-with-timeout modes) and notes, per input channel, the highest checkpoint it closed: a barrier of that
checkpoint or a later one, a cancellation marker, or its end of partition (which closes all). After each event the
handler took, a checkpoint still pending there although every channel has closed it is a violation: Flink's
handler triggers on the last barrier, aborts on a cancellation marker or a newer barrier, and counts an ended
channel as aligned (FLIP-147). The at-least-once tracker aligns nothing and is not watched.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

from barriersim.runtime.checkpointing.single_checkpoint_barrier_handler import SingleCheckpointBarrierHandler

if TYPE_CHECKING:
    from barriersim.runtime.events import CancelCheckpointMarker, CheckpointBarrier, InputChannelInfo
    from barriersim.runtime.task.stream_task import StreamTask

ENDED = float("inf")


class AlignmentMonitor:
    def __init__(
        self,
        task_name: str,
        handler: SingleCheckpointBarrierHandler,
        channels: Iterable[InputChannelInfo],
        violations: list[str],
    ) -> None:
        self._name = task_name
        self._handler = handler
        # channel -> highest checkpoint id it closed
        self._closed: dict[InputChannelInfo, float] = {info: -1 for info in channels}
        self._violations = violations
        self._reported: set[int] = set()

    @staticmethod
    def attach(task: StreamTask, violations: list[str]) -> None:
        """Watch ``task``'s barrier handler (a ``StreamTask`` with network inputs), appending to ``violations``."""
        network_input: Any = getattr(task, "_network_input", None)
        handler = network_input.input_side.barrier_handler if network_input is not None else None
        if not isinstance(handler, SingleCheckpointBarrierHandler):
            return
        monitor = AlignmentMonitor(task.name, handler, network_input.input_side.channel_infos(), violations)
        barrier, cancel, end = (
            handler.process_barrier,
            handler.process_cancellation_barrier,
            handler.process_end_of_partition,
        )

        def process_barrier(b: CheckpointBarrier, channel_info: InputChannelInfo, is_rpc_trigger: bool = False) -> None:
            barrier(b, channel_info, is_rpc_trigger)
            monitor._close(channel_info, b.id)

        def process_cancellation_barrier(marker: CancelCheckpointMarker, channel_info: InputChannelInfo) -> None:
            cancel(marker, channel_info)
            monitor._close(channel_info, marker.checkpoint_id)

        def process_end_of_partition(channel_info: InputChannelInfo) -> None:
            end(channel_info)
            monitor._close(channel_info, ENDED)

        cast(Any, handler).process_barrier = process_barrier
        cast(Any, handler).process_cancellation_barrier = process_cancellation_barrier
        cast(Any, handler).process_end_of_partition = process_end_of_partition

    def _close(self, channel_info: InputChannelInfo, checkpoint_id: float) -> None:
        if channel_info in self._closed:
            self._closed[channel_info] = max(self._closed[channel_info], checkpoint_id)
        handler = self._handler
        pending = handler.current_checkpoint_id
        if (
            handler.is_checkpoint_pending()
            and pending not in self._reported
            and all(c >= pending for c in self._closed.values())
        ):
            self._reported.add(pending)
            self._violations.append(
                f"{self._name}: checkpoint {pending} still aligning after every input channel delivered its barrier, "
                f"a cancellation marker or its end of partition"
            )
