"""The ``barriersim`` command line.

How this works: argparse subcommands, each a thin layer over the one front door (``barriersim.api``: ``plan``
checks everything before anything starts, ``execute`` runs). ``run`` runs a scenario on Ray (with Spark on Ray
for workload and reference; ``--address`` or ``RAY_ADDRESS`` attaches to an existing cluster, which the run
leaves running) or on the deterministic simulator (``--backend sim``), in the scenario's mode or the one given
(``--mode all``: aligned, unaligned and at-least-once on the same workload, each in ``OUT/<mode>/``), with
``--set section.key=value`` overrides checked as the file's values are. ``replay`` re-runs a simulation exactly
from a scenario file, typically a run's own ``scenario.toml`` (or its run directory), which holds the seed, mode,
faults and overrides it ran with. ``sweep`` runs a ``[sweep]`` matrix (``barriersim.sweep``), ``report`` writes
the HTML report of a run directory. Bad input gets one line naming the file and the key and exit status 2, a
violated guarantee or a job that ended FAILED (its one-line reason printed) exit status 1; Ctrl-C stops a run cleanly (Spark and Ray are shut down) with exit status 130.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from barriersim import sweep
from barriersim.arguments import add_set_argument, seed_argument
from barriersim.errors import BarriersimError
from barriersim.report.cli import add_report_parser, cmd_report
from barriersim.runtime.checkpointing_mode import ALL_MODES
from barriersim.runtime.fault_log import fired_line
from barriersim.runtime.faults import FaultScheduleError
from barriersim.scenarios.loader import ScenarioError
from barriersim.summary import SCENARIO_FILE, default_out_dir

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
    run.add_argument("--seed", type=seed_argument, help="seed overriding the scenario's")
    run.add_argument("--address", help="address of an existing Ray cluster, left running (default: $RAY_ADDRESS, else start a local one)")
    run.add_argument("--backend", choices=("ray", "sim"), default="ray",
                     help="ray: Ray actors with Spark on Ray; sim: the deterministic simulator (default: ray)")
    run.add_argument("--mode", choices=ALL_MODES + ("all",),
                     help="checkpointing mode overriding the scenario's; all: aligned, unaligned and at-least-once")
    add_set_argument(run)
    replay = sub.add_parser("replay", help="re-run a simulation exactly",
                            description="Re-run a simulation from a scenario file: a run's scenario.toml (or its run "
                                        "directory) holds everything it ran with.")
    replay.add_argument("scenario", help="a scenario file (TOML), e.g. RUN_DIR/scenario.toml, or a run directory")
    replay.add_argument("--seed", type=seed_argument, help="seed overriding the file's")
    replay.add_argument("--mode", choices=ALL_MODES, help="checkpointing mode overriding the file's")
    replay.add_argument("--faults", help="a fault schedule as JSON, replacing the file's")
    add_set_argument(replay)
    replay.add_argument("--out", help="run directory (default: runs/<scenario>-<UTC timestamp>)")
    add_report_parser(sub)
    sweep.register(sub)
    return parser


def _console():
    from rich.console import Console

    return Console()


def _print_summary(console, summary: dict) -> None:
    from rich.table import Table

    s = summary
    v = s["verification"]
    table = Table(title=f"barriersim run: {s['scenario']} (seed {s['seed']}, {s['backend']}, {s['mode']})")
    table.add_column("what")
    table.add_column("value", justify="right")
    rows = [
        ("records", f"{s['workload']['records']:,}"),
        ("records/s through the job", f"{s['throughput']['records_per_second']:,}"),
        ("checkpoints completed", str(s["checkpoints"]["completed"])),
        ("checkpoints failed", str(s["checkpoints"]["failed"])),
        ("restarts", str(s["job"]["restarts"])),
        ("faults", fired_line(s["faults_fired"])),
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


def _print_side_by_side(console, summaries: list[dict]) -> None:
    from rich.table import Table

    first = summaries[0]
    table = Table(title=f"barriersim {first['backend']}: {first['scenario']} (seed {first['seed']})")
    table.add_column("figure")
    for s in summaries:
        table.add_column(s["mode"], justify="right")
    rows = [
        ("checkpoints completed", lambda s: s["checkpoints"]["completed"]),
        ("checkpoints failed", lambda s: s["checkpoints"]["failed"]),
        ("restarts", lambda s: s["job"]["restarts"]),
        ("faults", lambda s: fired_line(s["faults_fired"], detail=False)),
        ("lost", lambda s: s["verification"]["lost"]),
        ("duplicated", lambda s: s["verification"]["duplicated"]),
        ("wrong", lambda s: s["verification"]["wrong"]),
        ("verdict", lambda s: s["verification"]["verdict"]),
        ("records/s", lambda s: f"{s['throughput']['records_per_second']} ({s['throughput']['clock']})"),
        ("virtual seconds", lambda s: s.get("simulation", {}).get("virtual_seconds", "-")),
        ("wall seconds", lambda s: s["wall_seconds"]),
        ("trace sha256", lambda s: s.get("trace_sha256", "-")[:16]),
    ]
    for name, get in rows:
        table.add_row(name, *(str(get(s)) for s in summaries))
    console.print(table)


def _print_verdicts(result) -> None:
    """One plain line per mode (a replay command must stay on one line whatever the terminal width)."""
    for mode, r in result.items():
        s, v = r.summary, r.summary["verification"]
        print(f"{mode}: verdict: {v['verdict']}  lost={v['lost']} duplicated={v['duplicated']} wrong={v['wrong']}")
        if s["job"]["outcome"] == "failed":
            print(f"  job failed: {s['job'].get('failure_reason') or 'no reason recorded'}")
        if s["faults_fired"]:
            print(f"  faults: {fired_line(s['faults_fired'])}")
        if "replay" in s:
            print(f"  replay: {s['replay']}")


def _exit_status(result) -> int:
    failed = any(r.summary["job"]["outcome"] == "failed" for r in result.values())
    return EXIT_VIOLATED if failed or any(v == "violated" for v in result.verdicts.values()) else 0


def _cmd_run(args) -> int:
    from barriersim import api

    p = api.plan(args.scenario, backend=args.backend, mode=args.mode, seed=args.seed,
                 overrides=dict(args.overrides), mode_origin="--mode")
    out = Path(args.out) if args.out else default_out_dir(p.scenario)
    console = _console()
    if args.backend == "sim":
        result = api.execute(p, out, progress=lambda stage, _f: console.print(f"[bold]{stage}[/bold]"))
        _print_side_by_side(console, list(result.summaries.values()))
    else:
        result = _execute_with_progress_bar(console, api, p, out, args.address)
        if len(result) == 1:
            _print_summary(console, result.only.summary)
        else:
            _print_side_by_side(console, list(result.summaries.values()))
    _print_verdicts(result)
    print(f"wrote {out}")
    return _exit_status(result)


def _execute_with_progress_bar(console, api, p, out: Path, address: str | None):
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

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

        return api.execute(p, out, address=address, progress=progress)


def _cmd_replay(args) -> int:
    from barriersim import api

    path = Path(args.scenario)
    if path.is_dir():
        path = path / SCENARIO_FILE
    p = api.plan(path, backend="sim", mode=args.mode, seed=args.seed, faults=args.faults,
                 overrides=dict(args.overrides), mode_origin="--mode")
    out = Path(args.out) if args.out else default_out_dir(p.scenario)
    result = api.execute(p, out)
    summary = result.only.summary
    _print_side_by_side(_console(), [summary])
    _print_verdicts(result)
    print(f"trace_sha256: {summary['trace_sha256']}")
    return _exit_status(result)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "run":
            return _cmd_run(args)
        if args.command == "replay":
            return _cmd_replay(args)
        if args.command == "report":
            return cmd_report(args)
        if args.command == "sweep":
            return sweep.main_from_args(args)
    except (ScenarioError, FaultScheduleError, BarriersimError) as e:
        print(f"barriersim: {e}", file=sys.stderr)
        return EXIT_USAGE
    except ConnectionError as e:  # e.g. no Ray cluster at --address / RAY_ADDRESS
        print(f"barriersim: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("barriersim: interrupted; Spark and Ray were stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
