"""A deployed subtask, the same on every driver: its ``StreamTask`` built from a deployment descriptor, the
messages the JobMaster sends it, and the slowdowns the fault schedule puts on it.

How this works: ``deploy_task`` builds the sans-IO ``StreamTask`` of one ``TaskDeploymentDescriptor`` with the
job's settings (mode, network, watermarks, FLIP-147 final checkpoint, armed crash points) and restores its state;
the driver supplies only what is its own (clock, timer service, random stream, wakeup, split, external store); a
state that cannot be restored raises ``TaskRestoreError``, which each driver reports as a failed deployment.
``deliver_task_message`` hands a ``TaskMessage`` to the task. Every deployed task charges the job's checkpoint
cost model (``runtime.checkpoint_cost``) as its driver says (``Charging``): its checkpoints' asynchronous parts
are then the driver's to complete (``StreamTask.complete_async_part``). ``Slowdowns`` is the rule of the ``SlowTask``
faults of one deployment: the cost of a piece of work is multiplied by the factor of every slowdown whose window
holds the moment (overlapping ones multiply), and each slowdown is reported once, the first time it slows the
task (the run's fault log counts it as fired then). Mirrors what Flink's ``TaskExecutor.submitTask`` does with a
``TaskDeploymentDescriptor``, and its ``triggerCheckpoint`` / ``confirmCheckpoint`` / ``abortCheckpoint`` RPCs.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Callable, Mapping, Sequence

from barriersim.runtime.checkpoint_cost import Charging, CostCharger
from barriersim.runtime.job.actions import (
    NotifyCheckpointAborted,
    NotifyCheckpointComplete,
    TaskDeploymentDescriptor,
    TaskMessage,
    TriggerCheckpoint,
)
from barriersim.runtime.job.config import JobConfig
from barriersim.runtime.faults.fault_schedule import SlowTask
from barriersim.runtime.operators.sinks import ExternalStore
from barriersim.runtime.task.stream_task import StreamTask


class TaskRestoreError(Exception):
    """A task could not restore the state it was deployed with (a state blob that does not decode); the one-line
    message names the task. Flink: the task fails while restoring, and the job fails over."""


def deploy_task(config: JobConfig, descriptor: TaskDeploymentDescriptor, *, clock: Callable[[], int], timer_service,
                rng: random.Random, charging: Charging, cost_rng: random.Random,
                wakeup: Callable[[], None] = lambda: None, split: Sequence[tuple] = (),
                splits: Mapping[int, Sequence[tuple]] | None = None, store: ExternalStore | None = None,
                on_built: Callable[[StreamTask], None] | None = None) -> tuple[StreamTask, dict]:
    """The task of ``descriptor``, restored; and what it restored (``StreamTask.restore``'s account). A source
    reads ``splits`` (split id -> records: the splits of ``descriptor.source_splits``), or ``split`` as the split of
    its own index. ``charging`` and ``cost_rng``: how the driver charges the job's checkpoint cost model
    (``config.storage``) and the random stream of its spread. ``on_built`` sees the task before it restores (e.g. to
    log what its operator does from the start)."""
    attempt = descriptor.attempt
    network = config.network
    if config.graph.vertex(attempt.vertex_id).operator.is_source:
        network = dataclasses.replace(network, source_batch_records=config.source_batch_records)
    task = StreamTask(
        config.graph, attempt.vertex_id, attempt.subtask_index, attempt, mode=config.mode, clock=clock,
        timer_service=timer_service, rng=rng, wakeup=wakeup, network=network, split=split, splits=splits,
        store=store,
        emit_watermarks=config.emits_watermarks,
        checkpoints_after_tasks_finish=config.tasks_wait_for_final_checkpoint,
        crash_points=descriptor.crash_points,
        input_channel_kinds=config.placement.gate_specs(config.graph, attempt.vertex_id, attempt.subtask_index),
        local_subpartitions=config.placement.local_subpartitions(config.graph, attempt.vertex_id,
                                                                 attempt.subtask_index),
        cost=CostCharger(config.storage, charging, cost_rng),
        state_backend=config.state,
        memory_threshold=config.memory_threshold_bytes,
        source_min_checkpoints=config.source_min_checkpoints,
    )
    if on_built is not None:
        on_built(task)
    try:
        return task, task.restore(descriptor.state)
    except Exception as err:  # noqa: BLE001 - whatever the state's decoding raised: the restore failed
        detail = f": {err}" if str(err) else ""
        raise TaskRestoreError(f"{task.name}: could not restore its state: {type(err).__name__}{detail}") from err


def deliver_task_message(task: StreamTask, message: TaskMessage) -> None:
    if type(message) is TriggerCheckpoint:
        task.trigger_checkpoint(message.checkpoint_id, message.timestamp, message.options)
    elif type(message) is NotifyCheckpointComplete:
        task.notify_checkpoint_complete(message.checkpoint_id)
    elif type(message) is NotifyCheckpointAborted:
        task.notify_checkpoint_aborted(message.checkpoint_id, message.latest_completed_checkpoint_id)
    else:
        raise TypeError(f"{task.name}: not a message for a task: {message!r}")


class Slowdowns:
    """The ``SlowTask`` faults of one deployed subtask, in the schedule's order."""

    def __init__(self, slowdowns: Sequence[SlowTask]):
        self.slowdowns = tuple(slowdowns)
        self._met: set[int] = set()

    def __bool__(self) -> bool:
        return bool(self.slowdowns)

    def apply(self, cost: float, at_ms: int) -> tuple[float, list[int]]:
        """``cost`` stretched by every slowdown active at ``at_ms``; and the indices of the slowdowns that slow
        the task for the first time now (to be reported once)."""
        first_time = []
        for i, slow in enumerate(self.slowdowns):
            if slow.from_ms <= at_ms and (slow.until_ms is None or at_ms < slow.until_ms):
                cost *= slow.factor
                if i not in self._met:
                    self._met.add(i)
                    first_time.append(i)
        return cost, first_time
