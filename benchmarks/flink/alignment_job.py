"""Flink's measured alignment-latency job (docs/flink-facts.md), written from its description, for PyFlink 2.3.0.

How this works: this script runs under PyFlink (the ``.venv-flink`` that ``make flink-venv`` builds; it does not
import barriersim) in a local MiniCluster with one TaskManager, as the facts describe the job: a FLIP-27
``NumberSequenceSource`` (p=2) chained to a Python map that paces it with a token bucket and emits
``(key, seq, payload)`` with a 100-byte payload, 64 keys with 30 % of the records on key 0 and the rest uniform;
``key_by`` to a Python ``KeyedProcessFunction`` (p=4) that counts per key in a ``ValueState`` and sleeps 1 ms for
key 0; ``rebalance`` to Java's ``DiscardingSink`` (p=2); Python in thread mode; checkpoints every second, Flink's
defaults otherwise (32 KiB buffers, a 100 ms output flusher unless ``--buffer-timeout-ms`` says otherwise). Once every
task runs it waits ``--seconds``, then reads Flink's REST API: the checkpoint history, every completed checkpoint's
per-subtask statistics and the keyed subtasks' input counts (the one with the most owns key 0: the bottleneck). The
job's throughput is the keyed vertex's input count (every record passes it once) over the last two thirds of the
run: the count is read every second and the rate taken between the second and the last change of the REST API's
copy (the first read may be the metric fetcher's copy from before). It is not Flink's per-second meters, which
divide by a 60 s window (``MeterView``) and so understate the rate of a job younger than that. It writes all of it
as JSON to ``--out``; ``benchmarks/flink_remeasure.py`` runs it per setting and turns the JSON into the benchmark's
figures.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import urllib.request

from pyflink.common import Configuration, Types, WatermarkStrategy
from pyflink.datastream import KeyedProcessFunction, MapFunction, RuntimeContext, StreamExecutionEnvironment
from pyflink.datastream.connectors import Sink
from pyflink.datastream.connectors.number_seq import NumberSequenceSource
from pyflink.datastream.state import ValueStateDescriptor
from pyflink.java_gateway import get_gateway

PAYLOAD = "x" * 100
KEYS, HOT_SHARE = 64, 0.3


class PacedRecords(MapFunction):
    """The chained pacing map: a token bucket (a tenth of a second of burst) at ``rate`` records/s per subtask."""

    def __init__(self, rate: float, seed: int):
        self.rate, self.seed = rate, seed

    def open(self, runtime_context: RuntimeContext):
        self.tokens, self.last = 0.0, time.monotonic()
        self.rnd = random.Random(self.seed + id(self))

    def map(self, value):
        while True:
            now = time.monotonic()
            self.tokens = min(self.rate / 10, self.tokens + (now - self.last) * self.rate)
            self.last = now
            if self.tokens >= 1:
                self.tokens -= 1
                break
            time.sleep((1 - self.tokens) / self.rate)
        key = 0 if self.rnd.random() < HOT_SHARE else self.rnd.randint(1, KEYS - 1)
        return key, value, PAYLOAD


class CountPerKey(KeyedProcessFunction):
    """A ``ValueState`` counter per key; key 0, the hot key, sleeps 1 ms per record."""

    def open(self, runtime_context: RuntimeContext):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value, ctx):
        if value[0] == 0:
            time.sleep(0.001)
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield value[0], n


def configuration(args) -> Configuration:
    conf = Configuration()
    for key, value in {
        "python.execution-mode": "thread", "python.executable": sys.executable,
        "python.client.executable": sys.executable, "rest.port": str(args.rest_port),
        "web.checkpoints.history": "1000", "metrics.fetcher.update-interval": "500",
        "execution.checkpointing.interval": "1000ms",
    }.items():
        conf.set_string(key, value)
    if args.mode in ("unaligned", "aligned-with-timeout"):
        conf.set_string("execution.checkpointing.unaligned.enabled", "true")
    if args.mode == "aligned-with-timeout":
        conf.set_string("execution.checkpointing.aligned-checkpoint-timeout", f"{args.timeout_ms}ms")
    if args.mode == "at-least-once":
        conf.set_string("execution.checkpointing.mode", "AT_LEAST_ONCE")
    if args.buffer_timeout_ms is not None:
        conf.set_string("execution.buffer-timeout.interval", f"{args.buffer_timeout_ms}ms")
    return conf


def build(env: StreamExecutionEnvironment, rate: float, seed: int) -> None:
    records = Types.TUPLE([Types.INT(), Types.LONG(), Types.STRING()])
    source = env.from_source(NumberSequenceSource(0, 10**15), WatermarkStrategy.no_watermarks(), "source")
    paced = source.set_parallelism(2).map(PacedRecords(rate / 2, seed), output_type=records).set_parallelism(2)
    counted = (paced.key_by(lambda r: r[0], key_type=Types.INT())
               .process(CountPerKey(), output_type=Types.TUPLE([Types.INT(), Types.LONG()])).set_parallelism(4))
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", required=True,
                        choices=["aligned", "unaligned", "at-least-once", "aligned-with-timeout"])
    parser.add_argument("--rate", type=float, required=True, help="offered records/s, all sources together")
    parser.add_argument("--seconds", type=float, default=40.0, help="how long to run once every task runs")
    parser.add_argument("--timeout-ms", type=int, default=500, help="aligned-checkpoint timeout (aligned-with-timeout)")
    parser.add_argument("--buffer-timeout-ms", type=int, default=None, help="execution.buffer-timeout.interval")
    parser.add_argument("--rest-port", type=int, default=8081)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    env = StreamExecutionEnvironment.get_execution_environment(configuration(args))
    build(env, args.rate, args.seed)
    client = env.execute_async("alignment-latency")
    base = f"http://localhost:{args.rest_port}/jobs/{client.get_job_id()}"
    try:
        while True:  # the job's tasks deploy and open their Python interpreters first
            job = get(base)
            if job["state"] in ("FAILED", "CANCELED", "FINISHED"):
                raise SystemExit(f"alignment_job: the job ended {job['state']} before it ran")
            if all(v["status"] == "RUNNING" for v in job["vertices"]):
                break
            time.sleep(0.5)
        running_at = time.monotonic()
        vertices = {v["name"]: v for v in job["vertices"]}
        keyed = next(v for name, v in vertices.items() if "KEYED" in name.upper())
        time.sleep(args.seconds / 3)
        counts = []  # (when, the keyed vertex's input count) each time the REST API's copy of the counter changed
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
                details[checkpoint["id"]] = {v["name"]: get(f"{base}/checkpoints/details/{checkpoint['id']}/subtasks/"
                                                             f"{v['id']}")["subtasks"] for v in job["vertices"]}
        out = {
            "flink_version": get(f"http://localhost:{args.rest_port}/config").get("flink-version"),
            "settings": vars(args), "job": job, "history": history, "subtasks": details,
            "keyed_vertex": keyed["name"], "sink_vertex": next(n for n in vertices if n.startswith("Sink")),
            "keyed_records_in": subtask_counts(base, keyed, "numRecordsIn"),
            # the first read may still be the fetcher's copy from before: it is left out
            "throughput": ((counts[-1][1] - counts[1][1]) / (counts[-1][0] - counts[1][0])
                           if len(counts) > 2 else None),
            "throughput_samples": counts,
        }
        with open(args.out, "w") as f:
            json.dump(out, f)
    finally:
        client.cancel()
    return 0


if __name__ == "__main__":
    sys.exit(main())
