"""What a checkpoint costs in time, as one model both drivers charge: the synchronous snapshot, the asynchronous
upload, the channel-state write, the coordinator's trigger path and its ``_metadata`` write.

How this works: ``CheckpointCostModel`` (a scenario's ``[storage]``) turns a piece of checkpoint work into
milliseconds: fixed parts and per-file latencies, each drawn log-normally around its median from an injected
``random.Random``, plus bytes at a throughput. ``Charging`` says which costs a driver charges (the simulator all,
on its virtual clock; Ray only an emulated remote store's uploads on top of its real writes); ``CostCharger``
binds a model, a charging and a random stream. Flink has no such model: ``docs/architecture.md`` ("Settings:
scenario to runtime") says what each part mirrors, ``docs/flink-facts.md`` what each default is calibrated to.
"""

from __future__ import annotations

import enum
import math
import random
from dataclasses import dataclass, fields

from barriersim.runtime.lognormal import lognormal
from barriersim.runtime.settings import Between, setting

MIB = 1024 * 1024


class Charging(enum.Enum):
    """Which of the model's costs a driver charges."""

    VIRTUAL = "virtual"  # the simulator: every cost, on the virtual clock
    REAL_TIME = "real_time"  # Ray: real work takes real time; only an emulated remote store's uploads are added


@dataclass(frozen=True)
class CheckpointCostModel:
    """The cost of checkpoint work. The defaults are calibrated to Flink's measured table (``docs/flink-facts.md``,
    "What a checkpoint costs"), on the part of each end-to-end duration that comes after the barrier reached the
    bottleneck (the end-to-end median less the bottleneck's start-delay median), since the start delay itself is
    the barrier's travel, not the checkpoint's cost:
    - ``snapshot_fixed_ms`` + ``async_fixed_ms`` (1 + 6 ms, with the spread ≈ 9-10 ms for the later of two
      subtasks): without backpressure an aligned checkpoint ends 8-15 ms (at-least-once 7-12 ms) after the
      bottleneck's first barrier; the last to acknowledge are the stateless sinks, whose checkpoint is nothing but
      these fixed parts and the acknowledgement's RPC;
    - ``channel_state_fixed_ms`` (8 ms): without backpressure an unaligned checkpoint, whose barriers overtake the
      data, ends 15-17 ms after its start delay, ≈ 5 ms later than an aligned one at the same start delay: the
      sources and keyed subtasks each write ≈ 2 KB of in-flight data, and the slowest of six such writes,
      concurrent with the asynchronous part, makes the difference;
    - ``upload_mib_per_s`` (250 MiB/s) and ``file_latency_ms`` (1 ms): with heavy backpressure an unaligned
      checkpoint persists ≈ 450 KB (≈ 400 KB of it in one file at the bottleneck) and still ends 10-25 ms after
      its start delay, hardly later than the idle one: the local filesystem writes fast;
    - ``latency_sigma`` (0.5): Flink's unaligned p90s are 1.3-1.7 × their medians; the slowest of a checkpoint's
      subtasks decides its duration, so the spread of each draw must be that wide;
    - ``trigger_fixed_ms`` (3 ms, spread) and ``trigger_constant_ms`` (5.5 ms, not spread): an unaligned barrier
      overtakes every buffer in its way, so an unaligned checkpoint's start delay at the bottleneck is the trigger
      path, the trigger RPC and the barrier's way from the sources: Flink measured 9-10 ms (heavy backpressure 7-10
      ms), with its sources starting at 3-6 ms (the facts' raw files; the family's Java job 3-4.5, p90 5-8). The
      spread part is that measured path; the constant is the rest of the bottleneck's 9-10 ms, the way from the
      sources that barriersim's hops do not take (under 1 ms where Flink's take 2-5), charged before the RPCs: a
      fitted constant, not a latency, so it does not widen the p90s (the idle p90s are 4-9 ms above the medians);
    - ``snapshot_mib_per_s`` (1000 MiB/s): a heap backend's copy-on-write snapshot walks its tables in memory; an
      incremental backend's memtable flush writes a local file. Flink's measured job (≈ 9 KiB of keyed state) does
      not show it; it matters for the state-size sweep only."""

    snapshot_fixed_ms: float = setting(
        1.0, "the synchronous part's fixed cost, ms (the operator chain's snapshotState)", Between(0.0, 3_600_000.0)
    )
    snapshot_mib_per_s: float = setting(
        1000.0, "MiB the synchronous part copies or flushes per second", Between(0.001, 1e9)
    )
    async_fixed_ms: float = setting(
        6.0, "the asynchronous part's fixed cost, ms (executor hand-off, acknowledgement)", Between(0.0, 3_600_000.0)
    )
    upload_mib_per_s: float = setting(
        250.0, "MiB of state, channel state and metadata written per second", Between(0.001, 1e9)
    )
    file_latency_ms: float = setting(
        1.0, "latency per file written (state file, channel-state file, _metadata), ms", Between(0.0, 3_600_000.0)
    )
    channel_state_fixed_ms: float = setting(
        8.0,
        "the fixed cost of the channel-state write of a subtask that persisted in-flight data, ms",
        Between(0.0, 3_600_000.0),
    )
    trigger_fixed_ms: float = setting(
        3.0,
        "the coordinator's trigger path, from the checkpoint's timestamp to the trigger RPCs, ms (spread)",
        Between(0.0, 3_600_000.0),
    )
    trigger_constant_ms: float = setting(
        5.5,
        "a constant part added to the trigger path without spread, ms: the facts' fit for the barrier's way from "
        "the sources to the bottleneck that the simulator's hops do not take",
        Between(0.0, 3_600_000.0),
    )
    latency_sigma: float = setting(
        0.5, "log-normal spread of every fixed part and latency (0: none)", Between(0.0, 3.0)
    )
    emulate_remote_store: bool = setting(
        False, "Ray: add the modelled upload and metadata times to the real file writes"
    )

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "emulate_remote_store":
                continue
            if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value) or value < 0:
                raise ValueError(f"storage.{f.name}: must be a number >= 0, got {value!r}")
            if f.name.endswith("_per_s") and value <= 0:
                raise ValueError(f"storage.{f.name}: must be > 0, got {value!r}")

    # -- the pieces -----------------------------------------------------------------------------------

    def _spread(self, median_ms: float, rng: random.Random) -> float:
        return lognormal(median_ms, self.latency_sigma, rng)

    def _files(self, files: int, rng: random.Random) -> float:
        return sum(self._spread(self.file_latency_ms, rng) for _ in range(files))

    def sync_ms(self, copied_bytes: int, rng: random.Random) -> float:
        """The synchronous part of one subtask's snapshot that copies or flushes ``copied_bytes``."""
        return self._spread(self.snapshot_fixed_ms, rng) + copied_bytes / (self.snapshot_mib_per_s * MIB) * 1000

    def upload_ms(self, uploaded_bytes: int, files: int, rng: random.Random) -> float:
        """Writing ``files`` files of ``uploaded_bytes`` in all to the checkpoint storage."""
        return self._files(files, rng) + uploaded_bytes / (self.upload_mib_per_s * MIB) * 1000

    def async_ms(self, uploaded_bytes: int, files: int, rng: random.Random) -> float:
        """The asynchronous part of one subtask's snapshot: its fixed part and the upload of its state files."""
        return self._spread(self.async_fixed_ms, rng) + self.upload_ms(uploaded_bytes, files, rng)

    def channel_state_ms(self, persisted_bytes: int, files: int, rng: random.Random) -> float:
        """One subtask's channel-state write of ``persisted_bytes`` of in-flight data in ``files`` files."""
        return self._spread(self.channel_state_fixed_ms, rng) + self.upload_ms(persisted_bytes, files, rng)

    def metadata_ms(self, metadata_bytes: int, rng: random.Random) -> float:
        """The coordinator's ``_metadata`` write."""
        return self.upload_ms(metadata_bytes, 1, rng)

    def trigger_ms(self, rng: random.Random) -> float:
        """The coordinator's trigger path of one checkpoint, before its trigger RPCs leave: the constant part and
        the spread one (one draw, as before the constant part existed)."""
        return self.trigger_constant_ms + self._spread(self.trigger_fixed_ms, rng)


