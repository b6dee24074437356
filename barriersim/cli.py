"""The ``barriersim`` command line.

How this works: argparse subcommands; ``run`` loads and validates the scenario (a bad file gets one line
naming the file and the key, exit status 2), runs it with a rich progress display and prints a final table.
Ctrl-C stops the run cleanly (Spark and Ray are shut down) with exit status 130.
"""

from __future__ import annotations

import argparse
import sys

from barriersim.run import UnsupportedScenario
from barriersim.scenarios.loader import ScenarioError, load_scenario

EXIT_VIOLATED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="barriersim", description="Simulate Flink-style checkpointing on Ray, with Spark-on-Ray workloads."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a scenario end to end", description="Run a scenario end to end.")
    run.add_argument("scenario", help="path of a scenario file (TOML)")
    run.add_argument("--out", help="run directory (default: runs/<scenario>-<UTC timestamp>)")
    run.add_argument("--seed", type=_seed, help="seed overriding the scenario's")
    run.add_argument("--address", help="address of an existing Ray cluster (default: start a local one)")
    return parser


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}")
    return value


def _print_summary(console, result) -> None:
    from rich.table import Table

    s = result.summary
    v = s["verification"]
    table = Table(title=f"barriersim run: {s['scenario']} (seed {s['seed']}, {s['backend']}, {s['mode']})")
    table.add_column("what")
    table.add_column("value", justify="right")
    rows = [
        ("records", f"{s['workload']['records']:,}"),
        ("records/s through the job", f"{s['throughput']['records_per_second']:,}"),
        ("checkpoints completed", str(s["checkpoints"]["completed"])),
        ("checkpoints aborted", str(s["checkpoints"]["aborted"])),
        ("lost", str(v["lost"])),
        ("duplicated", str(v["duplicated"])),
        ("wrong", str(v["wrong"])),
        ("verdict", v["verdict"]),
        ("Spark start (s)", str(s["timings_seconds"]["spark_start"])),
        ("wall time (s)", str(s["wall_seconds"])),
    ]
    for what, value in rows:
        table.add_row(what, value)
    console.print(table)
    if result.checkpoints:
        cps = Table(title="checkpoints (Flink's field names)")
        for col in ("id", "status", "end_to_end_duration", "state_size", "alignment_buffered", "num_acknowledged_subtasks"):
            cps.add_column(col, justify="right")
        for c in result.checkpoints:
            cps.add_row(*(str(c[col]) for col in ("id", "status", "end_to_end_duration", "state_size",
                                                  "alignment_buffered", "num_acknowledged_subtasks")))
        console.print(cps)
    console.print(f"verdict: {v['verdict']}  lost={v['lost']} duplicated={v['duplicated']} wrong={v['wrong']}")
    console.print(f"wrote {result.out_dir}/summary.json")


def _cmd_run(args) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from barriersim.run import run_scenario

    scenario = load_scenario(args.scenario)
    console = Console()
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=console,
                  transient=False) as bar:
        task = bar.add_task("starting", total=None)
        stages: list[str] = []

        def progress(stage: str, fraction: float | None) -> None:
            if not stages or stages[-1] != stage:
                stages.append(stage)
                bar.console.print(f"[bold]{stage}[/bold]")
            if fraction is None:
                bar.update(task, description=stage, total=None)
            else:
                bar.update(task, description=stage, total=1.0, completed=fraction)

        result = run_scenario(scenario, out_dir=args.out, seed=args.seed, address=args.address, progress=progress)
    _print_summary(console, result)
    return 0 if result.summary["verification"]["verdict"] != "violated" else EXIT_VIOLATED


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "run":
            return _cmd_run(args)
    except (ScenarioError, UnsupportedScenario) as e:
        print(f"barriersim: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("barriersim: interrupted; Spark and Ray were stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
