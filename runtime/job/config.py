"""What a job run is given, and how it ended: the settings every driver maps the same way.

How this works: ``JobConfig`` holds one job's settings: the job graph, the checkpointing mode
(``runtime.checkpointing_mode``) and the coordinator's settings (with the retention of externalized checkpoints),
the network (buffers, credit, debloating), the source rate, the restart policy, the fault schedule, the
experiment actions (``runtime.faults.experiment``: savepoints, stop-with-savepoint, cancel and restores of new jobs with
new parallelisms) and the run's own restore from a path, and the simulated network's latencies and virtual time
limit (which only the simulator reads: on Ray, latency is real). A run may hold several jobs (restores):
``job_graphs`` are their graphs, ``for_job`` the settings of one of them (its graph; the run's first graph stays
``base_graph``, whose sources' parallelism is the number of splits of each source, ``splits_of``). It checks
itself when built: the mode with its settings (``checkpointing_problem``), the actions and the fault schedule
against the graphs, that the cluster (``cluster``: TaskManagers, slots and nodes, ``runtime.job.placement``) can
hold every job, and the TaskManager and node faults against that placement. ``coordinator_configuration()``,
``checkpoint_options()`` and ``restart_settings()`` map it onto the coordinator's configuration, Flink's
``CheckpointOptions`` and a JobMaster's restart strategy: one mapping for both drivers. ``JobOutcome`` is how a
job ended. Mirrors Flink's ``CheckpointConfig`` / ``ExecutionConfig`` settings as a job's configuration carries
them.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass

from barriersim.runtime.checkpoint_cost import CheckpointCostModel
from barriersim.runtime.checkpointing_mode import CheckpointingMode, checkpointing_problem
from barriersim.runtime.coordinator.configuration import NO_PERIODIC_CHECKPOINTS, CheckpointCoordinatorConfiguration
from barriersim.runtime.coordinator.periodic_scheduler import MINIMAL_CHECKPOINT_TIME
from barriersim.runtime.coordinator.properties import ExternalizedCheckpointRetention
from barriersim.runtime.coordinator.shared_state_registry import RecoveryClaimMode
from barriersim.runtime.events import CheckpointOptions, CheckpointType
from barriersim.runtime.faults.experiment import ActionSchedule, ActionScheduleError, RestoreSettings, rescaled
from barriersim.runtime.faults.fault_schedule import FaultSchedule
from barriersim.runtime.job.placement import ClusterConfig, Placement, PlacementError, place
from barriersim.runtime.jobgraph import JobGraph
from barriersim.runtime.job.restart_strategy import RestartStrategyConfig, RestartStrategyKind
from barriersim.runtime.state.backend import StateBackendConfig
from barriersim.runtime.task.stream_task import UNPACED_SOURCE_BATCH_RECORDS, NetworkConfig


SOURCE_PACING_MS = 10  # a paced source emits what its rate allows per this many ms


class JobConfigError(ValueError):
    """Settings a job cannot run with; ``key`` is the scenario key at fault, ``str()`` the one-line message."""

    def __init__(self, key: str, problem: str):
        self.key = key
        self.problem = problem
        super().__init__(f"{key}: {problem}")


class SourceEmission(enum.Enum):
    """How the simulator emits a paced source's records (``source_rate_per_subtask``). ``STEPS``: a step reads
    what the rate allows in ``SOURCE_PACING_MS`` and writes it at once, and the task is busy until those records
    were due; a barrier or a flush during the step follows all of them, and a buffer they fill goes out at the
    step's start (up to ``SOURCE_PACING_MS`` early). ``EXACT``: every record is written when it is due, as
    Flink's source emits one record per mailbox turn (``runtime.sim.source_emission``); it costs simulator speed.
    The Ray backend reads in steps either way, in real time."""

    STEPS = "steps"
    EXACT = "exact"


class JobOutcome(enum.Enum):
    FINISHED = "finished"
    CANCELED = "canceled"  # cancelled by the user (JobMaster.cancel)
    FAILED = "failed"  # too many restarts, or the failure manager failed the job for good
    TIMED_OUT = "timed_out"  # the simulator's virtual time limit: a deadlock or a job too long for the limit


@dataclass(frozen=True)
class JobConfig:
    graph: JobGraph
    mode: CheckpointingMode = CheckpointingMode.ALIGNED
    interval_ms: int = 1000
    timeout_ms: int = 600_000
    aligned_checkpoint_timeout_ms: int = 0
    max_concurrent: int = 1
    min_pause_ms: int = 0
    tolerable_failures: int = 0
    max_retained: int = 1
    checkpoints_after_tasks_finish: bool = True
    memory_threshold_bytes: int = 20 * 1024  # Flink's state.storage.fs.memory-threshold (filesystem storage)
    # what survives the job's end (Flink's execution.checkpointing.externalized-checkpoint-retention)
    externalized_checkpoint_retention: ExternalizedCheckpointRetention = (
        ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS)
    network: NetworkConfig = NetworkConfig()
    storage: CheckpointCostModel = CheckpointCostModel()  # what checkpoints cost (runtime.checkpoint_cost)
    state: StateBackendConfig = StateBackendConfig()  # the keyed state backend (runtime.state.backend)
    # whether a new JobManager's recovered checkpoints are the job's to discard (Flink's claim mode; NO_CLAIM default)
    claim_mode: RecoveryClaimMode = RecoveryClaimMode.NO_CLAIM
    buffer_timeout_ms: int = 100
    restart_delay_ms: int = 1000  # the fixed-delay strategy's delay, and a JobManager failover's
    max_restarts: int = 20  # the fixed-delay strategy's attempts
    # an exponential-delay restart strategy's settings; None: the fixed-delay strategy of the two above
    restart: RestartStrategyConfig | None = None
    source_rate_per_subtask: int = 0  # records/s; 0: limited by cost and backpressure only
    source_emission: SourceEmission = SourceEmission.STEPS  # the simulator's model of a paced source
    # a source that read its splits holds its end of input until it was notified of this many completed checkpoints
    # (Flink's minCheckpoints of its UnalignedCheckpointTestBase.LongSource; StreamTask's source_min_checkpoints)
    source_min_checkpoints: int = 0
    faults: FaultSchedule = FaultSchedule()
    actions: ActionSchedule = ActionSchedule()
    restore: RestoreSettings | None = None  # the run starts from this savepoint or retained checkpoint
    base_graph: JobGraph | None = None  # the run's first graph, when ``graph`` is a restored job's
    cluster: ClusterConfig = ClusterConfig()
    # the CPU cores the subtasks of every TaskManager share (the simulator's; one machine, as a MiniCluster): their
    # records' CPU work stretches when more run at once (runtime.sim.cpu_share); 0: each has a core of its own
    cpu_cores: int = 0
    # the simulated network and time limit (the simulator's; on Ray latency is real and the driver sets the limit)
    latency_us_mean: float = 100.0
    latency_us_jitter: float = 20.0
    rpc_latency_us: float = 500.0
    max_virtual_ms: int = 3_600_000

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", CheckpointingMode.parse(self.mode, "checkpointing.mode"))
        problem = checkpointing_problem(self.mode, self.max_concurrent, self.aligned_checkpoint_timeout_ms)
        if problem is not None:
            raise JobConfigError(*problem)
        if self.restart is not None:
            if self.restart.strategy is not RestartStrategyKind.EXPONENTIAL_DELAY:
                raise JobConfigError("restart.strategy", "a fixed-delay strategy is set with max_restarts and "
                                                         "restart_delay_ms, not restart")
            problem = self.restart.problem()
            if problem is not None:
                raise JobConfigError("restart", problem)
        if self.source_min_checkpoints < 0:
            raise JobConfigError("workload.min_checkpoints", f"must be at least 0, not {self.source_min_checkpoints}")
        if self.source_min_checkpoints and not self.periodic_checkpoints:
            raise JobConfigError("workload.min_checkpoints", "needs periodic checkpoints (checkpointing.interval_ms): "
                                                              "without them the sources would never end")
        graphs = self.job_graphs
        # FaultScheduleError: a fault for a subtask no job of the run has
        self.faults.check_against(graphs[0] if len(graphs) == 1 else _union(graphs))
        try:
            for graph in graphs:
                place(graph, self.cluster)
            object.__setattr__(self, "_placement", place(self.graph, self.cluster))
        except PlacementError as err:
            raise JobConfigError(err.key, str(err).partition(": ")[2]) from None
        self.faults.check_against_placement(self.graph, self.placement)

    @property
    def job_graphs(self) -> list[JobGraph]:
        """The graph of each job of the run: the first (restored from ``restore`` if set), then each restore's."""
        base = self.base_graph or self.graph
        try:
            first = rescaled(base, self.restore.parallelism, "restore.parallelism") if self.restore else base
            self.actions.check_against(
                first, self.externalized_checkpoint_retention is ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
            return self.actions.graphs(first)
        except ActionScheduleError as err:
            key, _, problem = str(err).partition(": ")
            raise JobConfigError(key, problem) from None

    def for_job(self, graph: JobGraph) -> "JobConfig":
        """The settings of one job of the run: its graph (the run's first graph stays ``base_graph``)."""
        return dataclasses.replace(self, graph=graph, base_graph=self.base_graph or self.graph)

    def splits_of(self, source: str) -> int:
        """How many splits source vertex ``source`` reads: its parallelism in the run's first graph."""
        return (self.base_graph or self.graph).vertex(source).parallelism

    @property
    def placement(self) -> Placement:
        """Where each subtask runs (TaskManager, slot), and so which channels are local."""
        return self._placement  # type: ignore[attr-defined]

    @property
    def periodic_checkpoints(self) -> bool:
        """Whether the coordinator triggers checkpoints periodically (an interval it schedules)."""
        return MINIMAL_CHECKPOINT_TIME <= self.interval_ms < NO_PERIODIC_CHECKPOINTS

    @property
    def tasks_wait_for_final_checkpoint(self) -> bool:
        """FLIP-147: tasks at end of input wait for a final checkpoint only if checkpoints after tasks finish are
        enabled and periodic checkpointing is on (Flink waits only when checkpointing is enabled); otherwise a
        job without checkpoints could never end."""
        return self.checkpoints_after_tasks_finish and self.periodic_checkpoints

    @property
    def emits_watermarks(self) -> bool:
        """Sources emit watermarks when some operator of the job works in event time."""
        return any(v.operator.uses_event_time for v in self.graph.vertices)

    @property
    def source_batch_records(self) -> int:
        """Records a source subtask reads per step, at most: a paced source (``source_rate_per_subtask``) what its
        rate allows in ``SOURCE_PACING_MS`` (at least one record), so that a barrier or a flush never waits behind
        more than that much of its output, at every rate; an unpaced one ``UNPACED_SOURCE_BATCH_RECORDS``; either
        no more than ``network.source_batch_records`` when that is set. A step also ends at the record after which
        an output is backpressured (``StreamTask``), as Flink's source checks its output before each record."""
        limit = self.network.source_batch_records
        if not self.source_rate_per_subtask:
            return limit or UNPACED_SOURCE_BATCH_RECORDS
        paced = max(1, round(self.source_rate_per_subtask * SOURCE_PACING_MS / 1000))
        return min(limit, paced) if limit else paced

    def restart_settings(self) -> RestartStrategyConfig:
        """The restart strategy a new JobMaster creates (``RestartStrategyConfig.create``)."""
        if self.restart is not None:
            return self.restart
        return RestartStrategyConfig(RestartStrategyKind.FIXED_DELAY, self.max_restarts, self.restart_delay_ms)

    def coordinator_configuration(self) -> CheckpointCoordinatorConfiguration:
        """The coordinator's configuration for these settings."""
        return CheckpointCoordinatorConfiguration(
            checkpoint_interval=self.interval_ms,
            checkpoint_timeout=self.timeout_ms,
            min_pause_between_checkpoints=self.min_pause_ms,
            max_concurrent_checkpoints=self.max_concurrent,
            tolerable_checkpoint_failure_number=self.tolerable_failures,
            max_retained_checkpoints=self.max_retained,
            retention_policy=self.externalized_checkpoint_retention.retention_policy,
            checkpoint_options=self.checkpoint_options(),
            allow_checkpoints_after_tasks_finished=self.checkpoints_after_tasks_finish,
        )

    def checkpoint_options(self) -> CheckpointOptions:
        return CheckpointOptions.for_config(
            CheckpointType.CHECKPOINT,
            exactly_once=self.mode.exactly_once,
            unaligned_enabled=self.mode.unaligned_enabled,
            aligned_checkpoint_timeout=self.mode.alignment_timeout_ms(self.aligned_checkpoint_timeout_ms),
        )


def _union(graphs: list[JobGraph]) -> JobGraph:
    """A graph holding every subtask of ``graphs`` (the vertices at their highest parallelism), for checking a
    fault schedule against every job of a run."""
    vertices = [dataclasses.replace(v, parallelism=max(g.vertex(v.name).parallelism for g in graphs))
                for v in graphs[0].vertices]
    return JobGraph(tuple(vertices), graphs[0].edges)
