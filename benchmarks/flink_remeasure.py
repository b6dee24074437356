"""Flink 2.3.0 itself on this machine: runs the facts' job (``benchmarks/flink/alignment_job.py``) per row of Flink's
table and turns Flink's REST statistics into the figures ``benchmarks.alignment_latency`` computes for barriersim.

Each setting (a row of ``FLINK_TABLE``, the idle rows without the hot key as the facts ran them; and the idle aligned
row on the heavy rows' job, hot key included, at three output-flusher intervals) runs ``--runs`` times for
``--seconds`` under PyFlink (``make flink-venv``); the raw JSON is kept gzipped in ``--raw-dir``
(``benchmarks/flink/measured/``). ``summarize`` computes the benchmark's figures from one file with its definitions;
the runs give a range per figure, written to ``benchmarks/flink_remeasured.json`` (read by ``alignment_checks``).
Run: ``.venv/bin/python -m benchmarks.flink_remeasure`` (about 55 s a run, 20 runs) with nothing else running;
``--summarize-only`` recomputes the figures from the raw files."""

from __future__ import annotations

import argparse
import fnmatch
import gzip
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from benchmarks.alignment_checks import (
    ALIGNED_TIMEOUT_MS,
    CALM_HOT,
    FLINK_TABLE,
    HOT_KEY_DELAY_US,
    HOT_KEY_GROUPS,
    HOT_KEY_SHARE,
    OFFERED_RECORDS_PER_S,
    span_text,
)
from benchmarks.alignment_latency import DEFAULT_FLUSHER_MS, FLUSHER_TIMEOUTS_MS, p90
from benchmarks.flink_family.runner import wait_for_quiet

ROOT = Path(__file__).resolve().parent.parent
JOB = ROOT / "benchmarks" / "flink" / "alignment_job.py"
FLINK_VENV = ROOT / ".venv-flink"
REMEASURED = ROOT / "benchmarks" / "flink_remeasured.json"
SCRATCH = ROOT / "runs" / "flink-remeasure"  # each run's JSON before it is gzipped, and its log
# the idle aligned row on the heavy rows' job at the benchmark's execution.buffer-timeout.interval values (ms; None:
# Flink's default, 100 ms)
FLUSHER_VARIANTS = tuple(None if ms == DEFAULT_FLUSHER_MS else ms for ms in FLUSHER_TIMEOUTS_MS)
FIGURES = (
    "e2e",
    "e2e_p90",
    "start_delay",
    "sink_alignment",
    "after_start",
    "persisted_kib",
    "processed_kib",
    "throughput",
)


def settings() -> list[dict]:
    """One entry per row of Flink's table, then the idle aligned row with the hot key at the flusher intervals."""
    rows = [
        {"group": group, "mode": mode, "rate": OFFERED_RECORDS_PER_S[group], "buffer_timeout_ms": None}
        for group, mode in FLINK_TABLE
    ]
    rows += [
        {"group": CALM_HOT, "mode": "aligned", "rate": OFFERED_RECORDS_PER_S[CALM_HOT], "buffer_timeout_ms": ms}
        for ms in FLUSHER_VARIANTS
    ]
    return rows


def setting_name(s: dict) -> str:
    flusher = "" if s["buffer_timeout_ms"] is None else f"-flusher{s['buffer_timeout_ms']}ms"
    return f"{s['group'].replace(' ', '_').replace(',', '')}-{s['mode']}{flusher}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def run_job(s: dict, seconds: float, out: Path) -> None:
    """One run of the job under PyFlink; PEMJA's embedded interpreter finds PyFlink through PYTHONPATH."""
    python = FLINK_VENV / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"flink_remeasure: {python} is missing: run `make flink-venv` first")
    site = next((FLINK_VENV / "lib").glob("python3*/site-packages"))
    cmd = [
        str(python),
        str(JOB),
        "--mode",
        s["mode"],
        "--rate",
        str(s["rate"]),
        "--seconds",
        str(seconds),
        "--timeout-ms",
        str(ALIGNED_TIMEOUT_MS),
        "--rest-port",
        str(_free_port()),
        "--out",
        str(out),
    ]
    if s["buffer_timeout_ms"] is not None:
        cmd += ["--buffer-timeout-ms", str(s["buffer_timeout_ms"])]
    if s["group"] in HOT_KEY_GROUPS:
        cmd += ["--hot-share", str(HOT_KEY_SHARE), "--hot-delay-us", str(HOT_KEY_DELAY_US)]
    log = out.with_suffix(".log")
    with open(log, "w") as f:
        done = subprocess.run(
            cmd, stdout=f, stderr=subprocess.STDOUT, timeout=seconds + 240, env={**os.environ, "PYTHONPATH": str(site)}
        )
    if done.returncode != 0 or not out.exists():
        raise SystemExit(f"flink_remeasure: the run {out.name} failed (exit {done.returncode}); see {log}")


