"""The ``barriersim`` command line.

How this works: argparse subcommands. ``run`` loads and validates the scenario (a bad file gets one line
naming the file and the key, exit status 2) and runs it on Ray (with Spark on Ray for workload and
reference; ``--address`` or ``RAY_ADDRESS`` attaches to an existing cluster, which the run leaves running) or
on the deterministic simulator (``--backend sim``), in the scenario's mode or the one given (``--mode all``:
aligned, unaligned and at-least-once on the same workload, side by side, each in ``OUT/<mode>/``; on Ray under
one start of Ray and Spark). ``replay`` re-runs a simulation exactly from its scenario, seed, mode and faults (the command
every simulated run and every failing property example prints). ``report`` writes the HTML report of a run
directory. Ctrl-C stops a run cleanly (Spark and Ray are shut down) with exit status 130.
"""

from __future__ import annotations

import argparse
import sys

from barriersim import sweep
from barriersim.errors import UnsupportedScenario
from barriersim.report.cli import add_report_parser, cmd_report
from barriersim.runtime.fault_log import fired_line
from barriersim.runtime.faults import FaultSchedule, FaultScheduleError
from barriersim.scenarios.loader import MODES, ScenarioError, load_scenario

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
    run.add_argument("--address", help="address of an existing Ray cluster, left running (default: $RAY_ADDRESS, else start a local one)")
    run.add_argument("--backend", choices=("ray", "sim"), default="ray",
                     help="ray: Ray actors with Spark on Ray; sim: the deterministic simulator (default: ray)")
    run.add_argument("--mode", choices=MODES + ("all",),
                     help="checkpointing mode overriding the scenario's; all: aligned, unaligned and at-least-once")
    replay = sub.add_parser("replay", help="re-run a simulation exactly",
                            description="Re-run a simulation from its scenario, seed, mode and faults.")
    replay.add_argument("scenario", help="path of the scenario file (TOML)")
    replay.add_argument("--seed", type=_seed, required=True, help="the run's seed")
    replay.add_argument("--mode", choices=MODES, help="checkpointing mode (default: the scenario's)")
    replay.add_argument("--faults", help="the fault schedule as JSON (default: the scenario's)")
    replay.add_argument("--out", help="run directory (default: runs/<scenario>-<UTC timestamp>)")
    add_report_parser(sub)
    sweep.register(sub)
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

    from barriersim.run import run_scenario, run_scenario_modes

    scenario = load_scenario(args.scenario)
    modes = _modes(args, scenario)
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

        if args.mode == "all":
            results = run_scenario_modes(scenario, modes, out_dir=args.out, seed=args.seed, address=args.address,
                                         progress=progress)
        else:
            results = [run_scenario(scenario, out_dir=args.out, seed=args.seed, address=args.address,
                                    progress=progress, mode=modes[0])]
    if len(results) == 1:
        _print_summary(console, results[0])
    else:
        _print_side_by_side(console, [r.summary for r in results])
        for r in results:
            v = r.summary["verification"]
            print(f"{r.summary['mode']}: verdict: {v['verdict']}  lost={v['lost']} duplicated={v['duplicated']} "
                  f"wrong={v['wrong']}")
            _print_faults_fired(r.summary, "  ")
        print(f"wrote {results[0].out_dir.parent}")
    return EXIT_VIOLATED if any(r.summary["verification"]["verdict"] == "violated" for r in results) else 0


def _print_faults_fired(summary: dict, indent: str = "") -> None:
    """Which faults of a run with a fault schedule fired, on one plain line (nothing without faults)."""
    if summary["faults_fired"]:
        print(f"{indent}faults: {fired_line(summary['faults_fired'])}")


SIDE_BY_SIDE_MODES = ("aligned", "unaligned", "at-least-once")


def _modes(args, scenario) -> list[str]:
    if args.mode == "all":
        return list(SIDE_BY_SIDE_MODES)
    return [args.mode or scenario.checkpointing.mode]


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


def _cmd_run_sim(args) -> int:
    from pathlib import Path

    from rich.console import Console

    from barriersim.run import default_out_dir
    from barriersim.simulate import simulate_scenario

    scenario = load_scenario(args.scenario)
    modes = _modes(args, scenario)
    out = Path(args.out) if args.out else default_out_dir(scenario)
    console = Console()
    summaries = []
    for mode in modes:
        target = out / mode if len(modes) > 1 else out
        console.print(f"[bold]simulating {scenario.name} in {mode} mode[/bold]")
        summaries.append(simulate_scenario(scenario, target, seed=args.seed, mode=mode))
    _print_side_by_side(console, summaries)
    for s in summaries:  # plain print: a replay command must stay on one line whatever the terminal width
        v = s["verification"]
        print(f"{s['mode']}: verdict: {v['verdict']}  lost={v['lost']} duplicated={v['duplicated']} wrong={v['wrong']}")
        _print_faults_fired(s, "  ")
        print(f"  replay: {s['replay']}")
    print(f"wrote {out}")
    return EXIT_VIOLATED if any(s["verification"]["verdict"] == "violated" for s in summaries) else 0


def _cmd_replay(args) -> int:
    from pathlib import Path

    from rich.console import Console

    from barriersim.run import default_out_dir
    from barriersim.simulate import simulate_scenario

    scenario = load_scenario(args.scenario)
    faults = FaultSchedule.from_json(args.faults) if args.faults is not None else None
    out = Path(args.out) if args.out else default_out_dir(scenario)
    summary = simulate_scenario(scenario, out, seed=args.seed, mode=args.mode, faults=faults)
    console = Console()
    _print_side_by_side(console, [summary])
    v = summary["verification"]
    print(f"verdict: {v['verdict']}  lost={v['lost']} duplicated={v['duplicated']} wrong={v['wrong']}")
    _print_faults_fired(summary)
    print(f"trace_sha256: {summary['trace_sha256']}")
    return EXIT_VIOLATED if v["verdict"] == "violated" else 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "run":
            return _cmd_run_sim(args) if args.backend == "sim" else _cmd_run(args)
        if args.command == "replay":
            return _cmd_replay(args)
        if args.command == "report":
            return cmd_report(args)
        if args.command == "sweep":
            return sweep.main_from_args(args)
    except (ScenarioError, UnsupportedScenario, FaultScheduleError) as e:
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
