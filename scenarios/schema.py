"""The scenario schema: every section and key a scenario file may hold, each with its type, default and allowed range.

How this works: ``SCHEMA`` maps each section to its keys, ``VERTEX_FIELDS`` and ``EDGE_FIELDS`` are the keys of a
general job's ``[[job.vertex]]`` and ``[[job.edge]]`` tables; a ``Field`` is a key's type, its default (``None``:
required) and a check that returns the problem with a value, or ``None``. The defaults are Flink's where Flink has
one (``docs/flink-facts.md``) and the runtime's own defaults otherwise (the checkpoint cost model, the state backend),
read from the runtime so that a scenario that leaves a key out runs exactly as the runtime would. The loader
(``scenarios.loader``) applies the schema; ``SETTABLE_SECTIONS`` are the sections whose keys overrides and sweeps may
set as ``section.key``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from barriersim.runtime.checkpoint_cost import CheckpointCostModel
from barriersim.runtime.checkpointing_mode import ALL_MODES, CheckpointingMode
from barriersim.runtime.coordinator.properties import ExternalizedCheckpointRetention
from barriersim.runtime.coordinator.shared_state_registry import RecoveryClaimMode
from barriersim.runtime.job.config import SourceEmission
from barriersim.runtime.jobgraph import OperatorKind, Partitioner
from barriersim.runtime.job.restart_strategy import MAX_INT, RestartStrategyConfig, RestartStrategyKind
from barriersim.runtime.state.backend import StateBackendConfig, StateBackendKind

SETTABLE_SECTIONS = ("workload", "checkpointing", "network", "cluster", "storage", "state", "restart")  # what overrides and sweeps may set, as "section.key"


@dataclass(frozen=True)
class Field:
    kind: type
    default: Any
    check: Callable[[Any], str | None] = lambda v: None


def _at_least(low: float) -> Callable[[Any], str | None]:
    return lambda v: None if v >= low else f"must be >= {low}, got {v}"


def _between(low: float, high: float) -> Callable[[Any], str | None]:
    return lambda v: None if low <= v <= high else f"must be between {low} and {high}, got {v}"


def _one_of(*choices: str) -> Callable[[Any], str | None]:
    return lambda v: None if v in choices else f"must be one of {', '.join(choices)}, got {v!r}"


def _plain_name(v: str) -> str | None:
    """A name that shows as written in one-line messages, run directories and subtask names ('name#0')."""
    if not v or not v.isprintable() or v.strip() != v or any(c in v for c in "/#"):
        return f"must be a non-empty printable name without surrounding blanks, '/' or '#', got {v!r}"
    return None


_COST = CheckpointCostModel()
_STATE = StateBackendConfig()
_RESTART = RestartStrategyConfig()
OPERATORS = tuple(k.value for k in OperatorKind)
PARTITIONERS = tuple(p.value for p in Partitioner)
RETENTIONS = tuple(r.value for r in ExternalizedCheckpointRetention)  # Flink's default first

SCHEMA: dict[str, dict[str, Field]] = {
    "scenario": {
        "name": Field(str, None, _plain_name),
        "description": Field(str, ""),
        "seed": Field(int, 0, _at_least(0)),
    },
    "workload": {
        "records": Field(int, 100_000, _between(1, 100_000_000)),
        "keys": Field(int, 1000, _between(1, 10_000_000)),
        "zipf_exponent": Field(float, 1.0, _between(0.0, 3.0)),
        "hot_key_share": Field(float, 0.0, _between(0.0, 0.99)),  # > 0: key 0 carries this share of the records
        "key_growth": Field(bool, False),  # keys added over time: the key space grows from 1 to `keys` over the run
        "max_value": Field(int, 100, _between(1, 1_000_000)),
        "rate_per_source": Field(int, 0, _at_least(0)),
        # how the simulator emits a paced source's records: "steps" of 10 ms written at once, or "exact" (each record
        # when it is due; slower to simulate); the Ray backend reads in steps either way
        "source_emission": Field(str, SourceEmission.STEPS.value, _one_of(*(e.value for e in SourceEmission))),
        # > 0: a source that read its records holds its end of input until it was notified of this many completed
        # checkpoints (Flink's minCheckpoints of its test sources), so the job completes at least that many
        "min_checkpoints": Field(int, 0, _between(0, 1_000_000)),
    },
    # The quickstart shorthand; a general DAG uses [[job.vertex]] and [[job.edge]] instead.
    "job": {
        "source_parallelism": Field(int, 2, _between(1, 128)),
        "keyed_sum_parallelism": Field(int, 2, _between(1, 128)),
        "sink_parallelism": Field(int, 1, _between(1, 1)),
        "records_per_buffer": Field(int, 200, _between(1, 100_000)),
        "max_parallelism": Field(int, 128, _between(1, 32768)),
    },
    "network": {
        "buffer_size": Field(int, 32 * 1024, _between(1024, 1 << 20)),
        "exclusive_buffers_per_channel": Field(int, 2, _between(0, 1000)),
        "floating_buffers_per_gate": Field(int, 8, _between(0, 10_000)),
        "max_buffers_per_channel": Field(int, 10, _between(1, 10_000)),
        "latency_us_mean": Field(float, 100.0, _between(0.0, 10_000_000.0)),
        "latency_us_jitter": Field(float, 20.0, _between(0.0, 10_000_000.0)),
        "record_size": Field(int, 32, _between(1, 1 << 20)),
        # Flink's execution.buffer-timeout.interval: the output flusher hands open buffers to the consumers this often
        "buffer_timeout_ms": Field(int, 100, _between(1, 3_600_000)),
        # buffer debloating (FLIP-183), Flink's taskmanager.network.memory.buffer-debloat.* and min-segment-size
        "buffer_debloat": Field(bool, False),
        "buffer_debloat_target_ms": Field(int, 1000, _between(1, 3_600_000)),
        "buffer_debloat_period_ms": Field(int, 200, _between(1, 3_600_000)),
        "buffer_debloat_samples": Field(int, 20, _between(1, 100_000)),
        "buffer_debloat_threshold_percentages": Field(int, 25, _between(0, 100)),
        "min_buffer_size": Field(int, 256, _between(1, 1024)),
    },
    # where the job runs: TaskManagers and their slots (runtime.job.placement); channels between subtasks of one
    # TaskManager are local. The default is Flink's MiniCluster: one TaskManager with a slot per parallel instance.
    "cluster": {
        "taskmanagers": Field(int, 1, _between(1, 1024)),
        "slots_per_taskmanager": Field(int, 0, _between(0, 1024)),  # 0: the job's highest parallelism
        # the hosts the TaskManagers are spread over (TaskManager t on node t % nodes; node 0 hosts the JobManager);
        # 0: every node of the Ray cluster (one on the simulator)
        "nodes": Field(int, 0, _between(0, 1024)),
        # the CPU cores the subtasks of all TaskManagers share on the simulator (one machine, as Flink's MiniCluster;
        # runtime.sim.cpu_share); 0: each subtask has a core of its own. On Ray the machine's cores are real.
        "cpu_cores": Field(int, 0, _between(0, 1024)),
    },
    "checkpointing": {
        "mode": Field(str, CheckpointingMode.ALIGNED.value, _one_of(*ALL_MODES)),
        "interval_ms": Field(int, 1000, _at_least(10)),
        "timeout_ms": Field(int, 600_000, _at_least(1)),
        "aligned_checkpoint_timeout_ms": Field(int, 0, _at_least(0)),
        "max_concurrent": Field(int, 1, _between(1, 100)),
        "min_pause_ms": Field(int, 0, _at_least(0)),
        "tolerable_failures": Field(int, 0, _between(0, 1_000_000)),
        "max_retained": Field(int, 1, _between(1, 1000)),
        "checkpoints_after_tasks_finish": Field(bool, True),
        # Flink's state.storage.fs.memory-threshold (20 KiB, at most 1 MiB): a subtask's state stream at or above it
        # is written to a file of its own in the checkpoint's directory, a smaller one inline in _metadata
        "memory_threshold_bytes": Field(int, 20 * 1024, _between(0, 1024 * 1024)),
        # Flink's execution.checkpointing.externalized-checkpoint-retention: what a job that was cancelled, failed or
        # suspended keeps of its completed checkpoints (a finished job keeps none under any setting)
        "externalized_checkpoint_retention": Field(str, RETENTIONS[0], _one_of(*RETENTIONS)),
        # Flink's execution.state-recovery.claim-mode for the checkpoints a new JobManager recovers: no_claim (Flink's
        # default) never discards the files they created, claim discards them once no retained checkpoint uses them
        "recovery_claim_mode": Field(str, RecoveryClaimMode.NO_CLAIM.value, _one_of(*(m.value for m in RecoveryClaimMode))),
    },
    # the restart strategy (runtime.job.restart_strategy): fixed-delay (attempts, delay_ms) or exponential-delay (the other
    # keys; their defaults are Flink's restart-strategy.exponential-delay.*). The default stays barriersim's fixed-delay
    # of 20 attempts 1 s apart, on which the library's fault scenarios are timed; Flink's default for a job with
    # checkpointing is exponential-delay (README, "Restart strategy")
    "restart": {
        "strategy": Field(str, _RESTART.strategy.value, _one_of(*(k.value for k in RestartStrategyKind))),
        "attempts": Field(int, _RESTART.attempts, _between(0, 1_000_000)),
        "delay_ms": Field(int, _RESTART.delay_ms, _between(0, 86_400_000)),
        "initial_backoff_ms": Field(int, _RESTART.initial_backoff_ms, _between(1, 86_400_000)),
        "max_backoff_ms": Field(int, _RESTART.max_backoff_ms, _between(1, 86_400_000)),
        "backoff_multiplier": Field(float, _RESTART.backoff_multiplier,
                                    lambda v: None if 1 < v <= 1000 else f"must be greater than 1 and at most 1000, got {v}"),
        "reset_backoff_threshold_ms": Field(int, _RESTART.reset_backoff_threshold_ms, _between(1, 10**12)),
        "jitter_factor": Field(float, _RESTART.jitter_factor, _between(0.0, 1.0)),
        "attempts_before_reset_backoff": Field(int, _RESTART.attempts_before_reset_backoff, _between(1, MAX_INT)),
    },
    # the keyed state backend (runtime.state.backend): heap (full snapshots) or incremental (RocksDB-like sorted runs,
    # flushes and leveled compaction with RocksDB's defaults); entry_bytes models each state entry's size
    "state": {
        "backend": Field(str, _STATE.backend.value, _one_of(*(k.value for k in StateBackendKind))),
        "entry_bytes": Field(int, _STATE.entry_bytes, _between(0, 1 << 30)),
        "write_buffer_bytes": Field(int, _STATE.write_buffer_bytes, _between(1, 1 << 40)),
        "target_file_bytes": Field(int, _STATE.target_file_bytes, _between(1, 1 << 40)),
        "level0_compaction_trigger": Field(int, _STATE.level0_compaction_trigger, _between(1, 1000)),
        "max_bytes_for_level_base": Field(int, _STATE.max_bytes_for_level_base, _between(1, 1 << 50)),
        "level_multiplier": Field(int, _STATE.level_multiplier, _between(1, 1000)),
        "num_levels": Field(int, _STATE.num_levels, _between(2, 20)),
    },
    # what checkpoint work costs (runtime.checkpoint_cost.CheckpointCostModel: its docstring says which of Flink's
    # measured figures each default is calibrated to); the simulator charges it on its virtual clock, Ray only when
    # emulate_remote_store asks it to add the modelled upload times to its real file writes
    "storage": {
        "snapshot_fixed_ms": Field(float, _COST.snapshot_fixed_ms, _between(0.0, 3_600_000.0)),
        "snapshot_mib_per_s": Field(float, _COST.snapshot_mib_per_s, _between(0.001, 1e9)),
        "async_fixed_ms": Field(float, _COST.async_fixed_ms, _between(0.0, 3_600_000.0)),
        "upload_mib_per_s": Field(float, _COST.upload_mib_per_s, _between(0.001, 1e9)),
        "file_latency_ms": Field(float, _COST.file_latency_ms, _between(0.0, 3_600_000.0)),
        "channel_state_fixed_ms": Field(float, _COST.channel_state_fixed_ms, _between(0.0, 3_600_000.0)),
        "trigger_fixed_ms": Field(float, _COST.trigger_fixed_ms, _between(0.0, 3_600_000.0)),
        "latency_sigma": Field(float, _COST.latency_sigma, _between(0.0, 3.0)),
        "emulate_remote_store": Field(bool, _COST.emulate_remote_store),
    },
}

VERTEX_FIELDS: dict[str, Field] = {
    "name": Field(str, None, _plain_name),
    "operator": Field(str, None, _one_of(*OPERATORS)),
    "parallelism": Field(int, None, _between(1, 128)),
    "max_parallelism": Field(int, 128, _between(1, 32768)),
    "cost_us_per_record": Field(float, 1.0, _between(0.0, 1e9)),
    "hot_key": Field(int, -1, _at_least(-1)),
    "hot_key_extra_us": Field(float, 0.0, _between(0.0, 1e9)),
    "factor": Field(int, 2, _between(-1_000_000, 1_000_000)),
    "modulus": Field(int, 3, _between(1, 1_000_000)),
    "window_ms": Field(int, 1000, _between(1, 10**12)),
    # bytes each record this vertex emits occupies in a network buffer (its output type's serialized size);
    # 0: the scenario's [network] record_size
    "record_size": Field(int, 0, _between(0, 1 << 20)),
    # Flink's slotSharingGroup(name): subtasks of one group share slots (runtime.job.placement)
    "slot_sharing_group": Field(str, "default", _plain_name),
}
EDGE_FIELDS: dict[str, Field] = {
    "from": Field(str, None),
    "to": Field(str, None),
    "partitioner": Field(str, None, _one_of(*PARTITIONERS)),
    "input": Field(int, 0, _between(0, 1)),
}
