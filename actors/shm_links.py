"""Links between task actors on one Ray node over Ray's shared-memory channels, instead of one actor call per batch.

How this works: a ``ShmLink`` carries, from one task actor to one peer actor on the same Ray node, the same values
the actor would otherwise send as ``deliver`` or ``upstream`` calls (the msgpack parts of a batch of channel
elements, or a batch of credit, resume-consumption and buffer-size messages), through a
``ray.experimental.channel.BufferedSharedMemoryChannel``: the transport of Ray's compiled graphs, a ring of
``SLOTS`` buffers in the node's shared-memory object store that the writer fills and the reader takes in order,
without a Ray call, a task submission or a reply. What the channel carries is what a call carried, in the same
order, so no protocol rule moves: credit, sequence numbers and event order stay the runtime's.

- **Setting up.** The writing actor creates the channel (Ray's rule: the writer allocates it), after every actor of
  the deployment told on which Ray node it runs; the job manager hands each channel to its reader, which starts one
  reader thread per channel (Ray's channels have no select over several channels).
- **Writing.** One network thread per actor writes every link's values in the order the task thread handed them
  over (Flink's Netty event loop of a TaskManager's connections); a write waits while the reader has not taken the
  values in the channel's slots yet. When a write is done the task thread is told (``on_written``), as a finished
  call tells it today, so the in-flight window works as with calls.
- **Reading.** A reader thread takes each value and hands it to the task thread's mailbox (``on_value``).
- **When it is used.** Only between actors on one Ray node (``ray.get_runtime_context().get_node_id()``), and only
  for actors with at most ``MAX_SHM_PEERS`` peers: every incoming channel costs its reader a thread, so an actor
  with many peers (all-to-all edges at a high parallelism) keeps actor calls. Anything else keeps actor calls.
- **Ending.** A dead peer shows as a write or read that waits: both wait at most ``POLL_S`` at a time and end when
  the link is closed (``close``, when the task ends or fails); the job manager fails the job over on the dead actor
  as before, and kills every actor of the deployment.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable

import ray
from ray.exceptions import RayChannelError, RayChannelTimeoutError
from ray.experimental.channel.shared_memory_channel import BufferedSharedMemoryChannel
from ray.experimental.channel.utils import get_self_actor

SLOTS = 2  # values one link holds that its reader has not taken yet
MAX_SHM_PEERS = 8  # an actor with more peers than this keeps actor calls (a reader thread per incoming channel)
POLL_S = 1.0  # how long a write or a read waits before it looks whether the link was closed


class ShmLinks:
    """The shared-memory links of one task actor: the channels it writes (one per peer that reads them) and reader
    threads for the channels its peers write to it."""

    def __init__(self, name: str, on_value: Callable[[Any, Any], None], on_written: Callable[[Any], None]):
        """``on_value(peer, value)``: a value a peer wrote arrived (called on that link's reader thread);
        ``on_written(token)``: the value handed over with ``token`` is written (called on the network thread)."""
        self.name = name
        self._on_value = on_value
        self._on_written = on_written
        self._writers: dict = {}  # peer -> channel this actor writes
        self._outgoing: queue.SimpleQueue = queue.SimpleQueue()  # (peer, value, token), or None to stop
        self._closed = threading.Event()
        self._network_thread: threading.Thread | None = None

    # -- setting up (Ray's threads, before the task runs) ------------------------------------------------

    def open_writers(self, readers: dict, slot_bytes: int) -> dict:
        """A channel to each peer of ``readers`` (peer -> actor handle, each on this actor's node) with slots of
        ``slot_bytes``; returns them (peer -> channel) for the job manager to hand to the readers. Ray grows a
        channel whose value does not fit (and keeps the smaller buffers until the channel is gone), so a slot
        should hold the largest value the link carries."""
        node = ray.get_runtime_context().get_node_id()
        me = get_self_actor()
        for peer, handle in readers.items():
            channel = BufferedSharedMemoryChannel(me, [(handle, node)], SLOTS, typ=slot_bytes)
            channel.ensure_registered_as_writer()
            self._writers[peer] = channel
        if self._writers and self._network_thread is None:
            self._network_thread = threading.Thread(target=self._write_in_order, name=f"network {self.name}",
                                                    daemon=True)
            self._network_thread.start()
        return dict(self._writers)

    def attach_readers(self, channels: dict) -> None:
        """Start a reader thread for each channel a peer writes to this actor (peer -> channel)."""
        for peer, channel in channels.items():
            channel.ensure_registered_as_reader()
            threading.Thread(target=self._read, args=(peer, channel), name=f"reader {self.name} <- {peer}",
                             daemon=True).start()

    # -- the task thread's side ---------------------------------------------------------------------------

    def has_link_to(self, peer) -> bool:
        return peer in self._writers

    def send(self, peer, value, token) -> None:
        """Hand ``value`` to the network thread for ``peer``'s channel; ``on_written(token)`` follows."""
        self._outgoing.put((peer, value, token))

    def close(self) -> None:
        if not self._closed.is_set():
            self._closed.set()
            self._outgoing.put(None)

    # -- the threads --------------------------------------------------------------------------------------

    def _write_in_order(self) -> None:
        while not self._closed.is_set():
            item = self._outgoing.get()
            if item is None:
                return
            peer, value, token = item
            channel = self._writers[peer]
            while True:
                try:
                    channel.write(value, timeout=POLL_S)
                    break
                except RayChannelTimeoutError:
                    if self._closed.is_set():
                        return
                except RayChannelError:
                    return  # the channel was closed: the actor ends
            self._on_written(token)

    def _read(self, peer, channel) -> None:
        while not self._closed.is_set():
            try:
                value = channel.read(timeout=POLL_S)
            except RayChannelTimeoutError:
                continue
            except RayChannelError:
                return
            self._on_value(peer, value)


def plan_links(wiring, node_of: dict, max_peers: int = MAX_SHM_PEERS) -> dict:
    """Which links to open: writer -> the peers it writes to over shared memory (sorted). A pair is linked in both
    directions when the two subtasks exchange messages (data one way, credit the other), run on one Ray node
    (``node_of``: subtask -> Ray node id) and each has at most ``max_peers`` peers."""
    peers: dict = {key: set() for key in node_of}
    for (producer, _info), (consumer, _channel) in wiring.downstream.items():
        if producer in peers and consumer in peers:
            peers[producer].add(consumer)
            peers[consumer].add(producer)
    linked = {key for key, of in peers.items() if len(of) <= max_peers}
    plan = {key: sorted(p for p in peers[key] if p in linked and node_of[p] == node_of[key]) for key in sorted(linked)}
    return {key: to for key, to in plan.items() if to}
