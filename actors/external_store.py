"""The external system the sinks write to, kept in its own actor so that it survives task failures. See
docs/ray-driver.md, "The external store's actor".
"""

from __future__ import annotations

import msgpack
import ray

from barriersim.actors.messages import encode_records
from barriersim.runtime.operators.sinks import ExternalStore
from barriersim.runtime.records_codec import ext_default, ext_hook

_METHODS = frozenset(
    name for name in dir(ExternalStore) if not name.startswith("_") and callable(getattr(ExternalStore, name))
)


def _plain(value):
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    try:
        return ext_default(value)  # record batches travel as their column buffers
    except TypeError:
        raise TypeError(f"cannot send {type(value).__name__} to the external store") from None


@ray.remote(num_cpus=0.01)
class ExternalStoreActor:
    def __init__(self):
        self.store = ExternalStore()
        self._expected: dict[str, int] = {}
        self._held: dict[str, dict[int, bytes]] = {}

    async def apply(self, caller: str, sequence_number: int, calls: bytes) -> None:
        """Apply ``caller``'s batch ``sequence_number`` once every earlier batch of it was applied."""
        held = self._held.setdefault(caller, {})
        held[sequence_number] = calls
        expected = self._expected.get(caller, 0)
        while expected in held:
            for name, args in msgpack.unpackb(held.pop(expected), raw=False, use_list=False, ext_hook=ext_hook):
                if name not in _METHODS:
                    raise ValueError(f"external store: {caller} called unknown method {name!r}")
                getattr(self.store, name)(*args)
            expected += 1
        self._expected[caller] = expected

    async def output(self) -> bytes:
        return encode_records(self.store.output())

    async def load(self, snapshot: bytes) -> None:
        """Continue the external system of an earlier run (a run restored from one of its snapshots)."""
        self.store = ExternalStore.from_msgpack(snapshot)

    async def snapshot(self) -> bytes:
        """Everything the system holds (``ExternalStore.to_msgpack``)."""
        return self.store.to_msgpack()

    async def pending_records(self, transaction_ids: list) -> bytes:
        """The records of the pending transactions ``transaction_ids`` (a snapshot's sinks list them)."""
        return encode_records(self.store.pending_records(transaction_ids))

    async def counters(self) -> dict:
        s = self.store
        return {
            "transactions": len(s.committed),
            "pending_transactions": len(getattr(s, "pending", ())),
            "commits_attempted": s.commits_attempted,
            "aborted_transactions": s.aborted_transactions,
            "direct_records": s.direct_records,
        }


class RemoteExternalStore:
    """The store as a sink inside a task actor sees it: the store's methods, queued and sent in batches."""

    def __init__(self, handle, caller: str):
        self._handle = handle
        self._caller = caller
        self._sequence_number = 0
        self._queue: list = []
        self._in_flight: list = []

    def __getattr__(self, name: str):
        if name not in _METHODS:
            raise AttributeError(name)

        def call(*args) -> None:
            self._queue.append([name, list(args)])

        return call

    def send(self) -> None:
        if self._queue:
            calls = msgpack.packb(self._queue, use_bin_type=True, default=_plain)
            self._in_flight.append(self._handle.apply.remote(self._caller, self._sequence_number, calls))
            self._sequence_number += 1
            self._queue = []

    def take_unconfirmed(self) -> list:
        """Send what is queued and hand over the references of every call not handed over yet, for the caller to
        wait for."""
        self.send()
        refs, self._in_flight = self._in_flight, []
        return refs
