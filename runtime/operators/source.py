"""A source reading one replayable split by offset (Flink's ``SourceReader`` over a ``SourceSplit``).

How this works: the split is an ordered run of records, held as one ``RecordBatch`` (a split given as record
tuples or as an Arrow table is converted once); the reader's only state is the offset of the next record to
emit. ``poll(n)`` returns up to ``n`` records, a slice (view) of the split, and advances the offset. A checkpoint snapshots
the offset *before* the barrier is emitted (Flink snapshots a source's state in the synchronous part of the
checkpoint, then broadcasts the barrier), so a restore resumes exactly after the last record that went out
before the barrier.
"""

from __future__ import annotations

from barriersim.runtime.operators.records import pack, unpack
from barriersim.runtime.record_batch import RecordBatch
from barriersim.runtime.state.snapshot import OperatorStateHandle, OperatorSubtaskState

OFFSETS_STATE = "source-offsets"


class SplitSourceReader:
    def __init__(self, split_id: int, records):
        self.split_id = split_id
        self._records = RecordBatch.of(records)
        self.offset = 0

    @property
    def is_finished(self) -> bool:
        return self.offset >= len(self._records)

    @property
    def remaining(self) -> int:
        return len(self._records) - self.offset

    def poll(self, max_records: int) -> RecordBatch:
        start = self.offset
        end = min(len(self._records), start + max_records)
        self.offset = end
        return self._records.slice(start, end)

    def snapshot_state(self) -> OperatorSubtaskState:
        handle = OperatorStateHandle({OFFSETS_STATE: (pack([self.split_id, self.offset]),)})
        return OperatorSubtaskState(managed_operator_state=(handle,))

    def restore_state(self, state: OperatorSubtaskState) -> None:
        for handle in state.managed_operator_state:
            for part in handle.states.get(OFFSETS_STATE, ()):
                split_id, offset = unpack(part)
                if split_id == self.split_id:
                    self.offset = offset
