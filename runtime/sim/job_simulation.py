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
  channel state) and resume.
Everything random comes from the simulation's seed, so ``(config, workload, seed)`` fixes the trace.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Sequence

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.checkpoint_coordinator import CheckpointCoordinator
from barriersim.runtime.coordinator.configuration import NO_PERIODIC_CHECKPOINTS, CheckpointCoordinatorConfiguration
from barriersim.runtime.coordinator.periodic_scheduler import MINIMAL_CHECKPOINT_TIME
from barriersim.runtime.coordinator.plan import vertices_from_job_graph
from barriersim.runtime.coordinator.properties import JobStatus
from barriersim.runtime.events import CheckpointOptions, CheckpointType
from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason
from barriersim.runtime.faults import (
    CrashTask,
    FaultSchedule,
    MessageKind,
    ProtocolPoint,
    SlowTask,
)
from barriersim.runtime.jobgraph import JobGraph, OperatorKind
from barriersim.runtime.network.input.input_channel import AddCredit, ResumeConsumptionUpstream
from barriersim.runtime.operators.sinks import ExternalStore
from barriersim.runtime.recovery.state_assignment_operation import ExecutionJobVertexInfo, assign_states
from barriersim.runtime.sim.kernel import Priority, RunOutcome, Simulation
from barriersim.runtime.sim.wiring import SubtaskKey, Wiring
from barriersim.runtime.storage.atomic_file import WriteFault
from barriersim.runtime.storage.memory_storage import JobManagerCheckpointStorage
from barriersim.runtime.stream_task import MODE_OF, NetworkConfig, StepOutcome, StreamTask, TaskFinished
from barriersim.runtime.task.actions import AcknowledgeCheckpoint, DeclineCheckpoint


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

    @property
    def tasks_wait_for_final_checkpoint(self) -> bool:
        """FLIP-147: tasks at end of input wait for a final checkpoint only if checkpoints after tasks finish are
        enabled and periodic checkpointing is on (Flink waits only when checkpointing is enabled); otherwise a
        job without checkpoints could never end."""
        return self.checkpoints_after_tasks_finish and MINIMAL_CHECKPOINT_TIME <= self.interval_ms < NO_PERIODIC_CHECKPOINTS

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


