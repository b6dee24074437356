"""The simulator's data plane: ``DataPlane``, a collaborator of ``JobSimulation`` that owns the deployed tasks and
moves their data in virtual time. A task works on one input buffer (or source batch) at a time and is busy for its
cost, as its ``TaskThreads`` collaborator tells (``runtime.sim.task_threads``: cost model, slowdowns, CPU sharing,
synchronous snapshots holding the task); a paced source writes its records when they are due on its
``EmissionClock`` (one that sleeps in between runs its mails when the next is due); elements travel with a drawn
latency, FIFO per channel, under credit-based flow control; a checkpoint's asynchronous part completes off its
task; what a task tells its JobMaster goes to ``to_job_master``. Every callback carries its epoch. Mirrors Flink's
mailbox loop (``StreamTask.processInput``), its ``OutputFlusher`` and the credit-based Netty stack;
docs/windowed-faults.md."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from barriersim.runtime.job import events as je
from barriersim.runtime.job.config import JobConfig, SourceEmission, SourcePacing
from barriersim.runtime.job.deployment import deliver_task_message
from barriersim.runtime.job.slowdowns import Slowdowns
from barriersim.runtime.job.wiring import SubtaskKey, Wiring
from barriersim.runtime.lognormal import lognormal
from barriersim.runtime.network.input.input_channel import (
    UPSTREAM_MESSAGES,
    AcknowledgeAllRecordsProcessed,
    AddCredit,
    AnnounceBufferSize,
)
from barriersim.runtime.sim.kernel import Priority, Simulation
from barriersim.runtime.sim.source_emission import EmissionClock
from barriersim.runtime.sim.task_threads import TaskThreads
from barriersim.runtime.task.actions import (
    AcknowledgeCheckpoint,
    AsyncCheckpointStarted,
    DeclineCheckpoint,
    ReportIncompleteSnapshotStats,
    SyncSnapshotTaken,
    TaskFailed,
    TaskFinished,
)
from barriersim.runtime.task.crash_points import CrashedAtProtocolPoint
from barriersim.runtime.task.stream_task import StepOutcome, StreamTask

if TYPE_CHECKING:
    from barriersim.runtime.events import InputChannelInfo, ResultSubpartitionInfo
    from barriersim.runtime.job.actions import TaskMessage
    from barriersim.runtime.network.output.subpartition import BufferAndBacklog


_NORMAL = int(Priority.NORMAL)
# the log-normal spread of an output flusher period's overshoot: Java 17's Thread.sleep(100) on the machine kind
# overshoots by 105 / 123 / 163 µs (10th / 50th / 90th percentile) with the cores busy: sigma = ln(163 / 123) / 1.28
# (quiet: 156 / 181 / 213 µs; docs/flink-facts.md)
FLUSHER_OVERSHOOT_SIGMA = 0.22
_PROCESSED = StepOutcome.PROCESSED


class _Route(NamedTuple):
    """Where a subpartition's elements go (``Wiring.channel_of``), looked up once per subpartition: the consumer,
    its channel, whether the channel is local, the channel's key in the network's FIFO clocks and the start of the
    trace line of a delivery."""

    consumer: SubtaskKey
    channel: Any  # InputChannelInfo
    local: bool
    clock_key: tuple[Any, ...]
    trace_prefix: str


class _UpstreamRoute(NamedTuple):
    """Where a channel's upstream messages go (``Wiring.subpartition_of``), looked up once per channel."""

    producer: SubtaskKey
    info: Any  # ResultSubpartitionInfo
    local: bool
    clock_key: tuple[Any, ...]


