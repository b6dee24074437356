"""Sinks and the external system they write to: Flink's ``TwoPhaseCommitSinkFunction`` (exactly-once) and a plain
at-least-once sink. See docs/jobs-and-operators.md, "Sinks and the external store".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from barriersim.runtime import records_codec
from barriersim.runtime.operators.records import pack, unpack
from barriersim.runtime.record_batch import RecordBatch, RecordsLike
from barriersim.runtime.state.snapshot import OperatorStateHandle, OperatorSubtaskState

PENDING_TRANSACTIONS_STATE = "pending-transactions"


class SinkStore(Protocol):
    """What a sink calls on the external store: an ``ExternalStore``, or a driver's client of one (the Ray driver's
    ``actors.external_store.RemoteExternalStore``)."""

    def pre_commit(self, transaction_id: str, records: RecordsLike) -> None: ...

    def commit(self, transaction_id: str) -> None: ...

    def abort_lingering(self, owner: str, keep: set[str]) -> None: ...

    def write(self, records: RecordsLike) -> None: ...


@dataclass
class ExternalStore:
    """The external system, transactional like Kafka's: data of a transaction is written at pre-commit, stays
    invisible while pending, and becomes visible when committed; commits are idempotent per transaction id."""

    committed: dict[str, RecordBatch] = field(default_factory=dict)
    pending: dict[str, RecordBatch] = field(default_factory=dict)
    direct: list[RecordBatch] = field(default_factory=list)
    commits_attempted: int = 0
    aborted_transactions: int = 0

    def pre_commit(self, transaction_id: str, records: RecordsLike) -> None:
        self.pending[transaction_id] = RecordBatch.of(records)

    # lingering transactions a restored subtask aborted, still committable by the subtask that recovers them
    # (``abort_lingering``); kept in memory only: every subtask of a deployment restores before it runs
    _lingering: dict[str, RecordBatch] = field(default_factory=dict, repr=False, compare=False)

    def commit(self, transaction_id: str) -> None:
        self.commits_attempted += 1
        records = self.pending.pop(transaction_id, None)
        if records is None and transaction_id in self._lingering:  # recovered after another subtask's abort
            records = self._lingering.pop(transaction_id)
            self.aborted_transactions -= 1
        if records is not None and transaction_id not in self.committed:
            self.committed[transaction_id] = records

    def abort(self, transaction_id: str) -> None:
        if self.pending.pop(transaction_id, None) is not None:
            self.aborted_transactions += 1

    def abort_lingering(self, owner: str, keep: set[str]) -> None:
        """Abort ``owner``'s pending transactions except ``keep`` (what a restarted producer does to
        transactions of a failed attempt: Flink's recoverAndAbort / Kafka's producer fencing). After a rescale
        another subtask may recover one of them: Flink's ``TwoPhaseCommitSinkFunction`` keeps a subtask's pending
        transactions in one list entry, so the subtask that gets them is the one that aborts its lingering ones;
        barriersim's state has one entry per transaction, so an aborted one stays committable by its recoverer."""
        for tid in [t for t in self.pending if t.startswith(owner + "@") and t not in keep]:
            self._lingering[tid] = self.pending[tid]
            self.abort(tid)

    def committed_after(self, transaction_ids: Iterable[str]) -> list[str]:
        """The transactions committed after every one of ``transaction_ids`` that is committed, in commit order
        (none if none of them is): what a job committed after a snapshot whose sinks had pre-committed
        ``transaction_ids``, the output a restore of that snapshot produces again."""
        order, ids = list(self.committed), set(transaction_ids)
        positions = [i for i, tid in enumerate(order) if tid in ids]
        return order[max(positions) + 1 :] if positions else []

    def write(self, records: RecordsLike) -> None:
        batch = RecordBatch.of(records)
        if len(batch):
            self.direct.append(batch)

    @property
    def direct_records(self) -> int:
        return sum(len(b) for b in self.direct)

    def pending_records(self, transaction_ids: Iterable[str]) -> RecordBatch:
        """The records of the pending transactions ``transaction_ids`` (a snapshot's sinks list them), in that
        order, as one batch; an id that is not pending has none."""
        return RecordBatch.concat([self.pending[t] for t in transaction_ids if len(self.pending.get(t, ()))])

    def output(self) -> RecordBatch:
        """Everything visible to readers of the external system (read-committed), as one batch."""
        return RecordBatch.concat(self.output_batches())

    def output_batches(self) -> list[RecordBatch]:
        """``output()`` as the batches it joins, in commit order (each committed transaction's, then each direct
        write's), without joining them."""
        return [b for b in self.committed.values() if len(b)] + self.direct

    def snapshot(self) -> dict[str, Any]:
        """Everything the system holds, to be continued by a later run that restores a savepoint of this one (the
        transactions a restore commits stay pending until then): each transaction's and each direct write's records
        as a batch (``to_msgpack`` writes them as their column buffers)."""
        return {
            "committed": [[tid, records] for tid, records in self.committed.items()],
            "pending": [[tid, records] for tid, records in self.pending.items()],
            "direct": list(self.direct),
        }

    @staticmethod
    def from_snapshot(snapshot: dict[str, Any]) -> ExternalStore:
        """The store ``snapshot`` describes: its records as batches (one per transaction, one per direct write);
        records as arrays of record arrays, the form of earlier versions, are converted."""

        def batch(records: RecordsLike) -> RecordBatch:
            if type(records) is RecordBatch:
                return records
            return RecordBatch.from_rows([tuple(r) for r in records]) if len(records) else RecordBatch.empty()

        return ExternalStore(
            committed={tid: batch(rows) for tid, rows in snapshot.get("committed", ())},
            pending={tid: batch(rows) for tid, rows in snapshot.get("pending", ())},
            direct=[batch(rows) for rows in snapshot.get("direct", ())],
        )

    def to_msgpack(self) -> bytes:
        """``snapshot`` as msgpack, every batch as its column buffers (``runtime.records_codec``): no per-record
        step, so a run's tens of millions of committed records are written and read back in well under a
        second."""
        return records_codec.pack(self.snapshot())

    @staticmethod
    def from_msgpack(data: bytes) -> ExternalStore:
        """What ``to_msgpack`` wrote (or the row form of earlier versions). Raises ``ValueError`` (msgpack's
        errors, ``MalformedRecords``) or ``TypeError`` / ``AttributeError`` on bytes that do not hold a store."""
        snapshot = records_codec.unpack(data)
        if not isinstance(snapshot, dict):
            raise ValueError(f"not an external store snapshot (a msgpack {type(snapshot).__name__}, not a map)")
        return ExternalStore.from_snapshot(snapshot)


