"""The JobMaster's deployment of a job's attempt: which attempt, state, crash points, slowdowns and splits each
subtask gets.

How this works: ``ExecutionDeployer`` is the part of ``runtime.job.job_master.JobMaster`` (a base class of it, sharing
its state: the coordinator, the placement, the fault schedule, the outgoing actions) that builds a
``DeployTasks`` action. Before a deployment restores a checkpoint, its state files are read again and checked
(``check_state_files``, as Flink's tasks read their state files at restore): a damaged one fails the restore as a
task failure does (a failover). The checkpoint's state is assigned to the job's subtasks (``assign_states``,
Flink's ``StateAssignmentOperation``, rescaled if the parallelism changed); every subtask gets the coordinator's
current attempt, its share of that state, its armed task-side crash points (of its TaskManager and node too) and
its slowdowns; a source subtask reads the splits its restored state names, or its own split when it starts fresh.
The TaskManagers are placed on the nodes no ``kill_node`` took. (``runtime.job.deployment`` is the other side: what a
driver does with a ``TaskDeploymentDescriptor``.)
"""

from __future__ import annotations

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.job.actions import DeployTasks, SubtaskKey, TaskDeploymentDescriptor, subtask_name
from barriersim.runtime.job.restore_failure import RestorePhase
from barriersim.runtime.operators.source import assigned_splits
from barriersim.runtime.recovery.errors import StateAssignmentError
from barriersim.runtime.recovery.state_assignment_operation import ExecutionJobVertexInfo, assign_states
from barriersim.runtime.state.snapshot import CheckpointMetadata
from barriersim.runtime.storage.errors import CheckpointStorageError


class ExecutionDeployer:
    """The deployment of ``JobMaster``'s attempts (a part of it, not used alone). Mirrors Flink's
    ``DefaultExecutionDeployer`` (``allocateSlotsAndDeploy``) with the state assignment of ``SchedulerBase``."""

    def _deploy(self, restore: m.RestoreFrom | None) -> None:
        assignment = None
        if restore is not None and restore.metadata is not None:
            try:
                self.storage.check_state_files(restore.checkpoint_id)
            except CheckpointStorageError as err:  # the tasks could not read their state: a task failure, whenever
                self._restore_failed(RestorePhase.FAILOVER, "restore",
                                     f"could not restore checkpoint {restore.checkpoint_id}: {err}")
                return
            infos = [ExecutionJobVertexInfo(v.name, v.parallelism, v.max_parallelism) for v in self.graph.vertices]
            assignment = assign_states(restore.metadata, infos, allow_non_restored_state=restore.allow_non_restored_state,
                                       graph=self.graph)
            self.restored_ids.append(restore.checkpoint_id)
        splits = self._source_splits(restore.metadata if assignment is not None else None, assignment)
        self.taskmanager_nodes = self.placement.taskmanager_nodes(self.lost_nodes)
        descriptors = []
        for key in self.subtasks:
            vertex, i = key
            name = subtask_name(key)
            state = None
            if assignment is not None and vertex in assignment.task_restores:
                state = assignment.task_restores[vertex][i].task_state_snapshot
            tm = self.placement.taskmanager_of[key]
            armed = self.config.faults.armed_crash_points(name, self._fired_points, tm, self.taskmanager_nodes[tm])
            crash_points = tuple(sorted(armed, key=lambda p: (p[0].value, p[1])))
            descriptors.append(TaskDeploymentDescriptor(self.coordinator.current_attempt(vertex, i), state,
                                                        crash_points, self._slowdowns[name], splits.get(key, ())))
        self.attempts = {d.key: d.attempt for d in descriptors}
        for d in descriptors:  # Flink's executions go SCHEDULED -> DEPLOYING (the periodic trigger's deactivator)
            self._handle_coordinator(self.coordinator.handle(m.TaskDeploying(d.attempt)))
        self._deployed_restore = restore.checkpoint_id if restore is not None and restore.metadata is not None else None
        self.finished.clear()
        self._killed_keys.clear()
        restored_id = restore.checkpoint_id if restore is not None else None
        self.deployments.append({"epoch": self.epoch, "restored_checkpoint_id": restored_id,
                                 "taskmanager_nodes": list(self.taskmanager_nodes)})
        self._out.append(DeployTasks(self.epoch, tuple(descriptors), restored_id,
                                     restore.metadata if restore is not None else None, self.config,
                                     taskmanager_nodes=self.taskmanager_nodes))

    def _source_splits(self, metadata: CheckpointMetadata | None, assignment) -> dict[SubtaskKey, tuple[int, ...]]:
        """The splits each source subtask reads: its own index when its vertex starts fresh, else the splits its
        restored state names; a restore must name every split of the source once, those of subtasks that had
        finished (FLIP-147: their splits are done) aside (``StateAssignmentError``)."""
        restored = {s.operator_id: s for s in metadata.operator_states} if metadata is not None else {}
        out: dict[SubtaskKey, tuple[int, ...]] = {}
        for v in self.graph.sources:
            total = self.config.splits_of(v.name)
            named = {i: assigned_splits(assignment.subtask_state(v.name, i)) for i in range(v.parallelism)} \
                if v.name in restored else {}
            if not any(named.values()):  # fresh, or restored state that names no split: each reads its own
                for i in range(v.parallelism):
                    out[(v.name, i)] = (i,) if i < total else ()
                continue
            seen: list[int] = []
            for i in range(v.parallelism):
                out[(v.name, i)] = named[i]
                seen.extend(named[i])
            old = restored[v.name]
            some_finished = old.fully_finished or any(st.is_finished for st in old.subtask_states.values())
            if (len(seen) != len(set(seen)) or not set(seen) <= set(range(total))
                    or (not some_finished and len(seen) != total)):
                raise StateAssignmentError(
                    f"checkpoint {metadata.checkpoint_id}: source {v.name!r} holds the offsets of splits {sorted(seen)}, "
                    f"but its workload has {total} split(s) (0..{total - 1}): it was taken of another workload")
        return out
