"""The ``barriersim`` command line: argparse subcommands, each a thin layer over ``barriersim.api``.

How this works: ``run`` (a scenario file or a bundled scenario's name, ``scenarios`` lists them) runs on Ray with
Spark on Ray (``--address``/``RAY_ADDRESS``: an existing cluster, checked to answer within ``--connect-timeout``)
or on the simulator (``--backend sim``), in one mode or ``--mode all``, with ``--set`` overrides, experiment
actions and ``--from`` restores, and prints the run table (``barriersim.tables``). ``replay`` re-runs a simulation
from a run's ``scenario.toml`` and says whether its trace is the original's; ``sweep``, ``campaign`` and
``report`` are ``barriersim.sweep``, ``barriersim.campaign_cli`` and ``barriersim.report``. Bad input (a missing
extra, an unreachable address, an argparse error) is one line and exit status 2; a violated guarantee or a FAILED
job exit status 1; Ctrl-C 130."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from barriersim import api, campaign_cli, sweep, tables
from barriersim.arguments import add_action_arguments, add_checkpoint_arguments, add_set_argument, seed_argument
from barriersim.backends import BACKENDS, Backend
from barriersim.errors import ArgumentError, BarriersimError
from barriersim.out_dir import prepare_out_dir
from barriersim.progress import StageProgress
from barriersim.ray_address import timeout_argument
from barriersim.replay_check import compare, original_run
from barriersim.report.cli import add_report_parser, cmd_report
from barriersim.run_statistics import mode_statistics
from barriersim.runtime.checkpointing_mode import ALL_MODES
from barriersim.runtime.faults.experiment import ActionScheduleError
from barriersim.runtime.faults.fault_log import fired_line
from barriersim.runtime.faults.fault_schedule import FaultScheduleError
from barriersim.scenarios.library import bundled
from barriersim.scenarios.loader import ScenarioError
from barriersim.summary import SCENARIO_FILE, default_out_dir

EXIT_VIOLATED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error: the problem and where the help is (not the whole usage)."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


SCENARIO_HELP = "a scenario file (TOML), or the name of a bundled one (barriersim scenarios lists them)"


def add_connect_timeout_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--connect-timeout",
        type=timeout_argument,
        metavar="SECONDS",
        help="how long the Ray cluster at --address (or $RAY_ADDRESS) may take to answer before the "
        "command gives up (default: $BARRIERSIM_CONNECT_TIMEOUT, else 30)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="barriersim", description="Simulate Flink-style checkpointing on Ray, with Spark-on-Ray workloads."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = sub.add_parser("run", help="run a scenario end to end", description="Run a scenario end to end.")
    run.add_argument("scenario", help=SCENARIO_HELP)
    run.add_argument("--out", help="run directory, new or empty (default: runs/<scenario>-<UTC timestamp>)")
    run.add_argument("--force", action="store_true", help="replace the run in a non-empty --out directory")
    run.add_argument("--seed", type=seed_argument, help="seed overriding the scenario's")
    run.add_argument(
        "--address",
        help="address of an existing Ray cluster, left running (default: $RAY_ADDRESS, else start a local one)",
    )
    add_connect_timeout_argument(run)
    run.add_argument(
        "--checkpoint-storage",
        metavar="URI",
        help="where the checkpoints and savepoints go, as Flink's state.checkpoints.dir: a path every "
        "Ray node sees, file:///path, or s3://bucket/prefix (S3 client options in the query, e.g. "
        "?endpoint_override=host:9000&scheme=http; credentials from the AWS_* variables), each run "
        "under URI/<run directory name>; default: the run directory's checkpoints/ (ray), memory "
        "(sim)",
    )
    run.add_argument(
        "--backend",
        choices=BACKENDS,
        default=Backend.RAY.value,
        help="ray: Ray actors with Spark on Ray; sim: the deterministic simulator (default: ray)",
    )
    run.add_argument(
        "--mode",
        choices=ALL_MODES + ("all",),
        help="checkpointing mode overriding the scenario's; all: aligned, unaligned and at-least-once",
    )
    run.add_argument(
        "--no-cache",
        dest="cache",
        action="store_false",
        help="ray backend: generate the workload and its reference in Spark even if the workload cache "
        "($BARRIERSIM_CACHE_DIR, else $XDG_CACHE_HOME/barriersim or ~/.cache/barriersim) has them, "
        "and leave the cache alone",
    )
    add_set_argument(run)
    add_action_arguments(run)
    add_checkpoint_arguments(run)
    replay = sub.add_parser(
        "replay",
        help="re-run a simulation exactly",
        description="Re-run a simulation from a scenario file: a run's scenario.toml (or its run "
        "directory) holds everything it ran with.",
    )
    replay.add_argument(
        "scenario",
        help="a scenario file (TOML), e.g. RUN_DIR/scenario.toml, a run directory, or a bundled scenario's name",
    )
    replay.add_argument("--seed", type=seed_argument, help="seed overriding the file's")
    replay.add_argument("--mode", choices=ALL_MODES, help="checkpointing mode overriding the file's")
    replay.add_argument("--faults", help="a fault schedule as JSON, replacing the file's")
    replay.add_argument("--actions", help="an action schedule as JSON, replacing the file's")
    add_set_argument(replay)
    add_checkpoint_arguments(replay)
    replay.add_argument("--out", help="run directory, new or empty (default: runs/<scenario>-<UTC timestamp>)")
    replay.add_argument("--force", action="store_true", help="replace the run in a non-empty --out directory")
    add_report_parser(sub)
    sweep.register(sub)
    campaign_cli.register(sub)
    sub.add_parser(
        "scenarios",
        help="list the bundled scenarios",
        description="List the scenarios installed with barriersim: barriersim run NAME runs one.",
    )
    return parser


def _print_verdicts(result, traces: bool = True) -> None:
    """One plain line per mode (a replay command and a trace hash must stay on one line whatever the terminal
    width)."""
    for mode, r in result.items():
        s, v = r.summary, r.summary["verification"]
        print(f"{mode}: verdict: {v['verdict']}  lost={v['lost']} duplicated={v['duplicated']} wrong={v['wrong']}")
        if s["job"]["outcome"] == "failed":
            print(f"  job failed: {s['job'].get('failure_reason') or 'no reason recorded'}")
        if s["faults_fired"]:
            print(f"  faults: {fired_line(s['faults_fired'])}")
        if traces and "trace_sha256" in s:
            print(f"  trace_sha256: {s['trace_sha256']}")
        if "replay" in s:
            print(f"  replay: {s['replay']}")
    for line in tables.rate_warnings(list(result.summaries.values())) + tables.rewind_warnings(
        list(result.summaries.values())
    ):
        print(line)


def _exit_status(result) -> int:
    failed = any(r.summary["job"]["outcome"] == "failed" for r in result.values())
    return EXIT_VIOLATED if failed or any(v == "violated" for v in result.verdicts.values()) else 0


def _actions_of(args) -> list | str | None:
    """The action schedule of ``run``'s options: ``--actions`` as given, or the timed options (savepoints in
    time order, then the stop or the cancel); None when none is given (the scenario's own)."""
    timed = bool(args.savepoint_at) or args.stop_at is not None or args.cancel_at is not None
    if args.drain and args.stop_at is None:
        raise ArgumentError("--drain: drains a stop-with-savepoint; give --stop-with-savepoint-at too")
    if args.actions is not None:
        if timed:
            raise ArgumentError(
                "--actions: give a whole schedule or --savepoint-at / --stop-with-savepoint-at / --cancel-at, not both"
            )
        return args.actions
    if not timed:
        return None
    if args.stop_at is not None and args.cancel_at is not None:
        raise ArgumentError("--cancel-at: the job is stopped by --stop-with-savepoint-at; give one of them")
    actions = [{"type": "savepoint", "at_ms": at} for at in sorted(args.savepoint_at)]
    if args.stop_at is not None:
        actions.append({"type": "stop_with_savepoint", "at_ms": args.stop_at, "drain": args.drain})
    if args.cancel_at is not None:
        actions.append({"type": "cancel", "at_ms": args.cancel_at})
    return actions


def _out(args, scenario) -> Path:
    """The run directory, checked before anything starts (``barriersim.out_dir``)."""
    out = Path(args.out) if args.out else default_out_dir(scenario)
    prepare_out_dir(out, args.force)
    return out


def _cmd_run(args) -> int:
    started = time.perf_counter()
    p = api.plan(
        args.scenario,
        backend=args.backend,
        mode=args.mode,
        seed=args.seed,
        overrides=dict(args.overrides),
        actions=_actions_of(args),
        restore_from=args.restore_from,
        parallelism=dict(args.parallelism) or None,
        mode_origin="--mode",
    )
    checkpoint_storage = api.check_checkpoint_storage(p.backend, args.checkpoint_storage)
    if p.backend is Backend.RAY:  # before the run directory is touched (--force empties it)
        api.check_cluster(args.address, args.connect_timeout)
    out = _out(args, p.scenario)
    console = tables.console()
    with StageProgress(console) as progress:
        result = api.execute(
            p,
            out,
            address=args.address,
            progress=progress,
            checkpoint_files=args.checkpoint_files,
            checkpoint_storage=checkpoint_storage,
            cache=args.cache,
            connect_timeout=args.connect_timeout,
        )
    summaries = list(result.summaries.values())
    total = time.perf_counter() - started
    statistics = mode_statistics(out, {mode: r.out_dir for mode, r in result.items()}, result.summaries)
    if p.backend is Backend.SIM:
        console.print(tables.modes_table(summaries, statistics))
    elif len(summaries) == 1:
        console.print(tables.run_table(summaries[0], total, statistics))
    else:
        console.print(tables.shared_setup_table(summaries[0], total))
        console.print(tables.modes_table(summaries, statistics))
    cache = tables.cache_line(summaries[0])
    if cache is not None:
        print(f"workload cache: {cache}")
    _print_verdicts(result)
    print(f"wrote {out}")
    return _exit_status(result)


def _cmd_replay(args) -> int:
    path = Path(args.scenario)
    if path.is_dir():
        path = path / SCENARIO_FILE
    p = api.plan(
        path,
        backend=Backend.SIM,
        mode=args.mode,
        seed=args.seed,
        faults=args.faults,
        actions=args.actions,
        overrides=dict(args.overrides),
        mode_origin="--mode",
    )
    out = _out(args, p.scenario)
    result = api.execute(p, out, checkpoint_files=args.checkpoint_files)
    run = result.only
    statistics = mode_statistics(out, {run.mode: run.out_dir}, result.summaries)
    tables.console().print(tables.modes_table([run.summary], statistics))
    _print_verdicts(result, traces=False)
    print(f"trace_sha256: {run.summary['trace_sha256']}")
    original = original_run(Path(p.scenario.path))
    if original is None:
        print(f"replay: no original run to compare with ({p.scenario.path} is not in a run directory)")
    else:
        changed = [
            flag
            for flag, given in (
                ("--seed", args.seed is not None),
                ("--mode", args.mode),
                ("--faults", args.faults),
                ("--actions", args.actions),
                ("--set", args.overrides),
            )
            if given
        ]
        print(f"replay: {compare(original, run.out_dir, run.summary, changed)}")
    return _exit_status(result)


def _cmd_scenarios() -> int:
    table = tables.new_table("bundled scenarios (barriersim run NAME)", ("name", "left"), ("description", "left"))
    table.columns[1].max_width = 84
    for s in bundled():
        table.add_row(s.name, s.description)
    tables.console().print(table)
    return 0


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
        if args.command == "campaign":
            return campaign_cli.main_from_args(args)
        if args.command == "scenarios":
            return _cmd_scenarios()
    except (ScenarioError, FaultScheduleError, ActionScheduleError, BarriersimError) as e:
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
