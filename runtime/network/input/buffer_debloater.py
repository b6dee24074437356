"""Buffer debloating (FLIP-183): each input gate sizes its upstream's buffers so that the data in flight to it takes
about a target time to consume.

Mirrors Flink's ``ThroughputCalculator``, ``BufferSizeEMA``, ``BufferDebloater`` and
``SingleInputGate.triggerDebloating``; with ``DebloaterVersion.FLINK_1_14`` Flink 1.14.0's debloater instead (its
``ThroughputEMA``; the size its share of the target, no size average). See docs/data-plane.md, "Buffer debloating",
and docs/debloating.md.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass

NOT_TRACKED = -1


class DebloaterVersion(enum.Enum):
    """Whose buffer debloater. ``CURRENT``: Flink 1.15 to 2.3's (the instant throughput of each period, the buffer
    size an exponential moving average, FLINK-24470; buffers start at the starting segment size, FLINK-36556).
    ``FLINK_1_14``: Flink 1.14.0's, the release whose announcement charts debloating: the throughput an exponential
    moving average over ``samples`` (``ThroughputEMA``), the buffer size its share of the target without an average,
    buffers starting at the segment size."""

    CURRENT = "2.3"
    FLINK_1_14 = "1.14"


@dataclass(frozen=True)
class BufferDebloatConfiguration:
    enabled: bool = False
    target_ms: int = 1000
    period_ms: int = 200
    samples: int = 20
    threshold_percentages: int = 25
    min_buffer_size: int = 256
    starting_buffer_size: int = 1024  # taskmanager.memory.starting-segment-size
    version: DebloaterVersion = DebloaterVersion.CURRENT

    def starting_size(self, max_buffer_size: int) -> int:
        """The size a subpartition's buffers and a gate's debloater start at: Flink's starting segment size when
        debloating is on (``validate`` checks it is within [min, max]), else (and in Flink 1.14) the segment size."""
        if self.enabled and self.version is DebloaterVersion.CURRENT:
            return self.starting_buffer_size
        return max_buffer_size

    @property
    def throughput_ema_samples(self) -> int:
        """The samples a gate's throughput is averaged over: Flink 1.14's ``ThroughputEMA``; 0 (the last period's
        throughput) since Flink 1.15, which averages the buffer size instead."""
        return self.samples if self.version is DebloaterVersion.FLINK_1_14 else 0

    def validate(self, max_buffer_size: int) -> BufferDebloatConfiguration:
        for name in ("target_ms", "period_ms", "samples", "min_buffer_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"buffer debloating: {name} must be positive, got {getattr(self, name)}")
        if not 0 <= self.threshold_percentages <= 100:
            raise ValueError(
                f"buffer debloating: threshold_percentages must be in [0, 100], got {self.threshold_percentages}"
            )
        if self.min_buffer_size > max_buffer_size:
            raise ValueError(
                f"buffer debloating: min_buffer_size ({self.min_buffer_size}) exceeds the buffer size "
                f"({max_buffer_size})"
            )
        if not self.min_buffer_size <= self.starting_buffer_size <= max_buffer_size:  # BufferDebloatConfiguration's
            raise ValueError(
                f"buffer debloating: starting_buffer_size ({self.starting_buffer_size}) must be between "
                f"min_buffer_size ({self.min_buffer_size}) and the buffer size ({max_buffer_size})"
            )
        return self


class ThroughputCalculator:
    """Bytes consumed per second of time spent consuming (idle time left out), over the last period; with
    ``ema_samples`` (Flink 1.14's ``ThroughputEMA``) an exponential moving average of those, alpha
    ``2 / (samples + 1)``, restarting from the instant value whenever it stood at 0."""

    def __init__(self, clock: Callable[[], int], ema_samples: int = 0) -> None:
        self._clock = clock
        self._alpha = 2.0 / (ema_samples + 1) if ema_samples else 0.0
        self.current_throughput = 0
        self._accumulated_bytes = 0
        self._measurement_ms = 0
        self._start_ms = NOT_TRACKED

    def incoming_data_size(self, size: int) -> None:
        if self._start_ms == NOT_TRACKED:  # data resumes the measurement
            self._start_ms = self._clock()
        self._accumulated_bytes += size

    def pause_measurement(self) -> None:
        if self._start_ms != NOT_TRACKED:
            self._measurement_ms += self._clock() - self._start_ms
        self._start_ms = NOT_TRACKED

    def resume_measurement(self) -> None:
        if self._start_ms == NOT_TRACKED:
            self._start_ms = self._clock()

    def calculate_throughput(self) -> int:
        """Bytes per second since the last call (the previous value if no time was measured)."""
        if self._start_ms != NOT_TRACKED:
            now = self._clock()
            self._measurement_ms += now - self._start_ms
            self._start_ms = now
        if self._measurement_ms > 0:
            instant = int(self._accumulated_bytes / self._measurement_ms * 1000)
            if self._alpha and self.current_throughput != 0:  # Java's long += double: truncated
                self.current_throughput = int(
                    self.current_throughput + self._alpha * (instant - self.current_throughput)
                )
            else:
                self.current_throughput = instant
        self._accumulated_bytes = self._measurement_ms = 0
        return self.current_throughput


class BufferSizeEMA:
    """Exponential moving average of the buffer size, growing and shrinking at the same speed."""

    def __init__(
        self, max_buffer_size: int, min_buffer_size: int, samples: int, starting_buffer_size: int | None = None
    ) -> None:
        self.max_buffer_size = max_buffer_size
        self.min_buffer_size = min_buffer_size
        self.alpha = 2.0 / (samples + 1)
        self.last_buffer_size = float(max_buffer_size if starting_buffer_size is None else starting_buffer_size)

    def calculate_buffer_size(self, total_bytes: int, total_buffers: int) -> int:
        if total_bytes < 0 or total_buffers <= 0:
            raise ValueError(
                f"buffer size EMA: total bytes ({total_bytes}) must be >= 0 and buffers ({total_buffers}) > 0"
            )
        desirable = min(total_bytes / total_buffers, 2 * self.last_buffer_size)
        self.last_buffer_size += self.alpha * (desirable - self.last_buffer_size)
        self.last_buffer_size = max(self.min_buffer_size, min(self.last_buffer_size, self.max_buffer_size))
        return math.floor(self.last_buffer_size + 0.5)  # Java's Math.round: halves round up


class BufferDebloater:
    """One gate's buffer size from its throughput and the buffers in use."""

    def __init__(self, config: BufferDebloatConfiguration, max_buffer_size: int) -> None:
        self.config = config
        self.max_buffer_size = max_buffer_size
        self.last_buffer_size = config.starting_size(max_buffer_size)
        self._ema = BufferSizeEMA(max_buffer_size, config.min_buffer_size, config.samples, self.last_buffer_size)

    def recalculate_buffer_size(self, throughput: int, buffers_in_use: int) -> int | None:
        """The new size to announce, or None if it is too close to the last one."""
        buffers = max(1, buffers_in_use)
        desired_total = throughput * self.config.target_ms // 1000
        new_size = self._ema.calculate_buffer_size(desired_total, buffers)
        if self._skip_update(new_size):
            return None
        self.last_buffer_size = new_size
        return new_size

    def _skip_update(self, new_size: int) -> bool:
        if new_size == self.last_buffer_size:
            return True
        if new_size <= self.config.min_buffer_size or new_size >= self.max_buffer_size:
            return False
        delta = int(self.last_buffer_size * self.config.threshold_percentages / 100)
        return abs(new_size - self.last_buffer_size) < delta


class Flink114BufferDebloater:
    """Flink 1.14.0's ``BufferDebloater``: the target's bytes at the (averaged) throughput shared by the buffers in
    use, clamped to [min, segment size], announced unless within ``threshold_percentages`` of the last one. Flink
    1.14 ran one per task over all its gates; this is one per gate (the same for a task with one input gate)."""

    def __init__(self, config: BufferDebloatConfiguration, max_buffer_size: int) -> None:
        self.config = config
        self.max_buffer_size = max_buffer_size
        self.last_buffer_size = max_buffer_size

    def recalculate_buffer_size(self, throughput: int, buffers_in_use: int) -> int | None:
        """The new size to announce, or None if it is too close to the last one."""
        desired_total = throughput * self.config.target_ms // 1000
        new_size = max(self.config.min_buffer_size, min(desired_total // max(1, buffers_in_use), self.max_buffer_size))
        if abs(1 - self.last_buffer_size / new_size) * 100 < self.config.threshold_percentages:
            return None
        self.last_buffer_size = new_size
        return new_size


def buffer_debloater(
    config: BufferDebloatConfiguration, max_buffer_size: int
) -> BufferDebloater | Flink114BufferDebloater:
    """The debloater of ``config.version``."""
    if config.version is DebloaterVersion.FLINK_1_14:
        return Flink114BufferDebloater(config, max_buffer_size)
    return BufferDebloater(config, max_buffer_size)
