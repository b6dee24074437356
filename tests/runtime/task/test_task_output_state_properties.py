"""Hypothesis property of a source task's checkpoints end to end: coordinator, result partition, channel
state writer and reader.

Over random interleavings of records, flushes, credits, sends, resumes, checkpoints (aligned, unaligned,
timeoutable) and time passing (alignment timeouts): every checkpoint is acknowledged exactly once, and for
each one and each subpartition, what the receiver got before the barrier plus the output channel state
restored from the acknowledged snapshot is exactly the data produced before the barrier, in order, without
loss or duplicate; restoring it into a fresh partition hands those buffers out first, in order.
"""

from hypothesis import given, settings
from hypothesis import strategies as st

from barriersim.runtime.channel_state.reader import SequentialChannelStateReader
from barriersim.runtime.events import Buffer, CheckpointBarrier, CheckpointOptions, CheckpointType
from barriersim.runtime.network.output.result_partition import ResultPartition
from barriersim.runtime.state.snapshot import OperatorSubtaskState
from barriersim.runtime.task.actions import AcknowledgeCheckpoint
from barriersim.runtime.task.subtask_checkpoint_coordinator import SubtaskCheckpointCoordinator

N_SUB = 2


class _Clock:
    now = 0

    def __call__(self):
        return self.now


class _Timers:
    def __init__(self):
        self.timers = []

    def register_timer(self, at_ms, callback):
        entry = [at_ms, callback, True]
        self.timers.append(entry)

        class _H:
            def cancel(self_inner):
                entry[2] = False

        return _H()

    def fire_until(self, now):
        for entry in sorted(self.timers, key=lambda e: e[0]):
            if entry[0] <= now and entry[2]:
                entry[2] = False
                entry[1]()


ops = st.lists(
    st.one_of(
        st.tuples(st.just("emit"), st.integers(0, N_SUB - 1), st.integers(1, 60)),
        st.tuples(st.just("flush"), st.integers(0, N_SUB - 1), st.just(0)),
        st.tuples(st.just("credit"), st.integers(0, N_SUB - 1), st.integers(1, 3)),
        st.tuples(st.just("send"), st.integers(0, N_SUB - 1), st.integers(1, 4)),
        st.tuples(st.just("resume"), st.integers(0, N_SUB - 1), st.just(0)),
        st.tuples(st.just("checkpoint"), st.sampled_from(["aligned", "unaligned", "timeoutable"]), st.just(0)),
        st.tuples(st.just("time"), st.just(0), st.integers(1, 30)),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_acknowledged_output_state_restores_exactly_the_overtaken_data(operations):
    clock, timers = _Clock(), _Timers()
    part = ResultPartition(0, N_SUB, memory_segment_size=100)
    acks: dict[int, AcknowledgeCheckpoint] = {}
    coord = SubtaskCheckpointCoordinator(
        operator_id="src",
        snapshot_state=lambda cid, options: OperatorSubtaskState(),
        clock=clock,
        partitions=[part],
        timer_service=timers,
        has_inputs=False,
    )
    infos = part.subpartition_infos
    received = [[] for _ in range(N_SUB)]
    received_before: dict[int, list] = {}
    produced_before: dict[int, list[int]] = {}
    next_id = [1]

    def collect(actions):
        for a in actions:
            if isinstance(a, AcknowledgeCheckpoint):
                assert a.checkpoint_id not in acks, "acknowledged twice"
                acks[a.checkpoint_id] = a

    def send(i, k):
        for _ in range(k):
            n = part.poll_next(infos[i])
            if n is None:
                break
            if isinstance(n.element, Buffer):
                received[i].append(n.element.sequence_number)
            elif isinstance(n.element, CheckpointBarrier) and received_before[n.element.id][i] is None:
                received_before[n.element.id][i] = list(received[i])
        collect(coord.notify_output_progress())

    for op, a, b in operations:
        if op == "emit":
            part.emit_record(b, a, b)
        elif op == "flush":
            part.flush(a)
        elif op == "credit":
            part.add_credit(infos[a], b)
        elif op == "send":
            send(a, b)
        elif op == "resume":
            if part.subpartitions[a].is_blocked:
                part.resume_consumption(infos[a])
        elif op == "checkpoint":
            cid = next_id[0]
            next_id[0] += 1
            options = {
                "aligned": CheckpointOptions.aligned(),
                "unaligned": CheckpointOptions.unaligned(),
                "timeoutable": CheckpointOptions.aligned_with_timeout(CheckpointType.CHECKPOINT, 20),
            }[a]
            received_before[cid] = [None] * N_SUB
            collect(coord.checkpoint_state(cid, clock.now, options))
            produced_before[cid] = [s.next_buffer_index for s in part.subpartitions]
        elif op == "time":
            clock.now += b
            timers.fire_until(clock.now)
            collect(coord.drain_timer_actions())

    for _ in range(50):  # drain: send everything, resuming blocked subpartitions
        for i in range(N_SUB):
            part.add_credit(infos[i], 1000)
            send(i, 10_000)
            if part.subpartitions[i].is_blocked:
                part.resume_consumption(infos[i])
    assert sorted(acks) == sorted(produced_before), "every checkpoint is acknowledged"

    for cid, ack in acks.items():
        restored = SequentialChannelStateReader(ack.task_state_snapshot).output_data
        for i, info in enumerate(infos):
            persisted = [b.sequence_number for b in restored.get(info, ())]
            assert received_before[cid][i] + persisted == list(range(produced_before[cid][i]))
        fresh = ResultPartition(0, N_SUB, memory_segment_size=100)
        SequentialChannelStateReader(ack.task_state_snapshot).read_output_data([fresh])
        for info in infos:
            expected = list(restored.get(info, ()))
            fresh.add_credit(info, len(expected) + 1)
            assert [fresh.poll_next(info).element for _ in expected] == expected
