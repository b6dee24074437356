"""``barriersim report``'s one-line errors: exit status 2, the path or the id named, no traceback, and no
Spark started."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from barriersim.report import cli as report_cli
from tests.report.rundirs import two_mode_run_dir


@pytest.fixture(autouse=True)
def no_spark(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("Spark must not start when the arguments are wrong")

    monkeypatch.setattr(report_cli, "compute_analytics", refuse)


def report_error(capsys, *argv: str) -> str:
    status = report_cli.main(["report", *argv])
    captured = capsys.readouterr()
    assert status == 2
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err
    assert lines[0].startswith("barriersim report: ")
    return lines[0]


def test_missing_run_dir(tmp_path, capsys):
    missing = tmp_path / "nope"
    assert report_error(capsys, str(missing)) == f"barriersim report: {missing}: no such run directory"


def test_run_dir_is_a_file(tmp_path, capsys):
    f = tmp_path / "summary.json"
    f.write_text("{}")
    assert report_error(capsys, str(f)) == f"barriersim report: {f}: not a directory"


def test_directory_without_runs(tmp_path, capsys):
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    line = report_error(capsys, str(tmp_path / "empty"))
    assert str(tmp_path / "empty") in line and "holds no run" in line


def test_run_without_checkpoint_table(tmp_path, capsys):
    (tmp_path / "summary.json").write_text('{"mode": "aligned"}')
    line = report_error(capsys, str(tmp_path))
    assert (
        line == f"barriersim report: {tmp_path / 'checkpoints.parquet'}: missing (the run has no checkpoint statistics)"
    )


def test_invalid_summary_json(tmp_path, capsys):
    root = two_mode_run_dir(tmp_path / "run")
    (root / "unaligned" / "summary.json").write_text('{"mode": ')
    line = report_error(capsys, str(root))
    assert str(root / "unaligned" / "summary.json") in line and "not valid JSON" in line


def test_checkpoint_table_lacking_columns(tmp_path, capsys):
    root = two_mode_run_dir(tmp_path / "run")
    pq.write_table(pa.table({"id": [1], "status": ["COMPLETED"]}), str(root / "aligned" / "checkpoints.parquet"))
    line = report_error(capsys, str(root))
    assert str(root / "aligned" / "checkpoints.parquet") in line and "end_to_end_duration" in line


def test_corrupt_parquet(tmp_path, capsys):
    root = two_mode_run_dir(tmp_path / "run")
    (root / "aligned" / "subtasks.parquet").write_bytes(b"not parquet at all")
    line = report_error(capsys, str(root))
    assert str(root / "aligned" / "subtasks.parquet") in line and "not a readable Parquet file" in line


def test_unknown_checkpoint_id(tmp_path, capsys):
    root = two_mode_run_dir(tmp_path / "run")
    line = report_error(capsys, str(root), "--checkpoint", "99")
    assert line == f"barriersim report: checkpoint 99 is not in {root} (its checkpoint ids: 1..4)"


@pytest.mark.parametrize("bad", ["abc", "-3", "1.5"])
def test_checkpoint_id_not_an_integer(tmp_path, capsys, bad):
    root = two_mode_run_dir(tmp_path / "run")
    line = report_error(capsys, str(root), "--checkpoint", bad)
    assert f"got {bad!r}" in line and "--checkpoint" in line


def test_out_is_a_directory(tmp_path, capsys):
    root = two_mode_run_dir(tmp_path / "run")
    line = report_error(capsys, str(root), "--out", str(tmp_path))
    assert line == f"barriersim report: --out: {tmp_path} is a directory; give the HTML file to write"
