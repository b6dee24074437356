"""``barriersim report RUN_DIR [--checkpoint ID] [--out FILE]``.

How this works: ``cmd_report(args)`` first checks what the user gave and what the report needs (matplotlib, the
run directory and its tables, the checkpoint id; Spark's extra and the ``--address`` cluster when the statistics
are to be computed in Spark): a mistake costs one line naming it, exit status 2. The statistics come from
``RUN_DIR/analytics/`` when newer than the runs' tables; else pandas computes them for small simulator runs
(``barriersim.report.statistics``), and Spark on Ray for anything else (``barriersim.spark.analytics``, logs in
``RUN_DIR/logs/``). Each phase is named as it starts (``barriersim.progress``); then the figures and the HTML.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from barriersim.errors import BarriersimError
from barriersim.extras import require
from barriersim.progress import StageProgress
from barriersim.ray_address import check_address, timeout_argument
from barriersim.report.statistics import all_simulated, compute_locally, is_small
from barriersim.rundir import RunDirError, input_files, load_tables
from barriersim.spark.analytics import compute_analytics as compute_analytics_in_spark
from barriersim.spark.analytics import read_analytics, written_at
from barriersim.spark.session import RayAndSpark

EXIT_OK = 0
EXIT_USAGE = 2


def add_report_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "report",
        help="write an HTML report (with PNG plots) of a run directory",
        description="Write RUN_DIR/report/index.html with checkpoint statistics (Flink's names) and plots.",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (or one holding runs per mode)")
    parser.add_argument(
        "--checkpoint", metavar="ID", help="checkpoint id for the barrier timeline (default: the longest completed one)"
    )
    parser.add_argument(
        "--out", metavar="FILE", help="HTML file to write (default: RUN_DIR/report/index.html); the PNGs go beside it"
    )
    parser.add_argument("--address", help="address of an existing Ray cluster (default: start a local one)")
    parser.add_argument(
        "--connect-timeout",
        type=timeout_argument,
        metavar="SECONDS",
        help="how long the Ray cluster at --address may take to answer (default: $BARRIERSIM_CONNECT_TIMEOUT, else 30)",
    )
    parser.set_defaults(handler=cmd_report)
    return parser


class ReportError(Exception):
    """A one-line problem with what the user asked for."""


def _checkpoint_id(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ReportError(f"--checkpoint: must be a checkpoint id (a non-negative integer), got {text!r}") from None
    if value < 0:
        raise ReportError(f"--checkpoint: must be a checkpoint id (a non-negative integer), got {text!r}")
    return value


def _check_checkpoint(tables, checkpoint_id: int | None, run_dir: Path) -> None:
    if checkpoint_id is None:
        return
    ids = sorted(int(i) for i in tables.checkpoints["id"].unique())
    if checkpoint_id not in ids:
        known = f"{ids[0]}..{ids[-1]}" if ids else "none"
        raise ReportError(f"checkpoint {checkpoint_id} is not in {run_dir} (its checkpoint ids: {known})")


def _out_path(text: str | None, run_dir: Path) -> Path:
    if text is None:
        return run_dir / "report" / "index.html"
    out = Path(text)
    if out.is_dir():
        raise ReportError(f"--out: {out} is a directory; give the HTML file to write")
    return out


def fresh_analytics(run_dir: Path, runs):
    """The analytics under ``run_dir`` if they cover exactly ``runs`` and are newer than their tables, else None."""
    stamp = written_at(run_dir)
    if stamp is None or any(f.stat().st_mtime > stamp for f in input_files(runs)):
        return None
    cached = read_analytics(run_dir)
    if cached is None or set(cached.counts["run"]) != {r.label for r in runs}:
        return None
    return cached


def compute_analytics(run_dir: Path, tables, address: str | None, say):
    """The statistics of ``tables``' runs: in pandas for small simulator runs, else in Spark on Ray. ``say`` is
    the command's ``(stage, fraction)`` progress callback."""
    if all_simulated(tables.runs) and is_small(tables):
        say("computing the checkpoint statistics (pandas)", None)
        return compute_locally(run_dir, tables)
    say("starting Ray and Spark on Ray for the checkpoint statistics", None)
    with RayAndSpark(app_name="barriersim-report", address=address, log_dir=run_dir / "logs") as cluster:
        say("computing the checkpoint statistics in Spark", None)
        analytics = compute_analytics_in_spark(cluster.spark, run_dir, tables.runs)
        say("stopping Spark and Ray", None)
        return analytics


def cmd_report(args) -> int:
    """Run ``barriersim report``; returns the exit status (0, or 2 with one line on stderr)."""
    address = getattr(args, "address", None)
    try:
        require("report", "plotting")
        run_dir = Path(args.run_dir)
        checkpoint_id = _checkpoint_id(args.checkpoint)
        out = _out_path(args.out, run_dir)
        tables = load_tables(run_dir)
        _check_checkpoint(tables, checkpoint_id, run_dir)
        analytics = fresh_analytics(run_dir, tables.runs)
        if analytics is None and not (all_simulated(tables.runs) and is_small(tables)):  # statistics in Spark
            require("spark", "computing these runs' statistics in Spark on Ray")
            if address:  # else Spark starts on a local Ray of its own
                check_address(address, getattr(args, "connect_timeout", None))
    except (RunDirError, ReportError, BarriersimError) as e:
        print(f"barriersim report: {e}", file=sys.stderr)
        return EXIT_USAGE

    from barriersim.report.html import build_report  # needs matplotlib (the report extra)

    with StageProgress(Console(stderr=True)) as say:
        if analytics is None:
            analytics = compute_analytics(run_dir, tables, address, say)
        else:
            say("reusing the checkpoint statistics in analytics/", None)
        say("drawing the figures", None)
        report = build_report(run_dir, out, checkpoint_id, analytics=analytics, tables=tables)
    print(f"wrote {report.html} ({len(report.figures)} figures)")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (``python -m barriersim.report.cli``); ``barriersim report`` goes through the CLI."""
    parser = argparse.ArgumentParser(prog="barriersim")
    add_report_parser(parser.add_subparsers(dest="command", required=True))
    return cmd_report(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
