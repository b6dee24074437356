"""The raw Ray baseline every Ray-backend figure is compared with, measured in the same run. See docs/benchmarks.md,
"The raw Ray baseline".

Run alone: ``python -m benchmarks.ray_baseline``.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

import ray


@ray.remote(num_cpus=0.01)
class Receiver:
    def __init__(self):
        self.received = 0
        self.bytes = 0

    async def receive(self, payload: bytes) -> None:
        self.received += 1
        self.bytes += len(payload)

    async def ping(self) -> None:
        return None


@ray.remote(num_cpus=0.01)
class Sender:
    async def one_way(self, receiver, payload: bytes, calls: int, window: int) -> float:
        started = time.perf_counter()
        in_flight: list = []
        for _ in range(calls):
            in_flight.append(receiver.receive.remote(payload))
            if len(in_flight) >= window:
                await in_flight.pop(0)
        await asyncio.gather(*in_flight)
        return time.perf_counter() - started

    async def round_trips(self, receiver, calls: int) -> list[float]:
        latencies = []
        for _ in range(calls):
            t = time.perf_counter()
            await receiver.ping.remote()
            latencies.append(time.perf_counter() - t)
        return latencies


@ray.remote(num_cpus=0.01)
class ChainLink:
    def __init__(self, next_link=None):
        self.next_link = next_link

    async def forward(self, payload: bytes) -> None:
        if self.next_link is not None:
            await self.next_link.forward.remote(payload)


@ray.remote(num_cpus=0.01)
class PipelineStage:
    """One stage of a raw Ray pipeline: forwards every payload to the next stage without awaiting it, with at
    most ``window`` calls in flight (a call returns once its payload is passed on and the window has room, so
    a full window holds the caller back: the raw counterpart of credit-based flow control); the last stage
    counts what arrives."""

    def __init__(self, next_stage=None, window: int = 10):
        self.next_stage = next_stage
        self.window = window
        self.in_flight: list = []
        self.received = 0
        self.bytes = 0

    async def receive(self, payload: bytes) -> None:
        if self.next_stage is None:
            self.received += 1
            self.bytes += len(payload)
            return
        self.in_flight.append(self.next_stage.receive.remote(payload))
        while len(self.in_flight) > self.window:
            await self.in_flight.pop(0)

    async def drain(self) -> int:
        if self.in_flight:
            await asyncio.gather(*self.in_flight)
            self.in_flight = []
        if self.next_stage is not None:
            return await self.next_stage.drain.remote()
        return self.received


def measure_raw_pipeline(depth: int = 4, payload_bytes: int = 32 * 1024, calls: int = 3000, window: int = 10) -> dict:
    """The best a Ray pipeline of ``depth`` actors does on this machine: the first stage is fed like the
    one-way baseline, every stage passes each 32 KiB payload on with one call and no work, at most ``window``
    calls in flight per hop (Flink's 2 exclusive + 8 floating buffers). Every payload crosses ``depth - 1``
    actor hops (plus the feed), each costing a call's CPU at both ends on the same cores."""
    stages = [PipelineStage.remote(None, window)]  # type: ignore[attr-defined]
    for _ in range(depth - 1):
        stages.append(PipelineStage.remote(stages[-1], window))  # type: ignore[attr-defined]
    first, sender = stages[-1], Sender.remote()  # type: ignore[attr-defined]
    payload = b"x" * payload_bytes
    ray.get(sender.one_way.remote(first, payload, 200, window))  # warm up
    ray.get(first.drain.remote())
    started = time.perf_counter()
    ray.get(sender.one_way.remote(first, payload, calls, window))
    arrived = ray.get(first.drain.remote()) - 200
    seconds = time.perf_counter() - started
    for actor in (sender, *stages):
        ray.kill(actor)
    return {
        "depth": depth,
        "calls_per_second": arrived / seconds,
        "mb_per_second": arrived * payload_bytes / seconds / 1e6,
    }


@ray.remote(num_cpus=0.01, max_concurrency=4)  # type: ignore[call-overload]
class SocketPipelineStage:
    """One stage of the raw socket pipeline: a reader thread takes each payload from its incoming Unix domain socket
    (``multiprocessing.connection``, as ``actors.socket_links``) into a queue, and the stage writes it on to the next
    stage's socket, nothing else; the first stage writes, the last counts."""

    def listen(self) -> str:
        import os
        import queue
        from multiprocessing.connection import Listener

        self.address = "\0barriersim-baseline-" + os.urandom(8).hex()
        self.listener = Listener(self.address, family="AF_UNIX", authkey=b"baseline")
        self.arrived: queue.SimpleQueue = queue.SimpleQueue()
        return self.address

    def accept(self) -> None:
        import threading

        connection = self.listener.accept()

        def read() -> None:
            while True:
                try:
                    self.arrived.put(connection.recv_bytes())
                except (EOFError, OSError):
                    return

        threading.Thread(target=read, daemon=True).start()

    def connect(self, address: str) -> None:
        from multiprocessing.connection import Client

        self.output = Client(address, family="AF_UNIX", authkey=b"baseline")

    def run(self, payloads: int, payload_bytes: int, first: bool, last: bool) -> int:
        received = 0
        payload = b"x" * payload_bytes
        for _ in range(payloads):
            if not first:
                payload = self.arrived.get()
                received += len(payload)
            if not last:
                self.output.send_bytes(payload)
        return received


def measure_raw_socket_pipeline(depth: int = 4, payload_bytes: int = 32 * 1024, payloads: int = 10000) -> dict:
    """32 KiB payloads through ``depth`` actors over Unix domain sockets, one per hop, with a reader thread per
    stage: what that transport carries here when nobody does any work (the counterpart of ``measure_raw_pipeline``
    for task actors linked by ``actors.socket_links``)."""
    stages = [SocketPipelineStage.remote() for _ in range(depth)]  # type: ignore[attr-defined]
    addresses = ray.get([stage.listen.remote() for stage in stages])
    ray.get(
        [stage.accept.remote() for stage in stages[1:]]
        + [writer.connect.remote(address) for writer, address in zip(stages, addresses[1:])]
    )
    last = depth - 1
    ray.get([stage.run.remote(200, payload_bytes, i == 0, i == last) for i, stage in enumerate(stages)])  # warm up
    started = time.perf_counter()
    arrived = (
        ray.get([stage.run.remote(payloads, payload_bytes, i == 0, i == last) for i, stage in enumerate(stages)])[-1]
        // payload_bytes
    )
    seconds = time.perf_counter() - started
    for stage in stages:
        ray.kill(stage)
    return {
        "depth": depth,
        "payloads_per_second": arrived / seconds,
        "mb_per_second": arrived * payload_bytes / seconds / 1e6,
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure_raw_ray(
    payload_bytes: int = 32 * 1024, calls: int = 3000, window: int = 16, round_trips: int = 1000, depth: int = 4
) -> dict:
    receiver, sender = Receiver.remote(), Sender.remote()  # type: ignore[attr-defined]
    payload = b"x" * payload_bytes
    ray.get(sender.one_way.remote(receiver, payload, 200, window))  # warm up
    seconds = ray.get(sender.one_way.remote(receiver, payload, calls, window))
    ray.get(sender.round_trips.remote(receiver, 100))
    rtts = ray.get(sender.round_trips.remote(receiver, round_trips))

    link: Any = None  # the last ChainLink's handle
    for _ in range(depth):
        link = ChainLink.remote(link)  # type: ignore[attr-defined]
    ray.get([link.forward.remote(b"b") for _ in range(50)])
    chain = []
    for _ in range(300):
        t = time.perf_counter()
        ray.get(link.forward.remote(b"b"))
        chain.append(time.perf_counter() - t)
    calls_per_second = calls / seconds
    return {
        "payload_bytes": payload_bytes,
        "one_way_calls_per_second": calls_per_second,
        "one_way_mb_per_second": calls_per_second * payload_bytes / 1e6,
        "round_trip_median_ms": statistics.median(rtts) * 1e3,
        "round_trip_p99_ms": percentile(rtts, 0.99) * 1e3,
        "one_hop_ms": statistics.median(rtts) * 1e3 / 2,
        "chain_depth": depth,
        "chain_median_ms": statistics.median(chain) * 1e3,
    }


def main() -> None:
    from rich.console import Console
    from rich.table import Table

    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False)
    try:
        r = measure_raw_ray()
    finally:
        ray.shutdown()
    table = Table(title="raw Ray baseline (this machine, this run)")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("one-way calls/s (32 KiB)", f"{r['one_way_calls_per_second']:,.0f}")
    table.add_row("one-way MB/s (32 KiB)", f"{r['one_way_mb_per_second']:,.1f}")
    table.add_row("round trip median (ms)", f"{r['round_trip_median_ms']:.2f}")
    table.add_row("round trip p99 (ms)", f"{r['round_trip_p99_ms']:.2f}")
    table.add_row(f"chain of {r['chain_depth']} actors, end to end median (ms)", f"{r['chain_median_ms']:.2f}")
    Console().print(table)


if __name__ == "__main__":
    main()
