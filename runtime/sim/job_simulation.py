"""A whole job in virtual time: the same stream tasks, checkpoint coordinator and storage as the Ray backend,
driven by the discrete-event kernel, with a network and cost model and seeded faults.

How this works: every subtask is a ``StreamTask``; the ``CheckpointCoordinator`` and an in-memory
``JobManagerCheckpointStorage`` complete the job. The driver only moves things and keeps time:
- network: a buffer or event a subpartition may send (its receiver granted credit) is delivered to its input
  channel after a latency drawn from the ``network`` random stream, never before the previous element of the
  same channel (FIFO per channel); credit and resume-consumption messages travel back the same way;
- cost: a task works on one input buffer (or one source batch) at a time and is busy for
  ``records * cost_us_per_record`` (plus ``hot_key_extra_us`` per hot-key record); a task whose output is
  backpressured, or whose input is empty, sleeps until credit or data arrives; an output flusher finishes
  open buffers every ``buffer_timeout_ms`` (Flink's 100 ms);
- control: triggers, acknowledgements, declines and notifications are RPCs with their own latency;
- faults (``runtime.faults``): crashes at a time or at a protocol point, slowed tasks, delayed or dropped
  messages, failed storage writes, declined checkpoints; a crash runs Flink's global failover: every task
  dies (sinks abort their open transactions), pending checkpoints are aborted, and after the restart delay
  new attempts restore the latest completed checkpoint (operator state by key group, source offsets,
  channel state) and resume; a coordinator crash is a JobManager failover (the new coordinator recovers the
  completed checkpoints from storage and keeps the persisted id counter); a failed task state write declines
  (``CHECKPOINT_ASYNC_EXCEPTION``), a failed ``_metadata`` write aborts (``FINALIZE_CHECKPOINT_FAILURE``);
- checks: with ``record_cuts`` every completed checkpoint is checked to be a consistent cut after the run.
Everything random comes from the simulation's seed, so ``(config, workload, seed)`` fixes the trace. The
parts live in their own modules: ``config`` (settings and result), ``data_plane`` (scheduling, network),
``control_plane`` (the protocol's RPCs, coordinator actions) and ``failover`` (crashes, restarts); this module
deploys and runs the job. Mirrors a Flink ``MiniCluster`` running one job: its ``JobMaster`` (scheduler and
checkpoint coordinator) and its task executors.
"""

from __future__ import annotations

from typing import Sequence

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.checkpoint_coordinator import CheckpointCoordinator
from barriersim.runtime.coordinator.id_counter import StandaloneCheckpointIDCounter
from barriersim.runtime.coordinator.plan import vertices_from_job_graph
from barriersim.runtime.coordinator.properties import JobStatus
from barriersim.runtime.coordinator.stats_tracker import CheckpointStatsTracker, job_statistics
from barriersim.runtime.fault_log import FaultLog
from barriersim.runtime.faults import CrashCoordinator, CrashTask
from barriersim.runtime.operators.sinks import ExternalStore
from barriersim.runtime.recovery.state_assignment_operation import ExecutionJobVertexInfo, assign_states
from barriersim.runtime.sim.consistent_cut import CutRecorder, CutViolation, DeploymentLog, check_consistent_cuts
from barriersim.runtime.sim.config import JobOutcome, SimulationConfig, SimulationResult  # noqa: F401 (re-exported)
from barriersim.runtime.sim.control_plane import ControlPlane
from barriersim.runtime.sim.data_plane import DataPlane
from barriersim.runtime.sim.failover import Failover
from barriersim.runtime.sim.kernel import Priority, RunOutcome, Simulation
from barriersim.runtime.sim.wiring import SubtaskKey, Wiring
from barriersim.runtime.storage.memory_storage import JobManagerCheckpointStorage
from barriersim.runtime.stream_task import MODE_OF, StreamTask


