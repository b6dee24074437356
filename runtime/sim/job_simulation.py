"""A whole job in virtual time, the simulator's driver: the discrete-event kernel (``runtime.sim.kernel``: virtual
time, one seed, the trace), the run's ``Dispatcher`` (``runtime.job``: every decision at the job level) and the
``DataPlane`` (``runtime.sim.data_plane``: the tasks, their work and their network). ``JobSimulation`` carries out
the Dispatcher's actions in virtual time and hands it what happens, through its one way in; checkpoints go to an
in-memory ``JobManagerCheckpointStorage`` or, given a directory or storage URI, to the Ray backend's storage.
``(config, workload, seed)`` fixes the trace; with ``record_cuts`` every completed checkpoint is checked to be a
consistent cut after the run (``runtime.sim.consistent_cut``). Mirrors a Flink ``MiniCluster`` running one job.
docs/architecture.md ("The drivers") has the narrative."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from barriersim.runtime.checkpoint_cost import Charging
from barriersim.runtime.checkpointing_mode import CheckpointingMode
from barriersim.runtime.event_timers import DeliveringTimers
from barriersim.runtime.job import actions as a
from barriersim.runtime.job import events as je
from barriersim.runtime.job.config import JobConfig, JobOutcome
from barriersim.runtime.job.deployment import TaskRestoreError, deploy_task
from barriersim.runtime.job.dispatcher import Dispatcher
from barriersim.runtime.job.report import records_read_in_run
from barriersim.runtime.job.slowdowns import Slowdowns
from barriersim.runtime.job.wiring import SubtaskKey
from barriersim.runtime.operators.sinks import ExternalStore
from barriersim.runtime.record_batch import RecordBatch, RecordsLike
from barriersim.runtime.sim.alignment_liveness import AlignmentMonitor
from barriersim.runtime.sim.consistent_cut import CutRecorder, CutViolation, DeploymentLog, check_consistent_cuts
from barriersim.runtime.sim.data_plane import DataPlane
from barriersim.runtime.sim.kernel import Priority, RunOutcome, Simulation
from barriersim.runtime.storage.fs_storage import FileSystemCheckpointStorage
from barriersim.runtime.storage.memory_storage import JobManagerCheckpointStorage
from barriersim.runtime.storage.object_storage import checkpoint_storage_for, restore_storage_for
from barriersim.runtime.task.stream_task import StreamTask
from barriersim.runtime.verification.reference import Verification
from barriersim.runtime.verification.snapshot import verify_run

if TYPE_CHECKING:
    from barriersim.runtime.storage.checkpoint_storage import CheckpointStorage


@dataclass
class SimulationResult:
    """What ``JobSimulation.run`` returns: the JobMaster's account of the job, what the sinks committed, and the
    simulation's own figures (virtual time, events, the trace's SHA-256). The committed output is kept as the
    store's batches and joined into one batch when ``committed_output`` is first read: a caller that needs only
    its size (``committed_records``) does not copy every record once more."""

    outcome: JobOutcome
    committed_batches: Sequence[RecordBatch]  # what the sinks committed, in commit order (ExternalStore.output_batches)
    checkpoints: list[dict[str, Any]]
    subtasks: list[dict[str, Any]]
    counts: dict[str, int]
    restarts: int
    virtual_ms: int
    events: int
    trace_sha256: str
    restored_checkpoint_ids: list[int] = field(default_factory=list)
    restored_in_flight_bytes: int = 0
    coordinator_failovers: int = 0
    # runtime.faults.fault_log.FaultLog.report(): what fired
    fault_log: list[dict[str, Any]] = field(default_factory=list)
    storage_errors: list[str] = field(default_factory=list)
    # per deployment: epoch, restored id, TaskManager nodes
    deployments: list[dict[str, Any]] = field(default_factory=list)
    failure_reason: str | None = None  # one line, when the outcome is FAILED

    @cached_property
    def committed_output(self) -> RecordBatch:
        """What the sinks committed, as one batch (a sequence of record tuples too)."""
        return RecordBatch.concat(list(self.committed_batches))

    @property
    def committed_records(self) -> int:
        return sum(len(b) for b in self.committed_batches)


class JobSimulation:
    def __init__(
        self,
        config: JobConfig,
        splits: Mapping[str, Sequence[RecordsLike]],
        seed: int,
        record_cuts: bool = False,
        checkpoint_directory: str | Path | None = None,
        *,
        savepoint_directory: str | Path | None = None,
        store: ExternalStore | None = None,
        first_attempt_number: int = 0,
    ):
        """``record_cuts``: log every operator's records so that ``consistent_cut_violations()`` can check each
        completed checkpoint after the run, and list in ``finish_order_violations`` every task that finished while
        a task it reads still ran (costs memory and time; for tests and property checks);
        ``checkpoint_directory``: keep the checkpoints in the storage of this directory or storage URI
        (``checkpoint_storage_for``: a ``FileSystemCheckpointStorage``, or an ``ObjectStoreCheckpointStorage`` for
        ``s3://``, as the Ray backend does) instead of in memory; ``savepoint_directory``: where savepoints are
        written as files (else
        they stay with the checkpoints); ``store``: the external system, e.g. with what the run restored from
        wrote to it; ``first_attempt_number``: above the attempts of that run."""
        self.config = config
        self.record_cuts = record_cuts
        self.deployments: dict[int, DeploymentLog] = {}  # with record_cuts: what each deployment's operators did
        self.alignment_violations: list[str] = []  # with record_cuts: alignments that outlived their end
        self.graph = config.graph.validate()
        self.splits = splits
        self.sim = Simulation(seed)
        self.trace = self.sim.trace
        self.store = store if store is not None else ExternalStore()
        self.job_id = f"sim-{seed}"
        self._storage_rng = self.sim.random("storage")
        self._checkpoint_directory = checkpoint_directory
        self._savepoint_directory = savepoint_directory
        self.storages: dict[str, CheckpointStorage] = {}  # job id -> its checkpoint storage
        self._task_rng = self.sim.random("tasks")
        self._cost_rng = self.sim.random("checkpoint-cost")
        self.outcome: JobOutcome | None = None
        self.dispatcher = Dispatcher(
            config,
            self.job_id,
            storage_for=self._storage_for,
            clock=self.sim.clock_ms,
            timers=DeliveringTimers(self.sim, self._to_job_master),
            coordinator_rng=lambda: self.sim.random("coordinator"),
            trace=lambda label, detail: self.trace.record(self.sim.now_us, label, detail),
            keep_completed_metadata=record_cuts,
            restore_storage=restore_storage_for(config.restore.path if config.restore else None),
            first_attempt_number=first_attempt_number,
            charging=Charging.VIRTUAL,
            cost_rng=self.sim.random("metadata-cost"),
        )
        self.data_plane = DataPlane(
            config,
            sim=self.sim,
            finished=self.dispatcher.finished_subtasks(),
            record_cuts=record_cuts,
            to_job_master=self._to_job_master,
        )

    def _to_job_master(self, event: Any) -> None:
        self._carry_out(self.dispatcher.handle(event))

    def _storage_for(self, job_id: str) -> tuple[CheckpointStorage, CheckpointStorage]:
        """A job's checkpoint storage (in memory, Flink's JobManager storage) and its savepoints' (files in the
        savepoint directory when one is given, as Flink's JobManager storage writes them there)."""
        storage: CheckpointStorage
        if self._checkpoint_directory is None:
            storage = JobManagerCheckpointStorage(job_id, rng=self._storage_rng)
        else:
            storage = checkpoint_storage_for(
                self._checkpoint_directory,
                job_id,
                rng=self._storage_rng,
                memory_threshold=self.config.checkpointing.memory_threshold_bytes,
                default_savepoint_directory=None
                if self._savepoint_directory is None
                else str(self._savepoint_directory),
            )
            storage.initialize_base_locations()
        self.storages[job_id] = storage
        if self._savepoint_directory is None or self._checkpoint_directory is not None:
            return storage, storage
        return storage, FileSystemCheckpointStorage(
            self._savepoint_directory,
            job_id,
            rng=self._storage_rng,
            default_savepoint_directory=self._savepoint_directory,
        )

    @property
    def storage(self) -> CheckpointStorage:
        """The checkpoint storage of the first job."""
        return self.storages[self.job_id]

    @property
    def tasks(self) -> dict[SubtaskKey, StreamTask]:
        """The tasks of the last deployment."""
        return self.data_plane.deployed_tasks()

    @property
    def finish_order_violations(self) -> list[str]:
        """With ``record_cuts``: every task that finished while a task it reads still ran."""
        return self.data_plane.finish_order_violations()

    # -- running ---------------------------------------------------------------------------------------

    def run(self) -> SimulationResult:
        self._carry_out(self.dispatcher.handle(je.Start()))
        result = self.sim.run(until_us=self.config.max_virtual_ms * 1000)
        if self.outcome is None:
            self.outcome = JobOutcome.TIMED_OUT if result is RunOutcome.TIME_LIMIT else JobOutcome.FINISHED
        report = self.dispatcher.report()
        self.report = report
        return SimulationResult(
            outcome=self.outcome,
            committed_batches=self.store.output_batches(),
            checkpoints=report.checkpoints,
            subtasks=report.subtasks,
            counts=report.counts,
            restarts=report.restarts,
            virtual_ms=self.sim.clock_ms(),
            events=self.sim.events_processed,
            trace_sha256=self.trace.sha256,
            restored_checkpoint_ids=report.restored_checkpoint_ids,
            restored_in_flight_bytes=report.restored_in_flight_bytes,
            coordinator_failovers=report.coordinator_failovers,
            fault_log=report.fault_log,
            storage_errors=report.storage_errors,
            deployments=report.deployments,
            failure_reason=report.failure_reason,
        )

    def verify(self, result: SimulationResult) -> tuple[Verification, str]:
        """After ``run()``: the run's verification and what it covers, by the rule both backends apply
        (``runtime.verification.snapshot.verify_run``): its output against its splits, or against the snapshot its
        last job ended with (the store's pending transactions included), the run's operations telling of a failed
        drained stop."""
        return verify_run(
            self.config.graph,
            self.splits,
            self.dispatcher.ending_snapshot(),
            result.committed_output,
            self.store.pending_records,
            at_least_once=not self.config.checkpointing.mode.exactly_once,
            operations=self.report.operations,
        )

    def source_progress(self) -> dict[SubtaskKey, tuple[int, int | None]]:
        """After ``run()``: per source subtask of the last deployment, the records it read (how far its reader got,
        less where the run's first deployment started: 0 for a fresh job, the restored offsets for a job restored
        from an earlier run's snapshot), also when the job ended before its input did, and when its last record
        went out (virtual ms after the job's start: the end of its last step that read records; None if none)."""
        at_start = self.dispatcher.source_records_at_start()
        started = self.dispatcher.started_ms() or 0
        out = {}
        for key, records_read in self.data_plane.source_records_read().items():
            last_us = self.data_plane.last_record_us(key)
            last_ms = None if last_us is None else last_us // 1000 - started
            out[key] = (records_read_in_run(a.subtask_name(key), records_read, at_start), last_ms)
        return out

    def consistent_cut_violations(self) -> list[CutViolation]:
        """After ``run()``: every completed checkpoint checked as a consistent cut (``runtime.sim.consistent_cut``)."""
        if not self.record_cuts:
            raise ValueError("consistent_cut_violations: the simulation was created without record_cuts=True")
        return [
            v
            for graph, completed in self.dispatcher.completed_in_epoch_by_job()
            for v in check_consistent_cuts(
                graph,
                completed,
                self.deployments,
                exactly_once=self.config.checkpointing.mode.exactly_once,
                aligned_only=self.config.checkpointing.mode is CheckpointingMode.ALIGNED,
            )
        ]

    # -- the JobMaster's actions -----------------------------------------------------------------------

    def _carry_out(self, actions: list[Any]) -> None:
        for action in actions:
            kind = type(action)
            if kind is a.SendToTask:
                self._send_to_task(action)
            elif kind is a.SendToCoordinator:
                self._send_to_coordinator(action)
            elif kind is a.StartTimer:
                self.sim.schedule_after(
                    action.delay_ms * 1000,
                    cast(
                        "Callable[[], None]", lambda timer=action.timer: self._carry_out(self.dispatcher.handle(timer))
                    ),
                    Priority.URGENT,
                    "timer",
                )
            elif kind is a.DeployTasks:
                self._deploy(action)
            elif kind is a.ReportRunning:  # at this instant, after the timers due now (the deployment takes no time)
                self.sim.schedule_after(
                    0,
                    cast(
                        "Callable[[], None]",
                        lambda act=action: self._carry_out(
                            self.dispatcher.handle(je.TasksRunning(act.epoch, act.attempts))
                        ),
                    ),
                    Priority.LOW,
                    "running",
                )
            elif kind is a.KillTask:  # the task dies, and its death is seen at once
                self._carry_out(self.dispatcher.handle(je.TaskFailed(action.attempt, action.why)))
            elif kind is a.KillTaskManagers:  # every task of the TaskManagers dies at once
                lost = f"node {action.node}" if action.node is not None else f"taskmanager {action.taskmanagers[0]}"
                for attempt in action.attempts:
                    self._carry_out(self.dispatcher.handle(je.TaskFailed(attempt, f"{lost} lost ({action.why})")))
            elif kind is a.CancelTasks:
                self.data_plane.cancel(action.epoch + 1)
            elif kind is a.JobEnded:
                self.outcome = action.outcome
                self.sim.stop()
            else:
                raise TypeError(f"job {self.job_id}: the simulator cannot carry out {action!r}")

    def _send_to_task(self, action: a.SendToTask) -> None:
        attempt = action.attempt
        key = (attempt.vertex_id, attempt.subtask_index)
        data_plane = self.data_plane
        epoch = data_plane.current_epoch()

        def deliver() -> None:
            if not data_plane.has_task(key, epoch) or not self.dispatcher.is_current(attempt):
                return
            data_plane.deliver_message(key, action.message)

        self.sim.schedule_after(
            int(self.config.rpc_latency_us) + action.delay_ms * 1000, deliver, Priority.CONTROL, "rpc"
        )

    def _send_to_coordinator(self, action: a.SendToCoordinator[Any]) -> None:
        message = action.message
        self.sim.schedule_after(
            int(self.config.rpc_latency_us) + action.delay_ms * 1000,
            lambda: self._carry_out(self.dispatcher.handle(message)),
            Priority.CONTROL,
            "rpc",
        )

    def _deploy(self, action: a.DeployTasks) -> None:
        epoch = action.epoch
        config = action.config or self.config
        data_plane = self.data_plane
        data_plane.new_deployment(epoch, config)
        if self.record_cuts:
            log = self.deployments[epoch] = DeploymentLog(action.restored_metadata)
        restored_bytes = 0
        for descriptor in action.tasks:
            key = descriptor.key
            vertex = config.graph.vertex(key[0])
            splits = None
            if vertex.operator.is_source:
                available = self.splits.get(vertex.name, ())
                splits = {sid: available[sid] if sid < len(available) else () for sid in descriptor.source_splits}
            on_built = cast(
                "Callable[[StreamTask], None] | None",
                (
                    (
                        lambda t, k=key: (
                            cast(Any, log.recorders).__setitem__(k, CutRecorder.attach(t.operator)),
                            AlignmentMonitor.attach(t, self.alignment_violations),
                        )
                    )
                    if self.record_cuts
                    else None
                ),
            )
            try:
                task, restored = deploy_task(
                    config,
                    descriptor,
                    clock=self.sim.clock_ms,
                    timer_service=self.sim,
                    rng=self._task_rng,
                    charging=Charging.VIRTUAL,
                    cost_rng=self._cost_rng,
                    wakeup=cast("Callable[[], None]", lambda k=key, e=epoch: data_plane.wake(k, e)),
                    splits=splits,
                    store=self.store,
                    on_built=on_built,
                )
            except TaskRestoreError as err:  # the deployment fails; the tasks built so far die with it
                self._to_job_master(je.DeployFailed(epoch, str(err)))
                return
            restored_bytes += restored["input_bytes"] + restored["output_bytes"]
            data_plane.add_task(key, task, Slowdowns(descriptor.slowdowns))
        offsets = {a.subtask_name(key): read for key, read in data_plane.source_records_read().items()}
        self._to_job_master(je.TasksRestored(epoch, restored_bytes, offsets))
        data_plane.start_tasks()
        self.trace.record(self.sim.now_us, "deploy", f"epoch={epoch} restore={action.restored_checkpoint_id}")
        self._to_job_master(je.TasksStarted(epoch))
