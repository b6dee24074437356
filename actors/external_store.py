"""The external system the sinks write to, kept in its own actor so that it survives task failures.

How this works: ``ExternalStoreActor`` holds a ``runtime.operators.sinks.ExternalStore`` (commits are
idempotent per transaction id, so a commit repeated by a restored sink changes nothing). A sink task talks to
it through ``RemoteExternalStore``, which has the store's methods: commits and aborts are sent at once,
directly written records (the at-least-once sink) are gathered and sent as one call per ``send()``; every
call's reference is kept until ``flush()`` awaited it. The task actor flushes before it acknowledges a
checkpoint or reports that it finished, so whatever the sink handed to the store before a checkpoint's
barrier is in the store when the checkpoint can complete (as Flink's at-least-once sinks flush on
snapshot), and everything is in the store when the job ends. Records travel as msgpack.
"""

from __future__ import annotations

import asyncio

import ray

from barriersim.actors.messages import decode_records, encode_records
from barriersim.runtime.operators.sinks import ExternalStore


@ray.remote(num_cpus=0.01)
class ExternalStoreActor:
    def __init__(self):
        self.store = ExternalStore()

    async def commit(self, transaction_id: str, records: bytes) -> None:
        self.store.commit(transaction_id, tuple(decode_records(records)))

    async def abort(self, transaction_id: str) -> None:
        self.store.abort(transaction_id)

    async def write(self, records: bytes) -> None:
        self.store.write(decode_records(records))

    async def output(self) -> bytes:
        return encode_records(self.store.output())

    async def counters(self) -> dict:
        s = self.store
        return {"transactions": len(s.committed), "commits_attempted": s.commits_attempted,
                "aborted_transactions": s.aborted_transactions, "direct_records": len(s.direct)}


class RemoteExternalStore:
    """The store as a sink inside a task actor sees it."""

    def __init__(self, handle):
        self._handle = handle
        self._direct: list[tuple] = []
        self._in_flight: list = []

    def commit(self, transaction_id: str, records: tuple) -> None:
        self._in_flight.append(self._handle.commit.remote(transaction_id, encode_records(records)))

    def abort(self, transaction_id: str) -> None:
        self._in_flight.append(self._handle.abort.remote(transaction_id))

    def write(self, records) -> None:
        self._direct.extend(records)

    def send(self) -> None:
        if self._direct:
            self._in_flight.append(self._handle.write.remote(encode_records(self._direct)))
            self._direct = []

    @property
    def has_unconfirmed(self) -> bool:
        return bool(self._direct or self._in_flight)

    async def flush(self) -> None:
        self.send()
        while self._in_flight:
            refs, self._in_flight = self._in_flight, []
            await asyncio.gather(*refs)

