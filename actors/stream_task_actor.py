"""One subtask of a job as a Ray actor driving a sans-IO ``runtime.stream_task.StreamTask``.

How this works: the actor is an asyncio actor, so the task object sees one event at a time on one thread.
The task is built from its deployment descriptor as on the simulator (``runtime.job.deployment``); the actor
does per subtask what the simulator's data plane does, with real time and real messages:
- what arrives: ``deliver`` (a batch of channel elements from one upstream actor), ``upstream`` (credit,
  resume-consumption and debloated buffer sizes for this task's subpartitions), ``task_message`` (the
  JobMaster's checkpoint trigger, completion and abort notices). Elements are handed to the task in each
  channel's sequence-number order: Ray does not promise call order for async actors, so an element that
  arrives early waits until the gap before it is filled;
- work: ``run`` calls ``process_next()`` while it returns PROCESSED (yielding to the loop every few ms so
  that messages get in), waits for a message when the task is IDLE or BACKPRESSURED, and returns when the
  task is FINISHED (with its records, steps, idle waits, when on the job's clock it processed its last
  record, the process CPU its run took and its own thread's part of it, the Ray calls, buffers and bytes of
  channel elements it sent, and where its thread's time went: steps, arrivals, outgoing elements, calls); sources
  are paced to ``source_rate`` records/s when one is set; an output flusher calls ``flush_outputs()`` every
  ``buffer_timeout_ms`` (Flink's 100 ms); a task slowed by the fault schedule
  (``SlowTask``: ``factor`` from ``from_ms`` until ``until_ms`` after the job started) sleeps ``factor - 1``
  times each burst's duration after it, and works only from its loop (not inline on arrivals) meanwhile;
- what leaves: after every step, message and timer, ``poll_sendable()`` elements go to per-consumer
  outboxes and ``drain_actions()`` credit, resume-consumption and buffer sizes to per-producer outboxes; each
  outbox is sent as ONE Ray call (msgpack; a buffer's records as their column buffers) when the current burst of
  work ends, or at once when a step produced a channel event (a barrier, above all an unaligned one, must not
  wait behind the rest of a burst: Flink's network thread sends it as soon as it is queued), in the order the
  partitions handed the elements out (priority events first, as the partitions order them). At most
  ``DATA_CALLS_IN_FLIGHT`` calls to one consumer, and one to each producer, are in flight at a time (a call
  completes when the receiver has taken it in): what becomes ready meanwhile waits in the outbox and goes with
  the next call, so a task sends all the buffers its credit allows for one consumer in one call, as Flink's
  network stack writes whatever is queued for a connection whenever it is writable; credits for one
  subpartition waiting together are announced as one (Flink's ``unannouncedCredit``). How many buffers a call
  carries is the receiver's credit: up to its exclusive and floating buffers over a remote channel, at most two over a
  local channel (producer and consumer in one TaskManager), which holds the buffer its task reads and the next one
  (``runtime.network.input.input_channel``). The upstream window of one
  also keeps a producer's messages in order. Acknowledgements, declines and the finished notice go to the job manager
  actor in order, each after the sink's store writes were confirmed; an acknowledgement's snapshot is encoded
  only then, after the barrier went on downstream (as Flink's asynchronous snapshot part). A checkpoint's
  asynchronous part and channel-state write complete on the loop after the cost model's emulated remote-store
  time (``runtime.checkpoint_cost``, ``Charging.REAL_TIME``: none unless the scenario asks for it), then the task
  acknowledges.
Any error in the task fails the actor's ``run`` call, which the job manager treats as a task failure.
No protocol rule lives here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections import defaultdict

import ray

from barriersim.actors.clock import now_ms
from barriersim.actors.external_store import RemoteExternalStore
from barriersim.actors.messages import (
    ALL_RECORDS_PROCESSED,
    BUFFER_SIZE,
    CREDIT,
    attempt_to_wire,
    decode_elements,
    decode_split,
    decode_snapshot,
    decode_upstream,
    element_entry,
    encode_metrics,
    incomplete_stats_to_wire,
    merge_credits,
    encode_snapshot,
    pack,
    pack_elements,
    task_message_from_wire,
    upstream_entry,
)
from barriersim.actors.realtime import LoopTimerService
from barriersim.runtime.checkpoint_cost import Charging
from barriersim.runtime.events import Buffer
from barriersim.runtime.job.actions import TaskDeploymentDescriptor
from barriersim.runtime.job.config import JobConfig
from barriersim.runtime.job.deployment import Slowdowns, deliver_task_message, deploy_task
from barriersim.runtime.job.wiring import Wiring
from barriersim.runtime.network.input.input_channel import UPSTREAM_MESSAGES
from barriersim.runtime.stream_task import StepOutcome, StreamTask
from barriersim.runtime.task.actions import (
    AcknowledgeCheckpoint,
    AsyncCheckpointStarted,
    DeclineCheckpoint,
    ReportIncompleteSnapshotStats,
    SyncSnapshotTaken,
    TaskFailed,
    TaskFinished,
)
from barriersim.runtime.task.crash_points import CrashedAtProtocolPoint

BURST_SECONDS = 0.005  # how long the task works before it sends its outboxes and lets messages in
DATA_CALLS_IN_FLIGHT = 2  # data calls to one consumer not yet taken in, at most


@ray.remote(num_cpus=0.01)
class StreamTaskActor:
    def __init__(self, config: JobConfig, descriptor: TaskDeploymentDescriptor, seed: int, splits: dict | None,
                 snapshot: bytes | None, store, job_manager):
        """``descriptor`` comes without its state, which travels as ``snapshot`` (msgpack); a source gets the
        object references of the splits it reads (split id -> msgpack records or an Arrow table), read in
        ``connect``, so that the actor is created before its splits exist (``actors.workload_handoff``)."""
        self.config = config
        self.descriptor = descriptor
        self.name = descriptor.name
        self.key = descriptor.key
        self.attempt = descriptor.attempt
        self.seed = seed
        self.source_rate = config.source_rate_per_subtask if config.graph.vertex(self.key[0]).operator.is_source else 0
        self._split_refs = splits
        self._snapshot = snapshot
        self.store = RemoteExternalStore(store, f"{self.name}@{self.attempt.attempt_number}") if store is not None else None
        self.job_manager = job_manager
        self.task: StreamTask | None = None
        self.handles: dict = {}
        self._data_out: dict = defaultdict(list)
        self._upstream_out: dict = defaultdict(list)
        self._in_flight: dict = defaultdict(int)  # ("data", consumer) / ("upstream", producer) -> calls in flight
        self._expected: dict = {}
        self._held: dict = defaultdict(dict)
        self._failure: BaseException | None = None
        self.records_processed = 0
        self.data_bytes_sent = 0  # msgpack bytes of the channel elements this task sent downstream
        self.data_calls_sent = self.upstream_calls_sent = 0  # Ray calls: element batches, credit batches
        self.data_buffers_sent = 0  # data buffers among the channel elements sent
        # where the actor's thread spends its time (perf_counter seconds): the task's steps, taking in what
        # arrived (decoding it and handing it to the task), collecting what leaves (each element's wire form),
        # packing a call's elements, handing calls to Ray
        self._seconds = {"steps": 0.0, "receive": 0.0, "collect": 0.0, "encode": 0.0, "submit": 0.0}
        self.steps = 0
        self._running = False
        self.waits = 0
        self.finished = False
        self._burst_seconds = 0.0
        self._slowdowns = Slowdowns(descriptor.slowdowns)
        self._last_record_ms: int | None = None  # when the task last processed a record (wall clock)

    # -- setup ---------------------------------------------------------------------------------------

    async def connect(self, handles: dict) -> dict:
        """Build the task on this actor's loop, restore its state, and learn every peer's handle."""
        loop = asyncio.get_running_loop()
        self.handles = handles
        self.wiring = Wiring(self.config.graph)
        self._wake = asyncio.Event()
        self._sent = asyncio.Event()
        self._reports: asyncio.Queue = asyncio.Queue()
        restore = dataclasses.replace(self.descriptor, state=decode_snapshot(self._snapshot, self.key[1]))
        splits = None
        if self._split_refs is not None:
            ids = list(self._split_refs)
            data = await asyncio.gather(*(self._split_refs[sid] for sid in ids))
            splits = {sid: decode_split(d) for sid, d in zip(ids, data)}
        self.task, restored = deploy_task(
            self.config, restore, clock=now_ms, timer_service=LoopTimerService(loop, self._fail),
            rng=random.Random(self.seed), charging=Charging.REAL_TIME, cost_rng=random.Random(self.seed ^ 0x5EED),
            wakeup=self._after_event, splits=splits, store=self.store)
        self._split_refs = None
        self._reporter = loop.create_task(self._report_in_order())
        # a source's offset as restored: where the run's progress starts when this is its first deployment
        return {**restored, "ray_node_id": ray.get_runtime_context().get_node_id(),
                "records_read": self._records_read()}

    def _records_read(self) -> int | None:
        """How far a source's reader got (its split offsets, in records); None for a task that is not a source."""
        return self.task.operator.reader.records_read if self.task.operator.is_source else None

    # -- the work loop -------------------------------------------------------------------------------

    async def run(self, job_started_ms: int) -> dict:
        """Work until the task finishes; ``job_started_ms``: time 0 of the job's clock (the fault schedule's)."""
        self._job_started_ms = job_started_ms
        started = time.monotonic()
        cpu_started = time.process_time()
        thread_cpu_started = time.thread_time()
        pace = self.task.operator.is_source and self.source_rate
        self._running = True
        self._after_event()  # recovered output and initial credit
        flusher = asyncio.get_running_loop().create_task(self._flush_periodically())
        try:
            while True:
                self._raise_if_failed()
                outcome = self._work()
                self._send()
                if self.finished:
                    break
                slowed = max(0.0, self._slowdown() - 1.0) * self._burst_seconds
                if outcome is StepOutcome.PROCESSED:
                    delay = started + self.records_processed / self.source_rate - time.monotonic() if pace else 0.0
                    await asyncio.sleep(max(0.0, delay, slowed))
                else:
                    if slowed:
                        await asyncio.sleep(slowed)
                    self._wake.clear()
                    self.waits += 1
                    await self._wake.wait()
        finally:
            flusher.cancel()
        self._raise_if_failed()
        await self._drain_outboxes()  # the end of partition must leave before the run call returns
        self._raise_if_failed()
        last = None if self._last_record_ms is None else self._last_record_ms - job_started_ms
        return {"task": self.name, "records": self.records_processed, "steps": self.steps, "waits": self.waits,
                "records_read": self._records_read(), "last_record_at_ms": last,
                "cpu_seconds": time.process_time() - cpu_started,
                "thread_cpu_seconds": time.thread_time() - thread_cpu_started,
                **{f"{name}_seconds": value for name, value in self._seconds.items()},
                "data_bytes_sent": self.data_bytes_sent, "data_calls_sent": self.data_calls_sent,
                "data_buffers_sent": self.data_buffers_sent, "upstream_calls_sent": self.upstream_calls_sent}

    def _work(self) -> StepOutcome:
        """Call ``process_next()`` while it returns PROCESSED, for at most ``BURST_SECONDS`` (one step for a
        paced source), collecting what each step produced."""
        task = self.task
        burst_start = time.monotonic()
        burst_end = burst_start + BURST_SECONDS
        one_step = task.operator.is_source and self.source_rate
        records_before = self.records_processed
        seconds = self._seconds
        while True:
            step_start = time.perf_counter()
            result = task.process_next()
            seconds["steps"] += time.perf_counter() - step_start
            self.steps += 1
            self.records_processed += result.records
            if self._collect():
                self._send()  # an event (barrier, cancel marker, announcement) does not wait for the burst's end
            if result.outcome is not StepOutcome.PROCESSED or one_step or time.monotonic() >= burst_end:
                break
        if result.outcome is StepOutcome.FINISHED:
            self.finished = True
        if self.records_processed != records_before:
            self._last_record_ms = now_ms()
        self._burst_seconds = time.monotonic() - burst_start
        return result.outcome

    def _slowdown(self) -> float:
        """The fault schedule's slowdown factor now (1.0: none; ``runtime.job.deployment.Slowdowns``); a slowdown
        met for the first time is reported for the run's fault log."""
        if not self._slowdowns:
            return 1.0
        at_ms = now_ms() - self._job_started_ms
        factor, first_time = self._slowdowns.apply(1.0, at_ms)
        for index in first_time:
            self.job_manager.slowdown_met.remote(attempt_to_wire(self.attempt), index, at_ms)
        return factor

    def _work_inline(self) -> None:
        """A downstream task works on what just arrived at once, without a round through the event loop."""
        if self._running and not self.finished and not self.task.operator.is_source:
            if self._slowdown() > 1.0:
                self._wake.set()  # a slowed task works from its loop, which stretches each burst
                return
            self._work()

    async def _flush_periodically(self) -> None:
        interval = self.config.buffer_timeout_ms / 1000.0
        while not self.finished and not self.task.finished:
            await asyncio.sleep(interval)
            if self.task.finished:
                return
            try:
                self.task.flush_outputs()
                self._after_event()
            except BaseException as err:  # noqa: BLE001
                self._fail(err)
                return

    # -- what arrives --------------------------------------------------------------------------------

    async def deliver(self, *parts: bytes) -> None:
        """Channel elements in order, in one or more msgpack arrays (``messages.pack_elements``)."""
        try:
            receive_start = time.perf_counter()
            for channel, seq, backlog, element in (e for data in parts for e in decode_elements(data)):
                expected = self._expected.get(channel, 0)
                if seq != expected:
                    self._held[channel][seq] = (backlog, element)
                    continue
                self.task.on_element(channel, element, seq, backlog)
                expected += 1
                held = self._held.get(channel)
                while held and expected in held:
                    backlog, element = held.pop(expected)
                    self.task.on_element(channel, element, expected, backlog)
                    expected += 1
                self._expected[channel] = expected
            self._seconds["receive"] += time.perf_counter() - receive_start
            self._work_inline()
            self._after_event()
        except BaseException as err:  # noqa: BLE001
            self._fail(err)

    async def upstream(self, data: bytes) -> None:
        try:
            for info, kind, value in decode_upstream(data):
                if kind == CREDIT:
                    self.task.on_credit(info, value)
                elif kind == BUFFER_SIZE:
                    self.task.on_new_buffer_size(info, value)
                elif kind == ALL_RECORDS_PROCESSED:
                    self.task.on_all_records_processed(info)
                else:
                    self.task.on_resume_consumption(info)
            self._work_inline()
            self._after_event()
        except BaseException as err:  # noqa: BLE001
            self._fail(err)

    async def task_message(self, data: bytes) -> None:
        """A message of the JobMaster: a checkpoint trigger, or a completion or abort notice."""
        self._call(lambda: deliver_task_message(self.task, task_message_from_wire(data)))

    async def progress(self) -> int:
        return self.records_processed

    async def lifecycle(self) -> dict:
        """The task's ``lifecycle_report`` and what its outboxes still hold, for the report of a job that did not
        end in time."""
        outboxes = {"data_out": sum(map(len, self._data_out.values())),
                    "upstream_out": sum(map(len, self._upstream_out.values()))}
        return {"task": self.name, **(self.task.lifecycle_report() if self.task is not None else {}), **outboxes}

    def _call(self, fn) -> None:
        try:
            fn()
            self._after_event()
        except BaseException as err:  # noqa: BLE001
            self._fail(err)

    # -- what leaves ---------------------------------------------------------------------------------

    def _after_event(self) -> None:
        """Collect and send what the task's last event produced; wake the work loop."""
        self._collect()
        self._send()
        self._wake.set()

    def _collect(self) -> bool:
        """Move what the task's last step produced into the outboxes; True if that includes a channel event."""
        task = self.task
        events = False
        collect_start = time.perf_counter()
        for info, item in task.poll_sendable():
            consumer, channel = self.wiring.channel_of(self.key, info)
            self._data_out[consumer].append(element_entry(channel, item))
            if type(item.element) is Buffer:
                self.data_buffers_sent += 1
            else:
                events = True
        self._seconds["collect"] += time.perf_counter() - collect_start
        for action in task.drain_actions():
            if isinstance(action, UPSTREAM_MESSAGES):
                producer, info = self.wiring.subpartition_of(self.key, action.channel_info)
                self._upstream_out[producer].append(upstream_entry(info, action))
            elif isinstance(action, AcknowledgeCheckpoint):
                # encoded by the reporter, after this burst's data (the barrier among it) went out: Flink
                # sends the barrier on before the snapshot's asynchronous part acknowledges the checkpoint
                self._reports.put_nowait(("acknowledge", action))
            elif isinstance(action, AsyncCheckpointStarted):
                # the part runs off the task's thread: after the model's emulated remote-store time, if any
                asyncio.get_running_loop().call_later(
                    action.delay_ms / 1000, self._call,
                    lambda a=action: self.task.complete_async_part(a.checkpoint_id, a.part))
            elif isinstance(action, SyncSnapshotTaken):
                pass  # the real synchronous part took its real time on this thread
            elif isinstance(action, ReportIncompleteSnapshotStats):  # the task failed by itself (a stop-with-savepoint)
                self._reports.put_nowait(("report_incomplete_snapshot_stats", (
                    attempt_to_wire(self.attempt), incomplete_stats_to_wire(action))))
            elif isinstance(action, DeclineCheckpoint):
                self._reports.put_nowait(("decline", (
                    attempt_to_wire(self.attempt), action.checkpoint_id, action.reason.name, action.detail)))
            elif isinstance(action, TaskFinished):
                self._reports.put_nowait(("task_finished", (attempt_to_wire(self.attempt), self.records_processed)))
            elif isinstance(action, TaskFailed):
                self._fail(RuntimeError(action.cause))
            elif isinstance(action, CrashedAtProtocolPoint):
                self._reports.put_nowait(("crashed_at_protocol_point", (
                    attempt_to_wire(self.attempt), action.point.value, action.checkpoint_id)))
            else:
                raise TypeError(f"{self.name}: no way to carry out {action!r}")
        return events

    def _send(self) -> None:
        if self._data_out:
            for consumer in [c for c in self._data_out if self._in_flight[("data", c)] < DATA_CALLS_IN_FLIGHT]:
                encode_start = time.perf_counter()
                parts = pack_elements(self._data_out.pop(consumer))
                submit_start = time.perf_counter()
                self.data_bytes_sent += sum(len(part) for part in parts)
                self.data_calls_sent += 1
                self._track(("data", consumer), self.handles[consumer].deliver.remote(*parts))
                self._seconds["encode"] += submit_start - encode_start
                self._seconds["submit"] += time.perf_counter() - submit_start
        if self._upstream_out:
            for producer in [p for p in self._upstream_out if not self._in_flight[("upstream", p)]]:
                self.upstream_calls_sent += 1
                submit_start = time.perf_counter()
                entries = merge_credits(self._upstream_out.pop(producer))
                self._track(("upstream", producer), self.handles[producer].upstream.remote(pack(entries)))
                self._seconds["submit"] += time.perf_counter() - submit_start
        if self.store is not None:
            self.store.send()

    def _track(self, key: tuple, ref) -> None:
        """Count the call in flight until the receiver took it in; then send what waited for it."""
        self._in_flight[key] += 1
        # ref.future(), not ref.as_future(): Ray logs a deprecation warning on every as_future() call
        asyncio.wrap_future(ref.future()).add_done_callback(lambda _done, key=key: self._call_done(key))

    def _call_done(self, key: tuple) -> None:
        # a failed call (the receiver died) needs nothing here: the job manager fails the job over
        self._in_flight[key] -= 1
        if self._data_out or self._upstream_out:
            self._send()
        if not (self._data_out or self._upstream_out):
            self._sent.set()

    async def _drain_outboxes(self) -> None:
        """Wait until everything in the outboxes has been handed to Ray."""
        while self._data_out or self._upstream_out:
            self._sent.clear()
            await self._sent.wait()

    async def _report_in_order(self) -> None:
        while True:
            method, args = await self._reports.get()
            if self.store is not None and self.store.has_unconfirmed:
                await self.store.flush()
            if method == "acknowledge":
                args = (attempt_to_wire(self.attempt), args.checkpoint_id,
                        encode_snapshot(args.task_state_snapshot, self.key[1], args.checkpoint_id),
                        encode_metrics(args.metrics))
            getattr(self.job_manager, method).remote(*args)

    # -- failure -------------------------------------------------------------------------------------

    async def cancel(self) -> list:
        """The JobMaster cancels this attempt (a failover; Flink's ``Task.cancelExecution``): the task fails and
        stops (its run call raises), and what its closed asynchronous parts report comes back
        (``incomplete_stats_to_wire``) for the job manager to hand to the JobMaster before it kills this actor."""
        reports = self.task.fail() if self.task is not None else []
        if self._failure is None:
            self._failure = RuntimeError(f"{self.name} (attempt {self.attempt.attempt_number}) was cancelled")
        if self._running:
            self._wake.set()
        return [incomplete_stats_to_wire(r) for r in reports]

    def _fail(self, err: BaseException) -> None:
        if self._failure is None:
            self._failure = err
            if self.finished:  # no run call left to fail: tell the job manager directly
                self.job_manager.task_error.remote(attempt_to_wire(self.attempt), f"{type(err).__name__}: {err}")
        self._wake.set()

    def _raise_if_failed(self) -> None:
        if self._failure is not None:
            raise RuntimeError(f"{self.name} (attempt {self.attempt.attempt_number}) failed: "
                               f"{type(self._failure).__name__}: {self._failure}") from self._failure

