"""The figures' data: barrier phases per subtask and the default checkpoint of the timeline."""

from __future__ import annotations

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from barriersim.report.plots import differs_in_skew
from barriersim.report.timeline import barrier_phases, pick_checkpoint, plot_barrier_timeline, subtask_label
from barriersim.rundir import load_tables
from tests.report.rundirs import TRIGGER0, checkpoint_row, subtask_row, two_mode_run_dir, write_run


def test_phases_derived_from_flink_subtask_statistics():
    sts = pd.DataFrame(
        [
            subtask_row(0, "sink#0", start_delay=30, alignment=12, sync=3, ack_after=70),
            subtask_row(0, "source#0", start_delay=5, alignment=0, sync=1, ack_after=9),
        ]
    )
    phases = barrier_phases(sts, TRIGGER0)
    assert phases["task"].tolist() == ["source#0", "sink#0"]  # no graph given: by the vertices' median start delay
    assert phases.iloc[1][["first_barrier", "alignment_end", "snapshot_end", "ack"]].tolist() == [30, 42, 45, 70]
    assert phases.iloc[0][["first_barrier", "alignment_end", "snapshot_end", "ack"]].tolist() == [5, 5, 6, 9]


def test_phases_prefer_timeline_columns_when_present():
    row = subtask_row(0, "sink#0", start_delay=30, alignment=12, sync=3, ack_after=70)
    row.update(
        first_barrier_timestamp=TRIGGER0 + 20, alignment_end_timestamp=TRIGGER0 + 50, snapshot_timestamp=TRIGGER0 + 60
    )
    phases = barrier_phases(pd.DataFrame([row]), TRIGGER0)
    assert phases.iloc[0][["first_barrier", "alignment_end", "snapshot_end", "ack"]].tolist() == [20, 50, 60, 70]


ms = st.integers(min_value=0, max_value=10_000)


@settings(max_examples=200, deadline=None)
@given(start=ms, align=ms, sync=ms, ack=ms)
def test_phases_never_run_backwards(start, align, sync, ack):
    phases = barrier_phases(pd.DataFrame([subtask_row(0, "t", start, align, sync, ack)]), TRIGGER0).iloc[0]
    ends = [phases["first_barrier"], phases["alignment_end"], phases["snapshot_end"], phases["ack"]]
    assert ends == sorted(ends) and ends[0] == start
    assert ends[3] == max(ack, start + align + sync)
    if start + align + sync <= ack:
        assert ends == [start, start + align, start + align + sync, ack]


def test_default_checkpoint_is_longest_completed(tmp_path):
    tables = load_tables(two_mode_run_dir(tmp_path / "run"))
    aligned = tables.checkpoints[tables.checkpoints["run"] == "aligned"]
    assert pick_checkpoint(aligned) == 2  # checkpoint 4 took longer but FAILED
    assert pick_checkpoint(aligned, 4) == 4 and pick_checkpoint(aligned, 9) is None
    failed_only = pd.DataFrame([checkpoint_row(1, 10, status="FAILED")])
    assert pick_checkpoint(failed_only) is None


def test_runs_found_in_both_layouts_with_run_columns(tmp_path):
    root = two_mode_run_dir(tmp_path / "run")
    both = load_tables(root)
    assert [r.label for r in both.runs] == ["aligned", "unaligned"]
    assert set(both.checkpoints["mode"]) == {"aligned", "unaligned"} and len(both.checkpoints) == 7
    single = load_tables(root / "unaligned")
    assert [r.label for r in single.runs] == ["."] and len(single.subtasks) == 9
    assert not differs_in_skew(both.checkpoints)
    write_run(root / "skewed", "aligned", [checkpoint_row(1, 40)], [], zipf=2.0)
    assert differs_in_skew(load_tables(root).checkpoints)


def test_a_subtask_with_its_placement_is_labelled_with_its_taskmanager_and_channel_kinds(tmp_path):
    rows = [
        subtask_row(0, "sink#0", start_delay=30, alignment=12, sync=3, ack_after=70),
        subtask_row(0, "keyed-sum#1", start_delay=5, alignment=2, sync=1, ack_after=9),
    ]
    rows[0].update(taskmanager=0, local_input_channels=1, remote_input_channels=3)
    rows[1].update(taskmanager=1, local_input_channels=1, remote_input_channels=1)
    phases = barrier_phases(pd.DataFrame(rows), TRIGGER0)
    assert [subtask_label(p) for _, p in phases.iterrows()] == [
        "keyed-sum#1 · TM1 · in 1 local / 1 remote",
        "sink#0 · TM0 · in 1 local / 3 remote",
    ]
    # without them (an older run), the task name alone
    assert subtask_label(barrier_phases(pd.DataFrame([subtask_row(0, "t", 1, 1, 1, 9)]), TRIGGER0).iloc[0]) == "t"
    checkpoints = pd.DataFrame([checkpoint_row(0, 70)]).assign(run=".", mode="aligned")
    [figure] = plot_barrier_timeline(
        checkpoints, pd.DataFrame(rows).assign(run=".", mode="aligned"), tmp_path / "t.png"
    )
    assert figure.png.stat().st_size > 0
    assert figure.panels[0].ytick_labels == [
        "keyed-sum#1 · TM1 · in 1 local / 1 remote",
        "sink#0 · TM0 · in 1 local / 3 remote",
    ]


def test_a_subtask_finished_before_the_drawn_checkpoint_keeps_its_row_labelled_finished(tmp_path):
    """A source that finished (FLIP-147) acknowledges no later checkpoint: the timeline of the longest checkpoint,
    taken after it finished, still lists it in the job's order, labelled finished and without bars."""
    rows = [
        subtask_row(1, "source#0", 0, 0, 1, 5),
        subtask_row(1, "sink#0", 4, 1, 1, 9),
        subtask_row(2, "sink#0", 20, 10, 1, 40),
    ]  # checkpoint 2: the source had finished
    checkpoints = pd.DataFrame([checkpoint_row(1, 9, subtasks=2), checkpoint_row(2, 40, subtasks=2)])
    [figure] = plot_barrier_timeline(
        checkpoints.assign(run=".", mode="aligned"),
        pd.DataFrame(rows).assign(run=".", mode="aligned"),
        tmp_path / "t.png",
        vertices=["source", "sink"],
    )
    assert figure.panels[0].ytick_labels == ["source#0 · finished", "sink#0"]


def test_alignment_and_start_delay_leave_out_subtasks_finished_before_the_trigger(tmp_path):
    """Their rows (Flink's report of a finished task: every figure 0) are no barrier observations: the box plot
    counts only the subtasks that took part."""
    from barriersim.report.plots import plot_alignment_and_start_delay

    rows = [
        subtask_row(1, "keyed#0", 4, 12, 1, 30),
        subtask_row(1, "sink#0", 20, 7, 1, 40),
        {**subtask_row(1, "source#0", 0, 0, 0, 0), "finished": True},
    ]
    subtasks = pd.DataFrame(rows).assign(run=".", mode="aligned")
    subtasks["finished"] = subtasks["finished"].fillna(False)
    checkpoints = pd.DataFrame([checkpoint_row(1, 40)]).assign(run=".", mode="aligned")
    figure = plot_alignment_and_start_delay(checkpoints, subtasks, tmp_path / "a.png")
    assert [(s.label, s.points, s.y) for s in figure.panels[0].series] == [("aligned", 2, [9.5])]  # alignment
    assert [(s.label, s.points, s.y) for s in figure.panels[1].series] == [("aligned", 2, [12.0])]  # start delay
