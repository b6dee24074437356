"""A Hypothesis rule-based state machine driving the coordinator as a JobManager would see it: triggers,
acknowledgements, declines, time passing, failed ``_metadata`` writes, task failovers and JobManager failovers,
for some jobs a master hook or an operator coordinator that answers later. After every step its invariants hold
(``CoordinatorMachine`` lists them): ids only grow, concurrency and retention are bounded, the store holds exactly
what the storage holds, each task hears one outcome per checkpoint, a restore picks the latest checkpoint."""

from __future__ import annotations

from coordinator_test_harness import JOB, keyed_snapshot, make
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.checkpoint_recovery import recover_completed_checkpoint_store
from barriersim.runtime.coordinator.completed_store import DefaultCompletedCheckpointStore
from barriersim.runtime.coordinator.id_counter import StandaloneCheckpointIDCounter
from barriersim.runtime.coordinator.master_hooks import MASTER_STATE_PENDING
from barriersim.runtime.coordinator.plan import JobVertexInfo
from barriersim.runtime.coordinator.properties import JobStatus
from barriersim.runtime.failure_reason import CheckpointFailureReason as R
from barriersim.runtime.storage.errors import CheckpointStorageWriteError
from barriersim.runtime.storage.memory_storage import JobManagerCheckpointStorage

VERTICES = [
    JobVertexInfo("src", 2),
    JobVertexInfo("map", 2, inputs=("src",)),
    JobVertexInfo("sink", 1, inputs=("map",)),
]
DECLINES = [R.CHECKPOINT_DECLINED, R.CHECKPOINT_ASYNC_EXCEPTION, R.CHECKPOINT_DECLINED_TASK_NOT_READY]


class LaterHook:
    """A master hook that always answers later (``MasterHookCompleted``)."""

    identifier, version = "later", 1

    def trigger_checkpoint(self, checkpoint_id, timestamp):
        return MASTER_STATE_PENDING

    def restore_checkpoint(self, checkpoint_id, data):
        pass


