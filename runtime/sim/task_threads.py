"""The simulator's task threads: ``TaskThreads``, a collaborator of ``DataPlane`` that knows when each task's thread is
free again. A step keeps its task busy for its cost (``cost_us_per_record`` per record times the subtask's own speed
factor, ``cluster.subtask_speed_sigma``; ``hot_key_extra_us`` per hot-key record; stretched by the ``SlowTask`` rule
of ``runtime.job.slowdowns`` inside a slowdown's window); with ``cpu_cores`` the CPU work, not the hot key's sleep or
a source's pacing, shares the machine's cores (``runtime.sim.cpu_share``) less the JVM's own threads' share
(``cluster.jvm_share_*``); a checkpoint's synchronous part holds the thread after the step's work."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

from barriersim.runtime.job import events as je
from barriersim.runtime.job.config import JobConfig
from barriersim.runtime.job.slowdowns import Slowdowns
from barriersim.runtime.job.wiring import SubtaskKey
from barriersim.runtime.jobgraph import JobGraph
from barriersim.runtime.lognormal import lognormal
from barriersim.runtime.sim.cpu_share import ProcessorSharing
from barriersim.runtime.sim.kernel import Priority, ScheduledEvent, Simulation
from barriersim.runtime.task.stream_task import StepResult

JVM_STEP_US = 100_000  # the JVM threads' falling share of the cores, as steps this long at most (1/20 of the decay)


class TaskThreads:
    """When each task's thread is free again (see the module)."""

    def __init__(
        self,
        config: JobConfig,
        *,
        sim: Simulation,
        cpu_work_done: Callable[[SubtaskKey], None],
        to_job_master: Callable[[Any], None],
    ):
        """``config``: the run's (its workload paces the sources); ``cpu_work_done(key)``: the CPU work of ``key``'s
        step ended, with what held it after the work (its thread is free at ``free_at(key)``)."""
        self._workload = config.workload
        self._sim = sim
        self._cpu_work_done = cpu_work_done
        self._to_job_master = to_job_master
        self._graph = config.graph
        self._speed_sigma = config.cluster.subtask_speed_sigma
        # per task, when its thread is free (virtual us; may be past): ``free_at``, read-only outside (the data
        # plane's steps read it without a call)
        self.busy_until: dict[SubtaskKey, int] = {}
        self._cost_model: dict[SubtaskKey, tuple[float, float]] = {}  # per subtask: per-record cost, hot-key extra
        self._slowdowns: dict[SubtaskKey, Slowdowns] = {}
        # with ``cpu_cores``: the machine's cores, the tasks whose step's CPU work runs on them (each with what holds
        # it after the work: the step's sleep and synchronous snapshots) and the event of the next work's end
        self._cpu: ProcessorSharing[SubtaskKey] | None = (
            ProcessorSharing(config.cluster.cpu_cores) if config.cluster.cpu_cores else None
        )
        self.after_cpu: dict[SubtaskKey, int] = {}  # ``in_cpu_work`` (read-only outside, as ``busy_until``)
        self._cpu_event: ScheduledEvent | None = None
        # the JVM's own threads' share of the cores, from the first deployment's run on (``jvm_share_*``)
        cluster = config.cluster
        self._cores = cluster.cpu_cores
        self._jvm = (cluster.jvm_share_start, cluster.jvm_share_steady, cluster.jvm_share_decay_ms * 1000)
        self._jvm_started_us: int | None = None

    def new_graph(self, graph: JobGraph) -> None:
        """A restored job with another parallelism: other subtasks, other costs."""
        self._graph = graph
        self._cost_model.clear()

    def add(self, key: SubtaskKey, slowdowns: Slowdowns) -> None:
        """The thread of a newly deployed task: free now."""
        self._slowdowns[key] = slowdowns
        self.busy_until[key] = self._sim.now_us

    # -- queries --------------------------------------------------------------------------------------------------

    def free_at(self, key: SubtaskKey) -> int:
        """When the thread of ``key`` is free (virtual us; may be past)."""
        return self.busy_until[key]

    def is_busy(self, key: SubtaskKey) -> bool:
        """Whether the thread of ``key`` is held beyond now."""
        return self.busy_until[key] > self._sim.now_us

    def in_cpu_work(self, key: SubtaskKey) -> bool:
        """Whether ``key``'s step's CPU work still runs on the shared cores."""
        return key in self.after_cpu

    def slowdowns(self, key: SubtaskKey) -> Slowdowns:
        """The slowdowns of the task of ``key``."""
        return self._slowdowns[key]

    # -- what holds a thread ------------------------------------------------------------------------------------

    def step_done(self, key: SubtaskKey, name: str, is_source: bool, result: StepResult) -> int | None:
        """The task of ``key`` (``name``) processed ``result`` now: when its thread is free, or None while the
        step's CPU work shares the cores (``cpu_work_done`` tells its end)."""
        cost = self._cost_us(key, name, result)
        if self._cpu is not None and self._start_cpu_work(self._cpu, key, is_source, result, cost):
            return None
        busy_until, now = self.busy_until[key], self._sim.now_us
        free_at = self.busy_until[key] = (busy_until if busy_until > now else now) + cost
        return free_at

    def hold(self, key: SubtaskKey, duration_us: int) -> int | None:
        """A synchronous snapshot holds the thread of ``key`` for ``duration_us`` from now (after the step's CPU
        work, if that runs: then None), and when it is free."""
        if key in self.after_cpu:
            self.after_cpu[key] += duration_us
            return None
        self.busy_until[key] = max(self.busy_until[key], self._sim.now_us) + duration_us
        return self.busy_until[key]

    def start_jvm(self) -> None:
        """The job runs: the first time, the JVM's own threads start to take their share of the cores."""
        start, steady, _ = self._jvm
        if self._cpu is None or self._jvm_started_us is not None or start == steady == 0:
            return
        self._jvm_started_us = self._sim.now_us
        self._jvm_step()

    def _jvm_step(self) -> None:
        """The cores the tasks share now; again in ``JVM_STEP_US`` while the JVM's share still falls."""
        assert self._cpu is not None and self._jvm_started_us is not None
        start, steady, decay_us = self._jvm
        elapsed = self._sim.now_us - self._jvm_started_us
        share = steady + (start - steady) * math.exp(-elapsed / decay_us)
        self._cpu.set_cores(self._cores * (1 - share), self._sim.now_us)
        self._schedule_cpu(self._cpu)
        if elapsed < 5 * decay_us:
            step_us = max(1000, min(JVM_STEP_US, round(decay_us / 20)))
            self._sim.schedule_at(self._sim.now_us + step_us, self._jvm_step, Priority.NORMAL, "jvm")

    def clear_cpu(self) -> None:
        """The deployment ends: no CPU work runs any more."""
        if self._cpu is not None:
            self._cpu.clear(self._sim.now_us)
            self.after_cpu.clear()
            if self._cpu_event is not None:
                self._cpu_event.cancel()
                self._cpu_event = None

    # -- CPU sharing (``cpu_cores``, ``runtime.sim.cpu_share``) ---------------------------------------------------

    def _start_cpu_work(
        self, cpu: ProcessorSharing[SubtaskKey], key: SubtaskKey, is_source: bool, result: StepResult, total: int
    ) -> bool:
        """The step's CPU work (its records' cost; the hot key's sleep and a paced source's pacing are not CPU
        work) runs on the shared cores; what follows it (the sleep) is kept for its end. False: no CPU work.
        ``total``: the step's cost at full speed (``_cost_us``)."""
        if is_source and self._workload.rate_per_source:
            return False  # a paced source's step is its pacing
        per_record, hot_extra = self._cost_model[key]
        work = result.records * per_record
        nominal = work + result.hot_key_records * hot_extra
        if work <= 0 or nominal <= 0:
            return False
        cpu_us = total * work / nominal  # a slowdown stretches both parts alike
        now = self._sim.now_us
        self.busy_until[key] = max(self.busy_until[key], now)
        self.after_cpu[key] = self.busy_until[key] - now + round(total - cpu_us)
        cpu.start(key, cpu_us, now)
        self._schedule_cpu(cpu)
        return True

    def _schedule_cpu(self, cpu: ProcessorSharing[SubtaskKey]) -> None:
        """The event of the next CPU work's end (the one scheduled before is void: the share changed)."""
        if self._cpu_event is not None:
            self._cpu_event.cancel()
            self._cpu_event = None
        at = cpu.next_finish()
        if at is not None:
            self._cpu_event = self._sim.schedule_at(
                max(at, self._sim.now_us), partial(self._cpu_done, cpu), Priority.NORMAL, "cpu"
            )

    def _cpu_done(self, cpu: ProcessorSharing[SubtaskKey]) -> None:
        self._cpu_event = None  # a deployment's end cancels it (``clear_cpu``)
        now = self._sim.now_us
        for key in cpu.finished(now):
            self.busy_until[key] = now + self.after_cpu.pop(key)
            self._cpu_work_done(key)
        self._schedule_cpu(cpu)

    def _cost_us(self, key: SubtaskKey, name: str, result: StepResult) -> int:
        model = self._cost_model.get(key)
        if model is None:
            vertex = self._graph.vertex(key[0])
            if vertex.operator.is_source and self._workload.rate_per_source:
                per_record = 1e6 / self._workload.rate_per_source
            else:
                # the subtask's own speed, drawn at its first step (a fixed order)
                per_record = lognormal(
                    vertex.params.get("cost_us_per_record", 1.0), self._speed_sigma, self._sim.random("subtask-speed")
                )
            model = self._cost_model[key] = (per_record, vertex.params.get("hot_key_extra_us", 0.0))
        per_record, hot_extra = model
        cost = result.records * per_record + result.hot_key_records * hot_extra
        slowdowns = self._slowdowns[key]
        if slowdowns.slowdowns:  # the step starts now; only its part inside a slowdown's window is slowed
            start_ms = self._sim.now_us / 1000
            cost = slowdowns.stretch(start_ms, cost / 1000) * 1000
            for index, at_ms in slowdowns.met(start_ms, start_ms + cost / 1000):
                self._to_job_master(je.SlowdownMet(name, index, at_ms))
        whole = int(cost)
        return whole if whole > 1 else 1
