"""The job manager as a Ray actor: deploys one ``StreamTaskActor`` per subtask, drives the sans-IO
``CheckpointCoordinator`` in real time, persists completed checkpoints to ``FileSystemCheckpointStorage``,
watches the task actors and runs Flink's global failover when one dies.

How this works: it does what the simulator's ``JobSimulation`` does around its tasks, with real actors:
- deploy: for every subtask, the coordinator's current attempt, the state ``assign_states`` gives it from the
  ``RestoreFrom`` metadata (msgpack), its split (an object-store reference) and the handles of the job
  manager and the external store; once every actor of the attempt has built and restored its task and knows
  its peers (``connect``), each task is reported ``TaskRunning`` and started (``run``);
- checkpoints: the coordinator's timers run on this actor's event loop (``LoopTimerService``), its clock is
  the wall clock in ms; triggers, completion and abort notices go to the current attempts' actors;
  acknowledgements, declines and finished notices arrive as actor calls (older attempts' are ignored by the
  coordinator); ``PersistCheckpoint`` / ``DiscardCheckpoint`` go to storage;
- failures: a fault schedule's ``CrashTask(at_ms=...)`` is a ``ray.kill`` of the task's actor at that time
  on the job's clock, which starts when the first deployment's tasks start running (the simulator's time 0;
  starting the actors before it takes seconds); slowdowns and the fault log use the same clock; a task's
  death is seen only as the error of its ``run`` call (``RayActorError``), and any task error is a failure
  too. Failover as in the simulator: every task actor of the attempt is killed, the coordinator gets
  ``TaskFailed`` (it aborts pending checkpoints, creates the new attempts and answers ``RestoreFrom``), and
  after the restart delay the new attempts are deployed from that checkpoint. The job ends when every task of the current attempt finished.
- the fault schedule and the failover itself: ``actors.failover.RayFailover``, which this actor mixes in.
No protocol rule lives here.
"""

from __future__ import annotations

import asyncio
import random
import time
import traceback
import zlib

import ray

from barriersim.actors.clock import now_ms
from barriersim.actors.failover import RayFailover
from barriersim.actors.messages import (
    attempt_from_wire,
    decode_metrics,
    decode_snapshot,
    encode_snapshot,
    reason_from_wire,
)
from barriersim.actors.realtime import LoopTimerService
from barriersim.actors.stream_task_actor import StreamTaskActor, TaskDeployment
from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.checkpoint_coordinator import CheckpointCoordinator
from barriersim.runtime.coordinator.id_counter import StandaloneCheckpointIDCounter
from barriersim.runtime.coordinator.plan import vertices_from_job_graph
from barriersim.runtime.coordinator.properties import JobStatus
from barriersim.runtime.coordinator.stats_tracker import job_statistics
from barriersim.runtime.events import options_to_wire
from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason
from barriersim.runtime.fault_log import FaultLog
from barriersim.runtime.faults import (
    CrashCoordinator,
    CrashTask,
    MessageKind,
    ProtocolPoint,
    SlowTask,
)
from barriersim.runtime.recovery.state_assignment_operation import ExecutionJobVertexInfo, assign_states
from barriersim.runtime.sim.job_simulation import JobOutcome, SimulationConfig
from barriersim.runtime.storage.atomic_file import WriteFault
from barriersim.runtime.storage.fs_storage import FileSystemCheckpointStorage


def task_seed(seed: int, vertex: str, subtask: int, attempt: int) -> int:
    return zlib.crc32(f"{seed}/{vertex}/{subtask}/{attempt}".encode())


RUN_RESULTS_TIMEOUT_SECONDS = 30.0  # for the run calls of tasks that already reported they finished


