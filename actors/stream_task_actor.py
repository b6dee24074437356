"""One subtask of a job as a Ray actor driving a sans-IO ``runtime.task.stream_task.StreamTask`` on a task thread of
its own, as Flink's ``StreamTask`` runs on its task thread with a mailbox (``actors.mailbox``).

Its Ray methods only put mails (elements, upstream credit and buffer sizes, the JobMaster's messages) into the
task's ``TaskMailbox``; the task thread takes them in order, runs due timers and does the task's work in bursts
between them; what the task hands out leaves in one Ray call (or one socket write to a peer on the same node) per
outbox (``actors.outboxes``). Acknowledgements go to the job manager actor from a reporter thread
(``actors.reporter``). Any error in the task fails the actor's ``run`` call, a task failure for the job manager.
No protocol rule lives here; how it works in detail: docs/architecture.md, "The task actor"."""

from __future__ import annotations

import dataclasses
import functools
import random
import threading
import time
from collections import defaultdict

import ray

from barriersim.actors.clock import now_ms
from barriersim.actors.external_store import RemoteExternalStore
from barriersim.actors.mailbox import MailboxTimers, TaskMailbox
from barriersim.actors.messages import (
    ALL_RECORDS_PROCESSED,
    BUFFER_SIZE,
    CREDIT,
    attempt_to_wire,
    decode_elements,
    decode_snapshot,
    decode_split,
    decode_upstream,
    incomplete_stats_to_wire,
    task_message_from_wire,
)
from barriersim.actors.outboxes import CallKey, Outboxes
from barriersim.actors.reporter import Reporter
from barriersim.actors.socket_links import DATA, TASK_MESSAGE, UPSTREAM, SocketLinks
from barriersim.runtime.checkpoint_cost import Charging
from barriersim.runtime.job.actions import TaskDeploymentDescriptor
from barriersim.runtime.job.config import JobConfig
from barriersim.runtime.job.deployment import deliver_task_message, deploy_task
from barriersim.runtime.job.slowdowns import Slowdowns
from barriersim.runtime.job.wiring import Wiring
from barriersim.runtime.network.input.input_channel import UPSTREAM_MESSAGES
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
from barriersim.runtime.task.stream_task import StepOutcome, StreamTask

BURST_SECONDS = 0.005  # how long the task works before it sends its outboxes and takes its mails
RAY_THREADS = (
    8  # Ray's threads for the actor's methods: one is held by run for the task's life, the rest only put mails
)
ANSWER_TIMEOUT_S = 8.0  # for the task thread to answer a cancel or a lifecycle question (the job manager waits 10 s)


