"""The figures of one run, from Flink's REST statistics or barriersim's, with one definition for both.

How this works: ``Statistics`` is a run's checkpoints (Flink's summary names) and, per completed checkpoint, each
vertex's subtask rows (``start_delay``, ``alignment_duration``, ``unaligned_checkpoint``) under the description's
vertex names. ``from_flink`` reads a raw file of ``runner`` (the REST vertices in the job's topological order are
the description's), ``from_barriersim`` a simulation's result (leaving out checkpoints a finished source took part
in, as ``alignment_latency.measure``). ``figures`` leaves out the first completed checkpoint and gives medians: end
to end (and its p90), the bottleneck vertex's latest start delay, the sinks' longest alignment, persisted and
processed data; per vertex its subtasks' unaligned flags (majority); the first six checkpoints' end-to-end ramp.
``combined`` takes several runs' figures to one: medians, the ramp per checkpoint, the flags by majority.
``flink_measures`` adds what only Flink's metrics give: throughput, busy time per record per vertex, bytes/record."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from benchmarks.alignment_latency import p90
from benchmarks.flink_family.description import Config, loads

NUMERIC = ("e2e", "e2e_p90", "start_delay", "sink_alignment", "persisted_kib", "processed_kib")
RAMP = 6


@dataclass(frozen=True)
class Statistics:
    checkpoints: list[dict]  # id, status, end_to_end_duration, persisted_data, processed_data, checkpoint_type
    subtasks: dict[int, dict[str, list[dict]]]  # completed checkpoint id -> vertex -> rows in subtask order


def from_flink(raw: dict, config: Config) -> Statistics:
    names = [v.name for v in config.vertices]
    rest = [v["id"] for v in raw["job"]["vertices"]]
    if len(rest) != len(names):
        raise ValueError(f"{config.name}: Flink's job has {len(rest)} vertices, the description {len(names)}")
    subtasks = {}
    for cid, per_vertex in raw["subtasks"].items():
        subtasks[int(cid)] = {
            name: [
                {
                    "start_delay": s["start_delay"],
                    "alignment_duration": s["alignment"]["duration"],
                    "unaligned_checkpoint": s["unaligned_checkpoint"],
                }
                for s in sorted(per_vertex[vid], key=lambda s: s["index"])
            ]
            for name, vid in zip(names, rest)
        }
    return Statistics(raw["history"], subtasks)


def from_barriersim(checkpoints: list[dict], rows: list[dict], config: Config) -> Statistics:
    sources = {f"{config.source.name}#{i}" for i in range(config.source.parallelism)}
    acked: dict[int, set[str]] = {}
    for r in rows:
        if not r["finished"]:
            acked.setdefault(r["id"], set()).add(r["task"])
    kept = [c for c in checkpoints if c["status"] != "COMPLETED" or sources <= acked.get(c["id"], set())]
    subtasks: dict[int, dict[str, list[dict]]] = {}
    for r in sorted(rows, key=lambda r: int(r["task"].rpartition("#")[2])):
        vertex = r["task"].rpartition("#")[0]
        subtasks.setdefault(r["id"], {}).setdefault(vertex, []).append(
            {k: r[k] for k in ("start_delay", "alignment_duration", "unaligned_checkpoint")}
        )
    return Statistics(kept, subtasks)


def _flags(rows: list[list[dict]]) -> str:
    """Per subtask, 1 if it reported ``unaligned_checkpoint`` in most of the checkpoints."""
    n = len(rows)
    return ",".join(
        "1" if sum(r[i]["unaligned_checkpoint"] for r in rows) * 2 > n else "0" for i in range(len(rows[0]))
    )


def figures(stats: Statistics, config: Config) -> dict:
    completed = sorted((c for c in stats.checkpoints if c["status"] == "COMPLETED"), key=lambda c: c["id"])
    steady = [c for c in completed[1:] if c["id"] in stats.subtasks]
    if not steady:
        return {"checkpoints": 0, "ramp": [c["end_to_end_duration"] for c in completed[:RAMP]]}
    bottleneck = loads(config).bottleneck_vertex
    per = [stats.subtasks[c["id"]] for c in steady]
    e2e = [c["end_to_end_duration"] for c in steady]
    return {
        "checkpoints": len(steady),
        "e2e": statistics.median(e2e),
        "e2e_p90": p90(e2e),
        "start_delay": statistics.median(max(r["start_delay"] for r in p[bottleneck]) for p in per),
        "sink_alignment": statistics.median(max(r["alignment_duration"] for r in p[config.sink.name]) for p in per),
        "persisted_kib": statistics.median(c["persisted_data"] / 1024 for c in steady),
        "processed_kib": statistics.median(c["processed_data"] / 1024 for c in steady),
        "flags": {v.name: _flags([p[v.name] for p in per]) for v in config.vertices},
        "ramp": [c["end_to_end_duration"] for c in completed[:RAMP]],
    }


def combined(runs: list[dict]) -> dict:
    """Several runs' figures as one (the simulator's over seeds): each numeric figure's median, the ramp's median
    per checkpoint (over the runs that reached it), each subtask's unaligned flag by majority."""
    if len(runs) == 1:
        return runs[0]
    out: dict = {"checkpoints": statistics.median(r["checkpoints"] for r in runs)}
    for key in NUMERIC:
        values = [r[key] for r in runs if r.get(key) is not None]
        if values:
            out[key] = statistics.median(values)
    ramps = [r["ramp"] for r in runs]
    out["ramp"] = [statistics.median(r[k] for r in ramps if len(r) > k) for k in range(max(len(r) for r in ramps))]
    flagged = [r["flags"] for r in runs if "flags" in r]
    if flagged:
        out["flags"] = {
            vertex: ",".join(
                "1" if sum(f[vertex].split(",")[i] == "1" for f in flagged) * 2 > len(flagged) else "0"
                for i in range(len(flagged[0][vertex].split(",")))
            )
            for vertex in flagged[0]
        }
    return out


def flink_measures(raw: dict, config: Config) -> dict:
    """From the two metric snapshots of the measured window: records/s out of the sources, busy µs per record in per
    vertex and per subtask (what a spin or a sleep costs as Flink measures it), bytes per record out of the sources."""
    first, last = raw["metrics"][0], raw["metrics"][-1]
    seconds = last["t"] - first["t"]
    names = [v.name for v in config.vertices]

    def delta(vertex: str, metric: str) -> float:
        return sum(
            b.get(metric, 0.0) - a.get(metric, 0.0) for a, b in zip(first["vertices"][vertex], last["vertices"][vertex])
        )

    def per_subtask(vertex: str) -> list[float | None]:
        out = []
        for a, b in zip(first["vertices"][vertex], last["vertices"][vertex]):
            records = b.get("numRecordsIn", 0.0) - a.get("numRecordsIn", 0.0)
            busy = b.get("accumulateBusyTimeMs", 0.0) - a.get("accumulateBusyTimeMs", 0.0)
            out.append(busy * 1000 / records if records else None)
        return out

    rest = [v["id"] for v in raw["job"]["vertices"]]
    busy, subtasks = {}, {}
    for name, vid in zip(names[1:], rest[1:]):
        records = delta(vid, "numRecordsIn")
        busy[name] = delta(vid, "accumulateBusyTimeMs") * 1000 / records if records else None
        subtasks[name] = per_subtask(vid)
    out = delta(rest[0], "numRecordsOut")
    return {
        "throughput": out / seconds if seconds > 0 else None,
        "busy_us_per_record": busy,
        "busy_us_per_record_per_subtask": subtasks,
        "bytes_per_record": delta(rest[0], "numBytesOut") / out if out else None,
    }