def _flags(per_checkpoint: list[list[bool]]) -> str:
    n = len(per_checkpoint)
    return ",".join("1" if sum(c[i] for c in per_checkpoint) * 2 > n else "0" for i in range(len(per_checkpoint[0])))


def summarize(raw: dict) -> dict:
    """The benchmark's figures from one run's REST statistics, as ``alignment_latency.measure`` takes them: medians
    and p90 over the completed checkpoints leaving out the first; the bottleneck's start delay (with the hot key the
    keyed subtask that read the most records, which owns key 0; without it the latest keyed subtask per checkpoint);
    the larger alignment of the two sinks; persisted and processed data; per subtask whether it reported
    ``unaligned_checkpoint`` in most checkpoints; the first six end-to-end durations; the counted records/s."""
    completed = sorted((c for c in raw["history"] if c["status"] == "COMPLETED"), key=lambda c: c["id"])
    steady = completed[1:]  # the first completed checkpoint is left out, as in the facts' measurement
    keyed_in = raw["keyed_records_in"]
    bottleneck = max(range(len(keyed_in)), key=keyed_in.__getitem__)
    per = [raw["subtasks"][str(c["id"])] for c in steady]
    keyed = [p[raw["keyed_vertex"]] for p in per]
    sinks = [p[raw["sink_vertex"]] for p in per]
    hot = raw.get("settings", {}).get("hot_share", HOT_KEY_SHARE) > 0
    delays = [k[bottleneck]["start_delay"] if hot else max(s["start_delay"] for s in k) for k in keyed]
    e2e = [c["end_to_end_duration"] for c in steady]
    return {
        "checkpoints": len(steady),
        "bottleneck_index": bottleneck,
        "e2e": statistics.median(e2e),
        "e2e_p90": p90(e2e),
        "start_delay": statistics.median(delays),
        "sink_alignment": statistics.median(max(s["alignment"]["duration"] for s in ss) for ss in sinks),
        "after_start": statistics.median(e - d for e, d in zip(e2e, delays)),
        "persisted_kib": statistics.median(c["persisted_data"] / 1024 for c in steady),
        "processed_kib": statistics.median(c["processed_data"] / 1024 for c in steady),
        "keyed_unaligned": _flags([[s["unaligned_checkpoint"] for s in k] for k in keyed]),
        "sinks_unaligned": _flags([[s["unaligned_checkpoint"] for s in ss] for ss in sinks]),
        "checkpoint_types": sorted({c["checkpoint_type"] for c in steady}),
        "ramp": [c["end_to_end_duration"] for c in completed[:6]],
        "throughput": raw["throughput"],
    }


def combine(s: dict, runs: list[dict]) -> dict:
    """A setting's runs as ranges (low, high) per figure, the flags and ramps per run."""
    row = {
        **{k: s[k] for k in ("group", "mode", "buffer_timeout_ms")},
        "runs": len(runs),
        "checkpoints": [r["checkpoints"] for r in runs],
    }
    for name in FIGURES:
        values = [r[name] for r in runs]
        row[name] = [round(min(values), 1), round(max(values), 1)]
    for name in ("keyed_unaligned", "sinks_unaligned", "bottleneck_index", "checkpoint_types", "ramp"):
        row[name] = [r[name] for r in runs]
    return row