@ray.remote(num_cpus=0.01)
class JobManagerActor(RayFailover):
    def __init__(self, config: SimulationConfig, split_refs: dict, checkpoint_root: str, job_id: str, seed: int,
                 store, task_num_cpus: float = 0.01):
        self.config = config
        self.graph = config.graph.validate()
        self.split_refs = split_refs
        self.job_id = job_id
        self.seed = seed
        self.store = store
        self.task_num_cpus = task_num_cpus
        self.storage = FileSystemCheckpointStorage(checkpoint_root, job_id, rng=random.Random(seed))
        self.storage.initialize_base_locations()
        self.epoch = 0
        self.tasks: dict = {}  # subtask key -> actor handle of the current attempt
        self.attempts: dict = {}  # subtask key -> ExecutionAttemptID of the current attempt
        self.finished: set = set()
        self.restarts = 0
        self.restored_ids: list[int] = []
        self.restored_in_flight = 0
        self.killed: list[str] = []
        self.task_runs: list[dict] = []  # what each finished task's run call returned
        self._watchers: list[asyncio.Task] = []  # the current deployment's run calls
        self.failures: list[str] = []
        self.storage_errors: list[str] = []
        self.outcome: JobOutcome | None = None
        self._restore_from: m.RestoreFrom | None = None
        self._fired_points: set = set()
        self.fault_log = FaultLog(config.faults)
        self._error: str | None = None
        self._emit_watermarks = any(v.operator.uses_event_time for v in self.graph.vertices)
        # what high availability keeps across a JobManager failover: the id counter (and the storage)
        self.id_counter = StandaloneCheckpointIDCounter()
        self.coordinator_generation = 0
        self.coordinator_failovers = 0
        self._coordinator_down = False
        self._retired_stats: list = []
        self.started_ms: int | None = None  # the job's clock (fault times) starts when the first deployment runs
        self._slow_faults: dict[str, list[SlowTask]] = {}  # task -> its slowdowns, in the schedule's order
        for f in config.faults.of_type(SlowTask):
            self._slow_faults.setdefault(f.task, []).append(f)

    def _new_coordinator(self, store=None, first_attempt_number: int = 0) -> CheckpointCoordinator:
        return CheckpointCoordinator(
            self.job_id, vertices_from_job_graph(self.graph), self.config.coordinator_configuration(), clock=now_ms,
            timer_service=_GenerationTimers(self, LoopTimerService(self.loop, self._on_error), self.coordinator_generation),
            rng=random.Random(self.seed), action_sink=lambda action: self._handle([action]), tasks_running=False,
            completed_checkpoint_store=store, checkpoint_id_counter=self.id_counter,
            checkpoint_writer=self._write_metadata, first_attempt_number=first_attempt_number,
        )

    def _write_metadata(self, metadata, is_savepoint: bool):
        """The coordinator's ``checkpoint_writer``: a failure (``FailStorageWrite`` without a task) raises into the
        coordinator, which aborts the checkpoint as ``FINALIZE_CHECKPOINT_FAILURE``."""
        if self.fault_log.fails_storage_write(metadata.checkpoint_id, self._job_ms()):
            self.storage.fail_next_write(WriteFault.FAIL_BEFORE_WRITE)
        try:
            return self.storage.persist_checkpoint(metadata, is_savepoint=is_savepoint)
        except Exception as err:
            self.storage_errors.append(f"{metadata.checkpoint_id}: {type(err).__name__}: {err}")
            raise

    # -- running -------------------------------------------------------------------------------------

    async def run(self) -> dict:
        self.loop = asyncio.get_running_loop()
        self.me = ray.get_runtime_context().current_actor
        self._done = asyncio.Event()
        c = self.config
        self.coordinator = self._new_coordinator()
        self.restart_strategy = c.restart_strategy()  # the JobMaster's
        self.started = time.monotonic()
        await self._deploy(None)
        self.deployed_seconds = time.monotonic() - self.started
        for fault in c.faults.of_type(CrashTask):
            if fault.at_ms is not None:
                self.loop.call_later(self._seconds_until(fault.at_ms), self._crash_at_time, fault)
        for fault in sorted(c.faults.of_type(CrashCoordinator), key=lambda f: f.at_ms):
            self.loop.call_later(self._seconds_until(fault.at_ms),
                                 lambda f=fault: self._guard(lambda: self._crash_coordinator(f)))
        self._guard(lambda: self._handle(self.coordinator.handle(m.JobStatusChanged(JobStatus.RUNNING))))
        await self._done.wait()
        job_seconds = time.monotonic() - self.started
        cpu_seconds = time.process_time() - self._cpu_started if self.started_ms is not None else 0.0
        if self.outcome is JobOutcome.FINISHED and self._watchers:  # every task said it finished: let their runs return
            await asyncio.wait(self._watchers, timeout=RUN_RESULTS_TIMEOUT_SECONDS)
        for handle in self.tasks.values():
            ray.kill(handle)
        self.tasks = {}
        if self._error is not None:
            raise RuntimeError(f"job {self.job_id} failed in the job manager: {self._error}")
        checkpoints, subtasks, counts = job_statistics(self._retired_stats + [self.coordinator.stats])
        return {
            "outcome": self.outcome.value,
            "checkpoints": checkpoints,
            "subtasks": subtasks,
            "counts": counts,
            "coordinator_failovers": self.coordinator_failovers,
            "restarts": self.restarts,
            "restored_checkpoint_ids": list(self.restored_ids),
            "restored_in_flight_bytes": self.restored_in_flight,
            "killed": list(self.killed),
            "task_runs": list(self.task_runs),
            "failures": list(self.failures),
            "storage_errors": list(self.storage_errors),
            "fault_log": self.fault_log.report(),
            "job_seconds": job_seconds,
            "first_deploy_seconds": self.deployed_seconds,
            "job_manager_cpu_seconds": cpu_seconds,
        }

    async def progress(self) -> dict:
        """Counts so far, and the records the current attempt's source subtasks have emitted."""
        counts = dict(self.coordinator.stats.counts) if hasattr(self, "coordinator") else {}
        sources = [h for (vertex, _), h in self.tasks.items() if self.graph.vertex(vertex).operator.is_source]
        try:
            emitted = sum(await asyncio.gather(*(h.progress.remote() for h in sources)))
        except Exception:  # noqa: BLE001 - a source died meanwhile; its failover is under way
            emitted = None
        return {"counts": counts, "restarts": self.restarts, "finished_tasks": len(self.finished),
                "tasks": sum(v.parallelism for v in self.graph.vertices), "source_records": emitted}

    async def shutdown(self) -> None:
        for handle in self.tasks.values():
            ray.kill(handle)
        self.tasks = {}

    # -- deployment ----------------------------------------------------------------------------------

    async def _deploy(self, restore: m.RestoreFrom | None) -> None:
        assignment = None
        if restore is not None and restore.metadata is not None:
            infos = [ExecutionJobVertexInfo(v.name, v.parallelism, v.max_parallelism) for v in self.graph.vertices]
            assignment = assign_states(restore.metadata, infos, allow_non_restored_state=restore.allow_non_restored_state)
            self.restored_ids.append(restore.checkpoint_id)
        epoch = self.epoch
        c = self.config
        tasks, attempts = {}, {}
        for vertex in self.graph.vertices:
            for i in range(vertex.parallelism):
                key = (vertex.name, i)
                attempt = self.coordinator.current_attempt(vertex.name, i)
                snapshot = None
                if assignment is not None and vertex.name in assignment.task_restores:
                    snapshot = encode_snapshot(assignment.task_restores[vertex.name][i].task_state_snapshot, i)
                split = self.split_refs[vertex.name][i] if vertex.operator.is_source and vertex.name in self.split_refs else None
                deployment = TaskDeployment(
                    graph=self.graph, vertex=vertex.name, subtask_index=i, attempt_number=attempt.attempt_number,
                    mode=c.mode, network=c.network, seed=task_seed(self.seed, vertex.name, i, attempt.attempt_number),
                    buffer_timeout_ms=c.buffer_timeout_ms,
                    source_rate=c.source_rate_per_subtask if vertex.operator.is_source else 0,
                    emit_watermarks=self._emit_watermarks, checkpoints_after_tasks_finish=c.tasks_wait_for_final_checkpoint,
                    slowdowns=tuple((f.factor, f.from_ms, f.until_ms)
                                    for f in self._slow_faults.get(f"{vertex.name}#{i}", ())),
                    crash_points=tuple(sorted(self.config.faults.armed_crash_points(f"{vertex.name}#{i}", self._fired_points),
                                              key=lambda p: (p[0].value, p[1]))),
                )
                tasks[key] = StreamTaskActor.options(num_cpus=self.task_num_cpus).remote(
                    deployment, split, snapshot, self.store if vertex.operator.is_sink else None, self.me)
                attempts[key] = attempt
        self.tasks, self.attempts, self.finished = tasks, attempts, set()
        try:
            restored = await asyncio.gather(*(h.connect.remote(tasks) for h in tasks.values()))
        except Exception as err:  # noqa: BLE001 - a task died while deploying: fail over again
            if epoch == self.epoch and self.outcome is None:
                self.failures.append(f"deploy of attempt {epoch}: {type(err).__name__}: {err}")
                self._failover("deploy", f"deploy failed: {type(err).__name__}: {err}")
            return
        if epoch != self.epoch:
            return
        self.restored_in_flight += sum(r["input_bytes"] + r["output_bytes"] for r in restored)
        for attempt in attempts.values():
            self._guard(lambda a=attempt: self._handle(self.coordinator.handle(m.TaskRunning(a))))
        if self.started_ms is None:  # time 0 of the fault schedule, as the simulator's: the first tasks start
            self.started_ms = now_ms()
            self._cpu_started = time.process_time()
        self._watchers = [self.loop.create_task(self._watch(key, handle.run.remote(self.started_ms), epoch))
                          for key, handle in tasks.items()]
        if self.restarts:  # a restart: a crash during_restore fires once, on the first restart, as in the simulator
            for f in self.config.faults.of_type(CrashTask):
                if f.point is ProtocolPoint.DURING_RESTORE and f not in self._fired_points:
                    self._fired_points.add(f)
                    if self._crash(f.task):
                        self.fault_log.fired(f, self._job_ms())
                    return

    async def _watch(self, key, ref, epoch: int) -> None:
        try:
            self.task_runs.append(await ref)
            return
        except ray.exceptions.RayActorError as err:
            cause = f"actor died ({type(err).__name__})"
        except Exception as err:  # noqa: BLE001 - the task raised: a task failure
            cause = f"task error: {err}"
        if epoch != self.epoch or self.outcome is not None:
            return
        name = f"{key[0]}#{key[1]}"
        self.failures.append(f"{name}: {cause}")
        self._failover(name, cause, failed=self.attempts[key])

    # -- messages from tasks -------------------------------------------------------------------------

    def _current(self, attempt) -> bool:
        return self.attempts.get((attempt.vertex_id, attempt.subtask_index)) == attempt

    async def acknowledge(self, attempt, checkpoint_id: int, snapshot: bytes, metrics: bytes) -> None:
        attempt = attempt_from_wire(attempt)
        name = f"{attempt.vertex_id}#{attempt.subtask_index}"
        if self._current(attempt) and self._crash_point(name, ProtocolPoint.AFTER_SYNC_SNAPSHOT_BEFORE_ACK, checkpoint_id):
            return  # the task died before its acknowledgement left it
        if self.fault_log.fails_state_write(name, checkpoint_id, self._job_ms()):
            # Flink's AsyncCheckpointRunnable: the asynchronous part failed, so the task declines
            exc = CheckpointException(CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION, checkpoint_id,
                                      f"{name}: injected by fail_storage_write: the state write failed")
            self._to_coordinator(MessageKind.DECLINE, name, checkpoint_id,
                                 m.DeclineCheckpoint(self.job_id, attempt, checkpoint_id, exc))
            return
        if self.fault_log.declines(name, checkpoint_id, f"{self.graph.sources[0].name}#0", self._job_ms()):
            exc = CheckpointException(CheckpointFailureReason.CHECKPOINT_DECLINED, checkpoint_id, "injected by fail_checkpoints")
            self._to_coordinator(MessageKind.DECLINE, name, checkpoint_id,
                                 m.DeclineCheckpoint(self.job_id, attempt, checkpoint_id, exc))
            return
        state = decode_snapshot(snapshot, attempt.subtask_index)
        metrics = decode_metrics(metrics)
        self._to_coordinator(MessageKind.ACKNOWLEDGE, name, checkpoint_id,
                             m.AcknowledgeCheckpoint(self.job_id, attempt, checkpoint_id, state, metrics))
        if self._current(attempt):
            self._crash_point(name, ProtocolPoint.AFTER_ACK_BEFORE_COMPLETION_NOTICE, checkpoint_id)

    async def decline(self, attempt, checkpoint_id: int, reason: str, detail: str) -> None:
        attempt = attempt_from_wire(attempt)
        exc = CheckpointException(reason_from_wire(reason), checkpoint_id, detail)
        self._to_coordinator(MessageKind.DECLINE, f"{attempt.vertex_id}#{attempt.subtask_index}", checkpoint_id,
                             m.DeclineCheckpoint(self.job_id, attempt, checkpoint_id, exc))

    def _message_fault(self, kind: MessageKind, task: str | None, checkpoint_id: int) -> tuple[bool, float]:
        """A fault schedule's ``DropMessage`` / ``DelayMessage`` for this message (``FaultSchedule.message_fate``)."""
        drop, delay_ms = self.fault_log.message_fate(kind, task, checkpoint_id, self._job_ms())
        return drop, delay_ms / 1000.0

    def _to_coordinator(self, kind: MessageKind, task: str, checkpoint_id: int, event) -> None:
        drop, delay = self._message_fault(kind, task, checkpoint_id)
        if drop:
            return
        generation = self.coordinator_generation

        def deliver() -> None:  # a message to a coordinator that crashed meanwhile is lost
            if generation == self.coordinator_generation and not self._coordinator_down:
                self._guard(lambda: self._handle(self.coordinator.handle(event)))

        if delay:
            self.loop.call_later(delay, deliver)
        else:
            deliver()

    def _to_task(self, kind: MessageKind, attempt, checkpoint_id: int, call) -> None:
        drop, delay = self._message_fault(kind, f"{attempt.vertex_id}#{attempt.subtask_index}", checkpoint_id)
        if drop:
            return

        def deliver() -> None:
            handle = self._handle_of(attempt)
            if handle is not None:
                call(handle)

        if delay:
            self.loop.call_later(delay, deliver)
        else:
            deliver()

    async def task_finished(self, attempt, records: int) -> None:
        attempt = attempt_from_wire(attempt)
        if not self._current(attempt) or self.outcome is not None:
            return
        self.finished.add((attempt.vertex_id, attempt.subtask_index))
        self._guard(lambda: self._handle(self.coordinator.handle(m.TaskFinished(attempt))))
        if len(self.finished) == len(self.tasks):
            self.outcome = JobOutcome.FINISHED
            self._guard(lambda: self._handle(self.coordinator.handle(m.JobStatusChanged(JobStatus.FINISHED))))
            self._done.set()

    async def task_error(self, attempt, message: str) -> None:
        attempt = attempt_from_wire(attempt)
        if self._current(attempt) and self.outcome is None:
            name = f"{attempt.vertex_id}#{attempt.subtask_index}"
            self.failures.append(f"{name}: task error after finishing: {message}")
            self._failover(name, message, failed=attempt)

    # -- coordinator actions -------------------------------------------------------------------------

    def _handle_of(self, attempt):
        return self.tasks.get((attempt.vertex_id, attempt.subtask_index)) if self._current(attempt) else None

    def _handle(self, actions: list) -> None:
        for action in actions:
            if isinstance(action, m.TriggerCheckpointOnSources):
                options = options_to_wire(action.options)
                for attempt in action.tasks:
                    handle = self._handle_of(attempt)
                    if handle is not None:
                        handle.trigger_checkpoint.remote(action.checkpoint_id, action.timestamp, options)
            elif isinstance(action, m.NotifyCheckpointComplete):
                name = f"{action.task.vertex_id}#{action.task.subtask_index}"
                if not (self._current(action.task) and self._crash_point(
                        name, ProtocolPoint.AFTER_ACK_BEFORE_COMPLETION_NOTICE, action.checkpoint_id)):
                    self._to_task(MessageKind.NOTIFY_COMPLETE, action.task, action.checkpoint_id,
                                  lambda h, a=action: h.notify_checkpoint_complete.remote(a.checkpoint_id))
            elif isinstance(action, m.NotifyCheckpointAborted):
                self._to_task(MessageKind.NOTIFY_ABORTED, action.task, action.checkpoint_id,
                              lambda h, a=action: h.notify_checkpoint_aborted.remote(
                                  a.checkpoint_id, a.latest_completed_checkpoint_id))
            elif isinstance(action, m.PersistCheckpoint):
                if self.fault_log.fails_storage_write(action.metadata.checkpoint_id, self._job_ms()):
                    self.storage.fail_next_write(WriteFault.FAIL_BEFORE_WRITE)
                try:
                    self.storage.persist_checkpoint(action.metadata, is_savepoint=action.is_savepoint)
                except Exception as err:  # noqa: BLE001 - recorded, as the simulator does
                    self.storage_errors.append(f"{action.metadata.checkpoint_id}: {type(err).__name__}: {err}")
            elif isinstance(action, m.DiscardCheckpoint):
                self.storage.discard_checkpoint(action.checkpoint_id)
            elif isinstance(action, m.RestoreFrom):
                self._restore_from = action
            elif isinstance(action, m.FailJob):
                failing = action.failing_task
                name = f"{failing.vertex_id}#{failing.subtask_index}" if failing else "coordinator"
                self._failover(name, action.reason.name)

    async def _guarded_deploy(self, restore) -> None:
        try:
            await self._deploy(restore)
        except BaseException:  # noqa: BLE001
            self._on_error_text(traceback.format_exc())

    def _guard(self, fn) -> None:
        try:
            fn()
        except BaseException:  # noqa: BLE001 - a coordinator error ends the run with its traceback
            self._on_error_text(traceback.format_exc())

    def _on_error(self, err: BaseException) -> None:
        self._on_error_text("".join(traceback.format_exception(err)))

    def _on_error_text(self, text: str) -> None:
        if self._error is None:
            self._error = text
        self._done.set()


class _GenerationTimers:
    """The coordinator's timer service on the actor's loop; the timers of a crashed coordinator never fire."""

    def __init__(self, job_manager: JobManagerActor, timers: LoopTimerService, generation: int):
        self._job_manager = job_manager
        self._timers = timers
        self._generation = generation

    def register_timer(self, at_ms: int, callback):
        job_manager, generation = self._job_manager, self._generation

        def fire() -> None:
            if generation == job_manager.coordinator_generation:
                callback()

        return self._timers.register_timer(at_ms, fire)
