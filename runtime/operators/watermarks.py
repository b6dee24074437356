"""Combining the watermarks of several input channels (Flink's ``StatusWatermarkValve``, without idleness).

How this works: the valve keeps the last watermark seen on every input channel; the task's watermark is the
minimum over the channels that have not ended, and it is emitted downstream only when it advances. A channel
that ends counts as having sent ``MAX_WATERMARK`` (Flink emits it at the end of input), so a finished input
never holds event time back.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from barriersim.runtime.events import MAX_WATERMARK, Watermark

NO_WATERMARK = -(2**63)


class WatermarkValve:
    def __init__(self, channels: Iterable[Hashable]) -> None:
        self._channel_watermarks = {c: NO_WATERMARK for c in channels}
        self.current = NO_WATERMARK

    def input_watermark(self, channel: Hashable, watermark: Watermark) -> Watermark | None:
        """Record ``channel``'s watermark; returns the new combined watermark if it advanced."""
        if watermark.timestamp > self._channel_watermarks[channel]:
            self._channel_watermarks[channel] = watermark.timestamp
        return self._advance()

    def end_of_input(self, channel: Hashable) -> Watermark | None:
        self._channel_watermarks[channel] = MAX_WATERMARK.timestamp
        return self._advance()

    def end_of_all_inputs(self) -> Watermark | None:
        """Every input ended drained (``StreamTask.endData(DRAIN)``): ``MAX_WATERMARK`` if that advances it."""
        for channel in self._channel_watermarks:
            self._channel_watermarks[channel] = MAX_WATERMARK.timestamp
        return self._advance()

    def _advance(self) -> Watermark | None:
        combined = min(self._channel_watermarks.values())
        if combined > self.current:
            self.current = combined
            return Watermark(combined)
        return None
