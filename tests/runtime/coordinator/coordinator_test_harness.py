"""Shared builders for the coordinator tests: a coordinator on a manual clock/timer service (Flink's
ManuallyTriggeredScheduledExecutor + ManualClock) with helpers to trigger, acknowledge and decline."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.checkpoint_coordinator import (
    NO_PERIODIC_CHECKPOINTS,
    CheckpointCoordinator,
    CheckpointCoordinatorConfiguration,
)
from barriersim.runtime.coordinator.manual_time import ManualTimerService
from barriersim.runtime.coordinator.plan import JobVertexInfo
from barriersim.runtime.event_timers import DeliveringTimers
from barriersim.runtime.events import CheckpointType
from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.state.snapshot import (
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorSubtaskState,
    TaskStateSnapshot,
)

JOB = "job-1"


def two_vertices() -> list[JobVertexInfo]:
    return [JobVertexInfo("src", 1), JobVertexInfo("map", 1, inputs=("src",))]


@dataclass
class Harness:
    coord: CheckpointCoordinator
    timers: ManualTimerService
    sink: list = field(default_factory=list)
    held: list = field(default_factory=list)  # the actions of ``call``s, until ``take``

    def attempt(self, vertex: str, index: int = 0) -> ExecutionAttemptID:
        return self.coord.current_attempt(vertex, index)

    @property
    def all_attempts(self) -> list[ExecutionAttemptID]:
        return [e.attempt_id for e in self.coord.executions().values()]

    def trigger(self, checkpoint_type: CheckpointType = CheckpointType.CHECKPOINT, **kw) -> list:
        return self.coord.handle(m.TriggerRequest(checkpoint_type, **kw))

    def ack(
        self, attempt: ExecutionAttemptID, checkpoint_id: int, state: TaskStateSnapshot | None = None, job: str = JOB
    ) -> list:
        return self.coord.handle(m.AcknowledgeCheckpoint(job, attempt, checkpoint_id, state))

    def ack_all(self, checkpoint_id: int) -> list:
        out = []
        for a in self.all_attempts:
            out += self.ack(a, checkpoint_id)
        return out

    def decline(
        self,
        attempt: ExecutionAttemptID,
        checkpoint_id: int,
        reason: CheckpointFailureReason = CheckpointFailureReason.CHECKPOINT_DECLINED,
    ) -> list:
        return self.coord.handle(m.DeclineCheckpoint(JOB, attempt, checkpoint_id, CheckpointException(reason)))

    def call(self, event):
        """Handle ``event`` as Flink's tests call a coordinator method: its actions wait for ``take()``; its outcome
        (``last_outcome``: an acknowledgement's, a restore's checkpoint ...) is returned."""
        self.held.extend(self.coord.handle(event))
        return self.coord.last_outcome()

    def take(self) -> list:
        out, self.held[:] = list(self.held), []
        return out

    def advance(self, ms: int) -> list:
        self.timers.advance(ms)
        out, self.sink[:] = list(self.sink), []
        return out

    @property
    def pending_ids(self) -> list[int]:
        return sorted(self.coord.pending_checkpoints())


def make(
    vertices=None,
    *,
    seed: int = 0,
    hooks=(),
    operator_coordinators=(),
    tasks_running: bool = True,
    checkpoint_writer=None,
    store=None,
    id_counter=None,
    first_attempt_number: int = 0,
    metadata_write_ms=None,
    **config,
) -> Harness:
    timers = ManualTimerService(0)
    sink: list = []
    cfg = CheckpointCoordinatorConfiguration(**config)
    coord = CheckpointCoordinator(
        JOB,
        vertices or two_vertices(),
        cfg,
        clock=timers.clock,
        timers=DeliveringTimers(timers, lambda event: sink.extend(coord.handle(event))),
        rng=random.Random(seed),
        master_hooks=hooks,
        operator_coordinators=operator_coordinators,
        tasks_running=tasks_running,
        checkpoint_writer=checkpoint_writer,
        completed_checkpoint_store=store,
        checkpoint_id_counter=id_counter,
        first_attempt_number=first_attempt_number,
        metadata_write_ms=metadata_write_ms,
    )
    return Harness(coord, timers, sink)


def of(kind, actions) -> list:
    return [a for a in actions if isinstance(a, kind)]


def triggered_ids(actions) -> list[int]:
    return [a.checkpoint_id for a in of(m.TriggerCheckpointOnSources, actions)]


def keyed_snapshot(operator: str, payload: bytes = b"x") -> TaskStateSnapshot:
    state = OperatorSubtaskState(managed_keyed_state=(KeyGroupsStateHandle(KeyGroupRange(0, 127), {0: payload}),))
    return TaskStateSnapshot({operator: state})


__all__ = ["JOB", "NO_PERIODIC_CHECKPOINTS", "Harness", "make", "of", "triggered_ids", "keyed_snapshot", "two_vertices"]
