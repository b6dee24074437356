"""The checkpoint coordinator as a Ray actor: a real-time periodic timer and message delivery around the
sans-IO coordinator.

How this works: ``run_until_finished`` fires the periodic trigger every interval (real time) and hands the
coordinator the time; acknowledgements and task-finished notices arrive as actor calls. The actions the
coordinator returns are carried out here: a trigger goes to every source task, a completed checkpoint gets its
``_metadata`` written to storage and every task notified. The loop ends when every task has finished.
"""

from __future__ import annotations

import asyncio

import ray

from barriersim.actors.clock import now_ms
from barriersim.actors.wire import decode_metrics
from barriersim.runtime.events import CheckpointOptions, options_to_wire
from barriersim.runtime.skeleton.coordinator import (
    AbortCheckpoint,
    CompleteCheckpoint,
    SkeletonCoordinator,
    TriggerCheckpoint,
)
from barriersim.runtime.skeleton.storage import SkeletonCheckpointStorage


@ray.remote(num_cpus=0.01)
class CoordinatorActor:
    def __init__(self, tasks: list[str], interval_ms: int, timeout_ms: int, checkpoint_root: str, job_id: str):
        self.coordinator = SkeletonCoordinator(tasks, CheckpointOptions.aligned(), timeout_ms)
        self.interval_ms = interval_ms
        self.storage = SkeletonCheckpointStorage(checkpoint_root, job_id)
        self.handles: dict = {}
        self.sources: list = []
        self._finished: set[str] = set()
        self._all_finished = asyncio.Event()
        self.tasks = tasks

    def connect(self, handles: dict, sources: list[str]) -> None:
        self.handles = handles
        self.sources = sources

    async def run_until_finished(self) -> dict:
        while not self._all_finished.is_set():
            try:
                await asyncio.wait_for(self._all_finished.wait(), self.interval_ms / 1000)
            except asyncio.TimeoutError:
                self._carry_out(self.coordinator.on_periodic_trigger(now_ms()))
        return self.statistics()

    def statistics(self) -> dict:
        c = self.coordinator
        return {
            "completed": c.completed,
            "failed": c.failed,
            "skipped": dict(c.skipped),
            "checkpoints": list(c.checkpoint_stats),
            "subtasks": list(c.subtask_stats),
        }

    async def acknowledge(self, task: str, checkpoint_id: int, path: str, size: int, metrics: bytes, at: int) -> None:
        self._carry_out(self.coordinator.on_acknowledge(task, checkpoint_id, (path, size), size, decode_metrics(metrics), at))

    async def task_finished(self, task: str, at: int) -> None:
        self._finished.add(task)
        self._carry_out(self.coordinator.on_task_finished(task, at))
        if self._finished >= set(self.tasks):
            self._all_finished.set()

    def _carry_out(self, actions: list) -> None:
        for action in actions:
            if isinstance(action, TriggerCheckpoint):
                b = action.barrier
                for name in self.sources:
                    self.handles[name].trigger_checkpoint.remote(b.id, b.timestamp, options_to_wire(b.options))
            elif isinstance(action, CompleteCheckpoint):
                self.storage.write_metadata(action.checkpoint_id, action.acknowledged)
                for handle in self.handles.values():
                    handle.notify_checkpoint_complete.remote(action.checkpoint_id)
            elif isinstance(action, AbortCheckpoint):
                pass  # the skeleton's tasks keep no per-checkpoint resources to release
            else:
                raise TypeError(f"coordinator: no way to carry out {action!r}")
