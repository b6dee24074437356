"""A task actor's outboxes: the channel elements the task handed out for each consumer and its messages for each
upstream producer (credit, buffer sizes, ...), each peer's sent in one Ray call or, to a peer on the same node, one
write to its socket link (``actors.socket_links``). A peer gets its next call once its calls in flight are under
the limit (``DATA_CALLS_IN_FLIGHT`` for data, one upstream): those the peer has not taken in yet. The outboxes count
what they sent and the time spent encoding and submitting it.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from barriersim.actors.messages import element_entry, merge_credits, pack, pack_elements, upstream_entry
from barriersim.actors.socket_links import DATA, UPSTREAM, SocketLinks
from barriersim.runtime.events import Buffer, ResultSubpartitionInfo
from barriersim.runtime.job.wiring import SubtaskKey, Wiring
from barriersim.runtime.network.output.subpartition import BufferAndBacklog

DATA_CALLS_IN_FLIGHT = 2  # data calls to one consumer not yet taken in, at most

CallKey = tuple[str, SubtaskKey]  # ("data", consumer) or ("upstream", producer)


class Outboxes:
    def __init__(self, key: SubtaskKey, wiring: Wiring, links: SocketLinks, sent: Callable[[CallKey], None]) -> None:
        """``key``: the task's subtask; ``links``: the actor's links to peers on its node; ``sent(key)``: a call
        completed (on a Ray thread), for the task thread to call ``call_done(key)``."""
        self._key = key
        self._wiring = wiring
        self._links = links
        self._sent = sent
        self._handles: dict[SubtaskKey, Any] = {}
        self._data_out: defaultdict[SubtaskKey, list[list[Any]]] = defaultdict(list)
        self._upstream_out: defaultdict[SubtaskKey, list[list[Any]]] = defaultdict(list)
        self._in_flight: defaultdict[CallKey, int] = defaultdict(int)
        self.data_bytes_sent = 0  # msgpack bytes of the channel elements this task sent downstream
        self.data_calls_sent = self.upstream_calls_sent = 0  # Ray calls: element batches, credit batches
        self.data_buffers_sent = 0  # data buffers among the channel elements sent
        self.link_writes_sent = 0  # of the calls counted above, those written to links instead
        self.seconds = {"encode": 0.0, "submit": 0.0}  # packing a call's elements, handing calls to Ray

    def connect(self, handles: dict[SubtaskKey, Any]) -> None:
        """Every peer's actor handle (peer -> handle), before anything is sent."""
        self._handles = handles

    def add_elements(self, sendable: list[tuple[ResultSubpartitionInfo, BufferAndBacklog]]) -> bool:
        """What the task's partitions handed out, into their consumers' outboxes; True if it holds a channel event."""
        events = False
        for info, item in sendable:
            consumer, channel = self._wiring.channel_of(self._key, info)
            self._data_out[consumer].append(element_entry(channel, item))
            if type(item.element) is Buffer:
                self.data_buffers_sent += 1
            else:
                events = True
        return events

    def add_upstream(self, action: Any) -> None:
        """A message for the producer of one of the task's input channels (``UPSTREAM_MESSAGES``)."""
        producer, info = self._wiring.subpartition_of(self._key, action.channel_info)
        self._upstream_out[producer].append(upstream_entry(info, action))

    def is_empty(self) -> bool:
        return not self._data_out and not self._upstream_out

    def sizes(self) -> dict[str, int]:
        """The entries waiting in the outboxes (for a lifecycle report)."""
        return {
            "data_out": sum(map(len, self._data_out.values())),
            "upstream_out": sum(map(len, self._upstream_out.values())),
        }

    def counts(self) -> dict[str, int]:
        """What was sent (for the run's result)."""
        return {
            "data_bytes_sent": self.data_bytes_sent,
            "data_calls_sent": self.data_calls_sent,
            "data_buffers_sent": self.data_buffers_sent,
            "upstream_calls_sent": self.upstream_calls_sent,
            "link_writes_sent": self.link_writes_sent,
        }

    def send(self) -> None:
        """Each outbox whose peer takes another call, in one call (or link write) each."""
        if self._data_out:
            for consumer in [c for c in self._data_out if self._in_flight[("data", c)] < DATA_CALLS_IN_FLIGHT]:
                encode_start = time.perf_counter()
                parts = pack_elements(self._data_out.pop(consumer))
                submit_start = time.perf_counter()
                self.data_bytes_sent += sum(len(part) for part in parts)
                self.data_calls_sent += 1
                self._send_to(("data", consumer), DATA, parts, lambda: self._handles[consumer].deliver.remote(*parts))  # noqa: B023 - called in this iteration
                self.seconds["encode"] += submit_start - encode_start
                self.seconds["submit"] += time.perf_counter() - submit_start
        if self._upstream_out:
            for producer in [p for p in self._upstream_out if not self._in_flight[("upstream", p)]]:
                self.upstream_calls_sent += 1
                submit_start = time.perf_counter()
                data = pack(merge_credits(self._upstream_out.pop(producer)))
                self._send_to(
                    ("upstream", producer),
                    UPSTREAM,
                    data,
                    lambda: self._handles[producer].upstream.remote(data),  # noqa: B023 - called in this iteration
                )
                self.seconds["submit"] += time.perf_counter() - submit_start

    def _send_to(self, key: CallKey, kind: int, payload: Any, call: Callable[[], Any]) -> None:
        """``payload`` to the peer of ``key``: written to their link if they have one, else as the Ray call
        ``call()`` makes; in flight until it is done."""
        peer = key[1]
        if self._links.has_link_to(peer):
            self._in_flight[key] += 1
            self.link_writes_sent += 1
            self._links.send(peer, kind, payload, key)
        else:
            self._track(key, call())

    def _track(self, key: CallKey, ref: Any) -> None:
        """Count the call in flight until the receiver took it in (``sent``, from Ray's thread that completes the
        call); then send what waited for it."""
        self._in_flight[key] += 1
        ref.future().add_done_callback(lambda _done, key=key: self._sent(key))

    def call_done(self, key: CallKey) -> None:
        # a failed call (the receiver died) needs nothing here: the job manager fails the job over
        self._in_flight[key] -= 1