class _TransactionBuffer:
    """The records of one open transaction, appended in order into one growing ``int64`` array (capacity doubles):
    the transaction's data is one contiguous batch when it is pre-committed, without a final copy, and the
    batches it was given go back to the allocator at once instead of staying alive until the pre-commit (a
    long transaction otherwise keeps every network buffer's batch, fresh memory page by page). The first batch is
    kept as it is (no copy) until a second one arrives: its array is full, so the second one grows into a new one.
    """

    __slots__ = ("_array", "_size")

    def __init__(self) -> None:
        self._array: np.ndarray | None = None
        self._size = 0

    def __bool__(self) -> bool:
        return self._size > 0

    def append(self, batch: RecordBatch) -> None:
        columns = batch.columns
        n = columns.shape[1]
        if self._array is None:
            self._array, self._size = columns, n
            return
        size, array = self._size, self._array
        if array.shape[1] < size + n:
            grown = np.empty((array.shape[0], max(size + n, 2 * array.shape[1])), dtype=array.dtype)
            grown[:, :size] = array[:, :size]
            self._array = array = grown
        array[:, size : size + n] = columns
        self._size = size + n

    def batch(self) -> RecordBatch:
        """The records appended so far, as one batch (a view; nothing writes into it again: a pre-committed
        transaction's buffer is not appended to)."""
        if not self._size:
            return RecordBatch.empty()
        assert self._array is not None  # records were appended
        return RecordBatch(self._array[:, : self._size])