NO_COST = CheckpointCostModel(
    snapshot_fixed_ms=0.0,
    async_fixed_ms=0.0,
    file_latency_ms=0.0,
    channel_state_fixed_ms=0.0,
    trigger_fixed_ms=0.0,
    trigger_constant_ms=0.0,
    latency_sigma=0.0,
    snapshot_mib_per_s=math.inf,
    upload_mib_per_s=math.inf,
)


class CostCharger:
    """A model bound to a driver's charging and a seeded random stream: the milliseconds a driver charges for
    each piece of checkpoint work (0 for what its charging leaves to real time)."""

    def __init__(self, model: CheckpointCostModel, charging: Charging, rng: random.Random):
        self.model = model
        self.charging = charging
        self._rng = rng

    @property
    def charges_uploads(self) -> bool:
        return self.charging is Charging.VIRTUAL or self.model.emulate_remote_store

    def sync_ms(self, copied_bytes: int) -> float:
        if self.charging is not Charging.VIRTUAL:
            return 0.0
        return self.model.sync_ms(copied_bytes, self._rng)

    def async_ms(self, uploaded_bytes: int, files: int) -> float:
        if self.charging is Charging.VIRTUAL:
            return self.model.async_ms(uploaded_bytes, files, self._rng)
        return self.model.upload_ms(uploaded_bytes, files, self._rng) if self.model.emulate_remote_store else 0.0

    def channel_state_ms(self, persisted_bytes: int, files: int) -> float:
        if self.charging is Charging.VIRTUAL:
            return self.model.channel_state_ms(persisted_bytes, files, self._rng)
        return self.model.upload_ms(persisted_bytes, files, self._rng) if self.model.emulate_remote_store else 0.0

    def metadata_ms(self, metadata_bytes: int) -> float:
        if not self.charges_uploads:
            return 0.0
        return self.model.metadata_ms(metadata_bytes, self._rng)

    def trigger_ms(self) -> float:
        """On Ray the coordinator actor's real trigger path takes real time: nothing is added."""
        if self.charging is not Charging.VIRTUAL:
            return 0.0
        return self.model.trigger_ms(self._rng)


FREE = CostCharger(NO_COST, Charging.VIRTUAL, random.Random(0))  # charges nothing: unit tests of the protocol


@dataclass(frozen=True)
class SnapshotWork:
    """What one subtask's snapshot does, in the model's bytes: ``copied_bytes`` in its synchronous part (a heap
    backend's table walk, an incremental backend's memtable flush), ``uploaded_bytes`` in ``files`` state files
    in its asynchronous part (state below the memory threshold travels inline in the acknowledgement: no file)."""

    copied_bytes: int = 0
    uploaded_bytes: int = 0
    files: int = 0


NO_WORK = SnapshotWork()