class DataPlane:
    """The deployed tasks, their scheduling and the network (see the module)."""

    def __init__(
        self,
        config: JobConfig,
        *,
        sim: Simulation,
        finished: set[SubtaskKey],
        record_cuts: bool,
        to_job_master: Callable[[Any], None],
    ):
        """``finished``: the run's finished subtasks of the current deployment (the Dispatcher's, kept up to date by
        it); ``record_cuts``: check that every task finishes after the tasks it reads (``finish_order_violations``);
        ``to_job_master(event)``: a task's acknowledgement, decline, end or death (``runtime.job.events``)."""
        self.config = config  # the run's (a restored job's deployment has its own graph, ``new_deployment``)
        self._deployment_config = config
        self.sim = sim
        self.trace = sim.trace
        self._finished = finished
        self.record_cuts = record_cuts
        self._to_job_master = to_job_master
        self._net_rng = sim.random("network")
        self.graph = config.graph.validate()
        self.wiring = Wiring(self.graph, config.placement)
        self._epoch = 0  # the deployment whose tasks run
        self._tasks: dict[SubtaskKey, StreamTask] = {}
        self._threads = TaskThreads(config, sim=sim, cpu_work_done=self._cpu_work_done, to_job_master=to_job_master)
        self._scheduled: set[SubtaskKey] = set()
        self._busy_until, self._after_cpu = self._threads.busy_until, self._threads.after_cpu  # read-only here
        self._steps: dict[SubtaskKey, Callable[[], None]] = {}  # each task's step callback, of the current epoch
        # paced sources: their emission clocks and pending sync points (``runtime.sim.source_emission``)
        self._emission: dict[SubtaskKey, EmissionClock] = {}
        self._sync_at: dict[SubtaskKey, int] = {}
        self._mail_until: dict[SubtaskKey, int] = {}  # a sleeping source's mails wait until then (SourcePacing.SLEEP)
        # when each source subtask's last step that read records ended (virtual us)
        self._source_last_record_us: dict[SubtaskKey, int] = {}
        self._channel_clock: dict[tuple[Any, ...], int] = {}
        # ``Wiring`` lookups, per (subtask, gate or partition index, channel or subpartition index): of the wiring
        self._routes: dict[tuple[Any, ...], _Route] = {}
        self._upstream_routes: dict[tuple[Any, ...], _UpstreamRoute] = {}
        self._finish_order_violations: list[str] = []  # with record_cuts: tasks that finished before an upstream

    # -- deployments ----------------------------------------------------------------------------------------------

    def new_deployment(self, epoch: int, config: JobConfig) -> None:
        """Deployment ``epoch`` of a job of ``config`` starts: nothing scheduled for the job before (one that
        finished, e.g. stopped with a savepoint) runs any more."""
        self._epoch = epoch
        self._steps.clear()
        if config.graph is not self.graph:  # a restored job with another parallelism: other channels
            self.graph = config.graph
            self.wiring = Wiring(self.graph, config.placement)
            self._threads.new_graph(self.graph)
            self._routes.clear()
            self._upstream_routes.clear()
        self._deployment_config = config
        self._tasks = {}
        self._scheduled.clear()
        self._threads.clear_cpu()
        self._emission.clear()
        self._sync_at.clear()
        self._mail_until.clear()

    def add_task(self, key: SubtaskKey, task: StreamTask, slowdowns: Slowdowns) -> None:
        """A task of the new deployment, restored; a source with an exact rate emits on its own clock."""
        config = self._deployment_config
        self._tasks[key] = task
        self._threads.add(key, slowdowns)
        if (
            task.is_source()
            and config.workload.rate_per_source
            and config.workload.source_emission is SourceEmission.EXACT
        ):
            self._emission[key] = EmissionClock(config.workload.rate_per_source, self.sim.now_us, slowdowns)

    def start_tasks(self) -> None:
        """Every task of the deployment sends its recovered output data and initial credit, and works. Their output
        flushers have run since the tasks built their record writers, one initialization (``task_initialization_ms``,
        drawn once per deployment) before the deployment runs."""
        self._threads.start_jvm()
        network = self.config.network
        rng = self.sim.random("task-initialization")
        lead_us = round(lognormal(network.task_initialization_ms * 1000, network.task_initialization_sigma, rng))
        for key in self._tasks:
            self._pump(key)
            self._kick(key)
            self._schedule_flush(key, self._epoch, lead_us)

    # -- queries --------------------------------------------------------------------------------------------------

    def deployed_tasks(self) -> dict[SubtaskKey, StreamTask]:
        """The tasks of the current deployment."""
        return self._tasks

    def current_epoch(self) -> int:
        """The deployment whose tasks run."""
        return self._epoch

    def has_task(self, key: SubtaskKey, epoch: int) -> bool:
        """Whether deployment ``epoch`` is the current one and holds the task ``key``."""
        return epoch == self._epoch and key in self._tasks

    def source_records_read(self) -> dict[SubtaskKey, int]:
        """How far each source task's reader got (in records)."""
        return {key: cast(int, task.source_records_read()) for key, task in self._tasks.items() if task.is_source()}

    def last_record_us(self, key: SubtaskKey) -> int | None:
        """When source subtask ``key``'s last step that read records ended (virtual us; None if none did)."""
        return self._source_last_record_us.get(key)

    def finish_order_violations(self) -> list[str]:
        """With ``record_cuts``: every task that finished while a task it reads still ran."""
        return list(self._finish_order_violations)

    def deliver_message(self, key: SubtaskKey, message: TaskMessage) -> None:
        """An RPC of the JobMaster reaches the task of ``key`` (Flink's ``triggerCheckpoint`` / ``confirmCheckpoint``
        / ``abortCheckpoint``): a mail of its mailbox, which runs at once unless a paced source sleeps on the task
        thread (``SourcePacing.SLEEP``): then it waits for the sleep to end, behind any mail still waiting."""
        at = self._mail_waits_until(key)
        if at is None:
            self._run_mail(key, message)
            return
        self._mail_until[key] = at
        self.trace.record(self.sim.now_us, "mail", f"{self._tasks[key].name} waits until {at}")
        self.sim.schedule_at(
            at, partial(self._run_waiting_mail, key, self._epoch, at, message), Priority.NORMAL, "mail"
        )

    def _mail_waits_until(self, key: SubtaskKey) -> int | None:
        if self._deployment_config.workload.pacing is not SourcePacing.SLEEP:
            return None
        now = self.sim.now_us
        waiting = self._mail_until.get(key)
        if waiting is not None and waiting >= now:
            return waiting
        emission = self._emission.get(key)
        if emission is None or emission.blocked or key not in self._tasks or not self._tasks[key].reads_source():
            return None  # not sleeping: backpressured (the mailbox waits for output), or its input ended
        return emission.sleep_ends_us(now)

    def _run_waiting_mail(self, key: SubtaskKey, epoch: int, at: int, message: TaskMessage) -> None:
        if self._mail_until.get(key) == at:
            del self._mail_until[key]
        if epoch == self._epoch and key in self._tasks:
            self._run_mail(key, message)

    def _run_mail(self, key: SubtaskKey, message: TaskMessage) -> None:
        self._sync_before(key)
        deliver_task_message(self._tasks[key], message)
        self._pump(key)
        self._kick(key)

    def cancel(self, next_epoch: int) -> None:
        """Every task of the deployment dies (sinks abort their open transactions); nothing scheduled for it runs.
        What a cancelled task's closed asynchronous parts report goes to the JobMaster."""
        for task in list(self._tasks.values()):
            for report in task.fail():
                self._to_job_master(je.IncompleteStatsReported(task.attempt_id, report))
        self._epoch = next_epoch
        self._steps.clear()
        self._scheduled.clear()
        self._threads.clear_cpu()
        self._sync_at.clear()
        self._channel_clock.clear()

    # -- scheduling -----------------------------------------------------------------------------------------------

    def _alive(self, key: SubtaskKey, epoch: int) -> bool:
        return self.has_task(key, epoch) and key not in self._finished

    def wake(self, key: SubtaskKey, epoch: int) -> None:
        if self.has_task(key, epoch):
            self._pump(key)
            self._kick(key)

    def _kick(self, key: SubtaskKey) -> None:
        # not a task of the deployment: what was just sent ended the job and a restored job with other subtasks
        # runs now
        if key in self._scheduled or key in self._finished or key not in self._tasks or key in self._after_cpu:
            return  # (``TaskThreads.in_cpu_work``, without a call)
        if self._emission:  # paced sources only (``SourceEmission.EXACT``)
            emission = self._emission.get(key)
            if emission is not None:
                if key in self._sync_at:
                    return  # it emits: its next sync point is set
                if self._tasks[key].reads_source():
                    self._kick_paced_source(key, emission)
                    return
        self._scheduled.add(key)
        step = self._steps.get(key)
        if step is None:
            step = self._steps[key] = partial(self._step, key, self._epoch)
        sim = self.sim
        now, free_at = sim.now_us, self._busy_until[key]  # (``TaskThreads.free_at``)
        sim.post_at(free_at if free_at > now else now, step, _NORMAL, "step")

    def _step(self, key: SubtaskKey, epoch: int) -> None:
        if epoch != self._epoch:
            return
        sim = self.sim
        now = sim.now_us
        free_at = self._busy_until[key]
        if free_at > now:  # a synchronous snapshot kept the task busy after this step was scheduled
            sim.post_at(free_at, partial(self._step, key, epoch), _NORMAL, "step")
            return
        self._scheduled.discard(key)
        task = self._tasks[key]
        result = task.process_next()
        outcome = result.outcome
        self.trace.record(now, "step", f"{task.name} {outcome._value_} {result.records}")
        self._pump_task(key, task)
        if outcome is _PROCESSED:
            is_source = task.is_source()
            done_at = self._threads.step_done(key, task.name, is_source, result)
            if done_at is None:
                return  # its CPU work shares the cores: ``_cpu_work_done`` goes on
            if is_source and result.records:  # its records are paced over the step
                self._source_last_record_us[key] = done_at
            self._kick(key)

    def _cpu_work_done(self, key: SubtaskKey) -> None:
        task = self._tasks.get(key)
        if task is not None and task.is_source():
            self._source_last_record_us[key] = self._threads.free_at(key)
        self._kick(key)

    # -- paced sources (``runtime.sim.source_emission``) ----------------------------------------------

    def _kick_paced_source(self, key: SubtaskKey, emission: EmissionClock) -> None:
        """A paced source emits on its clock: a blocked one resumes once its output is available again, one that
        emits has its next sync point scheduled already (or gets one now)."""
        if emission.blocked and self._tasks[key].is_backpressured():
            return
        self._schedule_sync(key, max(self.sim.now_us, self._threads.free_at(key)))

    def _schedule_sync(self, key: SubtaskKey, at: int) -> None:
        """A sync point of paced source ``key`` at ``at``, unless one at or before it is pending."""
        pending = self._sync_at.get(key)
        if pending is not None and pending <= at:
            return
        self._sync_at[key] = at
        epoch = self._epoch
        self.sim.schedule_at(at, lambda: self._sync_point(key, epoch, at), Priority.NORMAL, "step")

    def _sync_point(self, key: SubtaskKey, epoch: int, at: int) -> None:
        if epoch != self._epoch or key not in self._tasks or self._sync_at.get(key) != at:
            return  # another deployment's, or an earlier sync point took its place
        del self._sync_at[key]
        now = self.sim.now_us
        if self._threads.is_busy(key):  # a synchronous snapshot holds the task thread
            self._schedule_sync(key, self._threads.free_at(key))
            return
        emission = self._emission[key]
        if emission.blocked:
            if self._tasks[key].is_backpressured():
                return  # still blocked; the credit that frees the output kicks it again
            emission.restart(now)
        self._sync_source(key)
        self._schedule_next_sync(key)

    def _sync_source(self, key: SubtaskKey) -> None:
        """Write the records of paced source ``key`` that are due now (all of them, unless an output becomes
        backpressured: then its clock blocks), and send what may go out."""
        task, emission, now = self._tasks[key], self._emission[key], self.sim.now_us
        if emission.blocked or key in self._finished or not task.reads_source() or self._threads.is_busy(key):
            return
        due = emission.due(now)
        if due:
            slowdowns = self._threads.slowdowns(key)
            if slowdowns:  # those its emission since its anchor went through (its clock charged them)
                for index, at_ms in slowdowns.met(emission.anchor_us / 1000, now / 1000):
                    self._to_job_master(je.SlowdownMet(task.name, index, at_ms))
            self._write_due(key, task, emission, due)
        self._pump(key)

    def _write_due(self, key: SubtaskKey, task: StreamTask, emission: EmissionClock, due: int) -> None:
        now = self.sim.now_us
        while due > 0:
            result = task.process_next(due)
            self.trace.record(now, "step", f"{task.name} {result.outcome._value_} {result.records}")
            if result.outcome is not StepOutcome.PROCESSED or not result.records:
                break  # nothing read: backpressured (below), or no longer reading (``_schedule_next_sync``)
            emission.wrote(result.records)
            due -= result.records
            self._source_last_record_us[key] = now
            if task.source_input_ended():
                break
        if task.is_backpressured():
            emission.blocked = True

    def _schedule_next_sync(self, key: SubtaskKey) -> None:
        """The next sync point: when the record that finishes one of the task's buffers is due, and no more than
        ``source_batch_records`` (``SOURCE_PACING_MS`` of its records) ahead; a source that read everything goes
        on as every task does (its end of input)."""
        task, emission = self._tasks[key], self._emission[key]
        if emission.blocked or key in self._finished:
            return
        if not task.reads_source():  # its input ended: it goes on as every task does; if it reads again, the
            emission.blocked = True  # clock starts then
            self._kick(key)
            return
        ahead = task.source_records_until_buffer_finishes(self.config.source_batch_records)
        self._schedule_sync(key, emission.due_time_us(max(1, ahead)))

    def _sync_before(self, key: SubtaskKey) -> None:
        """A paced source's due records are written before anything that reads or marks its output position (an
        RPC such as a checkpoint trigger, the output flusher), as Flink's mailbox runs it between two records."""
        if key in self._emission and key in self._tasks and self._tasks[key].reads_source():
            self._sync_source(key)
            if not self._emission[key].blocked:
                self._schedule_next_sync(key)

    def _schedule_flush(self, key: SubtaskKey, epoch: int, lead_us: int = 0) -> None:
        """The task's output flusher. Flink's ``OutputFlusher`` thread starts when the task builds its record
        writers and loops: sleep ``buffer_timeout_ms``, flush. So the tasks of a deployment, which are built
        together, flush in step at first, and each period takes the timeout plus the sleep's wake-up and the flush
        (``flusher_overshoot_us``, drawn log-normally per period from the ``output-flusher`` random stream): the
        flushes drift against the checkpoint timer, and apart from each other only slowly. A flusher that has run
        ``lead_us`` already (``start_tasks``) is that far into its period."""

        def flush() -> None:
            if not self._alive(key, epoch):
                return
            self._sync_before(key)
            self._tasks[key].flush_outputs()
            self._pump(key)
            self._schedule_flush(key, epoch)

        network = self.config.network
        overshoot_us = lognormal(
            network.flusher_overshoot_us, FLUSHER_OVERSHOOT_SIGMA, self.sim.random("output-flusher")
        )
        delay_us = network.buffer_timeout_ms * 1000 + round(overshoot_us)
        if lead_us:
            delay_us -= lead_us % delay_us
        self.sim.schedule_after(delay_us, flush, Priority.TIMER, "flush")

    # -- network -------------------------------------------------------------------------------------

    def _latency_us(self) -> int:
        network = self.config.network
        return max(1, int(self._net_rng.gauss(network.latency_us_mean, network.latency_us_jitter)))

    def _deliver_in_order(
        self, channel_key: tuple[Any, ...], action: Callable[[], Any], label: str, local: bool = False
    ) -> None:
        """``action`` after the network latency (none for a local channel), never before the channel's previous
        element."""
        sim = self.sim
        at = sim.now_us
        if not local:  # ``_latency_us``, inline (once per element sent)
            network = self.config.network
            latency = int(self._net_rng.gauss(network.latency_us_mean, network.latency_us_jitter))
            at += latency if latency > 1 else 1
        clock = self._channel_clock
        previous = clock.get(channel_key, 0)
        if previous > at:
            at = previous
        clock[channel_key] = at
        sim.post_at(at, action, _NORMAL, label)

    def _pump(self, key: SubtaskKey) -> None:
        """Send what the task's partitions may send, and carry out its messages for others."""
        self._pump_task(key, self._tasks[key])

    def _pump_task(self, key: SubtaskKey, task: StreamTask) -> None:
        """``_pump`` of ``key``'s task, looked up by the caller."""
        sendable = task.poll_sendable()
        if sendable:
            epoch, routes = self._epoch, self._routes
            for info, item in sendable:  # (``_route``'s lookup inline: its route is known after the first)
                route = routes.get((key, info.partition_idx, info.subpartition_idx)) or self._route(key, info)
                self._deliver_in_order(
                    route.clock_key, partial(self._deliver, route, item, epoch), "deliver", route.local
                )
        actions = task.drain_actions()
        if actions:
            for action in actions:
                self._on_task_action(key, task, action)

    def _route(self, producer: SubtaskKey, info: ResultSubpartitionInfo) -> _Route:
        route_key = (producer, info.partition_idx, info.subpartition_idx)
        route = self._routes.get(route_key)
        if route is None:
            consumer, channel = self.wiring.channel_of(producer, info)
            route = self._routes[route_key] = _Route(
                consumer,
                channel,
                self.wiring.is_local(producer, consumer),
                ("data", consumer, channel.gate_idx, channel.channel_idx),
                f"{consumer} {channel.gate_idx}.{channel.channel_idx} ",
            )
        return route

    def _deliver(self, route: _Route, item: BufferAndBacklog, epoch: int) -> None:
        if epoch != self._epoch:
            return
        consumer = route.consumer
        task = self._tasks[consumer]
        task.on_element(route.channel, item.element, item.sequence_number, item.buffers_in_backlog)
        self.trace.record(self.sim.now_us, "deliver", f"{route.trace_prefix}{item.sequence_number}")
        self._pump_task(consumer, task)
        self._kick(consumer)

    def _check_finish_order(self, key: SubtaskKey, task: StreamTask) -> None:
        """A task finishes only after every upstream task it reads finished (Flink's ``END_OF_INPUT`` before
        ``afterInvoke``), unless it was deployed as finished; kept with ``record_cuts`` as a property of the run."""
        if task.input_side is None or task.deployed_as_finished:
            return
        running = sorted(
            {
                self._tasks[producer].name
                for producer, _ in (self.wiring.subpartition_of(key, info) for info in task.input_side.channel_infos())
                if not self._tasks[producer].finished
            }
        )
        if running:
            self._finish_order_violations.append(
                f"{task.name} finished at {self.sim.now_us} us (epoch {self._epoch}) while its upstream "
                f"{', '.join(running)} still ran"
            )

    def _upstream_route(self, consumer: SubtaskKey, channel: InputChannelInfo) -> _UpstreamRoute:
        route_key = (consumer, channel.gate_idx, channel.channel_idx)
        route = self._upstream_routes.get(route_key)
        if route is None:
            producer, info = self.wiring.subpartition_of(consumer, channel)
            route = self._upstream_routes[route_key] = _UpstreamRoute(
                producer,
                info,
                self.wiring.is_local(producer, consumer),
                ("credit", producer, info.partition_idx, info.subpartition_idx),
            )
        return route

    def _upstream(self, route: _UpstreamRoute, action: Any, epoch: int) -> None:
        """A consumer's message for its producer's subpartition (``UPSTREAM_MESSAGES``) arrives."""
        if epoch != self._epoch:
            return
        producer, info = route.producer, route.info
        if isinstance(action, AddCredit):
            self._tasks[producer].on_credit(info, action.credit)
        elif isinstance(action, AnnounceBufferSize):
            self._sync_before(producer)  # what was due went into buffers of the old size
            self._tasks[producer].on_new_buffer_size(info, action.buffer_size)
            if producer in self._sync_at:  # an empty open buffer took the new size: it may finish sooner
                self._schedule_next_sync(producer)
        elif isinstance(action, AcknowledgeAllRecordsProcessed):
            self._tasks[producer].on_all_records_processed(info)
        else:
            self._tasks[producer].on_resume_consumption(info)
        self._pump(producer)
        self._kick(producer)

    def _on_task_action(self, key: SubtaskKey, task: StreamTask, action: Any) -> None:
        epoch = self._epoch
        if isinstance(action, UPSTREAM_MESSAGES):
            channel = action.channel_info  # (``_upstream_route``'s lookup inline, as in ``_pump_task``)
            route = self._upstream_routes.get((key, channel.gate_idx, channel.channel_idx)) or self._upstream_route(
                key, channel
            )
            self._deliver_in_order(
                route.clock_key, partial(self._upstream, route, action, epoch), "credit", route.local
            )
        elif isinstance(action, SyncSnapshotTaken):  # the synchronous part held the task thread
            free_at = self._threads.hold(key, round(action.duration_ms * 1000))
            emission = self._emission.get(key)
            if free_at is not None and emission is not None and not emission.blocked:  # it emits again when free
                emission.restart(free_at)
                self._schedule_sync(key, free_at)
        elif isinstance(action, AsyncCheckpointStarted):  # runs off the task thread; done after its modelled time

            def complete(action: AsyncCheckpointStarted = action) -> None:
                if epoch == self._epoch and self._tasks.get(key) is task:
                    task.complete_async_part(action.checkpoint_id, action.part)
                    self._pump(key)

            self.sim.schedule_after(round(action.delay_ms * 1000), complete, Priority.NORMAL, "async-part")
        elif isinstance(action, AcknowledgeCheckpoint):
            self._to_job_master(
                je.CheckpointAcknowledged(
                    task.attempt_id, action.checkpoint_id, action.task_state_snapshot, action.metrics
                )
            )
        elif isinstance(action, DeclineCheckpoint):
            self._to_job_master(
                je.CheckpointDeclined(task.attempt_id, action.checkpoint_id, action.reason, action.detail)
            )
        elif isinstance(action, ReportIncompleteSnapshotStats):
            self._to_job_master(je.IncompleteStatsReported(task.attempt_id, action))
        elif isinstance(action, CrashedAtProtocolPoint):
            self._to_job_master(je.TaskCrashedAt(task.attempt_id, action.point, action.checkpoint_id))
        elif isinstance(action, TaskFinished):
            if self.record_cuts:
                self._check_finish_order(key, task)
            self._to_job_master(je.TaskFinished(task.attempt_id))
        elif isinstance(action, TaskFailed):
            self._to_job_master(je.TaskFailed(task.attempt_id, action.cause))
