"""Links between actors on one Ray node over Unix domain sockets, instead of one Ray actor call per message: between
task actors (batches of channel elements, credit) and between the job manager and the task actors on its node (the
JobMaster's trigger, completion and abort messages down; acknowledgements, declines and the finished notice up). A
link carries what a call carried, in the same order. See docs/ray-driver.md, "Socket links on one node", and
docs/architecture.md, "Links"."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from multiprocessing.connection import Client, Connection, Listener, wait
from typing import Any, cast

import msgpack

POLL_S = 1.0  # how long the reader waits before it looks whether the links were closed
BACKLOG = 256  # connections a listener queues before it accepts them
LINKS_ENVIRONMENT = "BARRIERSIM_RAY_LINKS"  # "calls": task actors exchange channel messages as actor calls only
# what a link's value carries: a deliver call's parts, an upstream call's data, a JobMaster's message to a task
# (``messages.task_message_to_wire``), a task's report to the job manager ([method, arguments])
DATA, UPSTREAM, TASK_MESSAGE, REPORT = 0, 1, 2, 3
JOB_MANAGER = "job manager"  # a task actor's name for its link to the job manager


def socket_links_wanted(socket_links: bool | None = None) -> bool:
    """Whether a Ray run links its task actors: ``socket_links`` if given, else yes unless the environment sets
    ``BARRIERSIM_RAY_LINKS=calls``; ValueError for any other value there."""
    if socket_links is not None:
        return socket_links
    value = os.environ.get(LINKS_ENVIRONMENT, "sockets")
    if value not in ("sockets", "calls"):
        raise ValueError(f"{LINKS_ENVIRONMENT}: must be sockets or calls, got {value!r}")
    return value == "sockets"


def new_secret() -> bytes:
    """The key a deployment's links authenticate with (``multiprocessing.connection``'s HMAC handshake)."""
    return os.urandom(16)


class SocketLinks:
    """The links of one task actor: a listener for the links its peers write to it, the connections it writes."""

    def __init__(self, name: str, on_value: Callable[[int, Any], None], on_written: Callable[[Any], None]):
        """``on_value(kind, payload)``: a value a peer wrote arrived (called on the reader thread);
        ``on_written(token)``: the value handed over with ``token`` (not None) is written (on the network thread)."""
        self.name = name
        self._on_value = on_value
        self._on_written = on_written
        self._listener: Listener | None = None
        self._writers: dict = {}  # peer -> connection this actor writes
        self._outgoing: queue.SimpleQueue = queue.SimpleQueue()  # (peer, kind, payload, token), or None to stop
        self._closed = threading.Event()
        self._writing = False  # the network thread runs

    # -- setting up (Ray's threads, before the task runs) ------------------------------------------------

    def listen(self, secret: bytes) -> str:
        """Listen for this actor's incoming links; returns the address (abstract namespace) peers connect to."""
        address = "\0barriersim-" + os.urandom(12).hex()
        self._listener = Listener(address, family="AF_UNIX", backlog=BACKLOG, authkey=secret)
        return address

    def accept(self, count: int) -> None:
        """Accept ``count`` links (one from each peer that writes to this actor), then read them on a reader thread."""
        assert self._listener is not None, "listen() before accept()"
        incoming = [self._listener.accept() for _ in range(count)]
        if incoming:
            threading.Thread(target=self._read, args=(incoming,), name=f"reader {self.name}", daemon=True).start()

    def connect_to(self, addresses: dict, secret: bytes) -> None:
        """A link to each peer of ``addresses`` (peer -> its listening address, on this actor's node)."""
        for peer, address in addresses.items():
            self._writers[peer] = Client(address, family="AF_UNIX", authkey=secret)
        if addresses and not self._writing:
            self._writing = True
            threading.Thread(target=self._write_in_order, name=f"network {self.name}", daemon=True).start()

    # -- the task thread's side ---------------------------------------------------------------------------

    def has_link_to(self, peer) -> bool:
        return peer in self._writers

    def send(self, peer, kind: int, payload, token) -> None:
        """Hand ``payload`` (msgpack-able: bytes, or a list or tuple of them) to the network thread for ``peer``'s
        link; ``on_written(token)`` follows unless ``token`` is None."""
        self._outgoing.put((peer, kind, payload, token))

    def close(self) -> None:
        if not self._closed.is_set():
            self._closed.set()
            self._outgoing.put(None)

    # -- the threads --------------------------------------------------------------------------------------

    def _write_in_order(self) -> None:
        dead: set = set()
        while True:
            item = self._outgoing.get()
            if item is None or self._closed.is_set():
                return
            peer, kind, payload, token = item
            if peer in dead:
                continue  # its reader is gone: the job manager fails the job over
            try:
                self._writers[peer].send_bytes(msgpack.packb((kind, payload)))
            except OSError:
                dead.add(peer)
                continue
            if token is not None:
                self._on_written(token)

    def _read(self, incoming: list) -> None:
        while incoming and not self._closed.is_set():
            for connection in cast("list[Connection]", wait(incoming, timeout=POLL_S)):
                try:
                    data = connection.recv_bytes()
                except (EOFError, OSError):  # the writer is gone
                    incoming.remove(connection)
                    continue
                kind, payload = msgpack.unpackb(data)
                self._on_value(kind, payload)


def plan_links(wiring, node_of: dict) -> dict:
    """Which links to open: writer -> the peers it writes to (sorted). Two subtasks are linked in both directions
    when they exchange messages (data one way, credit the other) and run on one Ray node (``node_of``: subtask ->
    Ray node id)."""
    peers: dict = {key: set() for key in node_of}
    for (producer, _info), (consumer, _channel) in wiring.downstream.items():
        if producer in peers and consumer in peers:
            peers[producer].add(consumer)
            peers[consumer].add(producer)
    plan = {key: sorted(p for p in peers[key] if node_of[p] == node_of[key]) for key in sorted(peers)}
    return {key: to for key, to in plan.items() if to}
