"""``barriersim campaign SCENARIO --seeds A..B``: a fault campaign from the command line (``barriersim.campaign``),
with a bar of the cases done, its table of verdicts, its failing cases and its rate; ``--shrink SEED`` shrinks a
failing seed. Exit status 0 when every case kept the properties, 1 when one did not (violated or raised), 2 with
one line for bad input, 130 on Ctrl-C (the rows done are written: the same command resumes)."""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

from barriersim.arguments import positive_argument, seed_argument, seed_range_argument
from barriersim.errors import BarriersimError
from barriersim.progress import CountedProgress
from barriersim.runtime.checkpointing_mode import ALL_MODES
from barriersim.runtime.faults.fault_schedule import FaultScheduleError
from barriersim.scenarios.loader import ScenarioError
from barriersim.sim_backend import replay_command
from barriersim.tables import console, new_table

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
SHOWN_FAILURES = 10


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``barriersim campaign`` to the ``barriersim`` parser's subcommands."""
    parser = subparsers.add_parser(
        "campaign",
        help="run a fault campaign: seeds drawn into cases, simulated and checked",
        description="Draw a case per seed from the property suite's strategies (generated jobs, or fault schedules "
        "for a scenario file's job), simulate and check each for the suite's properties, write a "
        "Parquet row per case under OUT/rows/ and each failing case as OUT/failures/<seed>-<mode>/"
        "scenario.toml, and aggregate the verdicts in Spark on Ray. Run again with the same --out to "
        "resume (or to add seeds).",
    )
    parser.add_argument(
        "scenario",
        metavar="SCENARIO",
        help="a scenario file (fault schedules drawn for its job), or 'generated' (whole jobs: "
        "topologies, configurations and faults, the property suite's default distribution)",
    )
    parser.add_argument(
        "--seeds", type=seed_range_argument, metavar="A..B", help="the seeds, A to B both included (or one N)"
    )
    parser.add_argument(
        "--mode",
        choices=ALL_MODES + ("all",),
        help="checkpointing mode of every case; all: aligned, unaligned and at-least-once, each "
        "seed in each (default: drawn per case for generated jobs, the scenario's own)",
    )
    parser.add_argument(
        "--jobmanager-faults", action="store_true", help="also JobManager failovers and failed storage writes"
    )
    parser.add_argument(
        "--taskmanager-faults",
        action="store_true",
        help="also TaskManager crashes and node losses (generated jobs spread over 2-4 TaskManagers on 1-3 nodes)",
    )
    parser.add_argument(
        "--out",
        help="campaign directory: new or empty, or one of the same settings to resume "
        "(default: runs/<scenario>-campaign-<UTC timestamp>)",
    )
    parser.add_argument("--force", action="store_true", help="replace what barriersim wrote in --out")
    parser.add_argument(
        "--parallelism",
        type=positive_argument,
        metavar="N",
        help="1: in this process; N > 1: as Ray tasks, N at a time (default: as Ray tasks over the "
        "cores, or the cluster at --address, when the first batch says the campaign would take "
        "more than a few seconds in one process)",
    )
    parser.add_argument("--address", help="address of an existing Ray cluster for the tasks and Spark")
    parser.add_argument(
        "--batch",
        type=positive_argument,
        metavar="N",
        help="cases per Ray task (default: campaign.DEFAULT_BATCH, 25, a second or two of work)",
    )
    parser.add_argument("--no-analytics", action="store_true", help="skip the verdict table in Spark")
    parser.add_argument(
        "--shrink",
        type=seed_argument,
        metavar="SEED",
        help="instead of a campaign: shrink the failing case of SEED with Hypothesis and write it "
        "as OUT/shrunk/<seed>-<mode>/scenario.toml",
    )
    parser.set_defaults(handler=main_from_args)
    return parser


def _out(args):
    from barriersim import campaign

    if args.out:
        return Path(args.out)
    name = campaign.GENERATED if args.scenario == campaign.GENERATED else Path(args.scenario).stem
    return Path("runs") / f"{name}-campaign-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}"


