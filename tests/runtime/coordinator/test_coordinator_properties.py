"""Hypothesis properties of the coordinator under random sequences of triggers, acknowledgements, declines,
time passing (expiry, periodic triggers) and failovers."""

from __future__ import annotations

from collections import Counter

from coordinator_test_harness import keyed_snapshot, make
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from barriersim.runtime.coordinator import messages as m
from barriersim.runtime.coordinator.plan import JobVertexInfo
from barriersim.runtime.coordinator.properties import JobStatus
from barriersim.runtime.events import CheckpointType
from barriersim.runtime.failure_reason import CheckpointFailureReason as R

DECLINE_REASONS = [
    R.CHECKPOINT_DECLINED,
    R.CHECKPOINT_ASYNC_EXCEPTION,
    R.CHECKPOINT_DECLINED_SUBSUMED,
    R.CHECKPOINT_DECLINED_TASK_NOT_READY,
    R.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER,
]

op = st.one_of(
    st.tuples(
        st.just("trigger"), st.sampled_from([CheckpointType.CHECKPOINT] * 4 + [CheckpointType.SAVEPOINT]), st.booleans()
    ),
    st.tuples(st.just("ack"), st.integers(0, 5), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("ack"), st.integers(0, 5), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("decline"), st.integers(0, 5), st.integers(0, 3), st.sampled_from(DECLINE_REASONS)),
    st.tuples(st.just("ack_all"), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("ack_all"), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("advance"), st.integers(1, 40)),
    st.tuples(st.just("fail"), st.integers(0, 5)),
)

config = st.fixed_dictionaries(
    {
        "max_concurrent_checkpoints": st.integers(1, 3),
        "min_pause_between_checkpoints": st.sampled_from([0, 5, 25]),
        "checkpoint_timeout": st.sampled_from([15, 60, 200]),
        "checkpoint_interval": st.sampled_from([10, 30, 2**63 - 1]),
        "tolerable_checkpoint_failure_number": st.sampled_from([-1, 2, 2**31 - 1]),
        "max_retained_checkpoints": st.integers(1, 3),
    }
)


def run(cfg: dict, ops: list, seed: int, use_savepoints: bool):
    h = make(
        [JobVertexInfo("src", 2), JobVertexInfo("map", 2, inputs=("src",)), JobVertexInfo("sink", 1, inputs=("map",))],
        seed=seed,
        **cfg,
    )
    log: list = []
    max_pending_checkpoints = 0
    max_pending_total = 0

    def record(actions):
        log.extend(actions)
        log.extend(h.sink)
        h.sink.clear()

    record(h.coord.handle(m.JobStatusChanged(JobStatus.RUNNING)))
    stale = []
    for step in ops:
        kind = step[0]
        attempts = h.all_attempts
        ids = sorted(h.coord.pending_checkpoints()) or [1]
        if kind == "trigger":
            ctype = step[1] if use_savepoints else CheckpointType.CHECKPOINT
            record(h.coord.handle(m.TriggerRequest(ctype, is_periodic=step[2] and ctype is CheckpointType.CHECKPOINT)))
        elif kind == "ack":
            task = (attempts + stale)[step[1] % len(attempts + stale)]
            cid = ids[step[2] % len(ids)] if step[2] < 3 else ids[-1] + 1
            state = keyed_snapshot(task.vertex_id) if step[3] else None
            record(h.ack(task, cid, state))
        elif kind == "ack_all":  # every current task acknowledges one checkpoint (reversed order on True)
            cid = ids[step[1] % len(ids)]
            for task in reversed(attempts) if step[2] else attempts:
                record(h.ack(task, cid, keyed_snapshot(task.vertex_id)))
        elif kind == "decline":
            task = (attempts + stale)[step[1] % len(attempts + stale)]
            cid = ids[step[2] % len(ids)] if step[2] < 3 else ids[0] - 1
            record(h.decline(task, cid, step[3]))
        elif kind == "advance":
            h.timers.advance(step[1])
            record([])
        else:
            stale.append(attempts[step[1] % len(attempts)])
            record(h.coord.handle(m.TaskFailed(attempts[step[1] % len(attempts)])))
            record(h.coord.handle(m.RestartTasks()))
            for a in h.all_attempts:
                record(h.coord.handle(m.TaskRunning(a)))
        pending = list(h.coord.pending_checkpoints().values())
        max_pending_checkpoints = max(max_pending_checkpoints, sum(1 for p in pending if not p.props.is_savepoint))
        max_pending_total = max(max_pending_total, len(pending))
    return h, log, max_pending_checkpoints, max_pending_total


def check_invariants(h, log, cfg, max_pending_checkpoints, max_pending_total, use_savepoints):
    triggered = [a.checkpoint_id for a in log if isinstance(a, m.TriggerCheckpointOnSources)]
    assert triggered == sorted(set(triggered)), "checkpoint ids are handed out in increasing order, once"
    completed = [a.metadata.checkpoint_id for a in log if isinstance(a, m.PersistCheckpoint)]
    completed_checkpoints = [
        a.metadata.checkpoint_id for a in log if isinstance(a, m.PersistCheckpoint) and not a.is_savepoint
    ]
    assert completed_checkpoints == sorted(completed_checkpoints), "checkpoints complete in increasing id order"
    failed = [a.checkpoint_id for a in log if isinstance(a, m.TriggerRequestFailed) and a.checkpoint_id is not None]
    ends = Counter(completed + failed)
    assert all(n == 1 for n in ends.values()), f"a checkpoint ended more than once: {ends}"
    assert set(ends) | set(h.coord.pending_checkpoints()) == set(triggered)
    assert not set(ends) & set(h.coord.pending_checkpoints()), "an ended checkpoint is still pending"
    assert max_pending_checkpoints <= cfg["max_concurrent_checkpoints"]
    if not use_savepoints:
        assert max_pending_total <= cfg["max_concurrent_checkpoints"]
    aborts = Counter((a.task, a.checkpoint_id) for a in log if isinstance(a, m.NotifyCheckpointAborted))
    assert all(n == 1 for n in aborts.values()), "a task got two abort notices for one checkpoint"
    completes = {(a.task, a.checkpoint_id) for a in log if isinstance(a, m.NotifyCheckpointComplete)}
    assert not completes & set(aborts), "a task was told a checkpoint both completed and aborted"
    stats = h.coord.checkpoint_counts()
    assert stats["in_progress"] == len(h.coord.pending_checkpoints())
    assert stats["completed"] == len(completed)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cfg=config, ops=st.lists(op, max_size=60), seed=st.integers(0, 3))
def test_random_checkpoint_traffic_keeps_the_coordinator_invariants(cfg, ops, seed):
    h, log, mpc, mpt = run(cfg, ops, seed, use_savepoints=False)
    check_invariants(h, log, cfg, mpc, mpt, use_savepoints=False)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cfg=config, ops=st.lists(op, max_size=60), seed=st.integers(0, 3))
def test_random_traffic_with_savepoints_keeps_the_coordinator_invariants(cfg, ops, seed):
    h, log, mpc, mpt = run(cfg, ops, seed, use_savepoints=True)
    check_invariants(h, log, cfg, mpc, mpt, use_savepoints=True)


@settings(max_examples=60, deadline=None)
@given(cfg=config, ops=st.lists(op, max_size=40), seed=st.integers(0, 3))
def test_same_seed_and_events_give_the_same_actions(cfg, ops, seed):
    _, log1, _, _ = run(cfg, ops, seed, use_savepoints=True)
    _, log2, _, _ = run(cfg, ops, seed, use_savepoints=True)
    assert log1 == log2
