"""Faults and failover of the Ray backend: the part of ``JobManagerActor`` that kills actors, crashes the
coordinator and restarts the job, as ``runtime.sim.failover`` is the simulator's.

How this works: ``RayFailover`` is mixed into the job manager actor and works on its state (tasks, attempts,
coordinator, epoch, fault log). Faults are read from the schedule as the simulator reads them: ``CrashTask`` at
``after_sync_snapshot_before_ack`` (the acknowledgement is dropped and the actor killed),
``after_ack_before_completion_notice`` (killed instead of notified) and ``during_restore`` (the first restart's
actor is killed once it restored its state), ``DropMessage`` / ``DelayMessage`` of acknowledgements, declines and
completion/abort notices, ``FailCheckpoints`` (the acknowledgement becomes a decline), ``FailStorageWrite`` of a
task (its acknowledgement becomes a ``CHECKPOINT_ASYNC_EXCEPTION`` decline) or of the ``_metadata`` (the
coordinator's ``checkpoint_writer`` fails, so it aborts the checkpoint as ``FINALIZE_CHECKPOINT_FAILURE``),
``SlowTask`` (handed to the task actor, which stretches its work) and ``CrashCoordinator``: a JobManager failover
inside this actor, as the simulator runs it: the coordinator's memory is dropped (its timers never fire; its
pending checkpoints are lost), every task actor is killed, and after the restart delay a new coordinator recovers
the completed checkpoints from the filesystem storage (``coordinator.checkpoint_recovery``) with the persisted id
counter and fresh attempt ids, restores the latest one and redeploys; it is no failure the restart strategy
(``runtime.restart_strategy``, which decides every task failover) counts, and the new JobMaster starts a new one.
Crashes ``before_forwarding_barrier`` and ``mid_alignment`` happen inside the task: each deployment is armed with
its unfired task-side points (``FaultSchedule.armed_crash_points``), the task stops itself there and reports
``crashed_at_protocol_point``, and this actor fails the job over. Every fault that takes effect is counted in the
run's fault log (``runtime.fault_log``) on the job's clock (ms since the first deployment's tasks started). No
protocol rule lives here.
"""

from __future__ import annotations

import ray

from barriersim.actors.clock import now_ms
from barriersim.actors.messages import attempt_from_wire
from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.checkpoint_recovery import (
    next_attempt_number,
    recover_completed_checkpoint_store,
    retire_coordinator,
)
from barriersim.runtime.coordinator.properties import JobStatus
from barriersim.runtime.faults import CrashCoordinator, CrashTask, ProtocolPoint
from barriersim.runtime.restart_strategy import RestartDecision
from barriersim.runtime.sim.config import JobOutcome


