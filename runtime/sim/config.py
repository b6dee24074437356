"""What a simulated job run is given and what it gives back.

How this works: ``SimulationConfig`` holds one run's settings (the job graph, the checkpointing mode and
coordinator settings, the network and cost model, restart policy, the fault schedule and the virtual time
limit); ``coordinator_configuration()`` maps them onto the coordinator's configuration and
``checkpoint_options()`` onto Flink's ``CheckpointOptions``, one mapping for every driver (simulator and Ray).
``SimulationResult`` is what ``JobSimulation.run`` returns: the outcome, the committed output, Flink's
per-checkpoint and per-subtask statistics, restarts, virtual time, events and the trace's SHA-256. Mirrors
Flink's ``CheckpointConfig`` / ``ExecutionConfig`` settings as a job's configuration carries them, and the
``JobExecutionResult`` with the checkpoint statistics of its REST API.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from barriersim.runtime.coordinator.configuration import NO_PERIODIC_CHECKPOINTS, CheckpointCoordinatorConfiguration
from barriersim.runtime.coordinator.periodic_scheduler import MINIMAL_CHECKPOINT_TIME
from barriersim.runtime.events import CheckpointOptions, CheckpointType
from barriersim.runtime.faults import FaultSchedule
from barriersim.runtime.jobgraph import JobGraph
from barriersim.runtime.stream_task import NetworkConfig
from barriersim.runtime.restart_strategy import FixedDelayRestartStrategy


@dataclass(frozen=True)
class SimulationConfig:
    graph: JobGraph
    mode: str = "aligned"
    interval_ms: int = 1000
    timeout_ms: int = 600_000
    aligned_checkpoint_timeout_ms: int = 0
    max_concurrent: int = 1
    min_pause_ms: int = 0
    tolerable_failures: int = 0
    max_retained: int = 1
    checkpoints_after_tasks_finish: bool = True
    network: NetworkConfig = NetworkConfig()
    latency_us_mean: float = 100.0
    latency_us_jitter: float = 20.0
    rpc_latency_us: float = 500.0
    buffer_timeout_ms: int = 100
    restart_delay_ms: int = 1000
    max_restarts: int = 20
    source_rate_per_subtask: int = 0  # records/s; 0: limited by cost and backpressure only
    faults: FaultSchedule = FaultSchedule()
    max_virtual_ms: int = 3_600_000

    def __post_init__(self) -> None:
        self.faults.check_against(self.graph)  # FaultScheduleError: a fault for a subtask this job does not have

    @property
    def tasks_wait_for_final_checkpoint(self) -> bool:
        """FLIP-147: tasks at end of input wait for a final checkpoint only if checkpoints after tasks finish are
        enabled and periodic checkpointing is on (Flink waits only when checkpointing is enabled); otherwise a
        job without checkpoints could never end."""
        return self.checkpoints_after_tasks_finish and MINIMAL_CHECKPOINT_TIME <= self.interval_ms < NO_PERIODIC_CHECKPOINTS

    def restart_strategy(self) -> FixedDelayRestartStrategy:
        """A new JobMaster's restart strategy for these settings (one mapping for every driver)."""
        return FixedDelayRestartStrategy(self.max_restarts, self.restart_delay_ms)

    def coordinator_configuration(self) -> CheckpointCoordinatorConfiguration:
        """The coordinator's configuration for these settings (one mapping for every driver)."""
        return CheckpointCoordinatorConfiguration(
            checkpoint_interval=self.interval_ms,
            checkpoint_timeout=self.timeout_ms,
            min_pause_between_checkpoints=self.min_pause_ms,
            max_concurrent_checkpoints=self.max_concurrent,
            tolerable_checkpoint_failure_number=self.tolerable_failures,
            max_retained_checkpoints=self.max_retained,
            checkpoint_options=self.checkpoint_options(),
            allow_checkpoints_after_tasks_finished=self.checkpoints_after_tasks_finish,
        )

    def checkpoint_options(self) -> CheckpointOptions:
        return CheckpointOptions.for_config(
            CheckpointType.CHECKPOINT,
            exactly_once=self.mode != "at-least-once",
            unaligned_enabled=self.mode in ("unaligned", "aligned-with-timeout"),
            aligned_checkpoint_timeout=self.aligned_checkpoint_timeout_ms if self.mode == "aligned-with-timeout" else 0,
        )


class JobOutcome(enum.Enum):
    FINISHED = "finished"
    FAILED = "failed"  # too many restarts, or the failure manager failed the job for good
    TIMED_OUT = "timed_out"  # virtual time limit reached: a deadlock or a job too long for the limit


@dataclass
class SimulationResult:
    outcome: JobOutcome
    committed_output: list[tuple]
    checkpoints: list[dict]
    subtasks: list[dict]
    counts: dict[str, int]
    restarts: int
    virtual_ms: int
    events: int
    trace_sha256: str
    restored_checkpoint_ids: list[int] = field(default_factory=list)
    restored_in_flight_bytes: int = 0
    coordinator_failovers: int = 0
    fault_log: list[dict] = field(default_factory=list)  # runtime.fault_log.FaultLog.report(): what fired