def show(doc: dict) -> None:
    table = Table(
        title=f"Flink {doc['flink_version']} re-measured on this machine ({doc['machine']}), beside the "
        "facts' table (docs/flink-facts.md)"
    )
    for col in (
        "setting",
        "mode",
        "flusher",
        "e2e median",
        "e2e p90",
        "start delay",
        "sink alignment",
        "persisted KiB",
        "processed KiB",
        "records/s",
        "keyed / sink flags",
    ):
        table.add_column(col)
    for row in doc["rows"]:
        facts = FLINK_TABLE.get((row["group"], row["mode"])) if row["buffer_timeout_ms"] is None else None

        def cell(name: str, fact_name: str) -> str:
            fact = getattr(facts, fact_name, None) if facts else None  # noqa: B023 - called in this iteration
            return span_text(row[name]) + (f" (facts {span_text(fact)})" if fact else "")  # noqa: B023

        table.add_row(
            row["group"],
            row["mode"],
            f"{row['buffer_timeout_ms'] or DEFAULT_FLUSHER_MS} ms",
            cell("e2e", "e2e"),
            cell("e2e_p90", "e2e_p90"),
            cell("start_delay", "start_delay"),
            cell("sink_alignment", "sink_alignment"),
            cell("persisted_kib", "persisted_kib"),
            cell("processed_kib", "processed_kib"),
            cell("throughput", "throughput"),
            f"{' | '.join(row['keyed_unaligned'])} / {' | '.join(row['sinks_unaligned'])}",
        )
    Console(width=240).print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="runs per setting (the facts' table: two)")
    parser.add_argument("--seconds", type=float, default=40.0, help="each run's length once every task runs")
    parser.add_argument("--raw-dir", type=Path, default=ROOT / "benchmarks" / "flink" / "measured")
    parser.add_argument("--summarize-only", action="store_true", help="recompute from the raw files in --raw-dir")
    parser.add_argument("--out", type=Path, default=REMEASURED)
    parser.add_argument(
        "--only",
        default="",
        help="run only the settings whose name matches one of these "
        "comma-separated shell patterns (e.g. 'no_backpressure-*'); the others are summarized",
    )
    parser.add_argument(
        "--wait-load",
        type=float,
        default=None,
        help="before each run, wait until the 1-minute load average is below this (a shared machine)",
    )
    args = parser.parse_args(argv)
    only = [p for p in args.only.split(",") if p]
    args.raw_dir.mkdir(parents=True, exist_ok=True)
    rows, version = [], None
    for s in settings():
        runs = []
        for i in range(1, args.runs + 1):
            kept = args.raw_dir / f"{setting_name(s)}-run{i}.json.gz"
            if not args.summarize_only and (not only or any(fnmatch.fnmatch(setting_name(s), p) for p in only)):
                if args.wait_load is not None:
                    wait_for_quiet(args.wait_load)
                started = time.monotonic()
                SCRATCH.mkdir(parents=True, exist_ok=True)
                out = SCRATCH / f"{setting_name(s)}-run{i}.json"
                run_job(s, args.seconds, out)
                with gzip.open(kept.with_suffix(".tmp"), "wb") as f:
                    f.write(out.read_bytes())
                kept.with_suffix(".tmp").replace(kept)
                out.unlink()
                print(f"{kept.name}: {time.monotonic() - started:.0f} s", file=sys.stderr)
            if not kept.exists():
                raise SystemExit(f"flink_remeasure: {kept} is missing: run without --summarize-only first")
            raw = json.loads(gzip.decompress(kept.read_bytes()))
            version = raw["flink_version"]
            runs.append(summarize(raw))
        rows.append(combine(s, runs))
    doc = {
        "flink_version": version,
        "machine": f"{os.cpu_count()} cores, {platform.machine()}",
        "runs_per_setting": args.runs,
        "seconds_per_run": args.seconds,
        "rows": rows,
    }
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(args.out)
    show(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
