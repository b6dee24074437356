"""Which tasks a checkpoint is triggered on, waits for and commits to, given the job's vertices and the current state
of every execution (FLIP-147: checkpoints after some tasks finished). Mirrors Flink's ``CheckpointPlan`` /
``DefaultCheckpointPlan`` and ``DefaultCheckpointPlanCalculator``. See docs/coordinator.md, "The checkpoint plan".
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from barriersim.runtime.failure_reason import CheckpointException, CheckpointFailureReason
from barriersim.runtime.ids import ExecutionAttemptID, JobVertexID, OperatorID

if TYPE_CHECKING:
    from barriersim.runtime.jobgraph import JobGraph


class ExecutionState(enum.Enum):
    """Flink's ``ExecutionState``."""

    CREATED = "CREATED"
    SCHEDULED = "SCHEDULED"
    DEPLOYING = "DEPLOYING"
    INITIALIZING = "INITIALIZING"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    CANCELING = "CANCELING"
    CANCELED = "CANCELED"
    FAILED = "FAILED"


@dataclass(frozen=True)
class JobVertexInfo:
    """A job vertex: ``operator_ids`` defaults to ``(vertex_id,)``; ``inputs`` are upstream vertices over
    all-to-all edges, ``pointwise_inputs`` over forward edges (subtask i reads upstream subtask i); no inputs at
    all means a source."""

    vertex_id: JobVertexID
    parallelism: int
    max_parallelism: int = 128
    operator_ids: tuple[OperatorID, ...] = ()
    inputs: tuple[JobVertexID, ...] = ()
    pointwise_inputs: tuple[JobVertexID, ...] = ()

    @property
    def operators(self) -> tuple[OperatorID, ...]:
        return self.operator_ids or (self.vertex_id,)

    @property
    def is_source(self) -> bool:
        return not self.inputs and not self.pointwise_inputs


def vertices_from_job_graph(job_graph: JobGraph) -> list[JobVertexInfo]:
    """The coordinator's view of a ``barriersim.runtime.jobgraph.JobGraph`` (one operator per vertex, named
    like the vertex), in topological order."""
    out = []
    for name in job_graph.topological_order():
        v = job_graph.vertex(name)
        edges = job_graph.inputs_of(name)
        out.append(
            JobVertexInfo(
                name,
                v.parallelism,
                v.max_parallelism,
                (name,),
                tuple(dict.fromkeys(e.source for e in edges if not e.partitioner.is_pointwise)),
                tuple(dict.fromkeys(e.source for e in edges if e.partitioner.is_pointwise)),
            )
        )
    return out


@dataclass(frozen=True)
class Execution:
    """The current execution attempt of one subtask and its state."""

    attempt_id: ExecutionAttemptID
    state: ExecutionState


@dataclass(frozen=True)
class CheckpointPlan:
    """Flink's ``CheckpointPlan``."""

    tasks_to_trigger: tuple[ExecutionAttemptID, ...]
    tasks_to_wait_for: tuple[ExecutionAttemptID, ...]
    tasks_to_commit_to: tuple[ExecutionAttemptID, ...]
    finished_tasks: tuple[ExecutionAttemptID, ...] = ()
    fully_finished_job_vertices: tuple[JobVertexID, ...] = ()

    @property
    def may_have_finished_tasks(self) -> bool:
        return bool(self.finished_tasks)


class DefaultCheckpointPlanCalculator:
    def __init__(self, vertices: Sequence[JobVertexInfo], allow_checkpoints_after_tasks_finished: bool = True) -> None:
        self.vertices = tuple(vertices)
        self.by_id = {v.vertex_id: v for v in self.vertices}
        for v in self.vertices:
            for upstream in v.inputs + v.pointwise_inputs:
                if upstream not in self.by_id:
                    raise ValueError(f"vertex {v.vertex_id!r} reads from unknown vertex {upstream!r}")
        self.allow_checkpoints_after_tasks_finished = allow_checkpoints_after_tasks_finished

    def calculate_checkpoint_plan(self, executions: Mapping[tuple[JobVertexID, int], Execution]) -> CheckpointPlan:
        for v in self.vertices:
            for i in range(v.parallelism):
                if (v.vertex_id, i) not in executions:
                    raise CheckpointException(
                        CheckpointFailureReason.NOT_ALL_REQUIRED_TASKS_RUNNING,
                        detail=f"subtask {v.vertex_id}#{i} has no execution",
                    )
        has_finished = any(e.state is ExecutionState.FINISHED for e in executions.values())
        if has_finished and not self.allow_checkpoints_after_tasks_finished:
            raise CheckpointException(
                CheckpointFailureReason.NOT_ALL_REQUIRED_TASKS_RUNNING,
                detail=(
                    "some tasks of the job have already finished and checkpointing with finished tasks is not enabled"
                ),
            )
        plan = self._after_tasks_finished(executions) if has_finished else self._all_running(executions)
        for v in self.vertices:
            for i in range(v.parallelism):
                e = executions[(v.vertex_id, i)]
                if e.attempt_id in plan.tasks_to_wait_for and e.state is not ExecutionState.RUNNING:
                    raise CheckpointException(
                        CheckpointFailureReason.NOT_ALL_REQUIRED_TASKS_RUNNING,
                        detail=f"task {e.attempt_id} is {e.state.value}, not RUNNING",
                    )
        if not plan.tasks_to_trigger:
            raise CheckpointException(
                CheckpointFailureReason.NOT_ALL_REQUIRED_TASKS_RUNNING, detail="no task left to trigger"
            )
        return plan

    def _all_running(self, executions: Mapping[tuple[JobVertexID, int], Execution]) -> CheckpointPlan:
        trigger, everyone = [], []
        for v in self.vertices:
            for i in range(v.parallelism):
                attempt = executions[(v.vertex_id, i)].attempt_id
                everyone.append(attempt)
                if v.is_source:
                    trigger.append(attempt)
        return CheckpointPlan(tuple(trigger), tuple(everyone), tuple(everyone))

    def _after_tasks_finished(self, executions: Mapping[tuple[JobVertexID, int], Execution]) -> CheckpointPlan:
        def all_finished(vertex_id: JobVertexID) -> bool:
            v = self.by_id[vertex_id]
            return all(executions[(vertex_id, i)].state is ExecutionState.FINISHED for i in range(v.parallelism))

        trigger: list[ExecutionAttemptID] = []
        wait: list[ExecutionAttemptID] = []
        finished: list[ExecutionAttemptID] = []
        fully_finished: list[JobVertexID] = []
        for v in self.vertices:
            if all_finished(v.vertex_id):
                fully_finished.append(v.vertex_id)
                finished.extend(executions[(v.vertex_id, i)].attempt_id for i in range(v.parallelism))
                continue
            upstream_done = all(all_finished(u) for u in v.inputs)
            for i in range(v.parallelism):
                e = executions[(v.vertex_id, i)]
                if e.state is ExecutionState.FINISHED:
                    finished.append(e.attempt_id)
                    continue
                wait.append(e.attempt_id)
                pointwise_done = all(executions[(u, i)].state is ExecutionState.FINISHED for u in v.pointwise_inputs)
                if upstream_done and pointwise_done:
                    trigger.append(e.attempt_id)
        return CheckpointPlan(tuple(trigger), tuple(wait), tuple(wait), tuple(finished), tuple(fully_finished))
