"""The re-measurement of Flink's job by Flink itself (``benchmarks.flink_remeasure``): its figures are the
benchmark's figures with the benchmark's definitions, and the committed re-measurement covers every row the
alignment-latency checks compare. Running Flink needs ``.venv-flink`` (``make flink-venv``) and is not part of the
suite; these tests read Flink REST documents of the shape its ``/checkpoints`` endpoints return."""

from __future__ import annotations

import pytest

from benchmarks.alignment_checks import CALM, CALM_HOT, FLINK_TABLE, REMEASURED_FIGURES, flink_checks, load_remeasured
from benchmarks.alignment_latency import Row
from benchmarks.flink_remeasure import FLUSHER_VARIANTS, combine, settings, summarize


def _subtask(start_delay: int, alignment: int, unaligned: bool) -> dict:
    return {"start_delay": start_delay, "alignment": {"duration": alignment}, "unaligned_checkpoint": unaligned}


def _checkpoint(cid: int, e2e: int, status: str = "COMPLETED") -> dict:
    return {
        "id": cid,
        "status": status,
        "end_to_end_duration": e2e,
        "persisted_data": 2048 * cid,
        "processed_data": 1024,
        "checkpoint_type": "UNALIGNED_CHECKPOINT",
    }


def _raw() -> dict:
    """Four checkpoints, one failed: the first completed one (id 1) is left out of every figure."""
    delays = {1: 900, 2: 30, 4: 50, 5: 40}
    subtasks = {
        str(cid): {
            "KEYED PROCESS": [
                _subtask(5, 1, True),
                _subtask(delay, 2, cid != 5),
                _subtask(6, 0, False),
                _subtask(7, 0, False),
            ],
            "Sink: Writer": [_subtask(delay + 1, delay - 20, False), _subtask(delay + 2, delay - 10, cid == 4)],
        }
        for cid, delay in delays.items()
    }
    history = [
        _checkpoint(5, 60),
        _checkpoint(4, 70),
        _checkpoint(3, 0, "FAILED"),
        _checkpoint(2, 50),
        _checkpoint(1, 950),
    ]
    return {
        "flink_version": "2.3.0",
        "history": history,
        "subtasks": subtasks,
        "keyed_vertex": "KEYED PROCESS",
        "sink_vertex": "Sink: Writer",
        "keyed_records_in": [100.0, 900.0, 120.0, 110.0],
        "throughput": 1234.5,
    }


def test_summarize_takes_the_benchmarks_figures_from_flinks_statistics():
    figures = summarize(_raw())
    assert figures["checkpoints"] == 3  # 2, 4, 5: the failed one and the first completed one left out
    assert figures["bottleneck_index"] == 1  # the keyed subtask that read the most records owns key 0
    assert figures["e2e"] == 60 and figures["start_delay"] == 40  # medians of (50, 70, 60) and (30, 50, 40)
    assert figures["after_start"] == 20  # median of 50-30, 70-50, 60-40
    assert figures["sink_alignment"] == 30  # the larger of the two sinks per checkpoint: 20, 40, 30
    assert figures["persisted_kib"] == 8  # median of 4, 8, 10 KiB
    assert figures["keyed_unaligned"] == "1,1,0,0"  # keyed#1 reported true in 2 of 3: a majority
    assert figures["sinks_unaligned"] == "0,0"  # sink#1 in 1 of 3: not
    assert figures["ramp"] == [950, 50, 70, 60]  # the first completed ones, in id order
    assert figures["throughput"] == 1234.5


def test_without_the_hot_key_the_bottleneck_start_delay_is_the_latest_keyed_subtasks():
    """The facts' idle rows ran without the hot key: no keyed subtask owns it, the latest barrier among them counts."""
    raw = {**_raw(), "settings": {"hot_share": 0.0}}
    figures = summarize(raw)
    assert figures["start_delay"] == 40  # per checkpoint the largest keyed start delay: 30, 50, 40 (keyed#1)
    raw["subtasks"]["5"]["KEYED PROCESS"][3]["start_delay"] = 90  # a later barrier at another keyed subtask
    assert summarize(raw)["start_delay"] == 50  # the median of 30, 50, 90
    assert summarize({**raw, "settings": {"hot_share": 0.3}})["start_delay"] == 40  # with it: keyed#1 only


def test_combine_gives_each_figure_the_range_of_the_runs():
    s = {"group": CALM, "mode": "aligned", "buffer_timeout_ms": None}
    first = summarize(_raw())
    second = {**first, "e2e": 80, "keyed_unaligned": "0,1,0,0"}
    row = combine(s, [first, second])
    assert row["e2e"] == [60, 80] and row["start_delay"] == [40, 40]
    assert row["keyed_unaligned"] == ["1,1,0,0", "0,1,0,0"] and row["runs"] == 2


def test_the_committed_remeasurement_covers_every_row_the_checks_compare():
    here = load_remeasured()
    assert here is not None and here.flink_version == "2.3.0"
    wanted = {(s["group"], s["mode"], s["buffer_timeout_ms"]) for s in settings()}
    assert set(here.rows) == wanted
    assert {(g, m, None) for g, m in FLINK_TABLE} | {(CALM_HOT, "aligned", ms) for ms in FLUSHER_VARIANTS} == wanted
    for row in here.rows.values():
        assert row["runs"] >= 1 and all(n >= 5 for n in row["checkpoints"])
        for key in REMEASURED_FIGURES.values():
            low, high = row[key]
            assert 0 <= low <= high


@pytest.mark.parametrize("with_remeasurement", [True, False])
def test_every_figure_check_is_also_judged_against_flink_here(with_remeasurement):
    """With the re-measurement each check carries a second verdict, against Flink's own figure on this machine."""
    here = load_remeasured() if with_remeasurement else None
    rows = [
        Row(
            group=g,
            mode=m,
            e2e_ms=1.0,
            e2e_p90_ms=1.0,
            after_start_ms=1.0,
            start_delay_ms=1.0,
            sink_alignment_ms=1.0,
            persisted_kib=1.0,
            processed_kib=1.0,
            keyed_unaligned="1,1,1,1",
            sinks_unaligned="0,0",
            throughput=1.0,
        )
        for g, m in FLINK_TABLE
    ]
    checks = flink_checks(rows, bottleneck_index=2, here=here)
    if with_remeasurement:
        assert all(c.passed_here is not None and c.detail_here.startswith("Flink 2.3.0 here") for c in checks)
        heavy_e2e = next(c for c in checks if c.name == "heavy backpressure, aligned: end-to-end median ms")
        assert heavy_e2e.passed_here is False  # 1 ms against Flink's seconds
    else:
        assert all(c.passed_here is None and c.detail_here == "" for c in checks)


def test_the_committed_figures_are_what_the_committed_raw_statistics_give(tmp_path, capsys):
    """``flink_remeasured.json`` is recomputed from the gzipped REST statistics kept beside it, and nothing else."""
    import json

    from benchmarks.alignment_checks import REMEASURED_JSON
    from benchmarks.flink_remeasure import main

    out = tmp_path / "figures.json"
    assert main(["--summarize-only", "--out", str(out)]) == 0
    assert json.loads(out.read_text()) == json.loads(REMEASURED_JSON.read_text())
    assert "re-measured on this machine" in capsys.readouterr().out
