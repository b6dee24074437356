"""The job manager as a Ray actor: the sans-IO ``Dispatcher`` of the run's jobs (``runtime.job``) on an asyncio loop
with real time, one ``StreamTaskActor`` per subtask pinned to its TaskManager's Ray node (``actors.placement``), and
each job's checkpoints in the storage of its checkpoint root (``<checkpoint root>/<job-id>/``: a
``FileSystemCheckpointStorage``, or an ``ObjectStoreCheckpointStorage`` for ``s3://``). It carries out the
Dispatcher's actions with real actors (deploying, killing, cancelling, RPCs, timers on the loop) and hands it what
the tasks tell, through its one way in (with the task actors on its Ray node both go over links,
``actors.socket_links``, with the others as calls); no protocol or job-level rule lives here. An error in the
Dispatcher that is not a restore's typed error is a bug and ends the run with its traceback. docs/architecture.md
("The drivers") has the narrative."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
import traceback
import zlib
from collections.abc import Callable
from typing import Any

import ray

from barriersim.actors.clock import now_ms
from barriersim.actors.deployment_links import DeploymentLinks
from barriersim.actors.messages import (
    attempt_from_wire,
    encode_snapshot,
    task_message_to_wire,
)
from barriersim.actors.node_agents import NodeAgents
from barriersim.actors.placement import RayNode, on_node
from barriersim.actors.realtime import LoopTimerService
from barriersim.actors.socket_links import new_secret
from barriersim.actors.stream_task_actor import StreamTaskActor
from barriersim.actors.task_reports import TaskReports
from barriersim.runtime.checkpoint_cost import Charging
from barriersim.runtime.event_timers import DeliveringTimers
from barriersim.runtime.faults.fault_schedule import KillNode
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.job import actions as a
from barriersim.runtime.job import events as je
from barriersim.runtime.job.config import JobConfig, JobOutcome
from barriersim.runtime.job.dispatcher import Dispatcher
from barriersim.runtime.storage import metadata_serializer
from barriersim.runtime.storage.object_storage import checkpoint_storage_for, restore_storage_for


def task_seed(seed: int, vertex: str, subtask: int, attempt: int) -> int:
    return zlib.crc32(f"{seed}/{vertex}/{subtask}/{attempt}".encode())


RUN_RESULTS_TIMEOUT_SECONDS = 30.0  # for the run calls of tasks that already reported they finished
CANCEL_TIMEOUT_S = 10.0  # for a cancelled task actor's answer, before it is killed all the same
PROGRESS_ANSWER_TIMEOUT_S = 10.0  # for each task actor's part of a progress report (loaded machines' actors are slow)


@ray.remote(num_cpus=0.01)
class JobManagerActor:
    def __init__(
        self,
        config: JobConfig,
        split_refs: dict,
        checkpoint_root: str,
        job_id: str,
        seed: int,
        store,
        task_num_cpus: float = 0.01,
        ray_nodes: list[RayNode] | None = None,
        savepoint_root: str | None = None,
        first_attempt_number: int = 0,
        socket_links: bool = True,
    ):
        """``ray_nodes``: the Ray node of each node of the job's placement (``actors.placement.cluster_nodes``;
        None: the TaskManagers are not pinned); ``savepoint_root``: the run's savepoint directory;
        ``first_attempt_number``: above every attempt of the run this one continues; ``socket_links``: task actors
        on one Ray node exchange their channels' messages over links (``actors.socket_links``), not calls."""
        self.config = config
        self.ray_nodes = ray_nodes
        self.placement_rows: list[dict] = []  # per deployment and subtask: where it ran
        self.graph = config.graph.validate()
        self.split_refs = split_refs
        self.job_id = job_id
        self.seed = seed
        self.store = store
        self.task_num_cpus = task_num_cpus
        self.socket_links = socket_links
        self.checkpoint_root = checkpoint_root
        self.savepoint_root = savepoint_root
        self.first_attempt_number = first_attempt_number
        self._storage_rng = random.Random(seed)
        self._dispatcher: Dispatcher | None = None  # the run's, from run() on (``dispatcher``)
        self.handles: dict[a.SubtaskKey, Any] = {}  # subtask key -> actor handle of the deployed attempt
        self._handle_attempts: dict[a.SubtaskKey, ExecutionAttemptID] = {}  # subtask key -> the attempt its handle runs
        self.task_runs: list[dict] = []  # what each finished task's run call returned
        self._watchers: list[asyncio.Task] = []  # the current deployment's run calls
        self._first_deploy: asyncio.Task | None = None
        self._cpu_started: float | None = None
        self._error: str | None = None
        self._agents = NodeAgents(
            job_id, {f.node for f in config.faults.of_type(KillNode)}, ray_nodes, self._on_error_text
        )
        self._reports = TaskReports(self._deliver)
        self._links = DeploymentLinks(
            reports=self._reports.names,
            told=lambda method, args: self._reports.told("link", method, args),
            on_error=self._on_error_text,
        )
        # the JobMaster's messages to tasks, and the tasks' reports, per transport
        self.control_messages = {"to_tasks": {"link": 0, "call": 0}, "from_tasks": self._reports.counts}

    # -- running -------------------------------------------------------------------------------------

    @property
    def dispatcher(self) -> Dispatcher:
        """The run's Dispatcher: ``run()`` creates it before anything else uses it."""
        if self._dispatcher is None:
            raise RuntimeError(f"job {self.job_id}: the job manager's run has not started")
        return self._dispatcher

    async def run(self) -> dict:
        self.loop = asyncio.get_running_loop()
        self.me = ray.get_runtime_context().current_actor
        self.node_id = ray.get_runtime_context().get_node_id()
        self._done = asyncio.Event()
        self._dispatcher = Dispatcher(
            self.config,
            self.job_id,
            storage_for=self._storage_for,
            clock=now_ms,
            timers=DeliveringTimers(
                LoopTimerService(self.loop, self._on_error),
                lambda event: self._carry_out(self.dispatcher.handle(event)),
            ),
            coordinator_rng=lambda: random.Random(self.seed),
            restore_storage=restore_storage_for(
                self.config.restore.path if self.config.restore else None, self.checkpoint_root
            ),
            first_attempt_number=self.first_attempt_number,
            charging=Charging.REAL_TIME,
            cost_rng=random.Random(self.seed ^ 0x5EED),
        )
        await self._agents.start()
        self.started = time.monotonic()
        self._guard(lambda: self._carry_out(self.dispatcher.handle(je.Start())))
        if self._first_deploy is not None:
            await self._first_deploy
        self.deployed_seconds = time.monotonic() - self.started
        await self._done.wait()
        job_seconds = time.monotonic() - self.started
        cpu_seconds = time.process_time() - self._cpu_started if self._cpu_started is not None else 0.0
        if self.dispatcher.outcome() is JobOutcome.FINISHED and self._watchers:
            await asyncio.wait(self._watchers, timeout=RUN_RESULTS_TIMEOUT_SECONDS)  # let the tasks' runs return
        self._kill_tasks()
        self._agents.kill_all()
        if self._error is not None:
            raise RuntimeError(f"job {self.job_id} failed in the job manager: {self._error}")
        report = self.dispatcher.report()
        assert report.outcome is not None  # the run ended by JobEnded, or by an error (raised above)
        ended_by_snapshot, metadata = self.dispatcher.ending_snapshot()
        result = dataclasses.asdict(report)
        for job in result["jobs"]:
            job["outcome"] = job["outcome"].value if job["outcome"] is not None else None
        return {
            **result,
            "outcome": report.outcome.value,
            "ending": [ended_by_snapshot, None if metadata is None else metadata_serializer.serialize(metadata)],
            "next_attempt_number": self.dispatcher.next_attempt_number(),
            "task_runs": list(self.task_runs),
            "job_seconds": job_seconds,
            "first_deploy_seconds": self.deployed_seconds,
            "job_manager_cpu_seconds": cpu_seconds,
            "placement": list(self.placement_rows),
            "ray_nodes": [n.as_row() for n in self.ray_nodes or ()],
            "control_messages": self.control_messages,
        }

    async def progress(self, unfinished_tasks: bool = False) -> dict:
        """Counts so far, and the records the current attempt's source subtasks have emitted; with
        ``unfinished_tasks``, where each task that has not finished stands (``StreamTask.lifecycle_report``)."""
        dispatcher = self._dispatcher
        counts = dispatcher.checkpoint_counts() if dispatcher is not None else {}
        sources = [h for (vertex, _), h in self.handles.items() if self.graph.vertex(vertex).operator.is_source]
        try:  # each source answers within PROGRESS_ANSWER_TIMEOUT_S, or none is counted
            emitted = sum(
                await asyncio.gather(
                    *(asyncio.wait_for(h.progress.remote(), PROGRESS_ANSWER_TIMEOUT_S) for h in sources)
                )
            )
        except Exception:  # noqa: BLE001 - a source died meanwhile (its failover is under way), or did not answer
            emitted = None
        progress = {
            "counts": counts,
            "restarts": dispatcher.restarts() if dispatcher else 0,
            "finished_tasks": len(dispatcher.finished_subtasks()) if dispatcher else 0,
            "tasks": dispatcher.task_count() if dispatcher else 0,
            "source_records": emitted,
        }
        if unfinished_tasks and dispatcher is not None:
            finished = dispatcher.finished_subtasks()
            waiting = [h for key, h in self.handles.items() if key not in finished]
            # each actor answers in time or is reported by its error (a dead or stuck actor among them)
            reports = await asyncio.gather(
                *(asyncio.wait_for(h.lifecycle.remote(), PROGRESS_ANSWER_TIMEOUT_S) for h in waiting),
                return_exceptions=True,
            )
            progress["unfinished_tasks"] = [r if isinstance(r, dict) else repr(r) for r in reports]
        return progress

    def _storage_for(self, job_id: str):
        """A job's checkpoint storage, whose savepoints go to the run's savepoint directory."""
        # Flink's state.checkpoints.dir: a path or file:// URI every node sees, or s3://
        storage = checkpoint_storage_for(
            self.checkpoint_root,
            job_id,
            rng=self._storage_rng,
            default_savepoint_directory=self.savepoint_root,
            memory_threshold=self.config.checkpointing.memory_threshold_bytes,
        )
        storage.initialize_base_locations()
        return storage, storage

    async def shutdown(self) -> None:
        self._kill_tasks()
        self._agents.kill_all()

    def _kill_tasks(self) -> None:
        self._links.close()
        handles, self.handles = self.handles, {}
        for handle in handles.values():
            ray.kill(handle)

    def _cancel_tasks(self) -> None:
        """Cancel the deployment's task actors (``CancelTasks``): each is told first (Flink's
        ``cancelExecution``: the task stops, and what its closed asynchronous parts report goes to the JobMaster),
        then killed. An actor that is dead already, or does not answer within ``CANCEL_TIMEOUT_S``, is killed all
        the same."""
        handles, self.handles = self.handles, {}
        for key, handle in handles.items():
            self.loop.create_task(self._cancel_task(self._handle_attempts[key], handle))

    async def _cancel_task(self, attempt, handle) -> None:
        try:
            reports = await asyncio.wait_for(handle.cancel.remote(), CANCEL_TIMEOUT_S)
        except (TimeoutError, ray.exceptions.RayError):
            reports = []
        finally:
            ray.kill(handle)
        for report in reports:
            self._reports.incomplete(attempt, report)

    # -- the JobMaster's actions ---------------------------------------------------------------------

    def _carry_out(self, actions: list) -> None:
        for action in actions:
            kind = type(action)
            if kind is a.SendToTask:
                self._later(action.delay_ms, lambda act=action: self._send_to_task(act))
            elif kind is a.SendToCoordinator:
                self._later(action.delay_ms, lambda msg=action.message: self._carry_out(self.dispatcher.handle(msg)))
            elif kind is a.StartTimer:
                self._later(
                    action.delay_ms,
                    lambda t=action.timer: self._carry_out(self.dispatcher.handle(t)),
                    always_later=True,
                )
            elif kind is a.ReportRunning:  # on a later turn of the loop, after the timers due now
                self._later(
                    0,
                    lambda act=action: self._carry_out(
                        self.dispatcher.handle(je.TasksRunning(act.epoch, act.attempts))
                    ),
                    always_later=True,
                )
            elif kind is a.DeployTasks:
                deploy = self.loop.create_task(self._guarded_deploy(action))
                if self._first_deploy is None:
                    self._first_deploy = deploy
            elif kind is a.KillTask:  # its death is seen as the error of its run call (_watch)
                handle = self.handles.get((action.attempt.vertex_id, action.attempt.subtask_index))
                if handle is not None:
                    ray.kill(handle)
            elif kind is a.KillTaskManagers:
                if action.node is not None:  # the node goes, and every actor on it with it
                    self.loop.create_task(self._agents.kill_node(action.node))
                else:
                    for attempt in action.attempts:
                        handle = self.handles.get((attempt.vertex_id, attempt.subtask_index))
                        if handle is not None:
                            ray.kill(handle)
            elif kind is a.CancelTasks:
                self._cancel_tasks()
            elif kind is a.JobEnded:
                self._done.set()
            else:
                raise TypeError(f"job {self.job_id}: the Ray job manager cannot carry out {action!r}")

    def _later(self, delay_ms: int, fn, always_later: bool = False) -> None:
        """Run ``fn`` now, or after ``delay_ms`` on the loop (a timer always goes through the loop)."""
        if delay_ms or always_later:
            self.loop.call_later(delay_ms / 1000.0, lambda: self._guard(fn))
        else:
            fn()

    def _send_to_task(self, action: a.SendToTask) -> None:
        attempt = action.attempt
        if self.dispatcher.is_current(attempt):
            key = (attempt.vertex_id, attempt.subtask_index)
            if self._links.send(key, task_message_to_wire(action.message)):
                self.control_messages["to_tasks"]["link"] += 1
                return
            handle = self.handles.get(key)
            if handle is not None:
                self.control_messages["to_tasks"]["call"] += 1
                handle.task_message.remote(task_message_to_wire(action.message))

    async def _guarded_deploy(self, action: a.DeployTasks) -> None:
        try:
            await self._deploy(action)
        except BaseException:  # noqa: BLE001
            self._on_error_text(traceback.format_exc())

    async def _deploy(self, action: a.DeployTasks) -> None:
        dispatcher, epoch = self.dispatcher, action.epoch
        config = action.config or self.config
        placement = config.placement
        handles: dict[a.SubtaskKey, Any] = {}  # Ray's actor handles are not typed
        self.handles = handles
        self._links.new_deployment()
        self._handle_attempts = {d.key: d.attempt for d in action.tasks}
        try:  # a task that cannot be created, or dies while deploying: the deployment failed, the job fails over
            for descriptor in action.tasks:
                vertex, i = descriptor.key
                operator = config.graph.vertex(vertex).operator
                snapshot = encode_snapshot(descriptor.state, i)
                splits = None
                if operator.is_source:
                    refs = self.split_refs.get(vertex, ())
                    splits = {sid: refs[sid] for sid in descriptor.source_splits if sid < len(refs)}
                seed = task_seed(self.seed, vertex, i, descriptor.attempt.attempt_number)
                options: dict[str, Any] = {"num_cpus": self.task_num_cpus}
                if self.ray_nodes is not None:
                    node = action.taskmanager_nodes[placement.taskmanager_of[descriptor.key]]
                    options["scheduling_strategy"] = on_node(self.ray_nodes[node].node_id)
                # ray.remote gives the class options(), which mypy does not see
                handles[descriptor.key] = StreamTaskActor.options(**options).remote(  # type: ignore[attr-defined]
                    config,
                    dataclasses.replace(descriptor, state=None),
                    seed,
                    splits,
                    snapshot,
                    self.store if operator.is_sink else None,
                    self.me,
                )
            secret = new_secret() if self.socket_links else None
            restored = await asyncio.gather(*(h.connect.remote(handles, secret) for h in handles.values()))
            if secret is not None:
                await self._links.link(
                    config, handles, {d.key: r for d, r in zip(action.tasks, restored)}, secret, self.node_id
                )
        except Exception as err:  # noqa: BLE001 - (above) the deployment failed: fail over again
            self._carry_out(dispatcher.handle(je.DeployFailed(epoch, f"{type(err).__name__}: {err}")))
            return
        self._record_placement(action, restored)
        if epoch != dispatcher.epoch():
            return
        offsets = {d.name: r["records_read"] for d, r in zip(action.tasks, restored) if r["records_read"] is not None}
        self._carry_out(
            dispatcher.handle(
                je.TasksRestored(epoch, sum(r["input_bytes"] + r["output_bytes"] for r in restored), offsets)
            )
        )
        if self._cpu_started is None:
            self._cpu_started = time.process_time()
        started_ms = dispatcher.started_ms()
        self._watchers = [
            self.loop.create_task(self._watch(d.attempt, handles[d.key].run.remote(started_ms))) for d in action.tasks
        ]
        self._carry_out(dispatcher.handle(je.TasksStarted(epoch)))

    def _record_placement(self, action: a.DeployTasks, restored: list[dict]) -> None:
        """Where each task of the deployment runs: its TaskManager, slot and node, and the Ray node it reported."""
        by_index = {n.index: n for n in self.ray_nodes or ()}
        config = action.config or self.config
        rows = {row["task"]: row for row in config.placement.describe(config.graph, action.taskmanager_nodes)}
        for descriptor, report in zip(action.tasks, restored):
            row = rows[descriptor.name]
            expected = by_index.get(row["node"])
            self.placement_rows.append(
                {
                    "deployment": action.epoch,
                    **row,
                    "ray_node_id": report["ray_node_id"],
                    "ray_node_address": expected.address if expected is not None else None,
                }
            )

    async def _watch(self, attempt, ref) -> None:
        try:
            self.task_runs.append(await ref)
            return
        except ray.exceptions.RayActorError as err:
            cause = f"actor died ({type(err).__name__})"
        except Exception as err:  # noqa: BLE001 - the task raised: a task failure
            cause = f"task error: {err}"
        self._deliver(lambda: je.TaskFailed(attempt, cause))

    # -- what the tasks tell: a task's reports come as these calls, or over its link (``TaskReports``) --

    async def acknowledge(self, attempt, checkpoint_id: int, snapshot: bytes, metrics: bytes) -> None:
        self._reports.told("call", "acknowledge", (attempt, checkpoint_id, snapshot, metrics))

    async def report_incomplete_snapshot_stats(self, attempt, report: list) -> None:
        self._reports.told("call", "report_incomplete_snapshot_stats", (attempt, report))

    async def decline(self, attempt, checkpoint_id: int, reason: str, detail: str) -> None:
        self._reports.told("call", "decline", (attempt, checkpoint_id, reason, detail))

    async def task_finished(self, attempt, records: int) -> None:
        self._reports.told("call", "task_finished", (attempt, records))

    async def crashed_at_protocol_point(self, attempt, point: str, checkpoint_id: int) -> None:
        self._reports.told("call", "crashed_at_protocol_point", (attempt, point, checkpoint_id))

    async def task_error(self, attempt, message: str) -> None:
        attempt = attempt_from_wire(attempt)
        self._deliver(lambda: je.TaskFailed(attempt, f"task error after finishing: {message}"))

    async def slowdown_met(self, attempt, index: int, at_ms: int) -> None:
        attempt = attempt_from_wire(attempt)
        task = a.subtask_name((attempt.vertex_id, attempt.subtask_index))
        self._deliver(lambda: je.SlowdownMet(task, index, at_ms))

    def _deliver(self, event_of: Callable[[], je.JobEvent]) -> None:
        """Hand the Dispatcher the event ``event_of()`` builds, and carry out what it causes."""
        self._guard(lambda: self._carry_out(self.dispatcher.handle(event_of())))

    # -- errors --------------------------------------------------------------------------------------

    def _guard(self, fn) -> None:
        try:
            fn()
        except BaseException:  # noqa: BLE001 - an error in the job master ends the run with its traceback
            self._on_error_text(traceback.format_exc())

    def _on_error(self, err: BaseException) -> None:
        self._on_error_text("".join(traceback.format_exception(err)))

    def _on_error_text(self, text: str) -> None:
        if self._error is None:
            self._error = text
        self._done.set()