@ray.remote(num_cpus=0.01, max_concurrency=RAY_THREADS)  # type: ignore[call-overload]  # Ray's stubs: no actor options
class StreamTaskActor:
    def __init__(
        self,
        config: JobConfig,
        descriptor: TaskDeploymentDescriptor,
        seed: int,
        splits: dict | None,
        snapshot: bytes | None,
        store,
        job_manager,
    ):
        """``descriptor`` comes without its state, which travels as ``snapshot`` (msgpack); a source gets the
        object references of the splits it reads (split id -> msgpack records or an Arrow table), read in
        ``connect``, so that the actor is created before its splits exist (``actors.workload_handoff``)."""
        self.config = config
        self.descriptor = descriptor
        self.name = descriptor.name
        self.key = descriptor.key
        self.attempt = descriptor.attempt
        self.seed = seed
        self.source_rate = config.workload.rate_per_source if config.graph.vertex(self.key[0]).operator.is_source else 0
        self._split_refs = splits
        self._snapshot = snapshot
        self.store = (
            RemoteExternalStore(store, f"{self.name}@{self.attempt.attempt_number}") if store is not None else None
        )
        self.job_manager = job_manager
        self.task: StreamTask | None = None
        self._mailbox = TaskMailbox()
        self._links = SocketLinks(self.name, self._on_link_value, self._sent)
        self._outboxes = Outboxes(self.key, Wiring(config.graph), self._links, self._sent)
        self._timers = MailboxTimers()
        self._reporter = Reporter(job_manager, self._links, self.store, self.attempt, self._fail_later)
        self._expected: dict = {}
        self._held: dict = defaultdict(dict)
        self._failure: BaseException | None = None
        self.records_processed = 0
        # where the task thread spends its time (perf_counter seconds): the task's steps, taking in what arrived
        # (decoding it and handing it to the task), collecting what leaves (each element's wire form); packing and
        # submitting calls: the outboxes' seconds
        self._seconds = {"steps": 0.0, "receive": 0.0, "collect": 0.0}
        self.steps = 0
        self.waits = 0
        self.finished = False
        self._running = False
        self._work_pending = False  # something happened since the task last had nothing to do
        self._work_resumes_at = 0.0  # time.monotonic() before which the task does no work (pacing, a slowdown)
        self._burst_seconds = 0.0
        self._burst_start_ms = 0.0  # on the job's clock
        self._slowdowns = Slowdowns(descriptor.slowdowns)
        self._last_record_ms: int | None = None  # when the task last processed a record (wall clock)
        self._run_ended = threading.Event()  # the task finished and its outboxes went to Ray, or it failed
        self._run_result: dict = {}  # set when the run ended without a failure

    # -- setup ---------------------------------------------------------------------------------------

    def connect(self, handles: dict, link_secret: bytes | None = None) -> dict:
        """Build the task, restore its state, learn every peer's handle, and start the task thread; with
        ``link_secret``, listen for the links of peers on this node (``actors.socket_links``; the address is
        returned as ``link_address``)."""
        self._outboxes.connect(handles)
        restore = dataclasses.replace(self.descriptor, state=decode_snapshot(self._snapshot, self.key[1]))
        splits = None
        if self._split_refs is not None:
            ids = list(self._split_refs)
            splits = {sid: decode_split(d) for sid, d in zip(ids, ray.get([self._split_refs[sid] for sid in ids]))}
        self.task, restored = deploy_task(
            self.config,
            restore,
            clock=now_ms,
            timer_service=self._timers,
            rng=random.Random(self.seed),
            charging=Charging.REAL_TIME,
            cost_rng=random.Random(self.seed ^ 0x5EED),
            splits=splits,
            store=self.store,
        )  # no wakeup: a timer that fired is an event of the task thread's loop
        self._split_refs = None
        # a source's offset as restored: where the run's progress starts when this is its first deployment
        connected = {
            **restored,
            "ray_node_id": ray.get_runtime_context().get_node_id(),
            "records_read": self._records_read(),
            "link_address": self._links.listen(link_secret) if link_secret is not None else None,
        }
        threading.Thread(target=self._task_thread, name=f"task {self.name}", daemon=True).start()
        self._reporter.start(f"reporter {self.name}")
        return connected

    def connect_links(self, addresses: dict, secret: bytes) -> None:
        """Links to these peers on this actor's Ray node (peer -> its listening address; ``actors.socket_links``),
        which carry what ``deliver`` and ``upstream`` calls to them would; the peer ``JOB_MANAGER``'s carries the
        reports the job manager's methods would get as calls."""
        self._links.connect_to(addresses, secret)

    def accept_links(self, count: int) -> None:
        """Accept the links of the ``count`` peers that write to this actor, and read them."""
        self._links.accept(count)

    @property
    def _task(self) -> StreamTask:
        """The task ``connect`` built: the task thread, and the mails it takes, run only after that."""
        if self.task is None:
            raise RuntimeError(f"{self.name}: no task before connect")
        return self.task

    def _records_read(self) -> int | None:
        """How far a source's reader got (its split offsets, in records); None for a task that is not a source."""
        return self._task.source_records_read()

    # -- the task thread -----------------------------------------------------------------------------

    def run(self, job_started_ms: int) -> dict:
        """Start the task and wait until it finishes; ``job_started_ms``: time 0 of the job's clock (the fault
        schedule's)."""
        self._mailbox.put(lambda: self._start(job_started_ms))
        self._run_ended.wait()
        if self._failure is not None:
            raise RuntimeError(
                f"{self.name} (attempt {self.attempt.attempt_number}) failed: "
                f"{type(self._failure).__name__}: {self._failure}"
            ) from self._failure
        return self._run_result

    def _start(self, job_started_ms: int) -> None:
        self._job_started_ms = job_started_ms
        self._started = time.monotonic()
        self._cpu_started = time.process_time()
        self._thread_cpu_started = time.thread_time()
        self._running = self._work_pending = True
        self._timers.call_later(self.config.network.buffer_timeout_ms / 1000.0, self._flush_periodically)

    def _task_thread(self) -> None:
        """Take the mails, run the timers due, work, send; wait for a mail or a timer when there is nothing to do."""
        mailbox, timers = self._mailbox, self._timers
        while True:
            events = mailbox.take(self._seconds_to_wait())
            events += timers.due()
            for event in events:
                self._guarded(event)
            if events:
                self._work_pending = True
            if self._may_work():
                self._guarded(self._work_and_pace)
            self._guarded(self._collect_and_send)
            if (
                self._running
                and not self._run_ended.is_set()
                and (self._failure is not None or (self.finished and self._outboxes.is_empty()))
            ):
                self._end_run()

    def _collect_and_send(self) -> None:
        self._collect()
        self._send()

    def _has_work(self) -> bool:
        """The task runs, something happened since it last had nothing to do, and it has neither finished nor failed."""
        return self._running and self._work_pending and not self.finished and self._failure is None

    def _seconds_to_wait(self) -> float | None:
        wait = None
        if self._has_work():
            wait = max(0.0, self._work_resumes_at - time.monotonic())
        timer = self._timers.seconds_to_next()
        if timer is not None and (wait is None or timer < wait):
            wait = timer
        return wait

    def _may_work(self) -> bool:
        return self._has_work() and time.monotonic() >= self._work_resumes_at

    def _work_and_pace(self) -> None:
        """A burst of work, then when the next may start: at once, after a paced source's next record is due, or
        after a slowed task's extra time; a task with nothing to do waits for something to happen."""
        outcome = self._work()
        if self.finished:
            return
        now = time.monotonic()
        slowed = self._slowed_seconds()
        if outcome is StepOutcome.PROCESSED:
            pace = self._task.is_source() and self.source_rate
            delay = self._started + self.records_processed / self.source_rate - now if pace else 0.0
            self._work_resumes_at = now + max(0.0, delay, slowed)
        else:
            self._work_resumes_at = now + slowed
            self._work_pending = False
            self.waits += 1

    def _end_run(self) -> None:
        if self._failure is None:
            last = None if self._last_record_ms is None else self._last_record_ms - self._job_started_ms
            self._run_result = {
                "task": self.name,
                "records": self.records_processed,
                "steps": self.steps,
                "waits": self.waits,
                "records_read": self._records_read(),
                "last_record_at_ms": last,
                "cpu_seconds": time.process_time() - self._cpu_started,
                "thread_cpu_seconds": time.thread_time() - self._thread_cpu_started,
                **{f"{name}_seconds": value for name, value in {**self._seconds, **self._outboxes.seconds}.items()},
                **self._outboxes.counts(),
            }
        self._run_ended.set()

    def _work(self) -> StepOutcome:
        """Call ``process_next()`` while it returns PROCESSED, for at most ``BURST_SECONDS`` (one step for a
        paced source), collecting what each step produced."""
        task = self._task
        burst_start = time.monotonic()
        self._burst_start_ms = now_ms() - self._job_started_ms
        burst_end = burst_start + BURST_SECONDS
        one_step = task.is_source() and self.source_rate
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

    def _slowed_seconds(self) -> float:
        """The time the fault schedule's slowdowns add to the last burst: only its part inside a slowdown's window
        is slowed (``runtime.job.slowdowns``); a slowdown met for the first time is reported for the run's fault
        log."""
        if not self._slowdowns:
            return 0.0
        start, work = self._burst_start_ms, self._burst_seconds * 1000
        took = self._slowdowns.stretch(start, work)
        for index, at_ms in self._slowdowns.met(start, start + took):
            self.job_manager.slowdown_met.remote(attempt_to_wire(self.attempt), index, at_ms)
        return max(0.0, took - work) / 1000

    def _flush_periodically(self) -> None:
        if self.finished or self._task.finished or self._failure is not None:
            return
        self._task.flush_outputs()
        self._timers.call_later(self.config.network.buffer_timeout_ms / 1000.0, self._flush_periodically)

    def _guarded(self, fn) -> None:
        try:
            fn()
        except BaseException as err:  # noqa: BLE001 - the task fails; its run call raises
            self._fail(err)

    # -- what arrives (Ray's threads: each a mail) ---------------------------------------------------

    def deliver(self, *parts: bytes) -> None:
        """Channel elements in order, in one or more msgpack arrays (``messages.pack_elements``)."""
        self._mailbox.put(lambda: self._take_in(parts))

    def _take_in(self, parts: tuple) -> None:
        receive_start = time.perf_counter()
        task, held_by_channel, expected_by_channel = self._task, self._held, self._expected
        for channel, seq, backlog, element in (e for data in parts for e in decode_elements(data)):
            expected = expected_by_channel.get(channel, 0)
            if seq != expected:
                held_by_channel[channel][seq] = (backlog, element)
                continue
            task.on_element(channel, element, seq, backlog)
            expected += 1
            held = held_by_channel.get(channel)
            while held and expected in held:
                backlog, element = held.pop(expected)
                task.on_element(channel, element, expected, backlog)
                expected += 1
            expected_by_channel[channel] = expected
        self._seconds["receive"] += time.perf_counter() - receive_start

    def upstream(self, data: bytes) -> None:
        self._mailbox.put(lambda: self._take_upstream(data))

    def _on_link_value(self, kind: int, payload) -> None:
        """What a peer wrote to its link to this actor: a ``deliver``, an ``upstream`` or (from the job manager) a
        ``task_message`` call's arguments, taken in as those calls are (the links' reader thread)."""
        if kind == DATA:
            self.deliver(*payload)
        elif kind == UPSTREAM:
            self.upstream(payload)
        elif kind == TASK_MESSAGE:
            self.task_message(payload)
        else:
            self._mailbox.put(lambda: self._fail(ValueError(f"{self.name}: a link value of unknown kind {kind!r}")))

    def _sent(self, key: CallKey) -> None:
        """A call to the peer of ``key`` completed, or its link's value was written (any thread): a mail."""
        self._mailbox.put(lambda: self._outboxes.call_done(key))

    def _take_upstream(self, data: bytes) -> None:
        task = self._task
        for info, kind, value in decode_upstream(data):
            if kind == CREDIT:
                task.on_credit(info, value)
            elif kind == BUFFER_SIZE:
                task.on_new_buffer_size(info, value)
            elif kind == ALL_RECORDS_PROCESSED:
                task.on_all_records_processed(info)
            else:
                task.on_resume_consumption(info)

    def task_message(self, data: bytes) -> None:
        """A message of the JobMaster: a checkpoint trigger, or a completion or abort notice."""
        self._mailbox.put(lambda: deliver_task_message(self._task, task_message_from_wire(data)))

    def progress(self) -> int:
        return self.records_processed

    def lifecycle(self) -> dict:
        """The task's ``lifecycle_report`` and what its outboxes still hold, for the report of a job that did not
        end in time."""

        def report() -> dict:
            task = self.task.lifecycle_report() if self.task is not None else {}
            return {"task": self.name, **task, **self._outboxes.sizes()}

        if self.task is None:
            return report()
        try:
            return self._mailbox.call(report, ANSWER_TIMEOUT_S)
        except TimeoutError:
            return {"task": self.name, "error": f"the task thread did not answer within {ANSWER_TIMEOUT_S:g} s"}

    # -- what leaves ---------------------------------------------------------------------------------

    def _collect(self) -> bool:
        """Move what the task's last step produced into the outboxes; True if that includes a channel event."""
        task = self.task
        if task is None:
            return False
        collect_start = time.perf_counter()
        events = self._outboxes.add_elements(task.poll_sendable())
        self._seconds["collect"] += time.perf_counter() - collect_start
        for action in task.drain_actions():
            if isinstance(action, UPSTREAM_MESSAGES):
                self._outboxes.add_upstream(action)
            elif isinstance(action, AcknowledgeCheckpoint):
                # encoded by the reporter, after this burst's data (the barrier among it) went out: Flink
                # sends the barrier on before the snapshot's asynchronous part acknowledges the checkpoint
                self._reporter.report("acknowledge", action)
            elif isinstance(action, AsyncCheckpointStarted):
                # the part runs off the task's work: after the model's emulated remote-store time, if any
                self._timers.call_later(
                    action.delay_ms / 1000,
                    functools.partial(task.complete_async_part, action.checkpoint_id, action.part),
                )
            elif isinstance(action, SyncSnapshotTaken):
                pass  # the real synchronous part took its real time on this thread
            elif isinstance(action, ReportIncompleteSnapshotStats):  # the task failed by itself (a stop-with-savepoint)
                self._reporter.report(
                    "report_incomplete_snapshot_stats",
                    (attempt_to_wire(self.attempt), incomplete_stats_to_wire(action)),
                )
            elif isinstance(action, DeclineCheckpoint):
                self._reporter.report(
                    "decline", (attempt_to_wire(self.attempt), action.checkpoint_id, action.reason.name, action.detail)
                )
            elif isinstance(action, TaskFinished):
                self._reporter.report("task_finished", (attempt_to_wire(self.attempt), self.records_processed))
            elif isinstance(action, TaskFailed):
                self._fail(RuntimeError(action.cause))
            elif isinstance(action, CrashedAtProtocolPoint):
                self._reporter.report(
                    "crashed_at_protocol_point",
                    (attempt_to_wire(self.attempt), action.point.value, action.checkpoint_id),
                )
            else:
                raise TypeError(f"{self.name}: no way to carry out {action!r}")
        return events

    def _send(self) -> None:
        self._outboxes.send()
        if self.store is not None:
            self.store.send()

    # -- failure -------------------------------------------------------------------------------------

    def cancel(self) -> list:
        """The JobMaster cancels this attempt (a failover; Flink's ``Task.cancelExecution``): the task fails and
        stops (its run call raises), and what its closed asynchronous parts report comes back
        (``incomplete_stats_to_wire``) for the job manager to hand to the JobMaster before it kills this actor."""
        task = self.task
        if task is None:
            return []

        def cancel_now() -> list:
            reports = task.fail()
            if self._failure is None:
                self._failure = RuntimeError(f"{self.name} (attempt {self.attempt.attempt_number}) was cancelled")
            self._links.close()
            return [incomplete_stats_to_wire(r) for r in reports]

        try:
            return self._mailbox.call(cancel_now, ANSWER_TIMEOUT_S)
        except TimeoutError:
            return []

    def _fail_later(self, err: BaseException) -> None:
        """``_fail`` on the task thread (any thread): a mail."""
        self._mailbox.put(functools.partial(self._fail, err))

    def _fail(self, err: BaseException) -> None:
        if self._failure is None:
            self._failure = err
            if self._run_ended.is_set():  # no run call left to fail: tell the job manager directly
                self.job_manager.task_error.remote(attempt_to_wire(self.attempt), f"{type(err).__name__}: {err}")