class TwoPhaseCommitSink:
    def __init__(self, store: SinkStore, subtask: str, attempt: int = 0) -> None:
        self.store = store
        self.subtask = subtask
        self._attempt = attempt
        self._serial = 0
        self._current = _TransactionBuffer()
        self._current_id = self._new_transaction_id()
        self._pending: dict[int, str] = {}  # checkpoint id -> pre-committed transaction id

    def _new_transaction_id(self) -> str:
        self._serial += 1
        return f"{self.subtask}@{self._attempt}/{self._serial}"

    def invoke_all(self, records: RecordsLike) -> None:
        batch = RecordBatch.of(records)
        if len(batch):
            self._current.append(batch)

    def _staged(self) -> RecordBatch:
        return self._current.batch()

    def snapshot_state(self, checkpoint_id: int) -> OperatorSubtaskState:
        """Pre-commit the current transaction for ``checkpoint_id`` and open the next one; the state holds the
        pending transaction handles only (the data is in the external system)."""
        self.store.pre_commit(self._current_id, self._staged())
        self._pending[checkpoint_id] = self._current_id
        self._current = _TransactionBuffer()
        self._current_id = self._new_transaction_id()
        parts = tuple(pack([cid, tid]) for cid, tid in sorted(self._pending.items()))
        return OperatorSubtaskState(managed_operator_state=(OperatorStateHandle({PENDING_TRANSACTIONS_STATE: parts}),))

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        for cid in sorted(c for c in self._pending if c <= checkpoint_id):
            self.store.commit(self._pending.pop(cid))

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """An aborted checkpoint's transaction stays pending: a later completed checkpoint commits it (Flink
        keeps pending transactions until a checkpoint that subsumes them completes)."""

    def restore_state(self, state: OperatorSubtaskState | None) -> None:
        """``recoverAndCommit`` the transactions the restored checkpoint lists as pending (their checkpoint
        completed; the notification may have been lost), then abort every other transaction of this subtask
        left behind by the failed attempt (``recoverAndAbort``)."""
        keep: set[str] = set()
        if state is not None:
            for handle in state.managed_operator_state:
                for part in handle.states.get(PENDING_TRANSACTIONS_STATE, ()):
                    _cid, tid = unpack(part)
                    self.store.commit(tid)
                    keep.add(tid)
        self.store.abort_lingering(self.subtask, keep)

    def close_on_failover(self) -> None:
        """The open transaction was never pre-committed: it simply disappears with the task."""
        self._current = _TransactionBuffer()

    def finish(self) -> None:
        """End of input when no final checkpoint follows (checkpoints after tasks finish disabled, or no periodic
        checkpoints; ``_Sink.end_of_input``): commit every pre-committed transaction and the open one. With
        FLIP-147's final checkpoint (the default) this is not called: that checkpoint pre-commits the open
        transaction and its completion commits it, as in Flink. A deliberate difference from Flink without a
        final checkpoint: ``TwoPhaseCommitSinkFunction.close()`` aborts the open transaction there, and a
        pre-committed one whose checkpoint's completion was not yet notified stays uncommitted, so a bounded Flink
        job loses the records after its last notified checkpoint; barriersim commits them, so that such a run
        still has an output to verify."""
        for cid in sorted(self._pending):
            self.store.commit(self._pending.pop(cid))
        if self._current:
            self.store.pre_commit(self._current_id, self._staged())
            self.store.commit(self._current_id)
            self._current = _TransactionBuffer()


class AtLeastOnceSink:
    def __init__(self, store: SinkStore, subtask: str, attempt: int = 0) -> None:
        self.store = store

    def invoke_all(self, records: RecordsLike) -> None:
        self.store.write(records)

    def snapshot_state(self, checkpoint_id: int) -> OperatorSubtaskState:
        return OperatorSubtaskState()

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        pass

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        pass

    def restore_state(self, state: OperatorSubtaskState | None) -> None:
        pass

    def close_on_failover(self) -> None:
        pass

    def finish(self) -> None:
        pass
