"""The JobMaster's deployments of a job's attempts: ``ExecutionDeployer``, a collaborator of ``JobMaster`` that owns
the current deployment (its epoch, each subtask's attempt, which tasks run, finished or were killed) and the
TaskManagers' nodes, and builds each ``DeployTasks``: the state each subtask restores (checked, then assigned,
rescaled if the parallelism changed), its armed crash points, slowdowns and splits. Mirrors Flink's
``DefaultExecutionDeployer`` (``allocateSlotsAndDeploy``) with the state assignment of ``SchedulerBase``.
(``runtime.job.deployment`` is the other side: what a driver does with a ``TaskDeploymentDescriptor``.)"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import Any

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.faults.fault_schedule import Fault, SlowTask
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.job.actions import CancelTasks, DeployTasks, SubtaskKey, TaskDeploymentDescriptor, subtask_name
from barriersim.runtime.job.config import JobConfig
from barriersim.runtime.operators.source import assigned_splits
from barriersim.runtime.recovery.errors import StateAssignmentError
from barriersim.runtime.recovery.state_assignment_operation import (
    ExecutionJobVertexInfo,
    StateAssignment,
    assign_states,
)
from barriersim.runtime.state.snapshot import CheckpointMetadata
from barriersim.runtime.storage.checkpoint_storage import CheckpointStorage
from barriersim.runtime.storage.errors import CheckpointStorageError


class ExecutionDeployer:
    """The current deployment and how the next one is built (see the module)."""

    def __init__(
        self,
        config: JobConfig,
        *,
        storage: CheckpointStorage,
        fired_points: set[Fault],
        finished: set[SubtaskKey],
        first_epoch: int,
        lost_nodes: AbstractSet[int],
        current_attempt: Callable[[str, int], ExecutionAttemptID],
        deploying: Callable[[ExecutionAttemptID], None],
        restore_failed: Callable[[str], None],
        emit: Callable[[Any], None],
    ):
        """``fired_points``: the run's fired crash faults (not armed again); ``finished``: the run's set of the
        current deployment's finished subtasks, cleared in place; ``current_attempt(vertex, index)``: the
        coordinator's; ``deploying(attempt)``: the coordinator hears it (SCHEDULED -> DEPLOYING); ``restore_failed``:
        the tasks could not read the state files of the checkpoint they restore (a failover's failure)."""
        self._config = config
        self._graph = config.graph
        self._storage = storage
        self._fired_points = fired_points
        self._current_attempt = current_attempt
        self._deploying = deploying
        self._restore_failed = restore_failed
        self._emit = emit
        self.subtasks: tuple[SubtaskKey, ...] = tuple(
            (v.name, i) for v in self._graph.vertices for i in range(v.parallelism)
        )
        self.placement = config.placement
        self.slowdowns = {
            name: tuple(f for f in config.faults.of_type(SlowTask) if f.task == name)
            for name in map(subtask_name, self.subtasks)
        }
        self.epoch = first_epoch
        self.attempts: dict[SubtaskKey, ExecutionAttemptID] = {}  # the deployed attempt of each subtask
        self.running = False  # the current deployment's tasks were restored and have not been cancelled
        self.finished = finished
        self.finished.clear()
        self.killed_keys: set[SubtaskKey] = set()  # killed by the fault schedule, death not yet reported
        self.lost_nodes: set[int] = set(lost_nodes)  # nodes a kill_node took; they do not come back
        self.taskmanager_nodes: tuple[int, ...] = self.placement.taskmanager_nodes()  # of the current deployment
        self.deployments: list[dict[str, Any]] = []  # per deployment: epoch, restored checkpoint, TaskManager nodes
        self.restored_ids: list[int] = []
        self.restoring: int | None = None  # the checkpoint the current deployment restores
        self.started = 0  # deployments whose tasks started

    # -- queries --------------------------------------------------------------------------------------------------

    def is_current(self, attempt: ExecutionAttemptID) -> bool:
        """Whether ``attempt`` is a running task of the current deployment (a message for it is delivered)."""
        return self.running and self.attempts.get((attempt.vertex_id, attempt.subtask_index)) == attempt

    def killable(self, key: SubtaskKey) -> bool:
        """Whether the fault schedule can kill the subtask ``key``: it runs, and did not finish or die already."""
        return self.running and key in self.attempts and key not in self.finished and key not in self.killed_keys

    def running_attempts(self) -> list[ExecutionAttemptID]:
        """The current deployment's attempts that did not finish, in subtask order."""
        return [self.attempts[key] for key in self.subtasks if key not in self.finished]

    # -- changes --------------------------------------------------------------------------------------------------

    def kill(self, key: SubtaskKey) -> ExecutionAttemptID:
        """The fault schedule kills subtask ``key``; its death is reported later."""
        self.killed_keys.add(key)
        return self.attempts[key]

    def lose_node(self, node: int) -> None:
        """A ``kill_node`` took ``node``: every later deployment places its TaskManagers on the others."""
        self.lost_nodes.add(node)

    def cancel(self) -> None:
        """Every task of the deployment dies at once; the next deployment is a new epoch."""
        self._emit(CancelTasks(self.epoch))
        self.epoch += 1
        self.running = False
        self.finished.clear()

    def deploy(self, restore: m.RestoreFrom | None) -> None:
        """Deploy new attempts, restoring ``restore`` (None, or one without metadata: fresh state)."""
        assignment: StateAssignment | None = None
        restored: CheckpointMetadata | None = None
        if restore is not None and restore.metadata is not None:
            restored = restore.metadata
            assert restore.checkpoint_id is not None  # a restore with metadata names its checkpoint (RestoreFrom)
            try:
                self._storage.check_state_files(restore.checkpoint_id)
            except CheckpointStorageError as err:  # the tasks could not read their state: a task failure, whenever
                self._restore_failed(f"could not restore checkpoint {restore.checkpoint_id}: {err}")
                return
            infos = [ExecutionJobVertexInfo(v.name, v.parallelism, v.max_parallelism) for v in self._graph.vertices]
            assignment = assign_states(
                restore.metadata, infos, allow_non_restored_state=restore.allow_non_restored_state, graph=self._graph
            )
            self.restored_ids.append(restore.checkpoint_id)
        splits = self._source_splits(restored, assignment)
        self.taskmanager_nodes = self.placement.taskmanager_nodes(self.lost_nodes)
        descriptors = []
        for key in self.subtasks:
            vertex, i = key
            name = subtask_name(key)
            state = None
            if assignment is not None and vertex in assignment.task_restores:
                state = assignment.task_restores[vertex][i].task_state_snapshot
            tm = self.placement.taskmanager_of[key]
            armed = self._config.faults.armed_crash_points(name, self._fired_points, tm, self.taskmanager_nodes[tm])
            crash_points = tuple(sorted(armed, key=lambda p: (p[0].value, p[1])))
            descriptors.append(
                TaskDeploymentDescriptor(
                    self._current_attempt(vertex, i), state, crash_points, self.slowdowns[name], splits.get(key, ())
                )
            )
        self.attempts = {d.key: d.attempt for d in descriptors}
        for d in descriptors:  # Flink's executions go SCHEDULED -> DEPLOYING (the periodic trigger's deactivator)
            self._deploying(d.attempt)
        self.restoring = restore.checkpoint_id if restore is not None and restore.metadata is not None else None
        self.finished.clear()
        self.killed_keys.clear()
        restored_id = restore.checkpoint_id if restore is not None else None
        self.deployments.append(
            {
                "epoch": self.epoch,
                "restored_checkpoint_id": restored_id,
                "taskmanager_nodes": list(self.taskmanager_nodes),
            }
        )
        self._emit(
            DeployTasks(
                self.epoch,
                tuple(descriptors),
                restored_id,
                restore.metadata if restore is not None else None,
                self._config,
                taskmanager_nodes=self.taskmanager_nodes,
            )
        )

    def _source_splits(
        self, metadata: CheckpointMetadata | None, assignment: StateAssignment | None
    ) -> dict[SubtaskKey, tuple[int, ...]]:
        """The splits each source subtask reads: its own index when its vertex starts fresh, else the splits its
        restored state names; a restore must name every split of the source once, those of subtasks that had
        finished (FLIP-147: their splits are done) aside (``StateAssignmentError``)."""
        restored = {s.operator_id: s for s in metadata.operator_states} if metadata is not None else {}
        out: dict[SubtaskKey, tuple[int, ...]] = {}
        for v in self._graph.sources:
            total = self._config.splits_of(v.name)
            named = (
                {i: assigned_splits(assignment.subtask_state(v.name, i)) for i in range(v.parallelism)}
                if v.name in restored and assignment is not None  # deploy assigns the state of metadata
                else {}
            )
            if not any(named.values()):  # fresh, or restored state that names no split: each reads its own
                for i in range(v.parallelism):
                    out[(v.name, i)] = (i,) if i < total else ()
                continue
            assert metadata is not None  # restored state names splits
            seen: list[int] = []
            for i in range(v.parallelism):
                out[(v.name, i)] = named[i]
                seen.extend(named[i])
            old = restored[v.name]
            some_finished = old.fully_finished or any(st.is_finished for st in old.subtask_states.values())
            if (
                len(seen) != len(set(seen))
                or not set(seen) <= set(range(total))
                or (not some_finished and len(seen) != total)
            ):
                raise StateAssignmentError(
                    f"checkpoint {metadata.checkpoint_id}: source {v.name!r} holds the offsets of splits "
                    f"{sorted(seen)}, "
                    f"but its workload has {total} split(s) (0..{total - 1}): it was taken of another workload"
                )
        return out
