"""What a job run is given, and how it ended: the settings both drivers take, as the same objects.

How this works: ``JobConfig`` is the job graph and one frozen value per scenario section (``CheckpointingConfig``,
``NetworkConfig``, ``WorkloadConfig``, ``ClusterConfig``, ``CheckpointCostModel``, ``StateBackendConfig``,
``RestartStrategyConfig``: each field a ``runtime.settings`` setting), the fault schedule, the experiment actions
and the run's restore, plus what only the simulator reads (RPC latency, virtual time limit). It checks itself when
built (the mode with its settings, the restart strategy, the actions and faults against the graphs, the placement);
``job_graphs`` are the run's graphs, ``for_job`` one job's settings. ``JobOutcome`` is how a job ended. Mirrors
Flink's ``CheckpointConfig`` / ``ExecutionConfig`` as a job carries them (``docs/architecture.md``, "Settings").
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import cast

from barriersim.runtime.checkpoint_cost import CheckpointCostModel
from barriersim.runtime.coordinator.configuration import (
    NO_PERIODIC_CHECKPOINTS,
    CheckpointingConfig,
)
from barriersim.runtime.coordinator.periodic_scheduler import MINIMAL_CHECKPOINT_TIME
from barriersim.runtime.coordinator.properties import ExternalizedCheckpointRetention
from barriersim.runtime.faults.experiment import ActionSchedule, ActionScheduleError, RestoreSettings, rescaled
from barriersim.runtime.faults.fault_schedule import FaultSchedule
from barriersim.runtime.job.placement import ClusterConfig, Placement, PlacementError, place
from barriersim.runtime.job.restart_strategy import RestartStrategyConfig
from barriersim.runtime.jobgraph import JobGraph
from barriersim.runtime.network.config import NetworkConfig
from barriersim.runtime.settings import AtLeast, Between, setting
from barriersim.runtime.state.backend import StateBackendConfig
from barriersim.runtime.task.stream_task import UNPACED_SOURCE_BATCH_RECORDS

SOURCE_PACING_MS = 10  # a paced source emits what its rate allows per this many ms


class JobConfigError(ValueError):
    """Settings a job cannot run with; ``key`` is the scenario key at fault, ``str()`` the one-line message."""

    def __init__(self, key: str, problem: str):
        self.key = key
        self.problem = problem
        super().__init__(f"{key}: {problem}")


class SourceEmission(enum.Enum):
    """How the simulator emits a paced source's records (``WorkloadConfig.rate_per_source``). ``STEPS``: a step reads
    what the rate allows in ``SOURCE_PACING_MS`` and writes it at once, and the task is busy until those records
    were due; a barrier or a flush during the step follows all of them, and a buffer they fill goes out at the
    step's start (up to ``SOURCE_PACING_MS`` early). ``EXACT``: every record is written when it is due, as
    Flink's source emits one record per mailbox turn (``runtime.sim.source_emission``); it costs simulator speed.
    The Ray backend reads in steps either way, in real time."""

    STEPS = "steps"
    EXACT = "exact"


class SourcePacing(enum.Enum):
    """How a paced source waits for its next record, which decides when its mails (checkpoint triggers,
    notifications) run. ``RATE_LIMITER``: off the task thread, as Flink's ``RateLimiterStrategy`` (the reader waits
    for a permit asynchronously), so a mail runs at once. ``SLEEP``: on the task thread, as a map chained to the
    source that sleeps until the record is due (the facts' and the family's jobs): a mail waits until the sleep ends
    and the record went out. Only ``SourceEmission.EXACT`` has records with due times to wait for."""

    RATE_LIMITER = "rate_limiter"
    SLEEP = "sleep"


class JobOutcome(enum.Enum):
    FINISHED = "finished"
    CANCELED = "canceled"  # cancelled by the user (JobMaster.cancel)
    FAILED = "failed"  # too many restarts, or the failure manager failed the job for good
    TIMED_OUT = "timed_out"  # the simulator's virtual time limit: a deadlock or a job too long for the limit


@dataclass(frozen=True)
class WorkloadConfig:
    """A scenario's ``[workload]``: what the sources read (the per-record draws, ``scenarios.workload``) and how
    they pace it."""

    records: int = setting(100_000, "records each source vertex reads", Between(1, 100_000_000))
    keys: int = setting(1000, "distinct keys", Between(1, 10_000_000))
    zipf_exponent: float = setting(1.0, "the keys' Zipf exponent (0: uniform)", Between(0.0, 3.0))
    hot_key_share: float = setting(0.0, "> 0: key 0 carries this share of the records", Between(0.0, 0.99))
    key_growth: bool = setting(False, "keys are added over time: the key space grows from 1 to `keys` over the run")
    max_value: int = setting(100, "values are uniform in 1..max_value", Between(1, 1_000_000))
    rate_per_source: int = setting(
        0, "records per second each source subtask emits; 0: as fast as cost and backpressure allow", AtLeast(0)
    )
    source_emission: SourceEmission = setting(
        SourceEmission.STEPS,
        "how the simulator emits a paced source's records: steps of 10 ms written at once, or "
        "exact (each when it is due; slower to simulate); Ray reads in steps either way",
    )
    pacing: SourcePacing = setting(
        SourcePacing.RATE_LIMITER,
        "how a paced source waits for its next record: rate_limiter (off the task thread: checkpoint triggers run "
        "at once) or sleep (a map that sleeps on the task thread: a trigger waits for the next record; needs "
        "source_emission = exact)",
    )
    min_checkpoints: int = setting(
        0,
        "> 0: a source that read its records holds its end of input until it was notified of this many "
        "completed checkpoints (Flink's minCheckpoints of its test sources)",
        Between(0, 1_000_000),
    )

    def __post_init__(self) -> None:  # a caller's string becomes the enum
        object.__setattr__(self, "source_emission", SourceEmission(self.source_emission))
        object.__setattr__(self, "pacing", SourcePacing(self.pacing))

    def problem(self) -> tuple[str, str] | None:
        """``(key, problem)`` if these settings do not go together, else None."""
        if self.source_emission is SourceEmission.EXACT and not self.rate_per_source:
            return (
                "workload.source_emission",
                '"exact" paces records by workload.rate_per_source, which is 0 (unpaced sources read in steps)',
            )
        if self.pacing is SourcePacing.SLEEP and self.source_emission is not SourceEmission.EXACT:
            return (
                "workload.pacing",
                '"sleep" waits for the due time of each record, which only source_emission = "exact" has',
            )
        return None


@dataclass(frozen=True)
class JobConfig:
    graph: JobGraph
    checkpointing: CheckpointingConfig = CheckpointingConfig()
    network: NetworkConfig = NetworkConfig()
    workload: WorkloadConfig = WorkloadConfig()
    cluster: ClusterConfig = ClusterConfig()
    storage: CheckpointCostModel = CheckpointCostModel()  # what checkpoints cost (a scenario's [storage])
    state: StateBackendConfig = StateBackendConfig()  # the keyed state backend
    restart: RestartStrategyConfig = RestartStrategyConfig()
    faults: FaultSchedule = FaultSchedule()
    actions: ActionSchedule = ActionSchedule()
    restore: RestoreSettings | None = None  # the run starts from this savepoint or retained checkpoint
    base_graph: JobGraph | None = None  # the run's first graph, when ``graph`` is a restored job's
    # records a source reads per step, at most (``source_batch_records``; None: no limit of its own), no scenario key
    max_source_batch_records: int | None = None
    # the simulator's RPC latency and time limit (on Ray latency is real and the driver sets the limit)
    rpc_latency_us: float = 500.0
    max_virtual_ms: int = 3_600_000

    def __post_init__(self) -> None:
        problem: tuple[str, str] | str | None
        for problem in (self.checkpointing.problem(), self.workload.problem()):
            if problem is not None:
                raise JobConfigError(*problem)
        problem = self.restart.problem()
        if problem is not None:
            raise JobConfigError("restart", problem)
        if self.workload.min_checkpoints < 0:
            raise JobConfigError("workload.min_checkpoints", f"must be at least 0, not {self.workload.min_checkpoints}")
        if self.workload.min_checkpoints and not self.periodic_checkpoints:
            raise JobConfigError(
                "workload.min_checkpoints",
                "needs periodic checkpoints (checkpointing.interval_ms): without them the sources would never end",
            )
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
                first,
                self.checkpointing.externalized_checkpoint_retention
                is ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION,
            )
            return self.actions.graphs(first)
        except ActionScheduleError as err:
            key, _, problem = str(err).partition(": ")
            raise JobConfigError(key, problem) from None

    def for_job(self, graph: JobGraph) -> JobConfig:
        """The settings of one job of the run: its graph (the run's first graph stays ``base_graph``)."""
        return dataclasses.replace(self, graph=graph, base_graph=self.base_graph or self.graph)

    def splits_of(self, source: str) -> int:
        """How many splits source vertex ``source`` reads: its parallelism in the run's first graph."""
        return (self.base_graph or self.graph).vertex(source).parallelism

    @property
    def placement(self) -> Placement:
        """Where each subtask runs (TaskManager, slot), and so which channels are local."""
        return cast(Placement, self._placement)  # type: ignore[attr-defined]

    @property
    def periodic_checkpoints(self) -> bool:
        """Whether the coordinator triggers checkpoints periodically (an interval it schedules)."""
        return MINIMAL_CHECKPOINT_TIME <= self.checkpointing.interval_ms < NO_PERIODIC_CHECKPOINTS

    @property
    def tasks_wait_for_final_checkpoint(self) -> bool:
        """FLIP-147: tasks at end of input wait for a final checkpoint only if checkpoints after tasks finish are
        enabled and periodic checkpointing is on (Flink waits only when checkpointing is enabled); otherwise a
        job without checkpoints could never end."""
        return self.checkpointing.checkpoints_after_tasks_finish and self.periodic_checkpoints

    @property
    def emits_watermarks(self) -> bool:
        """Sources emit watermarks when some operator of the job works in event time."""
        return any(v.operator.uses_event_time for v in self.graph.vertices)

    @property
    def source_batch_records(self) -> int:
        """Records a source subtask reads per step, at most: a paced source (``workload.rate_per_source``) what its
        rate allows in ``SOURCE_PACING_MS`` (at least one record), so that a barrier or a flush never waits behind
        more than that much of its output, at every rate; an unpaced one ``UNPACED_SOURCE_BATCH_RECORDS``; either
        no more than ``max_source_batch_records`` when that is set. A step also ends at the record after which
        an output is backpressured (``StreamTask``), as Flink's source checks its output before each record."""
        limit = self.max_source_batch_records
        rate = self.workload.rate_per_source
        if not rate:
            return limit or UNPACED_SOURCE_BATCH_RECORDS
        paced = max(1, round(rate * SOURCE_PACING_MS / 1000))
        return min(limit, paced) if limit else paced


def _union(graphs: list[JobGraph]) -> JobGraph:
    """A graph holding every subtask of ``graphs`` (the vertices at their highest parallelism), for checking a
    fault schedule against every job of a run."""
    vertices = [
        dataclasses.replace(v, parallelism=max(g.vertex(v.name).parallelism for g in graphs))
        for v in graphs[0].vertices
    ]
    return JobGraph(tuple(vertices), graphs[0].edges)
