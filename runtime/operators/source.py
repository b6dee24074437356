"""A source reading its assigned replayable splits by offset (Flink's ``SourceReader`` over ``SourceSplit`` s),
watermarked per split. See docs/jobs-and-operators.md, "The source".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from barriersim.runtime.operators.records import EVENT_TIME, pack, unpack
from barriersim.runtime.record_batch import RecordBatch, RecordsLike
from barriersim.runtime.state.snapshot import OperatorStateHandle, OperatorSubtaskState

OFFSETS_STATE = "source-offsets"


class SplitSourceReader:
    def __init__(self, split_id_or_splits: int | Mapping[int, RecordsLike], records: RecordsLike = ()) -> None:
        """``SplitSourceReader(split_id, records)`` reads one split; ``SplitSourceReader({split_id: records})``
        reads every split given, in split id order. A split is a ``RecordBatch``, or record tuples or an Arrow
        table (converted once)."""
        splits = split_id_or_splits if isinstance(split_id_or_splits, Mapping) else {split_id_or_splits: records}
        self._splits: dict[int, RecordBatch] = {sid: RecordBatch.of(r) for sid, r in sorted(splits.items())}
        self.offsets: dict[int, int] = {sid: 0 for sid in self._splits}
        self._order = list(self._splits)
        self._next = 0
        self._last_timestamp: dict[int, int] = {}  # per split: the largest timestamp emitted since the reader started
        self._polled: int | None = None  # the split of the last poll

    @property
    def split_ids(self) -> tuple[int, ...]:
        return tuple(self._splits)

    @property
    def split_id(self) -> int | None:
        return self._order[0] if self._order else None

    @property
    def offset(self) -> int:
        """The offset of the first split (for a reader of one split: its offset)."""
        return self.offsets[self._order[0]] if self._order else 0

    def _split_finished(self, sid: int) -> bool:
        return self.offsets[sid] >= len(self._splits[sid])

    @property
    def is_finished(self) -> bool:
        return all(self._split_finished(sid) for sid in self._order)

    @property
    def records_read(self) -> int:
        """How far the reader got: the records of its splits before their offsets (a restored reader's count
        starts at the offsets it restored)."""
        return sum(self.offsets.values())

    @property
    def remaining(self) -> int:
        return sum(len(self._splits[sid]) - self.offsets[sid] for sid in self._order)

    def poll(self, max_records: int, accepted: Callable[[RecordBatch], int] | None = None) -> RecordBatch:
        """Up to ``max_records`` records of the next unfinished split (round robin over the splits), a slice of
        it; with ``accepted``, only as many of them as it returns for the slice (the records the task's outputs
        take before they are backpressured: ``RecordWriters.records_until_backpressured``)."""
        order = self._order
        for _ in range(len(order)):
            sid = order[self._next]
            self._next = (self._next + 1) % len(order)
            if self._split_finished(sid):
                continue
            records = self._splits[sid]
            start = self.offsets[sid]
            end = min(len(records), start + max_records)
            out = records.slice(start, end)
            if accepted is not None and end > start:
                allowed = accepted(out)
                if allowed < end - start:
                    end = start + allowed
                    out = records.slice(start, end)
                # else: the batch ``accepted`` looked at is returned (its writers remember the targets they computed)
            self.offsets[sid] = end
            if end > start:
                self._last_timestamp[sid] = int(records.columns[EVENT_TIME, end - 1])
            self._polled = sid
            return out
        return RecordBatch.empty()

    def peek(self, max_records: int) -> RecordBatch:
        """The records the next ``poll(max_records)`` would return (before any ``accepted`` limit), without reading
        them."""
        order = self._order
        for j in range(len(order)):
            sid = order[(self._next + j) % len(order)]
            if self._split_finished(sid):
                continue
            start = self.offsets[sid]
            return self._splits[sid].slice(start, min(len(self._splits[sid]), start + max_records))
        return RecordBatch.empty()

    def current_watermark(self) -> int | None:
        """The reader's watermark after the last poll: the minimum over its unfinished splits and the split just
        polled of (largest timestamp emitted - 1); None while one of them has emitted nothing."""
        polled = self._polled
        marks = []
        for sid in self._order:
            if sid != polled and self._split_finished(sid):
                continue
            last = self._last_timestamp.get(sid)
            if last is None:
                return None
            marks.append(last - 1)
        return min(marks) if marks else None

    def snapshot_state(self) -> OperatorSubtaskState:
        handle = OperatorStateHandle({OFFSETS_STATE: tuple(pack([sid, self.offsets[sid]]) for sid in self._order)})
        return OperatorSubtaskState(managed_operator_state=(handle,))

    def restore_state(self, state: OperatorSubtaskState) -> None:
        for sid, offset in split_offsets(state).items():
            if sid in self.offsets:
                self.offsets[sid] = offset


def split_offsets(state: OperatorSubtaskState | None) -> dict[int, int]:
    """The split offsets a source subtask's state holds: split id -> offset of its next record."""
    offsets: dict[int, int] = {}
    if state is None:
        return offsets
    for handle in state.managed_operator_state:
        for part in handle.states.get(OFFSETS_STATE, ()):
            split_id, offset = unpack(part)
            offsets[split_id] = offset
    return offsets


def assigned_splits(state: OperatorSubtaskState | None) -> tuple[int, ...]:
    """The splits a restored source subtask reads: those its (possibly redistributed) state names."""
    return tuple(sorted(split_offsets(state)))
