"""A Hypothesis rule-based state machine driving the sans-IO ``JobMaster`` directly, as a tiny fake driver (no
simulator kernel, no Ray, no ``StreamTask``) carrying out its actions as ``runtime.sim.job_simulation`` does, over
small generated jobs, restart policies, placements and fault schedules. Invariants: checkpoint ids strictly increase
across failovers, a restore uses the latest completed checkpoint, no old attempt is acted on, the job ends once
faults stop (``JobMasterMachine`` says how). CI runs a fixed set of examples (``derandomize``);
``BARRIERSIM_PROPERTY_RANDOM=1`` explores new ones (``BARRIERSIM_PROPERTY_EXAMPLES``, ``BARRIERSIM_PROPERTY_STEPS``)."""

from __future__ import annotations

import functools
import os
import random
from dataclasses import dataclass, field

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.configuration import CheckpointingConfig
from barriersim.runtime.coordinator.manual_time import ManualTimerService
from barriersim.runtime.event_timers import DeliveringTimers
from barriersim.runtime.failure_reason import CheckpointFailureReason
from barriersim.runtime.faults.fault_schedule import (
    TASK_SIDE_POINTS,
    CrashCoordinator,
    CrashTask,
    CrashTaskManager,
    DelayMessage,
    DropMessage,
    FailCheckpoints,
    FailStorageWrite,
    FaultSchedule,
    FaultScheduleError,
    KillNode,
    MessageKind,
    ProtocolPoint,
)
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.job import events as je
from barriersim.runtime.job.actions import (
    CancelTasks,
    CoordinatorMessage,
    DeployTasks,
    JobEnded,
    KillTask,
    KillTaskManagers,
    NotifyCheckpointAborted,
    ReportRunning,
    RestartDue,
    SendToCoordinator,
    SendToTask,
    StartTimer,
    TaskDeploymentDescriptor,
    TriggerCheckpoint,
)
from barriersim.runtime.job.config import JobConfig, JobOutcome
from barriersim.runtime.job.job_master import JobMaster
from barriersim.runtime.job.placement import ClusterConfig, place, slots_needed
from barriersim.runtime.job.report import records_read_in_run
from barriersim.runtime.job.restart_strategy import RestartStrategyConfig, RestartStrategyKind
from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobVertex, OperatorKind, Partitioner
from barriersim.runtime.state.key_groups import compute_key_group_range_for_operator_index
from barriersim.runtime.state.snapshot import KeyGroupsStateHandle, OperatorSubtaskState, TaskStateSnapshot
from barriersim.runtime.storage.memory_storage import JobManagerCheckpointStorage
from barriersim.runtime.task.actions import TaskCheckpointMetrics

RANDOM = os.environ.get("BARRIERSIM_PROPERTY_RANDOM", "") == "1"
EXAMPLES = int(os.environ.get("BARRIERSIM_PROPERTY_EXAMPLES", "500" if RANDOM else "120"))
STEPS = int(os.environ.get("BARRIERSIM_PROPERTY_STEPS", "80"))
JOB = "jm-machine"
MAX_PARALLELISM = 128
DECLINES = [
    CheckpointFailureReason.CHECKPOINT_DECLINED,
    CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION,
    CheckpointFailureReason.CHECKPOINT_DECLINED_TASK_NOT_READY,
]


def job_graph(sources: int, maps: int) -> JobGraph:
    return JobGraph(
        (
            JobVertex("src", OperatorKind.SOURCE, sources, MAX_PARALLELISM),
            JobVertex("map", OperatorKind.MAP, maps, MAX_PARALLELISM),
            JobVertex("sink", OperatorKind.TWO_PHASE_COMMIT_SINK, 1, MAX_PARALLELISM),
        ),
        (JobEdge("src", "map", Partitioner.REBALANCE), JobEdge("map", "sink", Partitioner.REBALANCE)),
    ).validate()


def snapshot(attempt: ExecutionAttemptID, parallelism: int, checkpoint_id: int) -> TaskStateSnapshot:
    """Keyed state of the subtask's own key groups whose bytes name the checkpoint: a restore shows which
    checkpoint it came from."""
    key_groups = compute_key_group_range_for_operator_index(MAX_PARALLELISM, parallelism, attempt.subtask_index)
    handle = KeyGroupsStateHandle(key_groups, {key_groups.start_key_group: str(checkpoint_id).encode()})
    return TaskStateSnapshot({attempt.vertex_id: OperatorSubtaskState(managed_keyed_state=(handle,))})


def restored_checkpoint_ids(descriptor: TaskDeploymentDescriptor) -> set[int]:
    """The checkpoints whose bytes the descriptor's state holds."""
    if descriptor.state is None:
        return set()
    return {
        int(data.decode())
        for state in descriptor.state.subtask_states_by_operator.values()
        for handle in state.managed_keyed_state
        for data in handle.key_groups.values()
    }


