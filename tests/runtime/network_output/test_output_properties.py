"""Hypothesis properties of the output side over random interleavings of records, flushes, credits,
polls, resumes and barriers (aligned, unaligned, timeoutable with timeouts) on several subpartitions.

* credit never goes negative, no data buffer is handed out without credit, wire sequence numbers are consecutive;
* each receiver gets every buffer exactly once, in buffer-index order;
* for every checkpoint and subpartition, the buffers the receiver got before the barrier plus the
  buffers persisted as output channel state are exactly the buffers produced before the barrier, in
  order, with no loss and no duplicate (persisted copies of unaligned checkpoints are still sent after
  the barrier, as in Flink); an empty copy of a drained open buffer (Flink's ``processPriorityBuffer``) is not
  counted."""

from hypothesis import example, given, settings
from hypothesis import strategies as st

from barriersim.runtime.events import (
    Buffer,
    CheckpointBarrier,
    CheckpointOptions,
    CheckpointType,
    EndOfPartition,
    EventAnnouncement,
)
from barriersim.runtime.network.output.result_partition import ResultPartition

N_SUB = 3

ops = st.lists(
    st.one_of(
        st.tuples(st.just("emit"), st.integers(0, N_SUB - 1), st.integers(0, 70)),
        st.tuples(st.just("flush"), st.integers(0, N_SUB - 1), st.just(0)),
        st.tuples(st.just("credit"), st.integers(0, N_SUB - 1), st.integers(1, 3)),
        st.tuples(st.just("poll"), st.integers(0, N_SUB - 1), st.integers(1, 4)),
        st.tuples(st.just("resume"), st.integers(0, N_SUB - 1), st.just(0)),
        st.tuples(st.just("barrier"), st.sampled_from(["aligned", "unaligned", "timeoutable"]), st.just(0)),
        st.tuples(st.just("timeout"), st.just(0), st.just(0)),
    ),
    max_size=80,
)


def _data_indices(overtaken):
    """The buffer indices of the persisted buffers that carry data; an empty copy (no record, no byte) may only
    come last, after the buffers the barrier overtook."""
    data = [x for x in overtaken if x.records or x.size]
    assert len(data) >= len(overtaken) - 1, f"more than one empty copy persisted: {overtaken}"
    assert list(overtaken[: len(data)]) == data, f"an empty copy persisted before data: {overtaken}"
    return [x.sequence_number for x in data]


def _options(kind):
    if kind == "aligned":
        return CheckpointOptions.aligned()
    if kind == "unaligned":
        return CheckpointOptions.unaligned()
    return CheckpointOptions.aligned_with_timeout(CheckpointType.CHECKPOINT, 5)


@settings(max_examples=200, deadline=None)
@given(ops)
@example(  # a flushed buffer read to its end, then an unaligned barrier: its empty copy is persisted
    [("emit", 0, 0), ("flush", 0, 0), ("credit", 0, 1), ("poll", 0, 1), ("barrier", "unaligned", 0)]
)
def test_output_side_loses_and_duplicates_nothing_and_respects_credit(operations):
    part = ResultPartition(0, N_SUB, memory_segment_size=100)
    infos = part.subpartition_infos
    granted = [0] * N_SUB
    got_buffers = [[] for _ in range(N_SUB)]  # buffer indices received, in order
    wire = [[] for _ in range(N_SUB)]
    produced_before: dict[int, list[int]] = {}  # checkpoint -> per subpartition: #buffers before it
    persisted: dict[int, list[list[int]]] = {}
    received_before: dict[int, list[list[int] | None]] = {}
    timeoutable: list[int] = []
    next_id = [1]
    record = [0]

    def receive(i, n):
        wire[i].append(n.sequence_number)
        el = n.element
        if isinstance(el, Buffer):
            got_buffers[i].append(el.sequence_number)
            assert len(got_buffers[i]) <= granted[i], "a buffer was sent without credit"
        elif isinstance(el, CheckpointBarrier):
            if received_before[el.id][i] is None:
                received_before[el.id][i] = list(got_buffers[i])
        assert part.num_credits_available(infos[i]) >= 0

    def poll(i, k):
        for _ in range(k):
            n = part.poll_next(infos[i])
            if n is None:
                return
            receive(i, n)

    for op, a, b in operations:
        if op == "emit":
            record[0] += 1
            part.emit_record(record[0], a, b)
        elif op == "flush":
            part.flush(a)
        elif op == "credit":
            part.add_credit(infos[a], b)
            granted[a] += b
        elif op == "poll":
            poll(a, b)
        elif op == "resume":
            if part.subpartitions[a].is_blocked:
                part.resume_consumption(infos[a])
        elif op == "barrier":
            cid = next_id[0]
            next_id[0] += 1
            opts = _options(a)
            overtaken = part.broadcast_event(CheckpointBarrier(cid, 0, opts), opts.is_unaligned_checkpoint)
            produced_before[cid] = [s.next_buffer_index for s in part.subpartitions]
            persisted[cid] = [_data_indices(overtaken.get(info, ())) for info in infos]
            received_before[cid] = [None] * N_SUB
            if opts.is_timeoutable:
                timeoutable.append(cid)
        elif op == "timeout" and timeoutable:
            cid = timeoutable[-1]
            for info, data in part.aligned_barrier_timeout(cid).items():
                persisted[cid][info.subpartition_idx] = _data_indices(data)
        for i in range(N_SUB):
            assert part.num_credits_available(infos[i]) >= 0

    # drain everything
    part.finish()
    for i in range(N_SUB):
        while True:
            part.add_credit(infos[i], 1000)
            granted[i] += 1000
            poll(i, 10_000)
            if part.subpartitions[i].is_blocked:
                part.resume_consumption(infos[i])
                continue
            break
        assert part.subpartitions[i].is_released_and_drained

    for i in range(N_SUB):
        assert wire[i] == list(range(len(wire[i])))
        assert got_buffers[i] == list(range(part.subpartitions[i].next_buffer_index))
    for cid, before in produced_before.items():
        for i in range(N_SUB):
            assert received_before[cid][i] is not None, f"barrier {cid} never reached subpartition {i}"
            assert received_before[cid][i] + persisted[cid][i] == list(range(before[i]))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 250)), max_size=40))
def test_a_timeoutable_barrier_leaves_in_order_unannounced(records):
    """The sender never announces (Flink's ``PipelinedSubpartition``): the barrier follows exactly the data
    written before it, and the wire numbers are consecutive."""
    part = ResultPartition(0, 2, memory_segment_size=64)
    before = [0, 0]
    for target, size in records[: len(records) // 2]:
        part.emit_record(size, target, size)
        before[target] += size
    part.broadcast_event(CheckpointBarrier(9, 0, _options("timeoutable")))
    for target, size in records[len(records) // 2 :]:
        part.emit_record(size, target, size)
    part.finish()
    for info in part.subpartition_infos:
        part.add_credit(info, 1000)
        sent = []
        while (n := part.poll_next(info)) is not None:
            sent.append(n)
            if part.subpartitions[info.subpartition_idx].is_blocked:
                part.resume_consumption(info)
        assert [n.sequence_number for n in sent] == list(range(len(sent)))
        assert not any(isinstance(n.element, EventAnnouncement) for n in sent)
        at = next(i for i, n in enumerate(sent) if n.element == CheckpointBarrier(9, 0, _options("timeoutable")))
        assert sum(n.element.size for n in sent[:at]) == before[info.subpartition_idx]
        assert isinstance(sent[-1].element, EndOfPartition)