def _print_table(console, table) -> None:
    t = new_table(
        "barriersim campaign: verdicts",
        ("mode", "left"),
        ("cases", "right"),
        ("passed", "right"),
        ("violated", "right"),
        ("errors", "right"),
        ("exactly-once", "right"),
        ("at-least-once", "right"),
        ("faults", "right"),
        ("restarted", "right"),
        ("virtual s (avg)", "right"),
        ("wall s", "right"),
        ("CPU s", "right"),
    )
    for row in table.to_dict("records"):
        t.add_row(
            row["mode"],
            *(
                f"{row[c]:,}"
                for c in (
                    "cases",
                    "passed",
                    "violated",
                    "errors",
                    "exactly_once",
                    "at_least_once",
                    "faults",
                    "restarted",
                )
            ),
            f"{row['virtual_seconds_avg']:.2f}",
            f"{row['wall_seconds']:,.1f}",
            f"{row['cpu_seconds']:,.1f}",
        )
    console.print(t)


def _report(result, wall: float) -> int:
    from barriersim import campaign

    rows = result.rows.to_pandas()
    if result.table is not None:
        _print_table(console(), result.table)
    passed, violated, errors = (
        int((rows["status"] == s).sum()) for s in (campaign.PASSED, campaign.VIOLATED, campaign.ERROR)
    )
    print(
        f"{len(rows):,} cases: {passed:,} passed, {violated:,} violated, {errors:,} errors "
        f"(rows: {result.out_dir / campaign.ROWS_DIR})"
    )
    if result.ran:
        mine = rows.tail(result.ran)  # this call's rows are the last written
        cpu = float(mine["cpu_seconds"].sum())
        per_cpu = f", {result.ran * 60 / cpu:,.0f} per CPU minute of the cases" if cpu else ""
        print(f"ran {result.ran:,} cases in {wall:.1f} s: {result.ran * 60 / wall:,.0f} per minute{per_cpu}")
    failing = rows[rows["status"] != campaign.PASSED].sort_values(["seed", "mode"])
    for row in failing.head(SHOWN_FAILURES).to_dict("records"):
        where = campaign.failure_dir(result.out_dir, row["seed"], row["mode"]) / "scenario.toml"
        print(
            f"{row['status']}: seed {row['seed']} ({row['mode']}): {row['problem']}; replay: barriersim replay {where}"
        )
    if len(failing) > SHOWN_FAILURES:
        print(f"... and {len(failing) - SHOWN_FAILURES} more under {result.out_dir / campaign.FAILURES_DIR}")
    return EXIT_FAILED if len(failing) else EXIT_OK


def _shrink(args) -> int:
    from barriersim import campaign

    out = _out(args)
    found = campaign.shrink_seed(
        args.scenario,
        args.shrink,
        out=out,
        mode=args.mode,
        jobmanager_faults=args.jobmanager_faults,
        taskmanager_faults=args.taskmanager_faults,
    )
    for mode, problem, path in found:
        if problem is None:
            print(f"seed {args.shrink} ({mode}): passes; nothing to shrink")
        else:
            assert path is not None  # shrink_seed: a failing case comes with its shrunk scenario file
            print(f"seed {args.shrink} ({mode}): shrunk: {problem}; replay: {replay_command(path)}")
    return EXIT_FAILED if any(problem is not None for _, problem, _ in found) else EXIT_OK


def main_from_args(args) -> int:
    from barriersim import campaign

    try:
        if args.shrink is not None:
            return _shrink(args)
        if args.seeds is None:
            print("barriersim campaign: --seeds: give the seeds to run (A..B), or --shrink SEED", file=sys.stderr)
            return EXIT_USAGE
        started = time.perf_counter()
        with CountedProgress(Console(stderr=True), "checking the campaign") as progress:
            result = campaign.run_campaign(
                args.scenario,
                args.seeds,
                out=_out(args),
                mode=args.mode,
                jobmanager_faults=args.jobmanager_faults,
                taskmanager_faults=args.taskmanager_faults,
                parallelism=args.parallelism,
                address=args.address,
                batch=args.batch,
                aggregate=not args.no_analytics,
                force=args.force,
                progress=progress,
            )
    except (ScenarioError, FaultScheduleError, BarriersimError) as e:
        print(f"barriersim campaign: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("barriersim campaign: interrupted; Spark and Ray were stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    if result.interrupted:
        print(
            f"barriersim campaign: interrupted after {result.ran:,} cases, written to {result.out_dir}; the same "
            f"command with --out {result.out_dir} resumes",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    return _report(result, time.perf_counter() - started)
