"""Every alignment ends once each of its channels has delivered what ends it: checked while a simulated job runs.

An ``AlignmentMonitor`` listens to one task attempt's ``SingleCheckpointBarrierHandler`` (aligned, unaligned and
aligned-with-timeout modes; ``InputSide.add_channel_listener``) and notes, per input channel, the highest checkpoint
it closed: a barrier of that checkpoint or a later one, a cancellation marker, or its end of partition (which closes
all). After each such event, a checkpoint still pending although every channel has closed it is a violation: Flink's
handler triggers on the last barrier, aborts on a cancellation marker or a newer barrier, and counts an ended
channel as aligned (FLIP-147). The at-least-once tracker aligns nothing and is not watched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from barriersim.runtime.checkpointing.api import InputSide
    from barriersim.runtime.events import InputChannelInfo
    from barriersim.runtime.task.stream_task import StreamTask

ENDED = float("inf")


class AlignmentMonitor:
    """A ``ChannelListener`` of one task's barrier handler (see the module)."""

    def __init__(self, task_name: str, input_side: InputSide, violations: list[str]) -> None:
        self._name = task_name
        self._input = input_side
        # channel -> highest checkpoint id it closed
        self._closed: dict[InputChannelInfo, float] = {info: -1 for info in input_side.channel_infos()}
        self._violations = violations
        self._reported: set[int] = set()

    @staticmethod
    def attach(task: StreamTask, violations: list[str]) -> None:
        """Watch ``task``'s barrier handler (a task with network inputs), appending to ``violations``."""
        input_side = task.checkpointed_input()
        if input_side is not None:
            input_side.add_channel_listener(AlignmentMonitor(task.name, input_side, violations))

    def channel_event_taken(self, channel_info: InputChannelInfo, checkpoint_id: int | None) -> None:
        """The handler took a barrier or cancellation marker of ``checkpoint_id``, or (None) an end of partition."""
        closed = ENDED if checkpoint_id is None else checkpoint_id
        if channel_info in self._closed:
            self._closed[channel_info] = max(self._closed[channel_info], closed)
        pending = self._input.latest_checkpoint_id
        if (
            self._input.is_checkpoint_pending()
            and pending not in self._reported
            and all(c >= pending for c in self._closed.values())
        ):
            self._reported.add(pending)
            self._violations.append(
                f"{self._name}: checkpoint {pending} still aligning after every input channel delivered its barrier, "
                f"a cancellation marker or its end of partition"
            )
