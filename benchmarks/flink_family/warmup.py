"""Flink's warm-up, sampled: the share of the cores the JVM's own threads (compilers, collector, Flink's others)
take, and each vertex's CPU per record, window by window from the job's first checkpoint (docs/fidelity-family.md,
"The JVM's own threads").

Runs a family configuration on Flink as ``runner`` does (a fresh JVM and MiniCluster) and samples every thread of
the JVM (``/proc/PID/task/*/schedstat``) every ``--step`` s and, unless ``--rest-step 0``, each vertex's record
counters and busy time over REST. The samples go gzipped to ``benchmarks/flink/family/warmup/``; ``--fit`` fits the
calibration's ``JVM_SHARE_*`` over the runs that keep the cores busy. Run it with nothing else on the machine:
``.venv/bin/python -m benchmarks.flink_family.warmup --only NAME [--rest-step 0 --tag=-threads] [--fit]``."""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import sys
import threading
import time
from pathlib import Path

from benchmarks.flink_family.generator import FAMILY_JSON, load_family
from benchmarks.flink_family.runner import (
    ROOT,
    SCRATCH,
    RunFailed,
    _get,
    _wait_running,
    compile_job,
    flink_jvm,
    poll_job,
    selected,
    write_gzipped,
)

WARMUP_DIR = ROOT / "benchmarks" / "flink" / "family" / "warmup"
FETCH_MS = 200  # the JobManager's metric store fetched this often (metrics.fetcher.update-interval)
REST_METRICS = ("numRecordsIn", "numRecordsOut", "accumulateBusyTimeMs")
NAME_LEN = 15  # Linux keeps a thread's name to 15 characters (/proc/PID/task/TID/comm)


def thread_group(comm: str, vertices: list[str]) -> str:
    """Which part of the JVM a thread belongs to: a vertex's task threads, the JIT compilers, the collector, other."""
    for name in vertices:
        if comm.startswith(f"{name} ("[:NAME_LEN]) or (len(name) >= NAME_LEN and comm == name[:NAME_LEN]):
            return name
    if "CompilerThre" in comm:
        return "jit"
    if comm.startswith(("GC Thread", "G1 ", "VM Periodic")):
        return "gc"
    return "other"