class RayFailover:
    """Crashes, failover and JobManager recovery of ``JobManagerActor`` (a mixin: it uses the actor's state)."""

    async def slowdown_fired(self, attempt, index: int, at_ms: int) -> None:
        """A task actor worked inside the window of its ``index``-th slowdown (first time for this attempt)."""
        attempt = attempt_from_wire(attempt)
        fault = self._slow_faults[f"{attempt.vertex_id}#{attempt.subtask_index}"][index]
        if not self.fault_log.times_fired(fault):  # fires once, as in the simulator
            self.fault_log.fired(fault, at_ms)

    def _crash_point(self, task: str, point: ProtocolPoint, checkpoint_id: int) -> bool:
        """Kill ``task`` if the fault schedule crashes it at the coordinator-side ``point`` of ``checkpoint_id``."""
        fault = self.config.faults.crash_at(task, point, checkpoint_id, self._fired_points)
        if fault is None:
            return False
        self._fired_points.add(fault)
        if self._crash(task):
            self.fault_log.fired(fault, self._job_ms())
        return True

    async def crashed_at_protocol_point(self, attempt, point: str, checkpoint_id: int) -> None:
        """A task stopped itself at a task-side crash point it was deployed with (``runtime.task.crash_points``):
        it is dead, so the job fails over now (its ``run`` call may already have returned)."""
        attempt = attempt_from_wire(attempt)
        name = f"{attempt.vertex_id}#{attempt.subtask_index}"
        fault = self.config.faults.crash_at(name, ProtocolPoint(point), checkpoint_id, self._fired_points)
        if fault is not None:
            self._fired_points.add(fault)
            self.fault_log.fired(fault, self._job_ms())
        if self._current(attempt) and self.outcome is None:
            self.killed.append(f"{name}@{attempt.attempt_number}")
            self.failures.append(f"{name}: crashed at {point} of checkpoint {checkpoint_id}")
            self._failover(name, point, failed=attempt)

    def _job_ms(self) -> int:
        """The job's clock for fault times and the fault log: ms since the first deployment's tasks started
        (time 0 of the simulator's virtual clock); 0 before that."""
        return 0 if self.started_ms is None else now_ms() - self.started_ms

    def _seconds_until(self, at_ms: int) -> float:
        return max(0.0, at_ms - self._job_ms()) / 1000.0

    def _crash_at_time(self, fault: CrashTask) -> None:
        if self._crash(fault.task):
            self.fault_log.fired(fault, self._job_ms())

    def _crash(self, task_name: str) -> bool:
        """Kill ``task_name``'s actor; False (nothing happens) if it is unknown, finished or the job is over."""
        vertex, _, index = task_name.partition("#")
        key = (vertex, int(index or 0))
        if key not in self.tasks or key in self.finished or self.outcome is not None:
            return False
        self.killed.append(f"{task_name}@{self.attempts[key].attempt_number}")
        ray.kill(self.tasks[key])  # its death is detected through the error of its run call
        return True

    def _failover(self, task_name: str, why: str, failed=None) -> None:
        self.restarts += 1
        self.epoch += 1
        for handle in self.tasks.values():
            ray.kill(handle)
        self.tasks, self.finished = {}, set()
        if self.restart_strategy.on_failure() is RestartDecision.FAIL_JOB:
            self.outcome = JobOutcome.FAILED
            self._done.set()
            return
        self._restore_from = None
        if failed is None:
            failed = self.coordinator.current_attempt(self.graph.vertices[0].name, 0)
        self._guard(lambda: self._handle(self.coordinator.handle(m.TaskFailed(failed, f"{task_name}: {why}"))))
        restore = self._restore_from
        self.loop.call_later(self.restart_strategy.delay_ms / 1000.0,
                             lambda: self.loop.create_task(self._guarded_deploy(restore)))

    def _crash_coordinator(self, fault: CrashCoordinator) -> None:
        """A JobManager failover (``CrashCoordinator``): the coordinator's memory is gone (pending checkpoints,
        statistics, failure counts), its timers never fire, every task actor dies; after the restart delay a new
        coordinator recovers from the checkpoint storage."""
        if self.outcome is not None:
            return
        self.fault_log.fired(fault, self._job_ms())
        self.restarts += 1
        self.coordinator_failovers += 1
        self.epoch += 1
        self.killed.append("coordinator")
        for handle in self.tasks.values():
            ray.kill(handle)
        self.tasks, self.finished = {}, set()
        self._retired_stats.append(retire_coordinator(self.coordinator, now_ms()))
        self.coordinator_generation += 1
        self._coordinator_down = True
        self.attempts = {}
        self._restore_from = None
        epoch = self.epoch
        self.loop.call_later(self.config.restart_delay_ms / 1000.0,
                             lambda: self._guard(lambda: self._recover_coordinator(epoch)))

    def _recover_coordinator(self, epoch: int) -> None:
        """The new JobManager: completed checkpoints recovered from storage, the persisted id counter, attempt ids
        no earlier attempt used; it restores the latest checkpoint, starts its periodic trigger and redeploys."""
        if epoch != self.epoch or self.outcome is not None:
            return
        recovered = recover_completed_checkpoint_store(self.job_id, self.storage, self.config.coordinator_configuration())
        self.coordinator = self._new_coordinator(recovered.store, next_attempt_number(self.coordinator))
        self.restart_strategy = self.config.restart_strategy()
        self._coordinator_down = False
        self._restore_from = None
        self.coordinator.restore_latest_checkpointed_state()
        self._handle(self.coordinator.drain_actions())
        restore = self._restore_from
        self._handle(self.coordinator.handle(m.JobStatusChanged(JobStatus.RUNNING)))
        self.loop.create_task(self._guarded_deploy(restore))
