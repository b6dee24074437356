"""A Ray actor per subtask: it feeds its sans-IO task the events that arrive and carries out the actions the
task returns.

How this works: the actor is an asyncio actor. Every event (records read from the split, an element on an
input channel, a checkpoint trigger, a completion notice) is handled under one lock, so the task object sees
one event at a time and the actions of one event (sends downstream, the acknowledgement) go out in order.
A send awaits the downstream call, so an upstream subtask has at most one message in flight per channel:
channel order holds, and a slow consumer slows its producers down. Sources pace themselves to the scenario's
rate. Acknowledgements write the task's state to checkpoint storage first, then tell the coordinator.
No protocol rule lives here.
"""

from __future__ import annotations

import asyncio
import time

import ray

from barriersim.actors.clock import now_ms
from barriersim.actors.wire import decode_element, encode_element, encode_metrics
from barriersim.runtime.events import CheckpointBarrier, options_from_wire
from barriersim.runtime.skeleton.job import KEYED_SUM, SINK, SOURCE, QuickstartJob
from barriersim.runtime.skeleton.storage import SkeletonCheckpointStorage
from barriersim.runtime.skeleton.task import AcknowledgeCheckpoint, BroadcastEvent, SendBuffer, TaskFinished


@ray.remote(num_cpus=0.01)
class TaskActor:
    def __init__(self, name: str, job: QuickstartJob, checkpoint_root: str, job_id: str):
        self.name = name
        self.job = job
        self.kind, index = name.split("#")
        self.index = int(index)
        self.storage = SkeletonCheckpointStorage(checkpoint_root, job_id)
        self._lock = asyncio.Lock()
        self.reader = None
        self.sink = None
        if self.kind == KEYED_SUM:
            self.task = job.build_keyed_sum(self.index)
        elif self.kind == SINK:
            self.task, self.sink = job.build_sink()
        elif self.kind != SOURCE:
            raise ValueError(f"unknown task kind in {name!r}")
        self.downstream: list = []
        self.channel_at_downstream = 0
        self.coordinator = None
        self.records_out = 0
        self.completed_checkpoints: list[int] = []

    def connect(self, downstream: list, channel_at_downstream: int, coordinator) -> None:
        self.downstream = downstream
        self.channel_at_downstream = channel_at_downstream
        self.coordinator = coordinator

    async def load_split(self, block_refs: list) -> int:
        """Read this source's split from Ray's object store (Arrow blocks produced by Spark)."""
        from barriersim.scenarios.workload import split_records_from_tables

        tables = await asyncio.gather(*block_refs)
        records = split_records_from_tables(list(tables), self.index)
        self.task, self.reader = self.job.build_source(self.index, records)
        return len(records)

    async def run_source(self, rate_per_second: int) -> int:
        batch = self.job.records_per_buffer * self.job.keyed_sum_parallelism
        started = time.monotonic()
        while not self.reader.is_finished:
            async with self._lock:
                records = self.reader.poll(batch)
                self.records_out += len(records)
                await self._execute(self.task.emit_records(self.job.route(records), self.reader.is_finished))
            if rate_per_second:
                due = started + self.records_out / rate_per_second
                await asyncio.sleep(max(0.0, due - time.monotonic()))
            else:
                await asyncio.sleep(0)
        return self.records_out

    async def receive(self, channel: int, payload: bytes) -> None:
        async with self._lock:
            await self._execute(self.task.on_element(channel, decode_element(payload), now_ms()))

    async def trigger_checkpoint(self, checkpoint_id: int, timestamp: int, options: list) -> None:
        async with self._lock:
            if self.task is None:
                return
            barrier = CheckpointBarrier(checkpoint_id, timestamp, options_from_wire(options))
            await self._execute(self.task.trigger_checkpoint(barrier, now_ms()))

    async def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.completed_checkpoints.append(checkpoint_id)

    async def progress(self) -> int:
        return self.records_out

    async def sink_output(self) -> list:
        return [tuple(r) for r in self.sink.output]

    async def _execute(self, actions: list) -> None:
        for action in actions:
            if isinstance(action, SendBuffer):
                await self.downstream[action.channel].receive.remote(
                    self.channel_at_downstream, encode_element(action.buffer)
                )
            elif isinstance(action, BroadcastEvent):
                payload = encode_element(action.event)
                await asyncio.gather(*(d.receive.remote(self.channel_at_downstream, payload) for d in self.downstream))
            elif isinstance(action, AcknowledgeCheckpoint):
                path, size = self.storage.write_task_state(action.checkpoint_id, self.name, action.operator_state)
                self.coordinator.acknowledge.remote(
                    self.name, action.checkpoint_id, path, size, encode_metrics(action.metrics), now_ms()
                )
            elif isinstance(action, TaskFinished):
                self.coordinator.task_finished.remote(self.name, now_ms())
            else:
                raise TypeError(f"{self.name}: no way to carry out {action!r}")