def cpu_by_thread(pid: int) -> dict[str, int]:
    """Nanoseconds each live thread of ``pid`` has run, by ``comm/tid`` (threads that ended are not counted)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().rstrip("\n")  # a name cut at 15 characters may end in a space
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[f"{comm}/{tid}"] = int(f.read().split()[0])
        except OSError:
            continue  # the thread ended between the listing and the read
    return out


class Sampler(threading.Thread):
    """Samples the JVM's threads every ``step`` s until stopped; REST metrics too once ``base`` is set."""

    def __init__(self, pid: int, step: float, started: float, rest_step: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.step, self.started, self.rest_step = pid, step, started, rest_step
        self.base: str | None = None
        self.vertices: list[dict] = []
        self.threads: list[dict] = []
        self.rest: list[dict] = []
        self.rest_next = 0.0
        self.done = threading.Event()

    def run(self) -> None:
        next_at = time.monotonic()
        while not self.done.is_set():
            t = time.monotonic() - self.started
            try:
                self.threads.append({"t": t, "epoch_ms": time.time() * 1000, "ns": cpu_by_thread(self.pid)})
            except OSError:
                return  # the JVM ended
            if self.rest_step and self.base and self.vertices and t >= self.rest_next:
                self.rest_next = t + self.rest_step
                per_vertex: dict[str, dict[str, float]] = {}
                row = {"t": t, "epoch_ms": time.time() * 1000, "vertices": per_vertex}
                try:
                    for v in self.vertices:
                        got = _get(
                            f"{self.base}/vertices/{v['id']}/subtasks/metrics?get={','.join(REST_METRICS)}&agg=sum"
                        )
                        per_vertex[v["name"]] = {m["id"]: float(m["sum"]) for m in got}
                    self.rest.append(row)
                except OSError:
                    pass  # the REST API is busy or going away: the next sample
            next_at += self.step
            self.done.wait(max(0.0, next_at - time.monotonic()))


def _vertices(base: str, job: dict) -> tuple[list[dict], str] | None:
    """The job's vertices and REST base once the JobManager knows them (before the tasks run)."""
    return ([{"id": v["id"], "name": v["name"]} for v in job["vertices"]], base) if job["vertices"] else None


def run_once(config, classes: Path, out: Path, seconds: float, step: float, rest_step: float) -> None:
    description = {**config.to_json(), "metrics_fetch_ms": FETCH_MS if rest_step else 5000}
    load_before = os.getloadavg()
    started = time.monotonic()
    with flink_jvm(description, out.name.replace(".json.gz", ""), classes) as (process, port):
        sampler = Sampler(process.pid, step, started, rest_step)
        sampler.start()
        try:  # sampled over REST from the job's submission on
            sampler.vertices, sampler.base = poll_job(port, process, _vertices, "the job was submitted", every=0.05)
            _wait_running(port, process)
            running_at, running_epoch_ms = time.monotonic() - started, time.time() * 1000
            time.sleep(max(0.0, started + running_at + seconds - time.monotonic()))
            checkpoints = _get(f"{sampler.base}/checkpoints")["history"]
        finally:
            sampler.done.set()
            sampler.join()
    raw = {
        "config": config.to_json(),
        "step_s": step,
        "running_at": running_at,
        "running_epoch_ms": running_epoch_ms,
        "vertices": [v["name"] for v in sampler.vertices],
        "threads": sampler.threads,
        "rest": sampler.rest,
        "checkpoints": sorted(
            (
                {"id": c["id"], "trigger_timestamp": c["trigger_timestamp"], "e2e": c["end_to_end_duration"]}
                for c in checkpoints
                if c["status"] == "COMPLETED"
            ),
            key=lambda c: c["id"],
        ),
        "loadavg": {"before": load_before, "after": os.getloadavg()},
        "cpu_cores": os.cpu_count(),
    }
    write_gzipped(out, raw)


def _at(samples: list[dict], t: float) -> dict | None:
    """The last sample taken at or before ``t``."""
    best = None
    for s in samples:
        if s["t"] <= t:
            best = s
    return best


def group_ns(sample: dict, vertices: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for key, ns in sample["ns"].items():
        g = thread_group(key.rsplit("/", 1)[0], vertices)
        out[g] = out.get(g, 0) + ns
    return out


def _shares(a: dict, b: dict, vertices: list[str], cores: int) -> dict[str, float]:
    """The share of the machine's ``cores`` each thread group took between thread samples ``a`` and ``b``."""
    ga, gb = group_ns(a, vertices), group_ns(b, vertices)
    span = b["t"] - a["t"]
    return {g: (gb.get(g, 0) - ga.get(g, 0)) / 1e9 / span / cores for g in set(ga) | set(gb)}


def job_start(raw: dict) -> float:
    """When the job started (seconds since the JVM did): its first checkpoint's trigger (Flink triggers it once every
    task runs), or when the REST API said every task runs if no checkpoint completed or the clocks are not there."""
    if raw.get("running_epoch_ms") is None or not raw["checkpoints"]:
        return raw["running_at"]
    return raw["running_at"] + (raw["checkpoints"][0]["trigger_timestamp"] - raw["running_epoch_ms"]) / 1000


def windows(raw: dict, edges: list[float]) -> list[dict]:
    """Per window [a, b) of seconds since the job's start (``job_start``): per vertex CPU and busy µs per record
    (records in, or out for a source), and the share of the machine's cores each thread group took."""
    vertices, cores, t0 = raw["vertices"], raw["cpu_cores"], job_start(raw)
    rows = []
    for a, b in zip(edges, edges[1:]):
        ta, tb = _at(raw["threads"], t0 + a), _at(raw["threads"], t0 + b)
        if not (ta and tb) or tb["t"] <= ta["t"]:
            continue
        row: dict = {"from": a, "to": b, "share": _shares(ta, tb, vertices, cores), "vertices": {}}
        rows.append(row)
        ra = _at(raw["rest"], t0 + a) or (raw["rest"][0] if raw["rest"] else None)
        rb = _at(raw["rest"], t0 + b)
        if not (ra and rb) or rb["t"] <= ra["t"]:
            continue
        # the threads' CPU over the REST samples' window, for the per-record figures
        ra_ns = group_ns(_at(raw["threads"], ra["t"]) or ta, vertices)
        rb_ns = group_ns(_at(raw["threads"], rb["t"]) or tb, vertices)
        for i, name in enumerate(vertices):
            ma, mb = ra["vertices"].get(name), rb["vertices"].get(name)
            if not ma or not mb:
                continue
            counter = "numRecordsOut" if i == 0 else "numRecordsIn"
            records = mb[counter] - ma[counter]
            rest_span = rb["t"] - ra["t"]
            cpu_ns = rb_ns.get(name, 0) - ra_ns.get(name, 0)
            row["vertices"][name] = {
                "records_per_s": records / rest_span,
                "cpu_us": cpu_ns / 1e3 / records if records else None,
                "busy_us": (mb["accumulateBusyTimeMs"] - ma["accumulateBusyTimeMs"]) * 1e3 / records
                if records
                else None,
            }
    return rows


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}"


def startup_share(raw: dict) -> dict[str, float]:
    """The share of the cores each thread group took from the JVM's start until the job's (``job_start``)."""
    first, last = raw["threads"][0], _at(raw["threads"], job_start(raw))
    if last is None or last["t"] <= first["t"]:
        return {}
    return _shares(first, last, raw["vertices"], raw["cpu_cores"])


def summary(raw: dict, edges: list[float]) -> str:
    start = startup_share(raw)
    lines = ["  until the job | " + ", ".join(f"{g} {100 * s:.0f}%" for g, s in sorted(start.items()))]
    for w in windows(raw, edges):
        parts = [
            f"{name[:10]} {v['records_per_s']:.0f}/s cpu {_us(v['cpu_us'])} busy {_us(v['busy_us'])}"
            for name, v in w["vertices"].items()
        ]
        tasks = sum(s for g, s in w["share"].items() if g in raw["vertices"])
        share = f"tasks {100 * tasks:.0f}%, " + ", ".join(
            f"{g} {100 * s:.0f}%" for g, s in sorted(w["share"].items()) if g in ("jit", "gc", "other")
        )
        lines.append(f"  {w['from']:5.1f}-{w['to']:5.1f} s | " + " | ".join(parts) + f" | {share}")
    return "\n".join(lines)


EDGES = [0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0]
# a run whose JVM took this much of the machine in its last windows keeps it busy (with the sampler's own 3-4 %: 95 %)
BUSY_MACHINE = 0.90


def jvm_shares(rows: list[dict], vertices: list[str]) -> list[tuple[float, float, float]]:
    """Per window of ``rows`` (``windows``): its middle (s since the job's start), the JVM's own threads' share of what
    the JVM ran, and the window's length."""
    out = []
    for w in rows:
        jvm = sum(s for g, s in w["share"].items() if g not in vertices)
        ran = sum(w["share"].values())
        if ran > 0:
            out.append(((w["from"] + w["to"]) / 2, jvm / ran, w["to"] - w["from"]))
    return out


def keeps_cores_busy(rows: list[dict]) -> bool:
    """Whether the JVM ran the machine's cores full in the last three of a run's windows ``rows`` (``windows``)."""
    ran = [sum(w["share"].values()) for w in rows]
    return len(ran) >= 3 and min(ran[-3:]) >= BUSY_MACHINE


def fit_share(points: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    """``(start, steady, decay_s)`` of steady + (start - steady) e^(-t / decay) closest to ``points`` (middle, share,
    weight) in weighted least squares, on a grid of 0.01 and 0.5 s."""
    best: tuple[float, float, float, float] | None = None
    for start in (x / 100 for x in range(0, 91)):
        for steady in (x / 100 for x in range(0, 41)):
            for decay in (x / 2 for x in range(1, 61)):
                err = sum(w * (steady + (start - steady) * math.exp(-t / decay) - y) ** 2 for t, y, w in points)
                if best is None or err < best[0]:
                    best = (err, start, steady, decay)
    assert best is not None
    return best[1], best[2], best[3]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.flink_family.warmup", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--family", type=Path, default=FAMILY_JSON)
    parser.add_argument("--out-dir", type=Path, default=WARMUP_DIR)
    parser.add_argument("--only", required=True, help="comma-separated shell patterns of configuration names")
    parser.add_argument("--runs", type=int, default=2, help="runs per configuration")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long to sample after the job runs")
    parser.add_argument("--step", type=float, default=0.1, help="seconds between samples of the JVM's threads")
    parser.add_argument(
        "--rest-step", type=float, default=0.5, help="seconds between REST samples (0: none, the threads only)"
    )
    parser.add_argument("--tag", default="", help="added to the files' names (a variant of the probe)")
    parser.add_argument(
        "--fit",
        action="store_true",
        help="also fit the JVM's share of the cores over the runs that keep the cores busy (calibration.JVM_SHARE_*)",
    )
    parser.add_argument("--summary", action="store_true", help="only print the summaries of the files already there")
    args = parser.parse_args(argv)
    configs, _ = load_family(args.family)
    chosen = selected(configs, args.only)
    if not chosen:
        print(f"flink_family.warmup: --only {args.only!r} names no configuration of {args.family}", file=sys.stderr)
        return 2
    args.out_dir.mkdir(parents=True, exist_ok=True)
    classes = None if args.summary else compile_job(SCRATCH / "classes")
    edges = [e for e in EDGES if e <= args.seconds]
    failed = 0
    raws: list[dict] = []
    for config in chosen:
        for i in range(1, args.runs + 1):
            out = args.out_dir / f"{config.name}{args.tag}-run{i}.json.gz"
            if not out.exists() and classes is not None:
                try:
                    run_once(config, classes, out, args.seconds, args.step, args.rest_step)
                except (RunFailed, OSError) as err:
                    failed += 1
                    print(f"{out.name}: failed: {err}", file=sys.stderr)
                    continue
            if out.exists():
                raw = json.loads(gzip.decompress(out.read_bytes()))
                raws.append(raw)
                print(
                    f"{out.name} (the job started {job_start(raw):.1f} s after the JVM, its tasks all ran at "
                    f"{raw['running_at']:.1f} s; windows from the job's start):"
                )
                print(summary(raw, edges))
    if args.fit:
        rows = [(windows(raw, edges), raw["vertices"]) for raw in raws]
        busy = [(w, vertices) for w, vertices in rows if keeps_cores_busy(w)]
        if busy:
            start, steady, decay = fit_share([p for w, vertices in busy for p in jvm_shares(w, vertices)])
            print(
                f"the JVM's share over the {len(busy)} of {len(raws)} runs that keep the cores busy: "
                f"start {start:.2f}, steady {steady:.2f}, decay {decay * 1000:.0f} ms"
            )
        else:
            print(f"none of the {len(raws)} runs keeps the cores busy: nothing to fit")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
