"""Sinks and the external system they write to: Flink's ``TwoPhaseCommitSinkFunction`` (exactly-once) and a
plain at-least-once sink.

How this works: ``ExternalStore`` stands for the system outside the job (a database, a Kafka topic). It
survives task failures; the drivers keep it outside every task and hand it to the sinks they build.
``TwoPhaseCommitSink`` writes records into the current transaction; at a checkpoint's synchronous snapshot
it *pre-commits* the transaction, keeps it as pending for that checkpoint id, opens a new one, and stores
the pending transactions in its state; when the checkpoint completes (``notify_checkpoint_complete``) it
commits every pending transaction up to that id. On restore it commits the transactions the restored state
lists as pending (Flink's ``recoverAndCommit``: the checkpoint they belong to completed, the notification
may have been lost) and aborts everything else (``recoverAndAbort``). Commits are idempotent per
transaction id, as Flink requires. ``AtLeastOnceSink`` writes every record to the store at once, so records
replayed after a failure appear twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from barriersim.runtime.operators.records import pack, unpack
from barriersim.runtime.state.snapshot import OperatorStateHandle, OperatorSubtaskState

PENDING_TRANSACTIONS_STATE = "pending-transactions"


@dataclass
class ExternalStore:
    """The external system: committed transactions (by id) and directly written records."""

    committed: dict[str, tuple] = field(default_factory=dict)
    direct: list[tuple] = field(default_factory=list)
    commits_attempted: int = 0
    aborted_transactions: int = 0

    def commit(self, transaction_id: str, records: tuple) -> None:
        self.commits_attempted += 1
        self.committed.setdefault(transaction_id, records)  # idempotent: a repeated commit changes nothing

    def abort(self, transaction_id: str) -> None:
        self.aborted_transactions += 1

    def write(self, records: Iterable[tuple]) -> None:
        self.direct.extend(records)

    def output(self) -> list[tuple]:
        """Everything visible to readers of the external system (read-committed)."""
        out = [r for records in self.committed.values() for r in records]  # in commit order
        return out + list(self.direct)


class TwoPhaseCommitSink:
    def __init__(self, store: ExternalStore, subtask: str, attempt: int = 0):
        self.store = store
        self.subtask = subtask
        self._attempt = attempt
        self._serial = 0
        self._current: list[tuple] = []
        self._current_id = self._new_transaction_id()
        self._pending: dict[int, tuple[str, tuple]] = {}  # checkpoint id -> (transaction id, records)

    def _new_transaction_id(self) -> str:
        self._serial += 1
        return f"{self.subtask}@{self._attempt}/{self._serial}"

    def invoke_all(self, records: Iterable[tuple]) -> None:
        self._current.extend(records)

    def snapshot_state(self, checkpoint_id: int) -> OperatorSubtaskState:
        """Pre-commit the current transaction for ``checkpoint_id`` and open the next one."""
        self._pending[checkpoint_id] = (self._current_id, tuple(self._current))
        self._current = []
        self._current_id = self._new_transaction_id()
        parts = tuple(
            pack([cid, tid, [list(r) for r in recs]]) for cid, (tid, recs) in sorted(self._pending.items())
        )
        return OperatorSubtaskState(managed_operator_state=(OperatorStateHandle({PENDING_TRANSACTIONS_STATE: parts}),))

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        for cid in sorted(c for c in self._pending if c <= checkpoint_id):
            tid, recs = self._pending.pop(cid)
            self.store.commit(tid, recs)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """An aborted checkpoint's transaction stays pending: a later completed checkpoint commits it (Flink
        keeps pending transactions until a checkpoint that subsumes them completes)."""

    def restore_state(self, state: OperatorSubtaskState | None) -> None:
        """``recoverAndCommit`` the restored pending transactions; the open one of the failed attempt is lost
        (``recoverAndAbort``)."""
        if state is None:
            return
        for handle in state.managed_operator_state:
            for part in handle.states.get(PENDING_TRANSACTIONS_STATE, ()):
                _cid, tid, recs = unpack(part)
                self.store.commit(tid, tuple(tuple(r) for r in recs))

    def close_on_failover(self) -> None:
        self.store.abort(self._current_id)
        for tid, _ in self._pending.values():
            self.store.abort(tid)

    def finish(self) -> None:
        """End of input: commit every pre-committed transaction and the open one. This stands in for FLIP-147's
        final checkpoint, after which Flink's sink commits everything before the task finishes (the simulator
        does not yet model a failover after tasks have finished)."""
        for cid in sorted(self._pending):
            tid, recs = self._pending.pop(cid)
            self.store.commit(tid, recs)
        if self._current:
            self.store.commit(self._current_id, tuple(self._current))
            self._current = []


class AtLeastOnceSink:
    def __init__(self, store: ExternalStore, subtask: str, attempt: int = 0):
        self.store = store

    def invoke_all(self, records: Iterable[tuple]) -> None:
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
