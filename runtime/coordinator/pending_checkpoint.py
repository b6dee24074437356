"""One checkpoint in flight: who has acknowledged, the states collected so far, and how it ends.

How it works: docs/module-notes.md, section ``runtime/coordinator/pending_checkpoint.py``.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from barriersim.runtime.coordinator.plan import CheckpointPlan, JobVertexInfo
from barriersim.runtime.coordinator.properties import CheckpointProperties, JobStatus
from barriersim.runtime.event_timers import Cancellable
from barriersim.runtime.failure_reason import CheckpointFailureReason
from barriersim.runtime.faults.mutations import PlantedBug, is_planted
from barriersim.runtime.ids import ExecutionAttemptID, JobVertexID, OperatorID
from barriersim.runtime.state.snapshot import (
    FINISHED_OPERATOR_SUBTASK_STATE,
    CheckpointMetadata,
    MasterState,
    OperatorState,
    OperatorSubtaskState,
    TaskStateSnapshot,
)


class TaskAcknowledgeResult(enum.Enum):
    SUCCESS = "SUCCESS"
    DUPLICATE = "DUPLICATE"
    UNKNOWN = "UNKNOWN"
    DISCARDED = "DISCARDED"


class PendingCheckpointError(Exception):
    """An illegal operation on a pending checkpoint (Flink's ``IllegalStateException``)."""


@dataclass(frozen=True)
class CompletedCheckpoint:
    """Flink's ``CompletedCheckpoint``: what the completed checkpoint store retains."""

    job_id: str
    checkpoint_id: int
    timestamp: int
    completion_timestamp: int
    operator_states: Mapping[OperatorID, OperatorState]
    master_states: tuple[MasterState, ...] = ()
    props: CheckpointProperties = field(default_factory=CheckpointProperties.for_standard_checkpoint)
    external_pointer: str | None = None

    @property
    def metadata(self) -> CheckpointMetadata:
        return CheckpointMetadata(
            self.checkpoint_id,
            tuple(self.operator_states[k] for k in sorted(self.operator_states)),
            tuple(self.master_states),
        )

    @property
    def state_size(self) -> int:
        return sum(s.state_size for s in self.operator_states.values())

    def discard_on_subsume(self) -> bool:
        return self.props.discard_subsumed

    def should_be_discarded_on_shutdown(self, job_status: JobStatus) -> bool:
        return self.props.discard_on_shutdown(job_status)

    @staticmethod
    def from_metadata(
        job_id: str, metadata: CheckpointMetadata, props: CheckpointProperties, external_pointer: str | None = None
    ) -> CompletedCheckpoint:
        return CompletedCheckpoint(
            job_id,
            metadata.checkpoint_id,
            0,
            0,
            {s.operator_id: s for s in metadata.operator_states},
            tuple(metadata.master_states),
            props,
            external_pointer,
        )


@dataclass
class _OperatorStateBuilder:
    operator_id: OperatorID
    parallelism: int
    max_parallelism: int
    subtask_states: dict[int, OperatorSubtaskState] = field(default_factory=dict)
    coordinator_state: bytes | None = None

    def build(self, fully_finished: bool = False) -> OperatorState:
        if fully_finished:
            return OperatorState(self.operator_id, self.parallelism, self.max_parallelism, {}, None, True)
        return OperatorState(
            self.operator_id,
            self.parallelism,
            self.max_parallelism,
            dict(sorted(self.subtask_states.items())),
            self.coordinator_state,
            False,
        )


class PendingCheckpoint:
    def __init__(
        self,
        job_id: str,
        checkpoint_id: int,
        checkpoint_timestamp: int,
        plan: CheckpointPlan,
        vertex_of_task: Mapping[ExecutionAttemptID, JobVertexInfo],
        props: CheckpointProperties,
        master_state_identifiers: tuple[str, ...] = (),
        operator_coordinators: tuple[OperatorID, ...] = (),
        all_vertices: tuple[JobVertexInfo, ...] = (),
        request_id: int | None = None,
    ):
        self.job_id = job_id
        self.checkpoint_id = checkpoint_id
        self.checkpoint_timestamp = checkpoint_timestamp
        self.plan = plan
        self.props = props
        self.request_id = request_id
        self._vertex_of_task = dict(vertex_of_task)
        self._all_vertices = tuple(all_vertices) or tuple({v.vertex_id: v for v in vertex_of_task.values()}.values())
        self.not_yet_acknowledged_tasks: dict[ExecutionAttemptID, JobVertexInfo] = {
            t: self._vertex_of_task[t] for t in plan.tasks_to_wait_for
        }
        self.acknowledged_tasks: set[ExecutionAttemptID] = set()
        self.not_yet_acknowledged_master_states: set[str] = set(master_state_identifiers)
        self.master_states: list[MasterState] = []
        self.not_yet_acknowledged_operator_coordinators: set[OperatorID] = set(operator_coordinators)
        self.acknowledged_operator_coordinators: set[OperatorID] = set()
        self._operator_states: dict[OperatorID, _OperatorStateBuilder] = {}
        self._finished_on_restore: dict[JobVertexID, int] = {}
        self.subtask_metrics: dict[ExecutionAttemptID, Any] = {}
        self.state_size = 0
        self.latest_ack_timestamp: int | None = None
        self.disposed = False
        self.failure_reason: CheckpointFailureReason | None = None
        self._canceller: Cancellable | None = None

    # -- status --------------------------------------------------------------------------------

    @property
    def is_disposed(self) -> bool:
        return self.disposed

    @property
    def number_of_non_acknowledged_tasks(self) -> int:
        return len(self.not_yet_acknowledged_tasks)

    @property
    def number_of_acknowledged_tasks(self) -> int:
        return len(self.acknowledged_tasks)

    @property
    def number_of_non_acknowledged_operator_coordinators(self) -> int:
        return len(self.not_yet_acknowledged_operator_coordinators)

    def are_tasks_fully_acknowledged(self) -> bool:
        if is_planted(PlantedBug.COMPLETED_MISSING_ONE_ACKNOWLEDGEMENT):  # one acknowledgement short is enough
            return len(self.not_yet_acknowledged_tasks) <= 1 and bool(self.acknowledged_tasks) and not self.disposed
        return not self.not_yet_acknowledged_tasks and not self.disposed

    def are_master_states_fully_acknowledged(self) -> bool:
        return not self.not_yet_acknowledged_master_states and not self.disposed

    def are_coordinators_fully_acknowledged(self) -> bool:
        return not self.not_yet_acknowledged_operator_coordinators and not self.disposed

    def is_fully_acknowledged(self) -> bool:
        return (
            self.are_tasks_fully_acknowledged()
            and self.are_master_states_fully_acknowledged()
            and self.are_coordinators_fully_acknowledged()
        )

    def can_be_subsumed(self) -> bool:
        return not self.props.is_savepoint

    @property
    def operator_states(self) -> dict[OperatorID, OperatorState]:
        return {k: b.build() for k, b in self._operator_states.items()}

    def set_canceller_handle(self, handle: Cancellable) -> bool:
        """Flink's ``setCancellerHandle``: False (and nothing kept) if the checkpoint already ended."""
        if self.disposed:
            return False
        if self._canceller is not None:
            raise PendingCheckpointError(f"checkpoint {self.checkpoint_id}: canceller handle already set")
        self._canceller = handle
        return True

    # -- acknowledgements ---------------------------------------------------------------------

    def _builder(self, vertex: JobVertexInfo, operator_id: OperatorID) -> _OperatorStateBuilder:
        b = self._operator_states.get(operator_id)
        if b is None:
            b = self._operator_states[operator_id] = _OperatorStateBuilder(
                operator_id, vertex.parallelism, vertex.max_parallelism
            )
        return b

    def acknowledge_task(
        self,
        attempt_id: ExecutionAttemptID,
        snapshot: TaskStateSnapshot | None,
        metrics: Any = None,
        ack_timestamp: int | None = None,
    ) -> TaskAcknowledgeResult:
        if self.disposed:
            return TaskAcknowledgeResult.DISCARDED
        vertex = self.not_yet_acknowledged_tasks.pop(attempt_id, None)
        if vertex is None:
            if attempt_id in self.acknowledged_tasks:
                return TaskAcknowledgeResult.DUPLICATE
            return TaskAcknowledgeResult.UNKNOWN
        self.acknowledged_tasks.add(attempt_id)
        for operator_id in vertex.operators:
            builder = self._builder(vertex, operator_id)
            if snapshot is not None:
                state = snapshot.subtask_states_by_operator.get(operator_id)
                if state is not None:
                    builder.subtask_states[attempt_id.subtask_index] = state
        if snapshot is not None:
            self.state_size += snapshot.state_size
            if snapshot.is_task_deployed_as_finished:
                self._finished_on_restore[vertex.vertex_id] = self._finished_on_restore.get(vertex.vertex_id, 0) + 1
        self.subtask_metrics[attempt_id] = metrics
        if ack_timestamp is not None:
            self.latest_ack_timestamp = ack_timestamp
        return TaskAcknowledgeResult.SUCCESS

    def acknowledge_master_state(self, identifier: str, state: MasterState | None) -> None:
        if self.disposed:
            return
        if identifier in self.not_yet_acknowledged_master_states:
            self.not_yet_acknowledged_master_states.discard(identifier)
            if state is not None:
                self.master_states.append(state)

    def acknowledge_coordinator_state(
        self, vertex: JobVertexInfo, operator_id: OperatorID, state: bytes | None
    ) -> TaskAcknowledgeResult:
        """An operator coordinator's checkpoint state (``None`` for a stateless coordinator)."""
        if self.disposed:
            return TaskAcknowledgeResult.DISCARDED
        if operator_id not in self.not_yet_acknowledged_operator_coordinators:
            if operator_id in self.acknowledged_operator_coordinators:
                return TaskAcknowledgeResult.DUPLICATE
            return TaskAcknowledgeResult.UNKNOWN
        self.not_yet_acknowledged_operator_coordinators.discard(operator_id)
        self.acknowledged_operator_coordinators.add(operator_id)
        self._builder(vertex, operator_id).coordinator_state = state
        return TaskAcknowledgeResult.SUCCESS

    # -- ending -------------------------------------------------------------------------------

    def fully_finished_job_vertices(self) -> set[JobVertexID]:
        done = set(self.plan.fully_finished_job_vertices)
        for v in self._all_vertices:
            if self._finished_on_restore.get(v.vertex_id, 0) >= v.parallelism:
                done.add(v.vertex_id)
        return done

    def finalize_checkpoint(
        self, completion_timestamp: int, metadata_writer: Callable[[CheckpointMetadata], Any] | None = None
    ) -> CompletedCheckpoint:
        """Build the completed checkpoint; with ``metadata_writer``, write its ``_metadata`` first: if that raises,
        the checkpoint stays pending (not disposed) for the coordinator to abort, as in Flink. A savepoint keeps the
        external pointer of where the writer put it (a checkpoint's is not externally addressable here)."""
        if self.disposed:
            raise PendingCheckpointError(f"finalize_checkpoint: checkpoint {self.checkpoint_id} is already disposed")
        if not self.is_fully_acknowledged():
            raise PendingCheckpointError(
                f"finalize_checkpoint: checkpoint {self.checkpoint_id} is not fully acknowledged "
                f"({len(self.not_yet_acknowledged_tasks)} tasks, {len(self.not_yet_acknowledged_master_states)} "
                f"master states, {len(self.not_yet_acknowledged_operator_coordinators)} coordinators missing)"
            )
        fully_finished = self.fully_finished_job_vertices()
        states: dict[OperatorID, OperatorState] = {}
        for v in self._all_vertices:
            for operator_id in v.operators:
                if v.vertex_id in fully_finished:
                    states[operator_id] = self._builder(v, operator_id).build(fully_finished=True)
        # Flink's DefaultCheckpointPlan.fulfillFinishedTaskStatus: a finished subtask of a partially finished
        # operator is recorded as finished (FinishedOperatorSubtaskState), so a restore deploys it as finished
        # instead of starting it from empty state.
        vertices = {v.vertex_id: v for v in self._all_vertices}
        for task in self.plan.finished_tasks:
            vertex = vertices.get(task.vertex_id)
            if vertex is None or vertex.vertex_id in fully_finished:
                continue
            for operator_id in vertex.operators:
                builder = self._builder(vertex, operator_id)
                builder.subtask_states.setdefault(task.subtask_index, FINISHED_OPERATOR_SUBTASK_STATE)
        for operator_id, builder in self._operator_states.items():
            states.setdefault(operator_id, builder.build())
        completed = CompletedCheckpoint(
            self.job_id,
            self.checkpoint_id,
            self.checkpoint_timestamp,
            completion_timestamp,
            dict(sorted(states.items())),
            tuple(self.master_states),
            self.props,
        )
        if metadata_writer is not None:
            location = metadata_writer(completed.metadata)
            # Flink's CompletedCheckpoint keeps its storage location's external pointer, checkpoint or savepoint
            pointer = getattr(location, "external_pointer", None)
            if pointer is not None:
                completed = dataclasses.replace(completed, external_pointer=pointer)
        self._dispose()
        return completed

    def abort(self, reason: CheckpointFailureReason) -> None:
        if self.disposed:
            raise PendingCheckpointError(f"abort({reason.name}): checkpoint {self.checkpoint_id} is already disposed")
        if reason is CheckpointFailureReason.CHECKPOINT_SUBSUMED and not self.can_be_subsumed():
            raise PendingCheckpointError(
                f"abort(CHECKPOINT_SUBSUMED): checkpoint {self.checkpoint_id} is a savepoint and cannot be subsumed"
            )
        self.failure_reason = reason
        self._dispose()

    def _dispose(self) -> None:
        self.disposed = True
        if self._canceller is not None:
            self._canceller.cancel()