class JobSimulation:
    def __init__(self, config: SimulationConfig, splits: dict[str, Sequence[Sequence[tuple]]], seed: int):
        self.config = config
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
        self._scheduled: set[SubtaskKey] = set()
        self._channel_clock: dict[tuple, int] = {}
        self._finished: set[SubtaskKey] = set()
        self._subtask_rows: list[dict] = []
        self._restore_from: m.RestoreFrom | None = None
        self.restarts = 0
        self.restored_ids: list[int] = []
        self.restored_in_flight = 0
        self.outcome: JobOutcome | None = None
        self._emit_watermarks = any(v.operator is OperatorKind.TUMBLING_WINDOW for v in self.graph.vertices)
        self._fired_points: set = set()
        self.coordinator = CheckpointCoordinator(
            self.job_id, vertices_from_job_graph(self.graph), config.coordinator_configuration(), clock=self.sim.clock_ms, timer_service=self.sim,
            rng=self.sim.random("coordinator"), action_sink=self._on_coordinator_action, tasks_running=False,
        )

    # -- running ---------------------------------------------------------------------------------------

    def run(self) -> SimulationResult:
        self._deploy(restore=None)
        for fault in self.config.faults.of_type(CrashTask):
            if fault.at_ms is not None:
                self.sim.schedule_at(fault.at_ms * 1000, lambda f=fault: self._crash(f.task, "crash_task"),
                                     Priority.URGENT, "fault")
        self._handle_coordinator(self.coordinator.handle(m.JobStatusChanged(JobStatus.RUNNING)))
        result = self.sim.run(until_us=self.config.max_virtual_ms * 1000)
        if self.outcome is None:
            self.outcome = JobOutcome.TIMED_OUT if result is RunOutcome.TIME_LIMIT else JobOutcome.FINISHED
        stats = self.coordinator.stats
        return SimulationResult(
            outcome=self.outcome,
            committed_output=self.store.output(),
            checkpoints=self._checkpoint_rows(stats),
            subtasks=self._subtask_rows,
            counts=dict(stats.counts),
            restarts=self.restarts,
            virtual_ms=self.sim.clock_ms(),
            events=self.sim.events_processed,
            trace_sha256=self.trace.sha256,
            restored_checkpoint_ids=self.restored_ids,
            restored_in_flight_bytes=self.restored_in_flight,
        )

    def _checkpoint_rows(self, stats) -> list[dict]:
        """The coordinator's per-checkpoint statistics plus Flink's per-checkpoint sums of the subtasks' figures
        (``alignment_buffered``, ``processed_data``, ``persisted_data``)."""
        sums: dict[int, dict[str, int]] = {}
        for row in self._subtask_rows:
            acc = sums.setdefault(row["id"], {"alignment_buffered": 0, "processed_data": 0, "persisted_data": 0})
            acc["alignment_buffered"] += row["alignment_buffered"]
            acc["processed_data"] += row["alignment_processed"]
            acc["persisted_data"] += row["alignment_persisted"]
        empty = {"alignment_buffered": 0, "processed_data": 0, "persisted_data": 0}
        return [{**record, **sums.get(cid, empty)} for cid, record in sorted(stats.history.items())]

    def _deploy(self, restore: m.RestoreFrom | None) -> None:
        assignment = None
        if restore is not None and restore.metadata is not None:
            infos = [ExecutionJobVertexInfo(v.name, v.parallelism, v.max_parallelism) for v in self.graph.vertices]
            assignment = assign_states(restore.metadata, infos, allow_non_restored_state=restore.allow_non_restored_state)
            self.restored_ids.append(restore.checkpoint_id)
        epoch = self.epoch
        self.tasks = {}
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
                )
                snapshot = None
                if assignment is not None and vertex.name in assignment.task_restores:
                    snapshot = assignment.task_restores[vertex.name][i].task_state_snapshot
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

    # -- task scheduling --------------------------------------------------------------------------------

    def _alive(self, key: SubtaskKey, epoch: int) -> bool:
        return epoch == self.epoch and key in self.tasks and key not in self._finished

    def _wake(self, key: SubtaskKey, epoch: int) -> None:
        if epoch == self.epoch and key in self.tasks:
            self._pump(key)
            self._kick(key)

    def _kick(self, key: SubtaskKey) -> None:
        if key in self._scheduled or key in self._finished:
            return
        self._scheduled.add(key)
        epoch = self.epoch
        at = max(self.sim.now_us, self._busy_until[key])
        self.sim.schedule_at(at, lambda: self._step(key, epoch), Priority.NORMAL, "step")

    def _step(self, key: SubtaskKey, epoch: int) -> None:
        if epoch != self.epoch:
            return
        self._scheduled.discard(key)
        task = self.tasks[key]
        result = task.process_next()
        self.trace.record(self.sim.now_us, "step", f"{task.name} {result.outcome.value} {result.records}")
        self._pump(key)
        if result.outcome is StepOutcome.PROCESSED:
            self._busy_until[key] = self.sim.now_us + self._cost_us(key, result)
            self._kick(key)

    def _cost_us(self, key: SubtaskKey, result) -> int:
        vertex = self.graph.vertex(key[0])
        if vertex.operator.is_source and self.config.source_rate_per_subtask:
            per_record = 1e6 / self.config.source_rate_per_subtask
        else:
            per_record = vertex.params.get("cost_us_per_record", 1.0)
        cost = result.records * per_record + result.hot_key_records * vertex.params.get("hot_key_extra_us", 0.0)
        for slow in self.config.faults.of_type(SlowTask):
            if slow.task == f"{key[0]}#{key[1]}" and slow.from_ms <= self.sim.clock_ms() and (
                    slow.until_ms is None or self.sim.clock_ms() < slow.until_ms):
                cost *= slow.factor
        return max(1, int(cost))

    def _schedule_flush(self, key: SubtaskKey, epoch: int) -> None:
        def flush() -> None:
            if not self._alive(key, epoch):
                return
            self.tasks[key].flush_outputs()
            self._pump(key)
            self._schedule_flush(key, epoch)

        self.sim.schedule_after(self.config.buffer_timeout_ms * 1000, flush, Priority.TIMER, "flush")

    # -- network -------------------------------------------------------------------------------------

    def _latency_us(self) -> int:
        c = self.config
        return max(1, int(self._net_rng.gauss(c.latency_us_mean, c.latency_us_jitter)))

    def _deliver_in_order(self, channel_key: tuple, action, label: str) -> None:
        at = max(self.sim.now_us + self._latency_us(), self._channel_clock.get(channel_key, 0))
        self._channel_clock[channel_key] = at
        self.sim.schedule_at(at, action, Priority.NORMAL, label)

    def _pump(self, key: SubtaskKey) -> None:
        """Send what the task's partitions may send, and carry out its messages for others."""
        task = self.tasks[key]
        epoch = self.epoch
        for info, item in task.poll_sendable():
            consumer, channel = self.wiring.channel_of(key, info)

            def deliver(consumer=consumer, channel=channel, item=item) -> None:
                if epoch != self.epoch:
                    return
                self.tasks[consumer].on_element(channel, item.element, item.sequence_number, item.buffers_in_backlog)
                self.trace.record(self.sim.now_us, "deliver", f"{consumer} {channel.gate_idx}.{channel.channel_idx} {item.sequence_number}")
                self._pump(consumer)
                self._kick(consumer)

            self._deliver_in_order(("data", consumer, channel), deliver, "deliver")
        for action in task.drain_actions():
            self._on_task_action(key, task, action)

    def _on_task_action(self, key: SubtaskKey, task: StreamTask, action: Any) -> None:
        epoch = self.epoch
        if isinstance(action, (AddCredit, ResumeConsumptionUpstream)):
            producer, info = self.wiring.subpartition_of(key, action.channel_info)

            def upstream(producer=producer, info=info, action=action) -> None:
                if epoch != self.epoch:
                    return
                if isinstance(action, AddCredit):
                    self.tasks[producer].on_credit(info, action.credit)
                else:
                    self.tasks[producer].on_resume_consumption(info)
                self._pump(producer)
                self._kick(producer)

            self._deliver_in_order(("credit", producer, info), upstream, "credit")
        elif isinstance(action, AcknowledgeCheckpoint):
            self._on_acknowledge(key, task, action)
        elif isinstance(action, DeclineCheckpoint):
            exc = CheckpointException(action.reason, action.checkpoint_id, action.detail)
            self._rpc_to_coordinator(MessageKind.DECLINE, task.name, action.checkpoint_id,
                                     m.DeclineCheckpoint(self.job_id, task.attempt_id, action.checkpoint_id, exc))
        elif isinstance(action, TaskFinished):
            self._finished.add(key)
            self.trace.record(self.sim.now_us, "finished", task.name)
            self._handle_coordinator(self.coordinator.handle(m.TaskFinished(task.attempt_id)))
            if len(self._finished) == len(self.tasks):
                self._on_job_finished()

    def _on_acknowledge(self, key: SubtaskKey, task: StreamTask, action: AcknowledgeCheckpoint) -> None:
        cid = action.checkpoint_id
        if self._crash_point(task.name, ProtocolPoint.AFTER_SYNC_SNAPSHOT_BEFORE_ACK, cid):
            return
        if self.config.faults.declines(task.name, cid, f"{self.graph.sources[0].name}#0"):
            exc = CheckpointException(CheckpointFailureReason.CHECKPOINT_DECLINED, cid, "injected by fail_checkpoints")
            self._rpc_to_coordinator(MessageKind.DECLINE, task.name, cid,
                                     m.DeclineCheckpoint(self.job_id, task.attempt_id, cid, exc))
            return
        metrics = action.metrics
        self._subtask_rows.append({
            "id": cid, "task": task.name, "ack_timestamp": self.sim.clock_ms(),
            "state_size": action.task_state_snapshot.state_size,
            "checkpointed_size": action.task_state_snapshot.state_size,
            "checkpoint_sync": metrics.sync_duration_ms, "checkpoint_async": metrics.async_duration_ms,
            "alignment_buffered": 0,
            "alignment_processed": metrics.bytes_processed_during_alignment or 0,
            "alignment_persisted": metrics.bytes_persisted_during_alignment + metrics.persisted_output_bytes,
            "alignment_duration": metrics.alignment_duration_ms or 0,
            "start_delay": metrics.checkpoint_start_delay_ms,
            "unaligned_checkpoint": metrics.unaligned_checkpoint, "aborted": False,
        })
        self._rpc_to_coordinator(MessageKind.ACKNOWLEDGE, task.name, cid,
                                 m.AcknowledgeCheckpoint(self.job_id, task.attempt_id, cid, action.task_state_snapshot, metrics))
        self._crash_point(task.name, ProtocolPoint.AFTER_ACK_BEFORE_COMPLETION_NOTICE, cid)

    # -- control plane -----------------------------------------------------------------------------------

    def _message_fault(self, kind: MessageKind, task: str | None, checkpoint_id: int) -> tuple[bool, int]:
        drop, delay_ms = self.config.faults.message_fate(kind, task, checkpoint_id)
        return drop, delay_ms * 1000

    def _rpc_to_coordinator(self, kind: MessageKind, task: str, checkpoint_id: int, event) -> None:
        drop, delay = self._message_fault(kind, task, checkpoint_id)
        if drop:
            self.trace.record(self.sim.now_us, "dropped", f"{kind.value} {task} {checkpoint_id}")
            return
        self.sim.schedule_after(int(self.config.rpc_latency_us) + delay,
                                lambda: self._handle_coordinator(self.coordinator.handle(event)), Priority.CONTROL, "rpc")

    def _rpc_to_task(self, kind: MessageKind | None, attempt, checkpoint_id: int, call) -> None:
        key = (attempt.vertex_id, attempt.subtask_index)
        name = f"{key[0]}#{key[1]}"
        drop, delay = self._message_fault(kind, name, checkpoint_id) if kind else (False, 0)
        if drop:
            self.trace.record(self.sim.now_us, "dropped", f"{kind.value} {name} {checkpoint_id}")
            return
        epoch = self.epoch

        def deliver() -> None:
            task = self.tasks.get(key)
            if epoch != self.epoch or task is None or task.attempt_id != attempt:
                return
            call(task)
            self._pump(key)
            self._kick(key)

        self.sim.schedule_after(int(self.config.rpc_latency_us) + delay, deliver, Priority.CONTROL, "rpc")

    def _on_coordinator_action(self, action: Any) -> None:
        self._handle_coordinator([action])

    def _handle_coordinator(self, actions: list) -> None:
        for action in actions:
            self.trace.record(self.sim.now_us, "coordinator", type(action).__name__ + " " + str(getattr(action, "checkpoint_id", "")))
            if isinstance(action, m.TriggerCheckpointOnSources):
                for attempt in action.tasks:
                    self._rpc_to_task(None, attempt, action.checkpoint_id,
                                      lambda t, a=action: t.trigger_checkpoint(a.checkpoint_id, a.timestamp, a.options))
            elif isinstance(action, m.NotifyCheckpointComplete):
                if not self._crash_point(f"{action.task.vertex_id}#{action.task.subtask_index}",
                                         ProtocolPoint.AFTER_ACK_BEFORE_COMPLETION_NOTICE, action.checkpoint_id, peek=True):
                    self._rpc_to_task(MessageKind.NOTIFY_COMPLETE, action.task, action.checkpoint_id,
                                      lambda t, a=action: t.notify_checkpoint_complete(a.checkpoint_id))
            elif isinstance(action, m.NotifyCheckpointAborted):
                self._rpc_to_task(MessageKind.NOTIFY_ABORTED, action.task, action.checkpoint_id,
                                  lambda t, a=action: t.notify_checkpoint_aborted(a.checkpoint_id, a.latest_completed_checkpoint_id))
            elif isinstance(action, m.PersistCheckpoint):
                if self.config.faults.fails_storage_write(action.metadata.checkpoint_id):
                    self.storage.fail_next_write(WriteFault.FAIL_BEFORE_WRITE)
                try:
                    self.storage.persist_checkpoint(action.metadata, is_savepoint=action.is_savepoint)
                except Exception as err:  # a failed write is reported to the coordinator as Flink's storage does
                    self.trace.record(self.sim.now_us, "storage-failed", f"{action.metadata.checkpoint_id} {type(err).__name__}")
            elif isinstance(action, m.DiscardCheckpoint):
                self.storage.discard_checkpoint(action.checkpoint_id)
            elif isinstance(action, m.RestoreFrom):
                self._restore_from = action
            elif isinstance(action, m.FailJob):
                failing = action.failing_task
                self._failover(f"{failing.vertex_id}#{failing.subtask_index}" if failing else "coordinator", action.reason.name)

    # -- faults and failover -----------------------------------------------------------------------------

    def _crash_point(self, task: str, point: ProtocolPoint, checkpoint_id: int, peek: bool = False) -> bool:
        for f in self.config.faults.of_type(CrashTask):
            if f.task == task and f.point is point and f.checkpoint_id == checkpoint_id and f not in self._fired_points:
                self._fired_points.add(f)
                self._crash(task, point.value)
                return True
        return False

    def _crash(self, task_name: str, why: str) -> None:
        vertex, _, index = task_name.partition("#")
        key = (vertex, int(index or 0))
        if key not in self.tasks or key in self._finished or self.outcome is not None or self.tasks[key].finished:
            return  # unknown, finished, or already dead (the job is restarting): nothing left to crash
        self._failover(task_name, why, failed=self.tasks[key].attempt_id)

    def _failover(self, task_name: str, why: str, failed=None) -> None:
        self.trace.record(self.sim.now_us, "failover", f"{task_name} {why}")
        self.restarts += 1
        for task in self.tasks.values():
            task.fail()
        self.epoch += 1
        self._scheduled.clear()
        self._channel_clock.clear()
        if self.restarts > self.config.max_restarts:
            self.outcome = JobOutcome.FAILED
            self.sim.stop()
            return
        self._restore_from = None
        if failed is None:
            key = (self.graph.vertices[0].name, 0)
            failed = self.coordinator.current_attempt(*key)
        self._handle_coordinator(self.coordinator.handle(m.TaskFailed(failed, why)))
        restore = self._restore_from
        epoch = self.epoch
        self.sim.schedule_after(self.config.restart_delay_ms * 1000, lambda: self._restart(restore, epoch),
                                Priority.URGENT, "restart")

    def _restart(self, restore: m.RestoreFrom | None, epoch: int) -> None:
        if epoch != self.epoch:
            return  # superseded by a later failover
        self._deploy(restore)
        for f in self.config.faults.of_type(CrashTask):
            if f.point is ProtocolPoint.DURING_RESTORE and f not in self._fired_points:
                self._fired_points.add(f)
                self._crash(f.task, "during_restore")
                return

    def _on_job_finished(self) -> None:
        self.outcome = JobOutcome.FINISHED
        self._handle_coordinator(self.coordinator.handle(m.JobStatusChanged(JobStatus.FINISHED)))
        self.sim.stop()
