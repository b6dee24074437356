"""A job's network settings, a scenario's ``[network]`` section: buffers and credit (Flink's defaults), the output
flusher's interval and overshoot, buffer debloating (FLIP-183) and the simulated channel latency.

How this works: ``NetworkConfig`` is one frozen value whose fields are ``runtime.settings`` settings; a task's
result partitions and input gates read the buffer and credit settings, ``debloat_configuration()`` gives the
debloating settings as ``BufferDebloatConfiguration``, and the simulator alone reads the latencies and the flusher's
overshoot (on Ray, both are real).
"""

from __future__ import annotations

from dataclasses import dataclass

from barriersim.runtime.network.input.buffer_debloater import BufferDebloatConfiguration, DebloaterVersion
from barriersim.runtime.settings import Between, setting


@dataclass(frozen=True)
class NetworkConfig:
    """Flink's network defaults (``docs/flink-facts.md``)."""

    buffer_size: int = setting(
        32 * 1024, "bytes of a network buffer (taskmanager.memory.segment-size)", Between(1024, 1 << 20)
    )
    exclusive_buffers_per_channel: int = setting(
        2,
        "buffers each input channel owns, announced as credit (taskmanager.network.memory.buffers-per-channel)",
        Between(0, 1000),
    )
    floating_buffers_per_gate: int = setting(
        8,
        "buffers an input gate shares among its channels on demand "
        "(taskmanager.network.memory.floating-buffers-per-gate)",
        Between(0, 10_000),
    )
    max_buffers_per_channel: int = setting(
        10,
        "buffers one subpartition may hold before its partition is backpressured "
        "(taskmanager.network.memory.max-buffers-per-channel)",
        Between(1, 10_000),
    )
    latency_us_mean: float = setting(
        100.0,
        "the simulated channel latency's mean, in microseconds (the simulator's; on Ray latency is real)",
        Between(0.0, 10_000_000.0),
    )
    latency_us_jitter: float = setting(
        20.0, "the simulated channel latency's jitter, in microseconds", Between(0.0, 10_000_000.0)
    )
    record_size: int = setting(
        32,
        "bytes a record occupies in a network buffer (a vertex's record_size overrides it for the records it emits)",
        Between(1, 1 << 20),
    )
    buffer_timeout_ms: int = setting(
        100,
        "the output flusher hands open buffers to the consumers this often (execution.buffer-timeout.interval)",
        Between(1, 3_600_000),
    )
    flusher_overshoot_us: float = setting(
        120.0,
        "how much longer than buffer_timeout_ms each period of a task's output flusher takes: Flink's OutputFlusher "
        "sleeps the timeout, then flushes (the simulator's, drawn per period; on Ray the timers' own)",
        Between(0.0, 10_000_000.0),
    )
    task_initialization_ms: float = setting(
        200.0,
        "how long before a deployment runs (its first checkpoint may be triggered) its tasks built their record "
        "writers and started their output flushers: Flink's INITIALIZING (restore, open) and the RUNNING reports; "
        "the simulator starts the tasks running, their flushers that far into a period (drawn once per "
        "deployment; on Ray the flushers' own)",
        Between(0.0, 3_600_000.0),
    )
    task_initialization_sigma: float = setting(
        0.15, "the log-normal spread of task_initialization_ms from one deployment to the next", Between(0.0, 3.0)
    )
    buffer_debloat: bool = setting(
        False,
        "buffer debloating (FLIP-183, taskmanager.network.memory.buffer-debloat"
        ".enabled): each gate sizes its buffers to the throughput",
    )
    buffer_debloat_target_ms: int = setting(
        1000,
        "the time the in-flight data of a gate should take to consume (buffer-debloat.target)",
        Between(1, 3_600_000),
    )
    buffer_debloat_period_ms: int = setting(
        200, "how often a gate recalculates its buffer size (buffer-debloat.period)", Between(1, 3_600_000)
    )
    buffer_debloat_samples: int = setting(
        20, "throughput samples averaged over (buffer-debloat.samples)", Between(1, 100_000)
    )
    buffer_debloat_threshold_percentages: int = setting(
        25,
        "a new buffer size is announced only if it differs by this many percent (buffer-debloat.threshold-percentages)",
        Between(0, 100),
    )
    min_buffer_size: int = setting(
        256, "the smallest buffer debloating shrinks to (taskmanager.memory.min-segment-size)", Between(1, 1024)
    )
    buffer_debloater: DebloaterVersion = setting(
        DebloaterVersion.CURRENT,
        "whose buffer debloater: 2.3 (Flink 1.15 to 2.3: the buffer size averaged) or 1.14 (Flink 1.14.0's: the "
        "throughput averaged, buffers starting at the segment size)",
    )

    def debloat_configuration(self) -> BufferDebloatConfiguration:
        """The buffer debloating settings as the input gates and result partitions take them."""
        return BufferDebloatConfiguration(
            enabled=self.buffer_debloat,
            target_ms=self.buffer_debloat_target_ms,
            period_ms=self.buffer_debloat_period_ms,
            samples=self.buffer_debloat_samples,
            threshold_percentages=self.buffer_debloat_threshold_percentages,
            min_buffer_size=self.min_buffer_size,
            version=self.buffer_debloater,
        )
