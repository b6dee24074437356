"""The simulator's control plane: the checkpoint protocol's RPCs between tasks and the coordinator.

How this works: ``ControlPlane`` is the part of ``JobSimulation`` that carries messages of the checkpoint
protocol. Acknowledgements and declines go from a task to the coordinator, triggers and completion/abort
notifications from the coordinator to a task, each after ``rpc_latency_us`` plus any ``DelayMessage`` delay,
unless a ``DropMessage`` loses it; a message for a task attempt that has since died, or for a coordinator that
has since crashed, is not delivered. The
coordinator's actions are carried out here in order: triggers and notifications become RPCs, discarding
checkpoints goes to the checkpoint storage (the coordinator writes ``_metadata`` through ``_write_metadata``, so a
failed write aborts the checkpoint), ``RestoreFrom`` is kept for the next deployment and
``FailJob`` fails the job over. ``FailCheckpoints`` faults turn an acknowledgement into a decline
(``CHECKPOINT_DECLINED``), as does a failed task-side state write (``CHECKPOINT_ASYNC_EXCEPTION``), and
protocol-point crashes fire where the protocol reaches them. Mirrors the RPC gateways between Flink's
``JobMaster`` and ``TaskExecutor`` (``acknowledgeCheckpoint``, ``declineCheckpoint``, ``triggerCheckpoint``,
``notifyCheckpointOnComplete``, ``notifyCheckpointAborted``).
"""

from __future__ import annotations

from typing import Any

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason
from barriersim.runtime.faults import MessageKind, ProtocolPoint
from barriersim.runtime.sim.kernel import Priority
from barriersim.runtime.sim.wiring import SubtaskKey
from barriersim.runtime.storage.atomic_file import WriteFault
from barriersim.runtime.stream_task import StreamTask
from barriersim.runtime.task.actions import AcknowledgeCheckpoint


class ControlPlane:
    """The checkpoint protocol's messages of ``JobSimulation``."""

    def _on_acknowledge(self, key: SubtaskKey, task: StreamTask, action: AcknowledgeCheckpoint) -> None:
        cid = action.checkpoint_id
        if self._crash_point(task.name, ProtocolPoint.AFTER_SYNC_SNAPSHOT_BEFORE_ACK, cid):
            return
        if self.fault_log.fails_state_write(task.name, cid, self.sim.clock_ms()):
            # Flink's AsyncCheckpointRunnable: the asynchronous part failed, so the task declines
            exc = CheckpointException(CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION, cid,
                                      f"{task.name}: injected by fail_storage_write: the state write failed")
            self._rpc_to_coordinator(MessageKind.DECLINE, task.name, cid,
                                     m.DeclineCheckpoint(self.job_id, task.attempt_id, cid, exc))
            return
        if self.fault_log.declines(task.name, cid, f"{self.graph.sources[0].name}#0", self.sim.clock_ms()):
            exc = CheckpointException(CheckpointFailureReason.CHECKPOINT_DECLINED, cid, "injected by fail_checkpoints")
            self._rpc_to_coordinator(MessageKind.DECLINE, task.name, cid,
                                     m.DeclineCheckpoint(self.job_id, task.attempt_id, cid, exc))
            return
        self._rpc_to_coordinator(MessageKind.ACKNOWLEDGE, task.name, cid,
                                 m.AcknowledgeCheckpoint(self.job_id, task.attempt_id, cid, action.task_state_snapshot, action.metrics))
        self._crash_point(task.name, ProtocolPoint.AFTER_ACK_BEFORE_COMPLETION_NOTICE, cid)

    # -- control plane -----------------------------------------------------------------------------------

    def _message_fault(self, kind: MessageKind, task: str | None, checkpoint_id: int) -> tuple[bool, int]:
        drop, delay_ms = self.fault_log.message_fate(kind, task, checkpoint_id, self.sim.clock_ms())
        return drop, delay_ms * 1000

    def _rpc_to_coordinator(self, kind: MessageKind, task: str, checkpoint_id: int, event) -> None:
        drop, delay = self._message_fault(kind, task, checkpoint_id)
        if drop:
            self.trace.record(self.sim.now_us, "dropped", f"{kind.value} {task} {checkpoint_id}")
            return
        generation = self.coordinator_generation

        def deliver() -> None:
            if generation == self.coordinator_generation:  # a message for a crashed coordinator is lost
                self._handle_coordinator(self.coordinator.handle(event))

        self.sim.schedule_after(int(self.config.rpc_latency_us) + delay, deliver, Priority.CONTROL, "rpc")

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
                                         ProtocolPoint.AFTER_ACK_BEFORE_COMPLETION_NOTICE, action.checkpoint_id):
                    self._rpc_to_task(MessageKind.NOTIFY_COMPLETE, action.task, action.checkpoint_id,
                                      lambda t, a=action: t.notify_checkpoint_complete(a.checkpoint_id))
            elif isinstance(action, m.NotifyCheckpointAborted):
                self._rpc_to_task(MessageKind.NOTIFY_ABORTED, action.task, action.checkpoint_id,
                                  lambda t, a=action: t.notify_checkpoint_aborted(a.checkpoint_id, a.latest_completed_checkpoint_id))
            elif isinstance(action, m.DiscardCheckpoint):
                self.storage.discard_checkpoint(action.checkpoint_id)
            elif isinstance(action, m.RestoreFrom):
                self._restore_from = action
            elif isinstance(action, m.FailJob):
                failing = action.failing_task
                self._failover(f"{failing.vertex_id}#{failing.subtask_index}" if failing else "coordinator", action.reason.name)

    def _write_metadata(self, metadata, is_savepoint: bool):
        """The coordinator's ``checkpoint_writer``: write ``_metadata`` to the checkpoint storage while the
        coordinator finalizes the checkpoint; a failure (``FailStorageWrite`` without a task) raises into the
        coordinator, which aborts the checkpoint as ``FINALIZE_CHECKPOINT_FAILURE``."""
        cid = metadata.checkpoint_id
        # the same trace line as when the driver carried out a PersistCheckpoint action (traces stay comparable)
        self.trace.record(self.sim.now_us, "coordinator", "PersistCheckpoint ")
        if self.fault_log.fails_storage_write(cid, self.sim.clock_ms()):
            self.storage.fail_next_write(WriteFault.FAIL_BEFORE_WRITE)
        try:
            location = self.storage.persist_checkpoint(metadata, is_savepoint=is_savepoint)
        except Exception as err:
            self.trace.record(self.sim.now_us, "storage-failed", f"{cid} {type(err).__name__}")
            raise
        if self.record_cuts and not is_savepoint:
            self.completed_in_epoch[cid] = (self.epoch, metadata)
        return location