class CoordinatorMachine(RuleBasedStateMachine):
    """A Hypothesis rule-based state machine driving the coordinator as a JobManager would see it: triggers,
    acknowledgements (of the ended attempts too, while a failover waits for its restart), declines, time passing
    (expiry, periodic triggers), failed ``_metadata`` writes, task failover and restart after a delay, JobManager
    failover (a new coordinator recovering the completed checkpoints from the storage's completed-checkpoint list,
    with the persisted id counter), and, for some jobs, a master hook or an operator coordinator that answers each
    trigger later (or fails). After every step the invariants hold: checkpoint ids only grow (across JobManager
    failovers too), at most ``max_concurrent`` checkpoints are pending, completed ids only grow, the store retains at
    most ``max_retained`` checkpoints and exactly what the storage holds, a failed write never reaches the store, each
    task hears at most one outcome per checkpoint, a restore picks the store's latest checkpoint, and a trigger in
    flight belongs to a live pending checkpoint whose tasks have not been triggered yet (or to one aborted meanwhile,
    whose trigger fails at the timer's next turn, as in Flink)."""

    @initialize(
        max_concurrent=st.integers(1, 3),
        max_retained=st.integers(1, 3),
        interval=st.sampled_from([10, 30]),
        timeout=st.sampled_from([15, 60]),
        tolerable=st.sampled_from([0, 2, 2**31 - 1]),
        answers_later=st.sampled_from(["nothing", "master hook", "operator coordinator"]),
    )
    def start(self, max_concurrent, max_retained, interval, timeout, tolerable, answers_later):
        self.config = dict(
            max_concurrent_checkpoints=max_concurrent,
            max_retained_checkpoints=max_retained,
            checkpoint_interval=interval,
            checkpoint_timeout=timeout,
            tolerable_checkpoint_failure_number=tolerable,
        )
        self.answers_later = answers_later
        self.storage = JobManagerCheckpointStorage(JOB)
        self.counter = StandaloneCheckpointIDCounter()
        self.failing_writes: set[int] = set()
        self.triggered: list[int] = []
        self.completed: list[int] = []
        self.failed_writes: list[int] = []
        self.outcomes: set[tuple] = set()
        self.generation = 0
        self.restart_due = False
        self.h = self.new_coordinator(store=DefaultCompletedCheckpointStore(max_retained, self.storage))
        self.carry_out(self.h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING)))

    def new_coordinator(self, **kw):
        return make(
            VERTICES,
            checkpoint_writer=self.write,
            id_counter=self.counter,
            hooks=(LaterHook(),) if self.answers_later == "master hook" else (),
            operator_coordinators=("src",) if self.answers_later == "operator coordinator" else (),
            **kw,
            **self.config,
        )

    # -- the JobManager's side ---------------------------------------------------------------------

    def write(self, metadata, is_savepoint):
        if metadata.checkpoint_id in self.failing_writes:
            self.failed_writes.append(metadata.checkpoint_id)
            raise CheckpointStorageWriteError(f"checkpoint {metadata.checkpoint_id}: injected")
        return self.storage.persist_checkpoint(metadata, is_savepoint=is_savepoint)

    def carry_out(self, actions):
        actions = list(actions) + self.h.sink
        self.h.sink.clear()
        for a in actions:
            if isinstance(a, m.TriggerCheckpointOnSources):
                assert all(a.checkpoint_id > t for t in self.triggered), (a.checkpoint_id, self.triggered)
                self.triggered.append(a.checkpoint_id)
            elif isinstance(a, (m.NotifyCheckpointComplete, m.NotifyCheckpointAborted)):
                key = (self.generation, a.task, a.checkpoint_id)
                assert key not in self.outcomes, f"a second outcome of checkpoint {a.checkpoint_id} for {a.task}"
                self.outcomes.add(key)
            elif isinstance(a, m.TriggerRequestCompleted):
                self.completed.append(a.checkpoint_id)
            elif isinstance(a, m.DiscardCheckpoint):
                self.storage.discard_checkpoint(a.checkpoint_id)
            elif isinstance(a, m.RestoreFrom):
                assert a.checkpoint_id == (self.h.coord.completed_checkpoint_store().get_latest_checkpoint_id() or None)
            elif isinstance(a, m.FailJob):
                self.fail_over()

    def fail_over(self):
        """A task fails: the attempts end; the new ones come with the restart, after the delay (``tasks_restart``)."""
        first = self.h.all_attempts[0]
        self.carry_out(self.h.coord.handle(m.TaskFailed(first, "failover")))
        self.restart_due = True

    # -- rules ---------------------------------------------------------------------------------------

    @rule()
    def trigger(self):
        self.carry_out(self.h.trigger())

    @rule(pick=st.integers(0, 10), task=st.integers(0, 4))
    def acknowledge(self, pick, task):
        if self.h.pending_ids:
            cid = self.h.pending_ids[pick % len(self.h.pending_ids)]
            attempt = self.h.all_attempts[task]
            self.carry_out(self.h.ack(attempt, cid, keyed_snapshot(attempt.vertex_id)))

    @rule(pick=st.integers(0, 10), fail_write=st.booleans())
    def acknowledge_all(self, pick, fail_write):
        if self.h.pending_ids:
            cid = self.h.pending_ids[pick % len(self.h.pending_ids)]
            if fail_write:
                self.failing_writes.add(cid)
            for attempt in self.h.all_attempts:
                if cid in self.h.coord.pending_checkpoints():
                    self.carry_out(self.h.ack(attempt, cid, keyed_snapshot(attempt.vertex_id)))

    @rule(pick=st.integers(0, 10), task=st.integers(0, 4), reason=st.sampled_from(DECLINES))
    def decline(self, pick, task, reason):
        if self.h.pending_ids:
            cid = self.h.pending_ids[pick % len(self.h.pending_ids)]
            self.carry_out(self.h.decline(self.h.all_attempts[task], cid, reason))

    @rule(ms=st.integers(1, 50))
    def time_passes(self, ms):
        self.h.timers.advance(ms)
        self.carry_out([])

    @rule(fail_write=st.booleans())
    def trigger_and_complete(self, fail_write):
        before = len(self.triggered)
        self.trigger()
        if len(self.triggered) > before:
            cid = self.triggered[-1]
            if fail_write:
                self.failing_writes.add(cid)
            for attempt in self.h.all_attempts:
                if cid in self.h.coord.pending_checkpoints():
                    self.carry_out(self.h.ack(attempt, cid, keyed_snapshot(attempt.vertex_id)))

    @rule(fail=st.booleans())
    def the_trigger_in_flight_gets_its_answer(self, fail):
        """The master hook or operator coordinator answers the checkpoint being triggered (or fails)."""
        triggering = self.h.coord.trigger_in_flight()
        if triggering is None:
            return
        cid = triggering.pending.checkpoint_id
        if self.answers_later == "master hook":
            event = m.MasterHookCompleted(cid, "later", b"state", "by design" if fail else None)
        else:
            event = (
                m.CoordinatorCheckpointFailed(cid, "src", "by design")
                if fail
                else m.AcknowledgeCoordinatorState(cid, "src", b"state")
            )
        self.carry_out(self.h.coord.handle(event))

    @rule(restart=st.booleans())
    def task_fails(self, restart):
        self.fail_over()
        if restart:
            self.tasks_restart()

    @rule()
    def tasks_restart(self):
        """The restart delay passed: new attempts (if a failover waits for them), deployed and running."""
        if self.restart_due:
            self.restart_due = False
            self.carry_out(self.h.coord.handle(m.RestartTasks()))
        for attempt in self.h.all_attempts:
            self.carry_out(self.h.coord.handle(m.TaskRunning(attempt)))

    @precondition(lambda self: self.generation < 3)
    @rule()
    def jobmanager_fails_over(self):
        """The old coordinator vanishes (nothing of it runs again); a new one recovers from storage."""
        old = self.h
        recovered = recover_completed_checkpoint_store(JOB, self.storage, old.coord.config)
        assert list(recovered.recovered_ids) == [
            c.checkpoint_id for c in old.coord.completed_checkpoint_store().get_all_checkpoints()
        ]
        first_attempt = 1 + max(a.attempt_number for a in old.all_attempts)
        self.generation += 1
        self.restart_due = False  # the new coordinator's attempts are new
        self.h = self.new_coordinator(store=recovered.store, first_attempt_number=first_attempt, tasks_running=False)
        self.h.call(m.RestoreLatestCheckpoint())
        self.carry_out(self.h.take())
        self.carry_out(self.h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING)))
        assert all(a.attempt_number == first_attempt for a in self.h.all_attempts)
        self.tasks_restart()  # the new attempts are deployed

    # -- invariants ----------------------------------------------------------------------------------

    @invariant()
    def at_most_max_concurrent_pending(self):
        assert self.h.coord.number_of_pending_checkpoints <= self.config["max_concurrent_checkpoints"]

    @invariant()
    def completed_ids_only_grow(self):
        assert self.completed == sorted(set(self.completed))

    @invariant()
    def the_store_retains_at_most_max_retained_and_what_storage_holds(self):
        stored = [c.checkpoint_id for c in self.h.coord.completed_checkpoint_store().get_all_checkpoints()]
        assert len(stored) <= self.config["max_retained_checkpoints"]
        assert sorted(loc.checkpoint_id for loc in self.storage.list_retained_checkpoints()) == stored
        assert [p.checkpoint_id for p in self.storage.completed_checkpoint_pointers() or ()] == stored
        assert not set(stored) & set(self.failed_writes)

    @invariant()
    def a_trigger_in_flight_belongs_to_a_live_checkpoint_not_yet_triggered(self):
        """... or to one aborted meanwhile, whose trigger fails at the timer's next turn (Flink's
        ``onTriggerFailure``, run by the trigger's future on the timer thread)."""
        triggering = self.h.coord.trigger_in_flight()
        if triggering is not None:
            cid = triggering.pending.checkpoint_id
            assert cid not in self.triggered
            if triggering.failure is not None:
                assert triggering.pending.is_disposed and cid not in self.h.coord.pending_checkpoints()
            else:
                assert self.h.coord.pending_checkpoints().get(cid) is triggering.pending
                assert not triggering.pending.is_disposed

    @invariant()
    def the_next_id_is_above_every_id_used(self):
        assert all(self.counter.get() > t for t in self.triggered)


TestCoordinatorMachine = CoordinatorMachine.TestCase
TestCoordinatorMachine.settings = settings(
    max_examples=40,
    stateful_step_count=40,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
