"""Faults that kill things, and the global failover that follows.

How this works: ``Failover`` is the part of ``JobSimulation`` that crashes tasks and restarts the job. A task
crash (at a time, or when the protocol reaches a ``ProtocolPoint`` for a checkpoint) runs Flink's global
failover: every task dies (sinks abort their open transactions), the epoch moves on so that nothing scheduled
for the dead deployment runs, the coordinator aborts its pending checkpoints and picks the latest completed
checkpoint, and after the restart delay new attempts restore it (operator state by key group, source offsets,
channel state) and resume. The JobMaster's restart strategy (``runtime.restart_strategy``: more than
``max_restarts`` failures) fails the job. A crash of a task that is dead
or finished does nothing and is not counted as fired (``runtime.fault_log``). A coordinator crash
(``CrashCoordinator``) is a JobManager failover: the coordinator's memory is lost (pending checkpoints, failure counts), every task dies, and after the restart delay a new
coordinator recovers the completed checkpoints from the checkpoint storage and keeps the persisted id counter
(``coordinator.checkpoint_recovery``), restores the latest one and redeploys; it is no failure the restart
strategy counts, and the new JobMaster starts a new one (Flink's restart strategy belongs to the JobMaster). Mirrors Flink's
``DefaultScheduler`` with the ``RestartAllFailoverStrategy`` and a fixed-delay restart strategy, and a
JobManager failover under high availability (``JobMasterServiceLeadershipRunner`` recovering the job).
"""

from __future__ import annotations

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
from barriersim.runtime.sim.kernel import Priority
from barriersim.runtime.task.crash_points import CrashedAtProtocolPoint


class Failover:
    """Crashes, failover and restart of ``JobSimulation``."""

    def _crash_point(self, task: str, point: ProtocolPoint, checkpoint_id: int) -> bool:
        """Crash ``task`` if the fault schedule kills it at the coordinator-side ``point`` of ``checkpoint_id``."""
        fault = self.config.faults.crash_at(task, point, checkpoint_id, self._fired_points)
        if fault is None:
            return False
        self._fired_points.add(fault)
        if self._crash(task, point.value):
            self.fault_log.fired(fault, self.sim.clock_ms())
        return True

    def _crashed_at_task_side_point(self, task, action: CrashedAtProtocolPoint) -> None:
        """``task`` stopped itself at a task-side crash point (it has failed already): fail the job over."""
        fault = self.config.faults.crash_at(task.name, action.point, action.checkpoint_id, self._fired_points)
        if fault is not None:
            self._fired_points.add(fault)
            self.fault_log.fired(fault, self.sim.clock_ms())
        if self.outcome is None:
            self._failover(task.name, action.point.value, failed=task.attempt_id)

    def _crash_at_time(self, fault: CrashTask) -> None:
        if self._crash(fault.task, "crash_task"):
            self.fault_log.fired(fault, self.sim.clock_ms())

    def _crash(self, task_name: str, why: str) -> bool:
        """Fail ``task_name`` over; False (nothing happens) if it is unknown, finished or already dead."""
        vertex, _, index = task_name.partition("#")
        key = (vertex, int(index or 0))
        if key not in self.tasks or key in self._finished or self.outcome is not None or self.tasks[key].finished:
            return False  # unknown, finished, or already dead (the job is restarting): nothing left to crash
        self._failover(task_name, why, failed=self.tasks[key].attempt_id)
        return True

    def _failover(self, task_name: str, why: str, failed=None) -> None:
        self.trace.record(self.sim.now_us, "failover", f"{task_name} {why}")
        self.restarts += 1
        for task in self.tasks.values():
            task.fail()
        self.epoch += 1
        self._scheduled.clear()
        self._channel_clock.clear()
        if self.restart_strategy.on_failure() is RestartDecision.FAIL_JOB:
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
        self.sim.schedule_after(self.restart_strategy.delay_ms * 1000, lambda: self._restart(restore, epoch),
                                Priority.URGENT, "restart")

    def _restart(self, restore: m.RestoreFrom | None, epoch: int) -> None:
        if epoch != self.epoch:
            return  # superseded by a later failover
        self._deploy(restore)
        for f in self.config.faults.of_type(CrashTask):
            if f.point is ProtocolPoint.DURING_RESTORE and f not in self._fired_points:
                self._fired_points.add(f)
                if self._crash(f.task, "during_restore"):
                    self.fault_log.fired(f, self.sim.clock_ms())
                return

    def _crash_coordinator(self, fault: CrashCoordinator) -> None:
        """A JobManager failover (``CrashCoordinator``): the coordinator's memory is gone (pending checkpoints,
        statistics, failure counts); its timers never fire and messages to it are lost; the task executors lose
        their JobManager and every task dies. After the restart delay a new coordinator recovers."""
        if self.outcome is not None:
            return
        self.fault_log.fired(fault, self.sim.clock_ms())
        self.trace.record(self.sim.now_us, "failover", "coordinator crash_coordinator")
        self.restarts += 1
        self.coordinator_failovers += 1
        for task in self.tasks.values():
            task.fail()
        self.epoch += 1
        self._scheduled.clear()
        self._channel_clock.clear()
        self._retired_stats.append(retire_coordinator(self.coordinator, self.sim.clock_ms()))
        self.coordinator_generation += 1
        self._restore_from = None
        epoch = self.epoch
        self.sim.schedule_after(self.config.restart_delay_ms * 1000, lambda: self._recover_coordinator(epoch),
                                Priority.URGENT, "restart")

    def _recover_coordinator(self, epoch: int) -> None:
        """The new JobManager: a coordinator whose completed checkpoint store is recovered from the checkpoint
        storage and whose id counter is the persisted one; it restores the latest completed checkpoint, starts
        its periodic trigger (job RUNNING) and deploys new attempts (ids no earlier attempt used)."""
        if epoch != self.epoch:
            return  # superseded by a later crash
        recovered = recover_completed_checkpoint_store(self.job_id, self.storage, self.config.coordinator_configuration())
        self.coordinator = self._new_coordinator(recovered.store, next_attempt_number(self.coordinator))
        self.restart_strategy = self.config.restart_strategy()
        self.trace.record(self.sim.now_us, "coordinator-recovered",
                          f"checkpoints={list(recovered.recovered_ids)} next_id={self.id_counter.get()}")
        self._restore_from = None
        self.coordinator.restore_latest_checkpointed_state()
        self._handle_coordinator(self.coordinator.drain_actions())
        restore = self._restore_from
        self._handle_coordinator(self.coordinator.handle(m.JobStatusChanged(JobStatus.RUNNING)))
        self._restart(restore, epoch)

    def _on_job_finished(self) -> None:
        self.outcome = JobOutcome.FINISHED
        self._handle_coordinator(self.coordinator.handle(m.JobStatusChanged(JobStatus.FINISHED)))
        self.sim.stop()