def cluster_of(graph: JobGraph) -> ClusterConfig:
    """Two TaskManagers sharing the job's slots, on two nodes."""
    return ClusterConfig(taskmanagers=2, slots_per_taskmanager=-(-slots_needed(graph) // 2), nodes=2)


@st.composite
def fault_schedules(draw, graph: JobGraph) -> FaultSchedule:
    names = [f"{v.name}#{i}" for v in graph.vertices for i in range(v.parallelism)]
    task = st.sampled_from(names)
    cid = st.integers(1, 6)
    points = [
        ProtocolPoint.AFTER_SYNC_SNAPSHOT_BEFORE_ACK,
        ProtocolPoint.AFTER_ACK_BEFORE_COMPLETION_NOTICE,
        ProtocolPoint.BEFORE_FORWARDING_BARRIER,
        ProtocolPoint.MID_ALIGNMENT,
    ]
    fault = st.one_of(
        st.builds(CrashTask, task, at_ms=st.integers(0, 400)),
        st.builds(CrashTask, task, point=st.sampled_from(points), checkpoint_id=cid),
        st.builds(CrashTask, task, point=st.just(ProtocolPoint.DURING_RESTORE)),
        st.builds(DropMessage, st.sampled_from(list(MessageKind)), st.none() | task, st.none() | cid),
        st.builds(DelayMessage, st.sampled_from(list(MessageKind)), st.integers(1, 80), st.none() | task, cid),
        st.builds(FailStorageWrite, cid, st.none() | task),
        st.builds(FailCheckpoints, cid, st.integers(1, 3), st.none() | task),
        st.builds(CrashTaskManager, st.integers(0, 1), at_ms=st.integers(0, 400)),
        st.builds(CrashTaskManager, st.integers(0, 1), point=st.sampled_from(points), checkpoint_id=cid),
        st.builds(KillNode, st.just(1), at_ms=st.integers(0, 400)),
        st.builds(
            KillNode, st.just(1), point=st.sampled_from(points + [ProtocolPoint.DURING_RESTORE]), checkpoint_id=cid
        ),
    )
    # drawn on their own, so that most schedules have some: JobManager crashes and task-side crash points
    jobmanager_crashes = draw(st.lists(st.builds(CrashCoordinator, st.integers(0, 400)), max_size=2))
    task_side = st.sampled_from(sorted(TASK_SIDE_POINTS, key=lambda p: p.value))
    task_side_crashes = draw(
        st.lists(st.builds(CrashTask, task, point=task_side, checkpoint_id=st.integers(1, 4)), max_size=2)
    )
    faults = tuple(draw(st.lists(fault, max_size=4)) + jobmanager_crashes + task_side_crashes)
    schedule = FaultSchedule(faults)
    try:
        schedule.check_against(graph)
        schedule.check_against_placement(graph, place(graph, cluster_of(graph)))
    except FaultScheduleError:  # a mid_alignment crash of a task, TaskManager or node with one input channel
        schedule = FaultSchedule(
            tuple(f for f in faults if getattr(f, "point", None) is not ProtocolPoint.MID_ALIGNMENT)
        )
    return schedule


@dataclass
class FakeTask:
    """What the fake driver knows of one deployed attempt."""

    descriptor: TaskDeploymentDescriptor
    epoch: int
    parallelism: int
    alive: bool = True  # not killed, crashed or cancelled
    finished: bool = False
    to_ack: set[int] = field(default_factory=set)  # checkpoints started in it, not acknowledged or declined yet
    seen: set[int] = field(default_factory=set)  # every checkpoint it heard of

    @property
    def attempt(self) -> ExecutionAttemptID:
        return self.descriptor.attempt

    def armed(self, checkpoint_id: int) -> ProtocolPoint | None:
        for point, cid in self.descriptor.crash_points:
            if cid == checkpoint_id:
                return point
        return None


def step(fn):
    """A rule of the machine: while it runs, the machine counts as failed (so that the teardown's final phase does
    not run after a failure and hide it)."""

    @functools.wraps(fn)
    def run(self, *args, **kwargs):
        self.failed_step = True
        self.steps += 1
        fn(self, *args, **kwargs)
        self.failed_step = False

    return run


class JobMasterMachine(RuleBasedStateMachine):
    """A Hypothesis rule-based state machine driving the sans-IO ``JobMaster`` directly, as a tiny fake driver: no
    simulator kernel, no Ray, no ``StreamTask``. The driver carries out the JobMaster's actions the way
    ``runtime.sim.job_simulation`` does: ``DeployTasks`` is restored and started at once (or, when a rule says so, later
    by a rule, or it fails: ``deploy_failed``), ``KillTask`` deaths are reported at once or when a rule sees them,
    ``CancelTasks`` forgets the deployment, ``SendToTask`` and ``SendToCoordinator`` are queued with their due time and
    delivered by rules (one at a time, or all that are due in some order), ``StartTimer`` and the coordinator's own
    timers run on one ``ManualTimerService`` that rules advance. A ``TriggerCheckpoint`` delivered to a current task
    starts the checkpoint in every live task of its deployment; rules then acknowledge it (with keyed state whose bytes
    name the checkpoint), decline it, let a task die, crash at a task-side protocol point (a deployment's armed points
    fire when the task gets there: at its acknowledgement), finish, or send messages from attempts of cancelled
    deployments. Each example draws a small job graph (source, map, sink; parallelism 1-2), a short checkpoint interval
    and timeout, a restart policy (fixed-delay or exponential-delay), a placement in two TaskManagers on two nodes and a
    fault schedule (timed and protocol-point task crashes, TaskManager crashes and node losses (``KillTaskManagers``:
    every death reported as a ``KillTask``'s), JobManager failovers, dropped and delayed messages, declined checkpoints,
    failing state and ``_metadata`` writes).

    Invariants, after every step:
    1. checkpoint ids strictly increase across failovers and JobManager failovers: the triggers in emission order and
       every coordinator's statistics (retired ones first) never reuse an id;
    2. a restore uses the latest completed checkpoint: every ``DeployTasks.restored_checkpoint_id`` is the highest
       completed checkpoint at the restart that led to it (None if none; at least the highest at the failover: a
       checkpoint still pending then may complete during the restart delay), and the state it hands out is that one's;
       the storage retains exactly that checkpoint as its newest;
    3. no old attempt is acted on: every ``SendToTask``/``KillTask`` names an attempt of the latest deployment,
       attempts are never reused and ``is_current`` is False for every attempt of an earlier deployment; messages from
       old attempts change nothing (no completion, no failover, no fault consumed), but for an acknowledgement or a
       decline of a checkpoint still pending (after a failover that did not stop the periodic trigger, the pending
       checkpoints wait for the restart, and Flink's coordinator takes their old attempts' messages);
    4. the job ends once faults stop: the final phase (a rule, and the teardown of every example that did not end)
       delivers everything, lets every task acknowledge and finish and advances the clock: the outcome is FINISHED, or
       FAILED only when the restart strategy legitimately gave up; after ``JobEnded`` nothing more happens.

    CI runs a fixed set of examples (``derandomize``). To hunt for bugs, explore new ones:
    ``BARRIERSIM_PROPERTY_RANDOM=1 .venv/bin/python -m pytest -q -p no:cacheprovider tests/runtime/job`` (500 examples
    unless ``BARRIERSIM_PROPERTY_EXAMPLES`` says otherwise; ``BARRIERSIM_PROPERTY_STEPS`` sets the steps per
    example), as
    the property tests in ``tests/properties`` do. ``--hypothesis-show-statistics`` shows what the examples reached
    (outcomes, completed checkpoints, restores, JobManager failovers, late messages of old attempts)."""

    def __init__(self):
        super().__init__()
        self.failed_step = False
        self.steps = 0

    @initialize(
        data=st.data(),
        sources=st.integers(1, 2),
        maps=st.integers(1, 2),
        interval=st.sampled_from([20, 50]),
        timeout=st.sampled_from([100, 300, 600_000]),
        max_concurrent=st.integers(1, 2),
        max_retained=st.integers(1, 2),
        tolerable=st.sampled_from([0, 1, 2**31 - 1]),
        restart_delay=st.sampled_from([0, 20]),
        max_restarts=st.sampled_from([1, 1000, 1000, 1000, 1000]),
        deaths_at_once=st.booleans(),
        exponential=st.booleans(),
    )
    @step
    def start(
        self,
        data,
        sources,
        maps,
        interval,
        timeout,
        max_concurrent,
        max_retained,
        tolerable,
        restart_delay,
        max_restarts,
        deaths_at_once,
        exponential,
    ):
        graph = job_graph(sources, maps)
        # Flink's exponential-delay strategy, scaled to the machine's times: 10, 20, 40 ms apart, jittered, reset after
        # 100 quiet ms, at most max_restarts attempts in a row; else fixed-delay. delay_ms is a JobManager failover's.
        restart = (
            RestartStrategyConfig(
                RestartStrategyKind.EXPONENTIAL_DELAY,
                delay_ms=restart_delay,
                initial_backoff_ms=10,
                max_backoff_ms=40,
                backoff_multiplier=2.0,
                reset_backoff_threshold_ms=100,
                jitter_factor=0.5,
                attempts_before_reset_backoff=max_restarts,
            )
            if exponential
            else (RestartStrategyConfig(delay_ms=restart_delay, attempts=max_restarts))
        )
        self.config = JobConfig(
            graph,
            checkpointing=CheckpointingConfig(
                interval_ms=interval,
                timeout_ms=timeout,
                max_concurrent=max_concurrent,
                max_retained=max_retained,
                tolerable_failures=tolerable,
            ),
            cluster=cluster_of(graph),
            restart=restart,
            faults=data.draw(fault_schedules(graph), label="faults"),
        )
        self.parallelism = {v.name: v.parallelism for v in graph.vertices}
        self.deaths_at_once = deaths_at_once
        self.timers = ManualTimerService(0)
        self.storage = JobManagerCheckpointStorage(JOB)
        self.deployments: dict[int, DeployTasks] = {}
        self.latest: DeployTasks | None = None
        self.pending_deploy: DeployTasks | None = None  # deployed, not yet restored (or failed)
        self.next_deploy = "now"  # how the next deployment goes: restored and started at once, "slow", "fails"
        self.deploy_how = "now"
        self.stale_deploys: list[DeployTasks] = []  # slow deployments cancelled before their tasks were restored
        self.cancelled: set[int] = set()
        self.tasks: dict[ExecutionAttemptID, FakeTask] = {}  # every attempt ever deployed
        self.current: dict[ExecutionAttemptID, FakeTask] = {}  # the running deployment's, as the driver sees it
        self.to_tasks: list[tuple[int, SendToTask]] = []
        self.to_coordinator: list[tuple[int, SendToCoordinator]] = []
        self.deaths: list[KillTask] = []  # killed by the fault schedule, death not reported yet
        self.trigger_ids: list[int] = []  # distinct, in emission order
        self.completed_at_cancel: int | None = None
        self.batches = 0
        self.ended_in_batch: int | None = None
        self.outcome: JobOutcome | None = None
        self.old_spoke = 0
        self.end_account: tuple | None = None
        self.jm = JobMaster(
            self.config,
            JOB,
            storage=self.storage,
            clock=self.timers.clock,
            timers=DeliveringTimers(self.timers, lambda event: self.carry_out(self.jm.handle(event))),
            coordinator_rng=lambda: random.Random(7),
        )
        self.carry_out(self.jm.handle(je.Start()))

    # -- the fake driver ------------------------------------------------------------------------------

    def carry_out(self, actions: list) -> None:
        self.batches += 1
        batch = self.batches
        if self.ended_in_batch is not None:  # late messages of tasks may still be forwarded: they change nothing
            assert all(type(a) is SendToCoordinator for a in actions), f"actions after the job ended: {actions}"
        triggered_here: set[int] = set()
        for action in actions:
            if self.ended_in_batch == batch:  # what follows JobEnded in its batch: only notices drivers drop
                assert type(action) is SendToTask and not self.jm.is_current(action.attempt), action
            kind = type(action)
            if kind is DeployTasks:
                self.on_deploy(action)
            elif kind is KillTask:
                assert self.latest is not None and action.attempt in self.attempts_of(self.latest), action
                assert self.latest.epoch not in self.cancelled, f"{action}: its deployment was cancelled"
                self.deaths.append(action)
            elif kind is KillTaskManagers:  # each of its tasks dies; the driver reports each death as a KillTask's
                assert self.latest is not None and set(action.attempts) <= self.attempts_of(self.latest), action
                assert self.latest.epoch not in self.cancelled, f"{action}: its deployment was cancelled"
                self.deaths += [KillTask(attempt, action.why) for attempt in action.attempts]
                event("TaskManagers killed" if action.node is None else "node lost")
            elif kind is CancelTasks:
                self.cancelled.add(action.epoch)
                self.completed_at_cancel = self.highest_completed()
                if self.pending_deploy is not None and self.pending_deploy.epoch == action.epoch:
                    self.stale_deploys.append(self.pending_deploy)
                    self.pending_deploy = None
                for task in self.current.values():
                    task.alive = False
                self.current = {}
                self.deaths = []
            elif kind is SendToTask:
                assert self.latest is not None and action.attempt in self.attempts_of(self.latest), (
                    f"{action} names an attempt of an earlier deployment"
                )
                if type(action.message) is TriggerCheckpoint:
                    cid = action.message.checkpoint_id
                    if cid not in triggered_here:
                        assert all(cid > t for t in self.trigger_ids), f"checkpoint id {cid} after {self.trigger_ids}"
                        self.trigger_ids.append(cid)
                        triggered_here.add(cid)
                self.to_tasks.append((self.now + action.delay_ms, action))
            elif kind is SendToCoordinator:
                self.to_coordinator.append((self.now + action.delay_ms, action))
            elif kind is StartTimer:
                self.timers.register_timer(
                    self.now + action.delay_ms, lambda timer=action.timer: self.carry_out(self.jm.handle(timer))
                )
            elif kind is ReportRunning:  # the other tasks' RUNNING, after what is due now (as the simulator does)
                self.timers.register_timer(
                    self.now,
                    lambda act=action: self.carry_out(self.jm.handle(je.TasksRunning(act.epoch, act.attempts))),
                )
            elif kind is JobEnded:
                assert self.outcome is None, f"a second JobEnded: {action}"
                self.outcome = action.outcome
                self.ended_in_batch = batch
            else:
                raise AssertionError(f"unknown action {action!r}")
        if self.deaths_at_once:
            while self.deaths:
                self.report_death(0)
        if self.pending_deploy is not None and self.deploy_how == "now":
            self.complete_deploy()
        elif self.pending_deploy is not None and self.deploy_how == "fails":
            action, self.pending_deploy = self.pending_deploy, None
            self.carry_out(self.jm.handle(je.DeployFailed(action.epoch, "a task died while deploying")))

    def on_deploy(self, action: DeployTasks) -> None:
        assert action.epoch not in self.deployments, f"epoch {action.epoch} deployed twice"
        for descriptor in action.tasks:
            assert descriptor.attempt not in self.tasks, f"attempt {descriptor.attempt} deployed twice"
        if self.latest is not None:  # a restart: the latest checkpoint completed before the restart
            assert action.epoch > self.latest.epoch
            assert action.restored_checkpoint_id == self.highest_completed(), (
                f"deployment {action.epoch} restores {action.restored_checkpoint_id}, the latest completed "
                f"checkpoint is {self.highest_completed()}"
            )
            # one still pending at the failover may have completed during the restart delay, none went away
            assert (self.completed_at_cancel or 0) <= (action.restored_checkpoint_id or 0)
        else:
            assert action.restored_checkpoint_id is None
        restored = set()
        for descriptor in action.tasks:
            restored |= restored_checkpoint_ids(descriptor)
            if action.restored_checkpoint_id is None:
                assert descriptor.state is None, f"{descriptor.name} restores state, but no checkpoint"
        if action.restored_checkpoint_id is not None:  # the state handed out is the restored checkpoint's
            assert restored == {action.restored_checkpoint_id}, f"deployment {action.epoch} hands out {restored}"
        self.deployments[action.epoch] = action
        self.latest = action
        self.pending_deploy = action
        self.deploy_how, self.next_deploy = self.next_deploy, "now"
        for descriptor in action.tasks:
            self.tasks[descriptor.attempt] = FakeTask(descriptor, action.epoch, self.parallelism[descriptor.key[0]])

    @staticmethod
    def attempts_of(deploy: DeployTasks) -> set[ExecutionAttemptID]:
        return {d.attempt for d in deploy.tasks}

    @property
    def now(self) -> int:
        return self.timers.clock()

    def highest_completed(self) -> int | None:
        done = [c["id"] for c in self.jm.report().checkpoints if c["status"] == "COMPLETED"]
        return max(done, default=None)

    def live_tasks(self) -> list[FakeTask]:
        return [t for t in self.current.values() if t.alive]

    def old_tasks(self) -> list[FakeTask]:
        """Attempts of cancelled deployments."""
        return [t for t in self.tasks.values() if t.epoch in self.cancelled]

    def due(self, queue: list) -> list[int]:
        return [i for i, (at, _) in enumerate(queue) if at <= self.now]

    def complete_deploy(self) -> None:
        action, self.pending_deploy = self.pending_deploy, None
        self.carry_out(self.jm.handle(je.TasksRestored(action.epoch, 0)))
        if self.latest is action and action.epoch not in self.cancelled:
            self.current = {d.attempt: self.tasks[d.attempt] for d in action.tasks}
        self.carry_out(self.jm.handle(je.TasksStarted(action.epoch)))

    def report_death(self, pick: int) -> None:
        kill = self.deaths.pop(pick % len(self.deaths))
        task = self.tasks[kill.attempt]
        task.alive = False
        self.carry_out(self.jm.handle(je.TaskFailed(kill.attempt, kill.why)))

    def deliver_to_task(self, index: int) -> None:
        _, send = self.to_tasks.pop(index)
        task = self.current.get(send.attempt)
        if not self.jm.is_current(send.attempt) or task is None or not task.alive:
            return  # the driver delivers only to a current attempt (SendToTask's contract)
        message = send.message
        if type(message) is TriggerCheckpoint:
            if not task.finished:
                for other in self.live_tasks():  # the barrier reaches every task of the deployment
                    if message.checkpoint_id not in other.seen:
                        other.seen.add(message.checkpoint_id)
                        other.to_ack.add(message.checkpoint_id)
        elif type(message) is NotifyCheckpointAborted:
            task.to_ack.discard(message.checkpoint_id)

    def deliver_to_coordinator(self, index: int) -> None:
        _, send = self.to_coordinator.pop(index)
        self.carry_out(self.jm.handle(send.message))

    def acknowledge(self, task: FakeTask, checkpoint_id: int) -> None:
        task.to_ack.discard(checkpoint_id)
        point = task.armed(checkpoint_id)
        if point is not None:  # the task reaches the protocol point it was deployed to crash at
            task.alive = False
            self.carry_out(self.jm.handle(je.TaskCrashedAt(task.attempt, point, checkpoint_id)))
            return
        self.carry_out(
            self.jm.handle(
                je.CheckpointAcknowledged(
                    task.attempt,
                    checkpoint_id,
                    snapshot(task.attempt, task.parallelism, checkpoint_id),
                    TaskCheckpointMetrics(checkpoint_id, sync_duration_ms=1),
                )
            )
        )

    def fire_next_timer(self) -> None:
        at = self.timers.next_timer_at()
        if at is not None:
            self.timers.advance_to(max(at, self.now))

    def deliver_due(self, rnd: random.Random) -> None:
        """Every message due by now arrives, in some order (those sent meanwhile wait)."""
        batch = [(self.to_tasks, send) for at, send in self.to_tasks if at <= self.now]
        batch += [(self.to_coordinator, send) for at, send in self.to_coordinator if at <= self.now]
        rnd.shuffle(batch)
        for queue, send in batch:
            index = next(i for i, (_, s) in enumerate(queue) if s is send)
            if queue is self.to_tasks:
                self.deliver_to_task(index)
            else:
                self.deliver_to_coordinator(index)

    def acknowledge_everything(self, rnd: random.Random) -> None:
        pending = [(t, cid) for t in self.live_tasks() for cid in sorted(t.to_ack)]
        rnd.shuffle(pending)
        for task, cid in pending:
            if task.alive and cid in task.to_ack and task.attempt in self.current:
                self.acknowledge(task, cid)

    # -- rules ----------------------------------------------------------------------------------------

    @rule(ms=st.none() | st.integers(1, 80), deliver=st.booleans(), rnd=st.randoms(use_true_random=False))
    @step
    def time_passes(self, ms, deliver, rnd):
        """The clock moves on by ``ms`` (None: to the next timer): due timers fire (the JobMaster's and the
        coordinator's); with ``deliver`` the messages due by then arrive too, in some order."""
        if ms is None:
            self.fire_next_timer()
        else:
            self.timers.advance(ms)
        if deliver:
            self.deliver_due(rnd)

    @rule(how=st.sampled_from(["slow", "fails"]))
    @step
    def the_next_deployment_is(self, how):
        self.next_deploy = how

    @precondition(lambda self: self.pending_deploy is not None)
    @rule(fails=st.booleans())
    @step
    def the_slow_deployment_is_done(self, fails):
        """The driver built the tasks of the pending deployment (or one of them died while deploying)."""
        if fails:
            action, self.pending_deploy = self.pending_deploy, None
            self.carry_out(self.jm.handle(je.DeployFailed(action.epoch, "a task died while deploying")))
        else:
            self.complete_deploy()

    @precondition(lambda self: self.stale_deploys)
    @rule(fails=st.booleans())
    @step
    def a_cancelled_deployment_reports(self, fails):
        """The tasks of a deployment cancelled while it was being built report: nothing happens."""
        action = self.stale_deploys.pop(0)
        before = self.account()
        if fails:
            assert self.jm.handle(je.DeployFailed(action.epoch, "late")) == []
        else:
            assert self.jm.handle(je.TasksRestored(action.epoch, 0)) == []
            assert self.jm.handle(je.TasksStarted(action.epoch)) == []
            assert self.jm.handle(je.TasksRunning(action.epoch, [d.attempt for d in action.tasks])) == []
        assert self.account() == before

    @precondition(lambda self: self.to_tasks or self.to_coordinator)
    @rule(pick=st.integers(0, 100), to_coordinator=st.booleans())
    @step
    def a_message_arrives(self, pick, to_coordinator):
        """One due message for a task (``SendToTask``) or for the coordinator (``SendToCoordinator``) arrives."""
        queue = self.to_coordinator if to_coordinator else self.to_tasks
        due = self.due(queue)
        if due and to_coordinator:
            self.deliver_to_coordinator(due[pick % len(due)])
        elif due:
            self.deliver_to_task(due[pick % len(due)])

    def pick_pending(self, pick: int) -> tuple[FakeTask, int] | None:
        pending = [(t, cid) for t in self.live_tasks() for cid in sorted(t.to_ack)]
        return pending[pick % len(pending)] if pending else None

    @rule(pick=st.integers(0, 100), everyone=st.booleans(), rnd=st.randoms(use_true_random=False))
    @step
    def tasks_acknowledge(self, pick, everyone, rnd):
        """A task acknowledges a checkpoint it started; with ``everyone``: every task acknowledges everything."""
        if everyone:
            self.acknowledge_everything(rnd)
        else:
            chosen = self.pick_pending(pick)
            if chosen is not None:
                self.acknowledge(*chosen)

    @rule(rnd=st.randoms(use_true_random=False))
    @step
    def a_checkpoint_goes_round(self, rnd):
        """The next timer fires (say, the periodic trigger), the messages in flight arrive, every task acknowledges
        what it has started, and the acknowledgements arrive."""
        self.fire_next_timer()
        self.deliver_due(rnd)
        self.acknowledge_everything(rnd)
        self.deliver_due(rnd)

    @rule(pick=st.integers(0, 100), reason=st.sampled_from(DECLINES))
    @step
    def task_declines(self, pick, reason):
        chosen = self.pick_pending(pick)
        if chosen is not None:
            task, cid = chosen
            task.to_ack.discard(cid)
            self.carry_out(self.jm.handle(je.CheckpointDeclined(task.attempt, cid, reason, "declined by the test")))

    @rule(pick=st.integers(0, 100))
    @step
    def task_dies(self, pick):
        """A task of the running deployment dies on its own (not by the fault schedule)."""
        live = self.live_tasks()
        if live:
            task = live[pick % len(live)]
            task.alive = False
            self.carry_out(self.jm.handle(je.TaskFailed(task.attempt, "lost its process")))

    @precondition(lambda self: self.deaths)
    @rule(pick=st.integers(0, 100))
    @step
    def killed_task_is_seen_dead(self, pick):
        self.report_death(pick)

    @rule(pick=st.integers(0, 100), point=st.sampled_from(sorted(TASK_SIDE_POINTS, key=lambda p: p.value)))
    @step
    def task_crashes_at_a_protocol_point(self, pick, point):
        chosen = self.pick_pending(pick)
        if chosen is not None:
            task, cid = chosen
            task.alive = False
            self.carry_out(self.jm.handle(je.TaskCrashedAt(task.attempt, point, cid)))

    @precondition(lambda self: self.steps >= STEPS // 2)  # the job runs a while before its tasks finish
    @rule(pick=st.integers(0, 100))
    @step
    def task_finishes(self, pick):
        live = [t for t in self.live_tasks() if not t.finished]
        if live:
            task = live[pick % len(live)]
            task.finished = True
            self.carry_out(self.jm.handle(je.TaskFinished(task.attempt)))

    @precondition(lambda self: self.old_tasks())
    @rule(
        pick=st.integers(0, 100),
        kind=st.sampled_from(["ack", "decline", "finished", "failed", "crashed"]),
        point=st.sampled_from(sorted(TASK_SIDE_POINTS, key=lambda p: p.value)),
    )
    @step
    def an_old_attempt_speaks(self, pick, kind, point):
        """A message of an attempt of an earlier deployment arrives late: it changes nothing."""
        old = self.old_tasks()
        armed = [(t, cid) for t in old for cid in sorted(t.to_ack) if t.armed(cid)]
        if kind == "crashed" and armed:  # one that was cancelled before it reached its armed crash point
            task, cid = armed[pick % len(armed)]
            event("a cancelled attempt reports its armed crash point")
        else:
            task = old[pick % len(old)]
            seen = sorted(task.seen)
            if kind in ("ack", "decline", "crashed") and not seen:
                kind = "finished"  # it never heard of a checkpoint
            cid = seen[pick % len(seen)] if seen else 0
        self.old_spoke += 1
        assert not self.jm.is_current(task.attempt)
        if kind in ("ack", "decline") and cid in self.jm.coordinator().pending_checkpoints():
            event("an old attempt speaks for a checkpoint still pending")
            live = True  # its checkpoint waits for the restart: the message counts
        else:
            live = False
        before = self.account()
        if kind == "ack":
            out = self.jm.handle(
                je.CheckpointAcknowledged(
                    task.attempt, cid, snapshot(task.attempt, task.parallelism, cid), TaskCheckpointMetrics(cid)
                )
            )
        elif kind == "decline":
            out = self.jm.handle(
                je.CheckpointDeclined(task.attempt, cid, CheckpointFailureReason.CHECKPOINT_DECLINED, "late")
            )
        elif kind == "finished":
            out = self.jm.handle(je.TaskFinished(task.attempt))
        elif kind == "failed":
            out = self.jm.handle(je.TaskFailed(task.attempt, "late death"))
        else:  # at the point it was armed with for that checkpoint, if any
            out = self.jm.handle(je.TaskCrashedAt(task.attempt, task.armed(cid) or point, cid))
        assert all(type(a) is SendToCoordinator for a in out), out
        for send in out:  # delivered at once: the coordinator ignores it too
            self.carry_out(self.jm.handle(send.message))
        after = self.account()
        if kind in ("ack", "decline"):  # the fault schedule's message faults may match a late message
            before, after = before[:-1], after[:-1]
        assert live or after == before, f"a message of old attempt {task.attempt} changed the job: {before} -> {after}"

    def account(self) -> tuple:
        jm = self.jm
        return (
            jm.epoch(),
            jm.restarts(),
            jm.outcome,
            jm.is_running(),
            sorted(jm.coordinator().pending_checkpoints()),
            self.highest_completed(),
            [loc.checkpoint_id for loc in self.storage.list_retained_checkpoints()],
            sorted(map(str, jm.finished_subtasks())),
            jm.fault_report(),
        )

    @precondition(lambda self: self.outcome is None and self.steps >= STEPS // 2)
    @rule()
    @step
    def faults_stop_and_the_job_finishes(self):
        self.finish_job()

    # -- the final phase ------------------------------------------------------------------------------

    def finish_job(self) -> None:
        """No more injected faults: deliver everything, let every task acknowledge and finish, advance the clock
        until the job ends (what is left of the schedule still fires, each fault once)."""
        for _ in range(2000):
            if self.outcome is not None:
                break
            if self.deaths:
                self.report_death(0)
            elif self.pending_deploy is not None:
                self.complete_deploy()
            elif self.stale_deploys:
                self.stale_deploys.pop()
            elif self.due(self.to_coordinator):
                self.deliver_to_coordinator(self.due(self.to_coordinator)[0])
            elif self.due(self.to_tasks):
                self.deliver_to_task(self.due(self.to_tasks)[0])
            elif self.pick_pending(0) is not None:
                self.acknowledge(*self.pick_pending(0))
            elif self.jm.is_running() and self.current and all(t.alive for t in self.current.values()):
                for task in list(self.current.values()):
                    if not task.finished and self.outcome is None:
                        task.finished = True
                        self.carry_out(self.jm.handle(je.TaskFinished(task.attempt)))
            else:
                upcoming = [at for at, _ in self.to_tasks + self.to_coordinator]
                next_timer = self.timers.next_timer_at()
                if next_timer is not None:
                    upcoming.append(next_timer)
                assert upcoming, "nothing left to do, but the job has not ended"
                self.timers.advance_to(max(self.now, min(upcoming)))
        assert self.outcome is not None, "the job did not end once faults stopped"
        if self.outcome is JobOutcome.FAILED:
            assert self.jm.restart_strategy().failures > self.jm.restart_strategy().max_attempts, (
                f"the job failed after {self.jm.restart_strategy().failures} failures ({self.jm.restart_strategy()!r})"
            )
        else:
            assert self.outcome is JobOutcome.FINISHED, self.outcome
        # past every checkpoint's expiry: an ended job's coordinator must not trigger, expire or fail anything
        self.timers.advance(self.config.checkpointing.timeout_ms + 1000)

    def teardown(self):
        if not self.failed_step and hasattr(self, "jm") and self.outcome is None:
            self.finish_job()
        if hasattr(self, "jm"):
            report = self.jm.report()
            event(f"outcome {self.outcome}")
            event(f"completed {min(3, report.counts['completed'])}")
            event(f"restores from a checkpoint {min(3, len(report.restored_checkpoint_ids))}")
            event(f"restarts {min(3, report.restarts)}")
            event(f"jobmanager failovers {min(2, report.coordinator_failovers)}")
            event(f"old attempts spoke {min(3, self.old_spoke)}")

    # -- invariants -----------------------------------------------------------------------------------

    @invariant()
    def invariants_hold(self):
        if not hasattr(self, "jm"):
            return
        self.failed_step = True
        jm = self.jm
        # 1. ids never reused: each coordinator's ids (in the order the coordinators lived) are above every id an
        # earlier one used; the report counts each coordinator's checkpoints once
        trackers = jm.retired_stats() + ([] if jm.coordinator_down() else [jm.coordinator().checkpoint_stats()])
        assert len({id(t) for t in trackers}) == len(trackers), "a coordinator's statistics are held twice"
        ids = [cid for tracker in trackers for cid in sorted(tracker.history)]
        assert all(a < b for a, b in zip(ids, ids[1:])), f"checkpoint ids reused across coordinators: {ids}"
        assert set(ids) == set(self.trigger_ids), "a checkpoint was triggered that no coordinator's statistics hold"
        assert all(jm.coordinator().checkpoint_id_counter().get() > cid for cid in ids)
        report = jm.report()
        statuses = [c["status"] for c in report.checkpoints]
        assert [c["id"] for c in report.checkpoints] == sorted(ids)
        assert report.counts["completed"] == statuses.count("COMPLETED"), (report.counts, statuses)
        assert report.counts["in_progress"] == statuses.count("IN_PROGRESS"), (report.counts, statuses)
        assert report.counts["failed"] >= statuses.count("FAILED"), (report.counts, statuses)
        # 2. the storage's newest checkpoint is the latest completed one (until the job's end discards them)
        if self.outcome is None:
            retained = [loc.checkpoint_id for loc in self.storage.list_retained_checkpoints()]
            assert max(retained, default=None) == self.highest_completed(), (retained, self.highest_completed())
        # 4. once the job ended, nothing changes any more
        if self.outcome is not None:
            account = self.account()[:-1]  # a late message may still meet a message fault of the schedule
            if self.end_account is None:
                self.end_account = account
            assert account == self.end_account, f"the job changed after it ended: {self.end_account} -> {account}"
        # 3. only attempts of the latest deployment are current, and only while it runs
        latest = self.attempts_of(self.latest) if self.latest is not None else set()
        for attempt, task in self.tasks.items():
            if jm.is_current(attempt):
                assert attempt in latest and jm.is_running()
                assert task.epoch == jm.epoch()
        self.failed_step = False


TestJobMasterMachine = JobMasterMachine.TestCase
TestJobMasterMachine.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    database=None,
    derandomize=not RANDOM,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


# -- examples the machine found, kept as plain regression tests ----------------------------------------


class SimpleDriver:
    """Deploys at once, reports deaths at once, runs timers on a manual clock, keeps every action batch."""

    def __init__(self, config: JobConfig, source_offsets: dict[str, int] | None = None):
        self.source_offsets = source_offsets or {}  # what each deployment's sources report once restored
        self.timers = ManualTimerService(0)
        self.storage = JobManagerCheckpointStorage(JOB)
        self.batches: list[list] = []
        self.jm = JobMaster(
            config,
            JOB,
            storage=self.storage,
            clock=self.timers.clock,
            timers=DeliveringTimers(self.timers, lambda event: self.carry_out(self.jm.handle(event))),
            coordinator_rng=lambda: random.Random(7),
        )
        self.carry_out(self.jm.handle(je.Start()))

    def carry_out(self, actions: list) -> None:
        self.batches.append(list(actions))
        for action in actions:
            if type(action) is StartTimer:
                self.timers.register_timer(
                    self.timers.clock() + action.delay_ms,
                    lambda timer=action.timer: self.carry_out(self.jm.handle(timer)),
                )
            elif type(action) is DeployTasks:
                self.carry_out(self.jm.handle(je.TasksRestored(action.epoch, 0, self.source_offsets)))
                self.carry_out(self.jm.handle(je.TasksStarted(action.epoch)))
            elif type(action) is ReportRunning:
                self.timers.register_timer(
                    self.timers.clock(),
                    lambda act=action: self.carry_out(self.jm.handle(je.TasksRunning(act.epoch, act.attempts))),
                )
            elif type(action) is KillTask:
                self.carry_out(self.jm.handle(je.TaskFailed(action.attempt, action.why)))

    def actions_since(self, batch: int) -> list:
        return [a for actions in self.batches[batch:] for a in actions]


def test_the_run_begins_where_its_first_deployment_restored_its_sources():
    """The source offsets the first deployment reports once restored (a job started from an earlier run's snapshot:
    that snapshot's) are where the run began; a failover's deployment, which restores later offsets, does not move
    them, so a source's records in this run count from there (``records_read_in_run``)."""
    driver = SimpleDriver(
        JobConfig(
            job_graph(1, 1),
            checkpointing=CheckpointingConfig(interval_ms=30),
            restart=RestartStrategyConfig(delay_ms=0),
        ),
        {"src#0": 500},
    )
    jm = driver.jm
    assert jm.source_records_at_start == {"src#0": 500}
    driver.source_offsets = {"src#0": 800}
    driver.timers.advance(40)
    driver.carry_out(jm.handle(je.TaskFailed(jm.attempt_of("map", 0), "lost its process")))
    driver.timers.advance(1)  # the restart (its delay's timer)
    assert jm.epoch() == 1 and jm.is_running()
    assert jm.report().source_records_at_start == {"src#0": 500}
    assert records_read_in_run("src#0", 1_200, jm.source_records_at_start) == 700
    assert records_read_in_run("map#0", 0, jm.source_records_at_start) == 0


def test_a_failed_job_stays_ended():
    """The restart strategy fails the job: its coordinator stops, so no checkpoint is triggered on the dead attempts
    afterwards, and none of them expires and fails the job over a second time (before the fix: a JobEnded(FAILED)
    and a CancelTasks every checkpoint timeout, the restarts counted on). The failure that failed the job is no
    restart (Flink's numRestarts counts the restarts its strategy allowed)."""
    driver = SimpleDriver(
        JobConfig(
            job_graph(1, 1),
            checkpointing=CheckpointingConfig(interval_ms=30, timeout_ms=60),
            restart=RestartStrategyConfig(delay_ms=0, attempts=0),
        )
    )
    driver.timers.advance(40)
    jm = driver.jm
    driver.carry_out(jm.handle(je.TaskFailed(jm.attempt_of("map", 0), "lost its process")))
    assert jm.outcome is JobOutcome.FAILED and jm.restarts() == 0
    ended = len(driver.batches)
    driver.timers.advance(1000)
    assert driver.actions_since(ended) == []
    assert jm.restarts() == 0 and jm.coordinator().is_shutdown


def test_while_the_jobmanager_is_down_its_dead_coordinator_is_reported_once():
    """Between a JobManager's crash and the recovery, the dead coordinator's statistics are the retired ones only
    (before the fix ``report()`` added them twice: every count doubled)."""
    faults = FaultSchedule((CrashCoordinator(100),))
    driver = SimpleDriver(
        JobConfig(
            job_graph(1, 1),
            checkpointing=CheckpointingConfig(interval_ms=30),
            restart=RestartStrategyConfig(delay_ms=50),
            faults=faults,
        )
    )
    driver.timers.advance(110)
    jm = driver.jm
    assert jm.coordinator_down()
    report = jm.report()
    # one checkpoint was pending (nobody acknowledges here): it failed with the JobManager, and is counted once; the
    # other failed trigger is the first task's RUNNING one (NOT_ALL_REQUIRED_TASKS_RUNNING, no row, as in Flink)
    assert len(report.checkpoints) == 1 and report.counts["total"] == 2
    assert report.counts["in_progress"] == 0 and report.counts["failed"] == 2


def test_a_jobmanager_crash_while_the_jobmanager_is_down_does_nothing():
    """A second ``crash_coordinator`` due while the JobManager is down (within the restart delay of the first) finds
    no JobManager to crash: nothing happens and it does not count as fired, as a crash of a task that is not running
    (before the fix it retired the dead coordinator a second time, so its checkpoints were counted twice, cancelled
    a deployment that did not exist and counted a second failover)."""
    faults = FaultSchedule((CrashCoordinator(100), CrashCoordinator(120)))
    driver = SimpleDriver(
        JobConfig(
            job_graph(1, 1),
            checkpointing=CheckpointingConfig(interval_ms=30),
            restart=RestartStrategyConfig(delay_ms=50),
            faults=faults,
        )
    )
    driver.timers.advance(400)
    jm = driver.jm
    report = jm.report()
    assert (report.coordinator_failovers, report.restarts) == (1, 1)
    assert [f["fired"] for f in report.fault_log] == [1, 0]
    assert [a.epoch for a in driver.actions_since(0) if type(a) is CancelTasks] == [0]
    # each JobManager's first task RUNNING set off a trigger that failed before it had an id (no row)
    assert report.counts["total"] == len(report.checkpoints) + 2
    ids = [c["id"] for c in report.checkpoints]
    assert ids == sorted(set(ids))


def test_a_late_crash_report_of_an_old_attempt_does_not_count_as_fired():
    """An attempt of a cancelled deployment reports that it stopped at its armed crash point (on Ray: its report
    raced with its kill): the job does not fail over, and the fault did not take effect, so it does not count as
    fired (as ``_crash_point`` and ``_crash`` do; before the fix the fault log claimed it fired)."""
    faults = FaultSchedule((CrashTask("map#0", point=ProtocolPoint.BEFORE_FORWARDING_BARRIER, checkpoint_id=1),))
    driver = SimpleDriver(
        JobConfig(
            job_graph(1, 1),
            checkpointing=CheckpointingConfig(interval_ms=30),
            restart=RestartStrategyConfig(delay_ms=0),
            faults=faults,
        )
    )
    jm = driver.jm
    old = jm.attempt_of("map", 0)
    driver.carry_out(jm.handle(je.TaskFailed(jm.attempt_of("src", 0), "lost its process")))
    driver.timers.advance(1)
    assert jm.is_running() and jm.epoch() == 1 and jm.restarts() == 1
    assert jm.handle(je.TaskCrashedAt(old, ProtocolPoint.BEFORE_FORWARDING_BARRIER, 1)) == []
    assert jm.restarts() == 1 and [f["fired"] for f in jm.report().fault_log] == [0]


def test_a_queued_trigger_that_a_failed_checkpoint_starts_goes_out_before_the_failover():
    """A checkpoint expires and the failure manager fails the job (no tolerable failures); the same coordinator call
    starts the queued periodic request. The new checkpoint's tasks are triggered before the failover cancels them, as
    in Flink, whose ``failJob`` is queued on the JobMaster's main thread while the coordinator's call goes on; the
    failover then aborts it. Before the fix the JobMaster failed over in the middle of the coordinator's actions, so
    the trigger went out after the failover had cancelled the deployment and aborted the checkpoint, and after the
    trigger of a newer checkpoint (the machine's first invariant: ids 1, 2, 4, then 3)."""
    config = JobConfig(
        job_graph(1, 1),
        checkpointing=CheckpointingConfig(interval_ms=30, timeout_ms=100, max_concurrent=1, tolerable_failures=0),
        restart=RestartStrategyConfig(delay_ms=50),
    )
    driver = SimpleDriver(config)
    driver.timers.advance(200)  # nobody acknowledges: checkpoint 1 expires while periodic requests wait in the queue
    jm = driver.jm
    assert jm.restarts() == 1
    actions = driver.actions_since(0)
    redeployed = next(i for i, a in enumerate(actions) if type(a) is DeployTasks and a.epoch == 1)
    sent = [a for a in actions[:redeployed] if type(a) in (SendToTask, CancelTasks)]  # the first deployment's
    cancel = next(i for i, a in enumerate(sent) if type(a) is CancelTasks)
    triggers = [
        (i, a.message.checkpoint_id)
        for i, a in enumerate(sent)
        if type(a) is SendToTask and type(a.message) is TriggerCheckpoint
    ]
    assert sorted({cid for _, cid in triggers}) == [1, 2], triggers
    assert all(i < cancel for i, _ in triggers), f"a trigger after the failover's CancelTasks: {triggers}, {cancel}"
    aborted_at = {
        a.message.checkpoint_id: i
        for i, a in enumerate(sent)
        if type(a) is SendToTask and type(a.message) is NotifyCheckpointAborted
    }
    assert aborted_at.keys() == {1, 2}
    assert all(i < aborted_at[cid] for i, cid in triggers)  # no checkpoint is triggered after its abort


def test_a_second_fail_job_of_one_coordinator_call_is_dropped_once_the_first_ended_the_job():
    """One coordinator call returns two ``FailJob``s and the restart strategy allows no restart: the first fails the job
    (one failover, one ``CancelTasks``, one ``JobEnded``), and the second finds it ended and does nothing, as Flink's
    ``DefaultExecutionGraph.failJob`` returns at once for a job that is failing or ended. Before the two queues of
    ``FailJob`` became one, the second failed the ended job over again (a second cancel and end)."""
    driver = SimpleDriver(
        JobConfig(
            job_graph(1, 1),
            checkpointing=CheckpointingConfig(interval_ms=30, timeout_ms=1000),
            restart=RestartStrategyConfig(delay_ms=0, attempts=0),
        )
    )
    driver.timers.advance(40)
    jm = driver.jm
    first = m.FailJob(CheckpointFailureReason.CHECKPOINT_DECLINED, "first")
    second = m.FailJob(CheckpointFailureReason.CHECKPOINT_EXPIRED, "second")
    jm.coordinator().handle = lambda event: [first, second]  # a fake coordinator call: what it returns is the point
    before = len(driver.batches)
    driver.carry_out(jm.handle(CoordinatorMessage(jm.coordinator_generation(), None)))
    after = driver.actions_since(before)
    assert jm.outcome is JobOutcome.FAILED and jm.restarts() == 0
    assert [type(a) for a in after].count(CancelTasks) == 1 and [type(a) for a in after].count(JobEnded) == 1
    assert "CHECKPOINT_DECLINED" in jm.failure_reason


def test_a_restarting_job_triggers_no_checkpoint_until_it_runs_again():
    """Flink's ``DefaultScheduler`` puts a failing-over job RESTARTING, and the periodic trigger stops, which aborts
    the pending checkpoints (``CHECKPOINT_COORDINATOR_SUSPEND``); when the restart deploys, the first task that
    reports RUNNING starts the trigger with the min pause (0): that trigger finds the other tasks not running and
    fails (``NOT_ALL_REQUIRED_TASKS_RUNNING``), and the next one comes one interval later. Before, the trigger ran on
    through the restart delay, and each trigger failed (the tasks were not running): dozens of failed checkpoints."""
    driver = SimpleDriver(
        JobConfig(
            job_graph(1, 1),
            checkpointing=CheckpointingConfig(interval_ms=30, timeout_ms=10_000),
            restart=RestartStrategyConfig(delay_ms=500),
        )
    )
    jm = driver.jm
    driver.timers.advance(40)  # checkpoint 1 is triggered and pending (nobody acknowledges)
    failed_at = len(driver.batches)
    driver.carry_out(jm.handle(je.TaskFailed(jm.attempt_of("map", 0), "lost its process")))
    assert jm.coordinator().checkpoint_stats().history[1]["failure_reason"] == "CHECKPOINT_COORDINATOR_SUSPEND"
    driver.timers.advance(499)  # the restart delay: no trigger, no checkpoint
    during = driver.actions_since(failed_at)
    assert not [a for a in during if type(a) is SendToTask and type(a.message) is TriggerCheckpoint]
    assert (
        sorted(jm.coordinator().checkpoint_stats().history) == [1]
        and not jm.coordinator().is_periodic_checkpointing_started
    )
    redeployed = len(driver.batches)
    failed = jm.coordinator().checkpoint_counts()["failed"]
    driver.timers.advance(1)  # the restart: RUNNING, deployed, a trigger at once that fails
    assert jm.epoch() == 1 and jm.coordinator().is_periodic_checkpointing_started
    assert jm.coordinator().checkpoint_counts()["failed"] == failed + 1
    driver.timers.advance(29)
    assert not [a for a in driver.actions_since(redeployed) if type(a) is SendToTask]
    driver.timers.advance(1)  # one interval after the restart
    triggers = [
        a.message.checkpoint_id
        for a in driver.actions_since(redeployed)
        if type(a) is SendToTask and type(a.message) is TriggerCheckpoint
    ]
    assert triggers and triggers[0] == 2


def test_an_exponential_delay_strategy_spaces_the_restarts_out():
    """Each failure in a row waits longer (Flink's ``ExponentialDelayRestartBackoffTimeStrategy``): 1 s, 1.5 s, 2.25 s
    without jitter; with Flink's 10 % jitter each is within 10 % of that, drawn from the run's seeded stream."""

    def restart_delays(jitter: float) -> list[int]:
        restart = RestartStrategyConfig(RestartStrategyKind.EXPONENTIAL_DELAY, jitter_factor=jitter)
        driver = SimpleDriver(
            JobConfig(
                job_graph(1, 1), checkpointing=CheckpointingConfig(interval_ms=30, timeout_ms=10_000), restart=restart
            )
        )
        for _ in range(3):
            driver.timers.advance(100)
            driver.carry_out(driver.jm.handle(je.TaskFailed(driver.jm.attempt_of("map", 0), "lost its process")))
            driver.timers.advance(5_000)
        return [a.delay_ms for a in driver.actions_since(0) if type(a) is StartTimer and type(a.timer) is RestartDue]

    assert restart_delays(0.0) == [1000, 1500, 2250]
    jittered = restart_delays(0.1)
    assert all(abs(d - e) <= e * 0.1 for d, e in zip(jittered, [1000, 1500, 2250])) and len(jittered) == 3
    assert restart_delays(0.1) == jittered  # the same seeded stream, the same delays


def test_a_stop_whose_savepoint_completes_during_the_restart_delay_fails_the_job():
    """A stop-with-savepoint after a first failover (the periodic trigger then runs without the deactivator, whose
    stop at the next failover would abort the pending checkpoints): every task acknowledges the savepoint, a task
    dies before the last acknowledgement reaches the coordinator, and that one arrives during the restart delay and
    completes the savepoint. The tasks the stop began with did not finish, so the job fails as Flink's
    ``StopWithSavepointTerminationHandlerImpl`` fails it (``StopWithSavepointStoppingException``, not restarted);
    before the fix the restart ran on and restored the latest checkpoint, older than the savepoint a restore
    resumes from, and the stop counted as COMPLETED."""
    driver = SimpleDriver(
        JobConfig(
            job_graph(1, 1),
            checkpointing=CheckpointingConfig(interval_ms=1000, timeout_ms=10_000),
            restart=RestartStrategyConfig(delay_ms=50),
        )
    )
    jm = driver.jm
    driver.timers.advance(10)
    driver.carry_out(jm.handle(je.TaskFailed(jm.attempt_of("map", 0), "lost its process")))
    driver.timers.advance(50)  # the first restart
    assert jm.epoch() == 1 and jm.is_running()
    stopped_at = len(driver.batches)
    driver.carry_out(jm.handle(je.StopWithSavepoint(drain=False)))
    (savepoint_id,) = {
        a.message.checkpoint_id
        for a in driver.actions_since(stopped_at)
        if type(a) is SendToTask and type(a.message) is TriggerCheckpoint
    }
    acks_at = len(driver.batches)
    for vertex in ("src", "map", "sink"):
        attempt = jm.attempt_of(vertex, 0)
        driver.carry_out(
            jm.handle(
                je.CheckpointAcknowledged(
                    attempt,
                    savepoint_id,
                    snapshot(attempt, 1, savepoint_id),
                    TaskCheckpointMetrics(savepoint_id, sync_duration_ms=1),
                )
            )
        )
    *first, last = [a for a in driver.actions_since(acks_at) if type(a) is SendToCoordinator]
    for ack in first:
        driver.carry_out(jm.handle(ack.message))
    driver.carry_out(jm.handle(je.TaskFailed(jm.attempt_of("map", 0), "lost its process")))  # the second failover
    assert jm.outcome is None and jm.restarts() == 2
    driver.carry_out(jm.handle(last.message))  # late, during the restart delay: the savepoint completes
    driver.timers.advance(100)  # its _metadata write, then the restart's time
    (stop,) = jm.report().operations
    assert stop["operation"] == "stop_with_savepoint" and stop["checkpoint_id"] == savepoint_id
    assert stop["status"] == "FAILED" and stop["failure"].startswith("A savepoint has been created at: ")
    assert jm.outcome is JobOutcome.FAILED and jm.epoch() == 2  # no deployment after the second failover
    assert "failed during stopping" in jm.failure_reason
