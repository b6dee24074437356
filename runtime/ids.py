"""Identifiers of the job graph's parts, in Flink's vocabulary.

How this works: a job vertex (``JobVertexID``, here its name) runs as ``parallelism`` subtasks; each run of
a subtask is an execution attempt (``ExecutionAttemptID``), renewed after every failover so that messages
of a dead attempt can be told apart. Operators (``OperatorID``) are chained inside a vertex; in barriersim
each vertex holds one operator whose id is the vertex name.
"""

from __future__ import annotations

from dataclasses import dataclass

JobVertexID = str
OperatorID = str


@dataclass(frozen=True, order=True)
class ExecutionAttemptID:
    """One execution attempt of one subtask (Flink's ``ExecutionAttemptID``)."""

    vertex_id: JobVertexID
    subtask_index: int
    attempt_number: int = 0

    def __str__(self) -> str:
        return f"{self.vertex_id}#{self.subtask_index}@{self.attempt_number}"

    def next_attempt(self) -> ExecutionAttemptID:
        return ExecutionAttemptID(self.vertex_id, self.subtask_index, self.attempt_number + 1)
