"""A deployed subtask, the same on every driver: its ``StreamTask`` built from a deployment descriptor
(``deploy_task``: the job's settings, the restored state; a state that cannot be restored raises
``TaskRestoreError``, which each driver reports as a failed deployment) and the messages the JobMaster sends it
(``deliver_task_message``). The driver supplies only what is its own (clock, timer service, random stream, wakeup,
splits, external store, how it charges the checkpoint cost model); the slowdowns the fault schedule puts on a task
follow ``runtime.job.slowdowns``. Mirrors what Flink's ``TaskExecutor.submitTask`` does with a
``TaskDeploymentDescriptor``, and its ``triggerCheckpoint`` / ``confirmCheckpoint`` / ``abortCheckpoint`` RPCs.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from barriersim.runtime.checkpoint_cost import Charging, CostCharger
from barriersim.runtime.job.actions import (
    NotifyCheckpointAborted,
    NotifyCheckpointComplete,
    TaskDeploymentDescriptor,
    TaskMessage,
    TriggerCheckpoint,
)
from barriersim.runtime.job.config import JobConfig
from barriersim.runtime.operators.sinks import SinkStore
from barriersim.runtime.task.stream_task import StreamTask

if TYPE_CHECKING:
    from barriersim.runtime.event_timers import TimerService
    from barriersim.runtime.record_batch import RecordsLike


class TaskRestoreError(Exception):
    """A task could not restore the state it was deployed with (a state blob that does not decode); the one-line
    message names the task. Flink: the task fails while restoring, and the job fails over."""


def deploy_task(
    config: JobConfig,
    descriptor: TaskDeploymentDescriptor,
    *,
    clock: Callable[[], int],
    timer_service: TimerService,
    rng: random.Random,
    charging: Charging,
    cost_rng: random.Random,
    wakeup: Callable[[], None] = lambda: None,
    split: RecordsLike = (),
    splits: Mapping[int, RecordsLike] | None = None,
    store: SinkStore | None = None,
    on_built: Callable[[StreamTask], None] | None = None,
) -> tuple[StreamTask, dict[str, int]]:
    """The task of ``descriptor``, restored; and what it restored (``StreamTask.restore``'s account). A source
    reads ``splits`` (split id -> records: the splits of ``descriptor.source_splits``), or ``split`` as the split of
    its own index. ``charging`` and ``cost_rng``: how the driver charges the job's checkpoint cost model
    (``config.storage``) and the random stream of its spread. ``on_built`` sees the task before it restores (e.g. to
    log what its operator does from the start)."""
    attempt = descriptor.attempt
    task = StreamTask(
        config.graph,
        attempt.vertex_id,
        attempt.subtask_index,
        attempt,
        mode=config.checkpointing.mode,
        clock=clock,
        timer_service=timer_service,
        rng=rng,
        wakeup=wakeup,
        network=config.network,
        split=split,
        splits=splits,
        store=store,
        emit_watermarks=config.emits_watermarks,
        checkpoints_after_tasks_finish=config.tasks_wait_for_final_checkpoint,
        crash_points=descriptor.crash_points,
        input_channel_kinds=config.placement.gate_specs(config.graph, attempt.vertex_id, attempt.subtask_index),
        local_subpartitions=config.placement.local_subpartitions(
            config.graph, attempt.vertex_id, attempt.subtask_index
        ),
        cost=CostCharger(config.storage, charging, cost_rng),
        state_backend=config.state,
        memory_threshold=config.checkpointing.memory_threshold_bytes,
        source_min_checkpoints=config.workload.min_checkpoints,
        source_batch_records=config.source_batch_records,
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