class JobSimulation(DataPlane, ControlPlane, Failover):
    def __init__(self, config: SimulationConfig, splits: dict[str, Sequence[Sequence[tuple]]], seed: int,
                 record_cuts: bool = False):
        """``record_cuts``: log every operator's records so that ``consistent_cut_violations()`` can check each
        completed checkpoint after the run (costs memory and time; for tests and property checks)."""
        self.config = config
        self.record_cuts = record_cuts
        self.deployments: dict[int, DeploymentLog] = {}
        self.graph = config.graph.validate()
        self.splits = splits
        self.sim = Simulation(seed)
        self.trace = self.sim.trace
        self.wiring = Wiring(self.graph)
        self.store = ExternalStore()
        self.job_id = f"sim-{seed}"
        self.storage = JobManagerCheckpointStorage(self.job_id, rng=self.sim.random("storage"))
        self._net_rng = self.sim.random("network")
        self._task_rng = self.sim.random("tasks")
        self.mode = MODE_OF[config.mode]
        self.epoch = 0
        self.tasks: dict[SubtaskKey, StreamTask] = {}
        self._busy_until: dict[SubtaskKey, int] = {}
        self._cost_model: dict[SubtaskKey, tuple] = {}  # per subtask: per-record cost, hot-key extra, its slowdowns
        self._scheduled: set[SubtaskKey] = set()
        self._channel_clock: dict[tuple, int] = {}
        self._finished: set[SubtaskKey] = set()
        self._restore_from: m.RestoreFrom | None = None
        self.restarts = 0
        self.restored_ids: list[int] = []
        self.restored_in_flight = 0
        self.outcome: JobOutcome | None = None
        self._emit_watermarks = any(v.operator.uses_event_time for v in self.graph.vertices)
        self._fired_points: set = set()
        self.fault_log = FaultLog(config.faults)
        # what high availability keeps across a JobManager failover: the checkpoint id counter (the completed
        # checkpoints are recovered from the checkpoint storage)
        self.id_counter = StandaloneCheckpointIDCounter()
        self.coordinator_generation = 0
        self.coordinator_failovers = 0
        self._retired_stats: list[CheckpointStatsTracker] = []
        self.completed_in_epoch: dict[int, tuple[int, object]] = {}  # checkpoint id -> (epoch, metadata)
        self.coordinator = self._new_coordinator()
        self.restart_strategy = config.restart_strategy()  # the JobMaster's

    def _new_coordinator(self, store=None, first_attempt_number: int = 0) -> CheckpointCoordinator:
        generation = self.coordinator_generation
        return CheckpointCoordinator(
            self.job_id, vertices_from_job_graph(self.graph), self.config.coordinator_configuration(),
            clock=self.sim.clock_ms, timer_service=_GenerationTimers(self, generation),
            rng=self.sim.random("coordinator"), action_sink=self._on_coordinator_action, tasks_running=False,
            completed_checkpoint_store=store, checkpoint_id_counter=self.id_counter,
            checkpoint_writer=self._write_metadata, first_attempt_number=first_attempt_number,
        )

    # -- running ---------------------------------------------------------------------------------------

    def run(self) -> SimulationResult:
        self._deploy(restore=None)
        for fault in self.config.faults.of_type(CrashTask):
            if fault.at_ms is not None:
                self.sim.schedule_at(fault.at_ms * 1000, lambda f=fault: self._crash_at_time(f), Priority.URGENT, "fault")
        for fault in sorted(self.config.faults.of_type(CrashCoordinator), key=lambda f: f.at_ms):
            self.sim.schedule_at(fault.at_ms * 1000, lambda f=fault: self._crash_coordinator(f), Priority.URGENT, "fault")
        self._handle_coordinator(self.coordinator.handle(m.JobStatusChanged(JobStatus.RUNNING)))
        result = self.sim.run(until_us=self.config.max_virtual_ms * 1000)
        if self.outcome is None:
            self.outcome = JobOutcome.TIMED_OUT if result is RunOutcome.TIME_LIMIT else JobOutcome.FINISHED
        checkpoints, subtasks, counts = job_statistics(self._retired_stats + [self.coordinator.stats])
        return SimulationResult(
            outcome=self.outcome,
            committed_output=self.store.output(),
            checkpoints=checkpoints,
            subtasks=subtasks,
            counts=counts,
            restarts=self.restarts,
            virtual_ms=self.sim.clock_ms(),
            events=self.sim.events_processed,
            trace_sha256=self.trace.sha256,
            restored_checkpoint_ids=self.restored_ids,
            restored_in_flight_bytes=self.restored_in_flight,
            coordinator_failovers=self.coordinator_failovers,
            fault_log=self.fault_log.report(),
        )

    def consistent_cut_violations(self) -> list[CutViolation]:
        """After ``run()``: every completed checkpoint checked as a consistent cut (``runtime.sim.consistent_cut``)."""
        if not self.record_cuts:
            raise ValueError("consistent_cut_violations: the simulation was created without record_cuts=True")
        return check_consistent_cuts(self.graph, self.completed_in_epoch, self.deployments,
                                     exactly_once=self.config.mode != "at-least-once",
                                     aligned_only=self.config.mode == "aligned")

    def _deploy(self, restore: m.RestoreFrom | None) -> None:
        assignment = None
        if restore is not None and restore.metadata is not None:
            infos = [ExecutionJobVertexInfo(v.name, v.parallelism, v.max_parallelism) for v in self.graph.vertices]
            assignment = assign_states(restore.metadata, infos, allow_non_restored_state=restore.allow_non_restored_state)
            self.restored_ids.append(restore.checkpoint_id)
        epoch = self.epoch
        self.tasks = {}
        if self.record_cuts:
            log = self.deployments[epoch] = DeploymentLog(restore.metadata if restore is not None else None)
        for vertex in self.graph.vertices:
            for i in range(vertex.parallelism):
                key = (vertex.name, i)
                attempt = self.coordinator.current_attempt(vertex.name, i)
                split = self.splits.get(vertex.name, [()] * vertex.parallelism)[i] if vertex.operator.is_source else ()
                task = StreamTask(
                    self.graph, vertex.name, i, attempt, mode=self.mode, clock=self.sim.clock_ms,
                    timer_service=self.sim, rng=self._task_rng, wakeup=lambda k=key, e=epoch: self._wake(k, e),
                    network=self.config.network, split=split, store=self.store,
                    emit_watermarks=self._emit_watermarks,
                    checkpoints_after_tasks_finish=self.config.tasks_wait_for_final_checkpoint,
                    crash_points=self.config.faults.armed_crash_points(f"{vertex.name}#{i}", self._fired_points),
                )
                snapshot = None
                if assignment is not None and vertex.name in assignment.task_restores:
                    snapshot = assignment.task_restores[vertex.name][i].task_state_snapshot
                if self.record_cuts:
                    log.recorders[key] = CutRecorder.attach(task.operator)
                restored = task.restore(snapshot)
                self.restored_in_flight += restored["input_bytes"] + restored["output_bytes"]
                self.tasks[key] = task
                self._busy_until[key] = self.sim.now_us
        self._finished = set()
        for key, task in self.tasks.items():
            self._handle_coordinator(self.coordinator.handle(m.TaskRunning(task.attempt_id)))
        for key, task in self.tasks.items():
            self._pump(key)  # recovered output data and initial credit
            self._kick(key)
            self._schedule_flush(key, epoch)
        self.trace.record(self.sim.now_us, "deploy", f"epoch={epoch} restore={restore.checkpoint_id if restore else None}")


class _GenerationTimers:
    """The kernel as the coordinator's timer service; the timers of a crashed coordinator never fire."""

    def __init__(self, job: JobSimulation, generation: int):
        self._job = job
        self._generation = generation

    def register_timer(self, at_ms: int, callback):
        job, generation = self._job, self._generation

        def fire() -> None:
            if generation == job.coordinator_generation:
                callback()

        return job.sim.register_timer(at_ms, fire)
