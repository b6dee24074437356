"""One configuration of the family: a Flink job and its MiniCluster as one JSON description, which the Java job
(``benchmarks/flink/FamilyJob.java``) runs and ``converter`` turns into a barriersim scenario.

How this works: a ``Config`` is a chain of vertices (the source, then 1-3 vertices each behind its exchange: hash,
rebalance, forward or broadcast; the last is the sink), per-record CPU costs, the keys' distribution and the hot
key's extra cost at one vertex, the offered rate, the record size, the cluster, the buffers and checkpointing.
``loads`` follows the records through the chain (key-group assignment for hash, as Flink's and barriersim's) to each
subtask's nominal busy time per offered record/s: the bottleneck subtask and the rate the job can take
(``capacity``), before the CPU contention of the machine's cores, which ``cpu_capacity`` bounds separately.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from barriersim.runtime.state.key_groups import assign_key_to_parallel_operator
from barriersim.scenarios.workload import zipf_cdf

EXCHANGES = ("hash", "rebalance", "forward", "broadcast")
MODES = ("aligned", "unaligned", "at-least-once", "aligned-with-timeout")
MAX_PARALLELISM = 128  # Flink's default for parallelism up to 85 (KeyGroupRangeAssignment), barriersim's default
# CPU time per second the machine can give the job's spins (µs/s): one of its two cores, the other left to Flink's
# own threads (pacing, serialization, the network stack, the JobManager)
CPU_BUDGET_US_PER_S = 1_000_000
HOT_KEY = 0


@dataclass(frozen=True)
class Vertex:
    name: str
    parallelism: int
    input: str | None = None  # the exchange the vertex takes its input through; None for the source
    spin_us: float = 0.0  # CPU time per record (the source: 0, it only paces)

    @property
    def keyed(self) -> bool:
        return self.input == "hash"


@dataclass(frozen=True)
class Config:
    name: str
    group: str  # "pair-base", "pair-variant", "calibration" or "draw"
    seed: int
    vertices: tuple[Vertex, ...]
    keys: int
    zipf_exponent: float  # the keys' Zipf exponent (0: uniform); with a hot key, over the other keys
    hot_key_share: float  # key 0's share of the records (0: no hot key)
    hot_key_extra_us: float  # key 0's sleep per record at ``hot_vertex`` (0 without a hot key)
    hot_vertex: str
    load: str  # the level the rate was drawn at (``generator.LOADS``), relative to ``capacity``
    rate: int  # offered records/s of all source subtasks together
    payload_bytes: int
    taskmanagers: int
    slots_per_taskmanager: int
    buffer_kib: int
    debloat: bool
    debloat_target_ms: int
    mode: str
    aligned_timeout_ms: int  # aligned-with-timeout only (0 otherwise)
    interval_ms: int
    seconds: int = 40  # how long Flink runs once every task runs
    notes: tuple[str, ...] = field(default=())

    @property
    def source(self) -> Vertex:
        return self.vertices[0]

    @property
    def sink(self) -> Vertex:
        return self.vertices[-1]

    @property
    def record_bytes(self) -> int:
        """A record's bytes in a network buffer: the 4-byte length, the stream element's tag byte and its 8-byte
        timestamp (the source's records carry one), the key and the random int (4 bytes each), the payload's length
        (Flink's StringValue: length + 1 in 7-bit groups) and its ASCII characters; Flink measured 122 bytes per
        record for a 100-byte payload (its sources' numBytesOut / numRecordsOut)."""
        n, groups = self.payload_bytes + 1, 1
        while n >= 0x80:
            n >>= 7
            groups += 1
        return 4 + 1 + 8 + 4 + 4 + groups + self.payload_bytes

    def to_json(self) -> dict:
        out = asdict(self)
        out["vertices"] = [asdict(v) for v in self.vertices]
        out["notes"] = list(self.notes)
        job = loads(self)  # derived, for the reader
        out["derived"] = {
            "record_bytes": self.record_bytes,
            "bottleneck": "{}#{:d}".format(*job.bottleneck),
            "capacity": round(job.capacity),
            "cpu_capacity": round(job.cpu_capacity),
            "cpu_bound": job.cpu_capacity < job.capacity,
        }
        return out

    @staticmethod
    def from_json(d: dict) -> Config:
        d = {k: v for k, v in d.items() if k != "derived"}
        d["vertices"] = tuple(Vertex(**v) for v in d["vertices"])
        d["notes"] = tuple(d.get("notes", ()))
        return Config(**d)


@dataclass(frozen=True)
class Loads:
    """Per vertex and subtask: records/s in and busy µs per s, each per offered record/s (scale by the rate)."""

    records_in: dict[str, list[float]]
    busy_us: dict[str, list[float]]
    cpu_us: float  # the spins' CPU µs per s over all subtasks (sleeps excluded)

    @property
    def bottleneck(self) -> tuple[str, int]:
        return max(
            ((name, i) for name, b in self.busy_us.items() for i in range(len(b))),
            key=lambda t: self.busy_us[t[0]][t[1]],
        )

    @property
    def bottleneck_vertex(self) -> str:
        return self.bottleneck[0]

    @property
    def capacity(self) -> float:
        """The offered rate at which the bottleneck subtask would be busy all the time."""
        name, i = self.bottleneck
        return 1e6 / self.busy_us[name][i] if self.busy_us[name][i] else float("inf")

    @property
    def cpu_capacity(self) -> float:
        """The offered rate at which the spins would use the CPU budget (``CPU_BUDGET_US_PER_S``)."""
        return CPU_BUDGET_US_PER_S / self.cpu_us if self.cpu_us else float("inf")


def key_shares(config: Config) -> list[float]:
    """Each key's share of the records (barriersim's workload draw, which the Java job's pacing map copies)."""
    cdf = zipf_cdf(config.keys, config.zipf_exponent, config.hot_key_share)
    return [float(cdf[0])] + [float(cdf[k] - cdf[k - 1]) for k in range(1, config.keys)]


def loads(config: Config) -> Loads:
    """Follow one offered record/s through the chain: per subtask the records (and hot-key records) it takes in."""
    shares = key_shares(config)
    hot_share = shares[HOT_KEY]
    ps = config.source.parallelism
    out = [1.0 / ps] * ps  # records/s each upstream subtask emits
    hot_out = [hot_share / ps] * ps
    records_in, busy, cpu = {}, {}, 0.0
    for v in config.vertices[1:]:
        total, hot_total, p = sum(out), sum(hot_out), v.parallelism
        if v.input == "hash":
            rin = [0.0] * p
            for key, share in enumerate(shares):
                rin[assign_key_to_parallel_operator(key, MAX_PARALLELISM, p)] += share * total
            hin = [0.0] * p
            hin[assign_key_to_parallel_operator(HOT_KEY, MAX_PARALLELISM, p)] = hot_total
        elif v.input == "rebalance":
            rin, hin = [total / p] * p, [hot_total / p] * p
        elif v.input == "forward":
            rin, hin = list(out), list(hot_out)
        elif v.input == "broadcast":
            rin, hin = [total] * p, [hot_total] * p
        else:
            raise ValueError(f"{config.name}: vertex {v.name}: unknown exchange {v.input!r}")
        extra = config.hot_key_extra_us if v.name == config.hot_vertex and config.hot_key_share > 0 else 0.0
        records_in[v.name] = rin
        busy[v.name] = [r * v.spin_us + h * extra for r, h in zip(rin, hin)]
        cpu += sum(rin) * v.spin_us
        out, hot_out = rin, hin
    return Loads(records_in, busy, cpu)
