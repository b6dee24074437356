"""The warm-up probe's arithmetic (``benchmarks.flink_family.warmup``): which threads are whose, the shares per
window from the job's start, and the fit that gives the calibration's ``JVM_SHARE_*``, on made-up samples."""

from __future__ import annotations

import math

import pytest

from benchmarks.flink_family.warmup import fit_share, job_start, jvm_shares, keeps_cores_busy, thread_group, windows

VERTICES = ["Source: source -> source-pace", "v1", "sink -> sink-discard: Writer"]


@pytest.mark.parametrize(
    "comm, group",
    [
        ("Source: source ", VERTICES[0]),  # cut at 15 characters, a space at its end
        ("v1 (3/8)#0", "v1"),
        ("sink -> sink-di", VERTICES[2]),
        ("C2 CompilerThre", "jit"),
        ("GC Thread#1", "gc"),
        ("flink-pekko.act", "other"),
        ("v10 (1/2)#0", "other"),  # not v1's
    ],
)
def test_threads_are_grouped_by_their_names(comm, group):
    assert thread_group(comm, VERTICES) == group


def _raw(jvm_share, tasks_cores=1.9, seconds=30):
    """Samples every 0.1 s of a JVM whose own threads hold ``jvm_share(t)`` of what it runs on two cores, the job
    started 3 s after the JVM (its first checkpoint), REST samples of a source and a vertex at 1,000 records/s."""
    threads, rest, ns = [], [], {"v1 (1/1)#0/11": 0, "C2 CompilerThre/12": 0}
    t, step = 0.0, 0.1
    while t <= 3 + seconds:
        threads.append({"t": t, "ns": dict(ns)})
        if t >= 3:
            share = jvm_share(t - 3)
            ran = tasks_cores / (1 - share) if share < 1 else 0
            ns["v1 (1/1)#0/11"] += round(tasks_cores * step * 1e9)
            ns["C2 CompilerThre/12"] += round((ran - tasks_cores) * step * 1e9)
            counts = {"numRecordsIn": (t - 3) * 1000, "numRecordsOut": (t - 3) * 1000, "accumulateBusyTimeMs": 0}
            rest.append({"t": t, "vertices": {"src": counts, "v1": counts}})
        t = round(t + step, 6)
    return {
        "vertices": ["src", "v1"],
        "cpu_cores": 2,
        "running_at": 5.0,
        "running_epoch_ms": 1_000_000.0,
        "checkpoints": [{"id": 1, "trigger_timestamp": 998_000.0, "e2e": 10}],
        "threads": threads,
        "rest": rest,
    }


def test_windows_count_from_the_first_checkpoint_and_give_cpu_per_record():
    raw = _raw(lambda t: 0.2)
    assert job_start(raw) == pytest.approx(3.0)
    w = windows(raw, [0, 10, 20])
    assert [x["from"] for x in w] == [0, 10]
    assert w[1]["vertices"]["v1"]["records_per_s"] == pytest.approx(1000, rel=0.02)
    assert w[1]["vertices"]["v1"]["cpu_us"] == pytest.approx(1900, rel=0.02)  # 1.9 cores over 1,000 records/s
    assert [round(y, 2) for _, y, _ in jvm_shares(w, raw["vertices"])] == [0.2, 0.2]


def test_the_fit_finds_the_share_it_was_made_from():
    raw = _raw(lambda t: 0.07 + (0.31 - 0.07) * math.exp(-t / 4))
    rows = windows(raw, [0, 1, 2, 3, 4, 6, 8, 10, 15, 20, 30])
    assert keeps_cores_busy(rows)
    start, steady, decay = fit_share(jvm_shares(rows, raw["vertices"]))
    assert abs(start - 0.31) <= 0.03 and abs(steady - 0.07) <= 0.01 and 3 <= decay <= 5


def test_a_light_run_is_not_fitted():
    assert not keeps_cores_busy(windows(_raw(lambda t: 0.2, tasks_cores=0.5), [0, 10, 20, 30]))
