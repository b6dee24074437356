"""The ``barriersim`` command line.

How this works: argparse subcommands, each a thin layer over the one front door (``barriersim.api``: ``plan``
checks everything before anything starts, ``execute`` runs). ``run`` runs a scenario on Ray (with Spark on Ray
for workload and reference; ``--address`` or ``RAY_ADDRESS`` attaches to an existing cluster, which the run
leaves running) or on the deterministic simulator (``--backend sim``), in the scenario's mode or the one given
(``--mode all``: aligned, unaligned and at-least-once on the same workload, each in ``OUT/<mode>/``), with
``--set section.key=value`` overrides checked as the file's values are. ``replay`` re-runs a simulation exactly
from a scenario file, typically a run's own ``scenario.toml`` (or its run directory), which holds the seed, mode,
faults and overrides it ran with. ``run`` also takes experiment actions (``--savepoint-at``,
``--stop-with-savepoint-at`` with ``--drain``, ``--cancel-at``, or a whole ``--actions`` schedule) and starts
from a savepoint or retained checkpoint of an earlier run with ``--from PATH --parallelism vertex=n``.
``sweep`` runs a ``[sweep]`` matrix (``barriersim.sweep``), ``campaign`` a fault campaign
(``barriersim.campaign_cli``), ``report`` writes
the HTML report of a run directory. Bad input gets one line naming the file and the key and exit status 2, a
violated guarantee or a job that ended FAILED (its one-line reason printed) exit status 1; Ctrl-C stops a run cleanly (Spark and Ray are shut down) with exit status 130.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from barriersim import campaign_cli, sweep, tables
from barriersim.arguments import add_action_arguments, add_checkpoint_arguments, add_set_argument, seed_argument
from barriersim.errors import ArgumentError, BarriersimError
from barriersim.out_dir import prepare_out_dir
from barriersim.progress import StageProgress
from barriersim.report.cli import add_report_parser, cmd_report
from barriersim.runtime.checkpointing_mode import ALL_MODES
from barriersim.runtime.fault_log import fired_line
from barriersim.runtime.experiment import ActionScheduleError
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
    run.add_argument("--out", help="run directory, new or empty (default: runs/<scenario>-<UTC timestamp>)")
    run.add_argument("--force", action="store_true", help="replace the run in a non-empty --out directory")
    run.add_argument("--seed", type=seed_argument, help="seed overriding the scenario's")
    run.add_argument("--address", help="address of an existing Ray cluster, left running (default: $RAY_ADDRESS, else start a local one)")
    run.add_argument("--checkpoint-storage", metavar="URI",
                     help="where the checkpoints and savepoints go, as Flink's state.checkpoints.dir: a path every "
                          "Ray node sees, file:///path, or s3://bucket/prefix (S3 client options in the query, e.g. "
                          "?endpoint_override=host:9000&scheme=http; credentials from the AWS_* variables), each run "
                          "under URI/<run directory name>; default: the run directory's checkpoints/ (ray), memory "
                          "(sim)")
    run.add_argument("--backend", choices=("ray", "sim"), default="ray",
                     help="ray: Ray actors with Spark on Ray; sim: the deterministic simulator (default: ray)")
    run.add_argument("--mode", choices=ALL_MODES + ("all",),
                     help="checkpointing mode overriding the scenario's; all: aligned, unaligned and at-least-once")
    run.add_argument("--no-cache", dest="cache", action="store_false",
                     help="ray backend: generate the workload and its reference in Spark even if the workload cache "
                          "($BARRIERSIM_CACHE_DIR, else $XDG_CACHE_HOME/barriersim or ~/.cache/barriersim) has them, "
                          "and leave the cache alone")
    add_set_argument(run)
    add_action_arguments(run)
    add_checkpoint_arguments(run)
    replay = sub.add_parser("replay", help="re-run a simulation exactly",
                            description="Re-run a simulation from a scenario file: a run's scenario.toml (or its run "
                                        "directory) holds everything it ran with.")
    replay.add_argument("scenario", help="a scenario file (TOML), e.g. RUN_DIR/scenario.toml, or a run directory")
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
    return parser


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
    for line in tables.rate_warnings(list(result.summaries.values())) + \
            tables.rewind_warnings(list(result.summaries.values())):
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
            raise ArgumentError("--actions: give a whole schedule or --savepoint-at / --stop-with-savepoint-at / "
                                "--cancel-at, not both")
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
    from barriersim import api

    started = time.perf_counter()
    p = api.plan(args.scenario, backend=args.backend, mode=args.mode, seed=args.seed,
                 overrides=dict(args.overrides), actions=_actions_of(args), restore_from=args.restore_from,
                 parallelism=dict(args.parallelism) or None, mode_origin="--mode")
    checkpoint_storage = api.check_checkpoint_storage(args.backend, args.checkpoint_storage)
    out = _out(args, p.scenario)
    console = tables.console()
    with StageProgress(console) as progress:
        result = api.execute(p, out, address=args.address, progress=progress, checkpoint_files=args.checkpoint_files,
                             checkpoint_storage=checkpoint_storage, cache=args.cache)
    summaries = list(result.summaries.values())
    total = time.perf_counter() - started
    if args.backend == "sim":
        console.print(tables.modes_table(summaries))
    elif len(summaries) == 1:
        console.print(tables.run_table(summaries[0], total))
    else:
        console.print(tables.shared_setup_table(summaries[0], total))
        console.print(tables.modes_table(summaries))
    _print_verdicts(result)
    print(f"wrote {out}")
    return _exit_status(result)


def _cmd_replay(args) -> int:
    from barriersim import api

    path = Path(args.scenario)
    if path.is_dir():
        path = path / SCENARIO_FILE
    p = api.plan(path, backend="sim", mode=args.mode, seed=args.seed, faults=args.faults, actions=args.actions,
                 overrides=dict(args.overrides), mode_origin="--mode")
    out = _out(args, p.scenario)
    result = api.execute(p, out, checkpoint_files=args.checkpoint_files)
    summary = result.only.summary
    tables.console().print(tables.modes_table([summary]))
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
        if args.command == "campaign":
            return campaign_cli.main_from_args(args)
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
