"""The job of Flink's measured alignment table (docs/flink-facts.md), row by row as the facts' own script ran it.

Runs under PyFlink 2.3.0 (``.venv-flink``), one MiniCluster per process; ``benchmarks/flink_remeasure.py`` runs it
per row and turns the JSON it writes (``--out``) into the benchmark's figures. What the job does, and which of its
settings the facts' rows used (the hot key only in the heavy and timeout rows), is in docs/flink-facts.md, "The
measured job in full" and "The idle rows". After every task runs it waits ``--seconds``, then reads Flink's REST
API: the checkpoint history, each completed checkpoint's per-subtask statistics, the keyed subtasks' input counts
and the keyed vertex's input count read every second (the job's throughput from Flink's counters, not from its
60 s per-second meters).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
import urllib.request

from pyflink.common import Configuration, Duration, Types, WatermarkStrategy
from pyflink.datastream import (
    CheckpointingMode,
    KeyedProcessFunction,
    MapFunction,
    RuntimeContext,
    StreamExecutionEnvironment,
)
from pyflink.datastream.connectors import Sink
from pyflink.datastream.connectors.number_seq import NumberSequenceSource
from pyflink.datastream.state import ValueStateDescriptor
from pyflink.java_gateway import get_gateway

KEYS, PAYLOAD_BYTES, KEYED_PARALLELISM = 64, 100, 4


class Throttle(MapFunction):
    """The chained pacing map: record ``n`` is due at ``t0 + n / rate``; more than 1 s behind (backpressure), the
    schedule starts again from now. Emits ``(key, random int, payload)``: key 0 for a ``hot`` in a million of the
    records, the others uniform over keys 1-63."""

    def __init__(self, rate: float, hot: int):
        self.rate, self.hot = rate, hot

    def open(self, runtime_context: RuntimeContext):
        self.rnd = random.Random()
        self.payload = "x" * PAYLOAD_BYTES
        self.t0, self.n = time.time(), 0

    def map(self, value):
        self.n += 1
        ahead = self.t0 + self.n / self.rate - time.time()
        if ahead > 0:
            time.sleep(ahead)
        elif ahead < -1.0:
            self.t0, self.n = time.time(), 0
        r = self.rnd.randrange(1_000_000)
        key = 0 if r < self.hot else 1 + self.rnd.randrange(KEYS - 1)
        return key, r, self.payload


class Work(KeyedProcessFunction):
    """A ``ValueState`` counter per key; key 0 sleeps ``delay_s`` per record (0: no sleep)."""

    def __init__(self, delay_s: float):
        self.delay_s = delay_s

    def open(self, runtime_context: RuntimeContext):
        self.count = runtime_context.get_state(ValueStateDescriptor("cnt", Types.LONG()))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        if self.delay_s and value[0] == 0:
            time.sleep(self.delay_s)
        yield value[0], n


def configuration(args, checkpoint_dir: str) -> Configuration:
    conf = Configuration()
    for key, value in {
        "python.execution-mode": "thread",
        "python.executable": sys.executable,
        "python.client.executable": sys.executable,
        "rest.port": str(args.rest_port),
        "web.checkpoints.history": "1000",
        "metrics.fetcher.update-interval": "500",
        "execution.checkpointing.storage": "filesystem",
        "execution.checkpointing.dir": "file://" + checkpoint_dir,
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": "3",
        "restart-strategy.fixed-delay.delay": "1 s",
        "minicluster.number-of-taskmanagers": "1",
        "taskmanager.numberOfTaskSlots": str(KEYED_PARALLELISM),
    }.items():
        conf.set_string(key, value)
    if args.buffer_timeout_ms is not None:
        conf.set_string("execution.buffer-timeout.interval", f"{args.buffer_timeout_ms}ms")
    return conf


def build(env: StreamExecutionEnvironment, args) -> None:
    env.set_parallelism(2)
    mode = CheckpointingMode.AT_LEAST_ONCE if args.mode == "at-least-once" else CheckpointingMode.EXACTLY_ONCE
    env.enable_checkpointing(1000, mode)
    if args.mode in ("unaligned", "aligned-with-timeout"):
        env.get_checkpoint_config().enable_unaligned_checkpoints(True)
    if args.mode == "aligned-with-timeout":
        env.get_checkpoint_config().set_aligned_checkpoint_timeout(Duration.of_millis(args.timeout_ms))
    records = Types.TUPLE([Types.INT(), Types.INT(), Types.STRING()])
    paced = env.from_source(NumberSequenceSource(0, 2**62), WatermarkStrategy.no_watermarks(), "source").map(
        Throttle(args.rate / 2, int(args.hot_share * 1_000_000)), output_type=records
    )
    counted = (
        paced.key_by(lambda r: r[0], key_type=Types.INT())
        .process(Work(args.hot_delay_us / 1e6), output_type=Types.TUPLE([Types.INT(), Types.LONG()]))
        .set_parallelism(KEYED_PARALLELISM)
    )
    sink = get_gateway().jvm.org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink()
    counted.rebalance().sink_to(Sink(sink)).set_parallelism(2)


def get(url: str):
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read().decode())


def vertex_sum(base: str, vertex: dict, metric: str) -> float:
    values = get(f"{base}/vertices/{vertex['id']}/subtasks/metrics?get={metric}&agg=sum")
    return float(values[0]["sum"]) if values else 0.0


def subtask_counts(base: str, vertex: dict, metric: str) -> list[float]:
    out = []
    for i in range(vertex["parallelism"]):
        values = get(f"{base}/vertices/{vertex['id']}/subtasks/{i}/metrics?get={metric}")
        out.append(float(values[0]["value"]) if values else 0.0)
    return out


def collect(base: str, args, running_at: float) -> dict:
    """Flink's REST answers once the run is over: the job, the checkpoint history, per-subtask statistics."""
    job = get(base)
    vertices = {v["name"]: v for v in job["vertices"]}
    keyed = next(v for name, v in vertices.items() if "KEYED" in name.upper())
    time.sleep(max(0.0, args.seconds / 3 - (time.monotonic() - running_at)))
    counts: list[
        tuple
    ] = []  # (when, the keyed vertex's input count) each time the REST API's copy of the counter changed
    while time.monotonic() - running_at < args.seconds:
        value = vertex_sum(base, keyed, "numRecordsIn")
        if not counts or value != counts[-1][1]:
            counts.append((time.monotonic(), value))
        time.sleep(1.0)
    job = get(base)
    history = get(f"{base}/checkpoints")["history"]
    details = {}
    for checkpoint in history:
        if checkpoint["status"] == "COMPLETED":
            details[checkpoint["id"]] = {
                v["name"]: get(f"{base}/checkpoints/details/{checkpoint['id']}/subtasks/{v['id']}")["subtasks"]
                for v in job["vertices"]
            }
    return {
        "flink_version": get(base.rsplit("/jobs/", 1)[0] + "/config").get("flink-version"),
        "settings": vars(args),
        "job": job,
        "history": history,
        "subtasks": details,
        "keyed_vertex": keyed["name"],
        "sink_vertex": next(n for n in vertices if n.upper().startswith("SINK")),
        "keyed_records_in": subtask_counts(base, keyed, "numRecordsIn"),
        # the first read may still be the metric fetcher's copy from before: it is left out
        "throughput": ((counts[-1][1] - counts[1][1]) / (counts[-1][0] - counts[1][0]) if len(counts) > 2 else None),
        "throughput_samples": counts,
        "loadavg": os.getloadavg(),  # the machine's load when the run ended (1, 5, 15 minutes)
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--mode", required=True, choices=["aligned", "unaligned", "at-least-once", "aligned-with-timeout"]
    )
    parser.add_argument("--rate", type=float, required=True, help="offered records/s, both sources together")
    parser.add_argument("--hot-share", type=float, default=0.0, help="share of the records on key 0 (heavy: 0.3)")
    parser.add_argument("--hot-delay-us", type=int, default=0, help="key 0's sleep per record (heavy: 1000)")
    parser.add_argument("--seconds", type=float, default=40.0, help="how long to run once every task runs")
    parser.add_argument("--timeout-ms", type=int, default=500, help="aligned-checkpoint timeout (aligned-with-timeout)")
    parser.add_argument("--buffer-timeout-ms", type=int, default=None, help="execution.buffer-timeout.interval")
    parser.add_argument("--rest-port", type=int, default=8081)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    checkpoint_dir = tempfile.mkdtemp(prefix="flink-alignment-cp-")
    env = StreamExecutionEnvironment.get_execution_environment(configuration(args, checkpoint_dir))
    build(env, args)
    client = env.execute_async("alignment-latency")
    base = f"http://localhost:{args.rest_port}/jobs/{client.get_job_id()}"
    try:
        while True:  # the job's tasks deploy and open their Python interpreters first
            job = get(base)
            if job["state"] in ("FAILED", "CANCELED", "FINISHED"):
                raise SystemExit(f"alignment_job: the job ended {job['state']} before it ran")
            if job["vertices"] and all(v["status"] == "RUNNING" for v in job["vertices"]):
                break
            time.sleep(0.5)
        out = collect(base, args, time.monotonic())
        with open(args.out, "w") as f:
            json.dump(out, f)
    finally:
        client.cancel()
        shutil.rmtree(checkpoint_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
