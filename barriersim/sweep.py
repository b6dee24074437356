"""Sweeps: a scenario's ``[sweep]`` axes expanded into a run matrix, every point run in every mode, and the runs
aggregated in Spark on Ray into one table.

How it works: docs/runs-and-workloads.md, "Sweeps".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as ProgressBar

from barriersim import api
from barriersim.analytics_export import export_analytics
from barriersim.arguments import seed_argument
from barriersim.backends import Backend, WorkloadGenerator
from barriersim.errors import BarriersimError
from barriersim.extras import require
from barriersim.out_dir import prepare_out_dir
from barriersim.rundir import RunDirError, discover_runs
from barriersim.runtime.checkpointing_mode import ALL_MODES
from barriersim.runtime.faults.fault_schedule import FaultScheduleError
from barriersim.runtime.storage.object_storage import child_uri, is_object_store_uri
from barriersim.scenarios.loader import Scenario, ScenarioError, expand_sweep
from barriersim.scenarios.schema import SCHEMA
from barriersim.spark.analytics import analytics_dir, compute_sweep_analytics
from barriersim.spark.session import SparkOnDemand
from barriersim.summary import default_out_dir, write_json_atomically
from barriersim.tables import console as table_console
from barriersim.tables import new_table

EXIT_OK = 0
EXIT_VIOLATED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

Progress = Callable[[str, int, int], None]  # (what, runs done, runs in all)


def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def point_label(settings: dict[str, Any]) -> str:
    """A point's directory name: its settings as ``name=value`` joined by commas, each named by the key's last
    part unless two axes share it (then by the dotted key)."""
    if not settings:
        return "base"
    short = [key.partition(".")[2] for key in settings]
    names = short if len(set(short)) == len(short) else list(settings)
    return ",".join(f"{n}={_format_value(v)}".replace(os.sep, "_") for n, v in zip(names, settings.values()))


@dataclass(frozen=True)
class SweepPoint:
    index: int
    label: str
    settings: dict
    scenario: Scenario = field(repr=False)


@dataclass
class SweepResult:
    """A finished sweep: its directory, its index (``sweep.json``), the runs and the aggregated table."""

    out_dir: Path
    index: dict = field(repr=False)
    runs: dict[tuple[str, str], api.ModeRun] = field(repr=False)
    table: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def verdicts(self) -> dict[tuple[str, str], str]:
        """(point label, mode) -> verdict."""
        return {key: r.verdict for key, r in self.runs.items()}


def sweep_points(scenario: Scenario) -> list[SweepPoint]:
    if not scenario.sweep:
        raise ScenarioError(
            scenario.path,
            "sweep",
            "the scenario has no [sweep] table (dotted keys to lists of values, e.g. "
            '"workload.zipf_exponent" = [0.5, 1.5])',
        )
    return [SweepPoint(i, point_label(settings), settings, s) for i, (settings, s) in enumerate(expand_sweep(scenario))]


def axis_types(scenario: Scenario) -> list[tuple[str, type]]:
    out = []
    for key, _ in scenario.sweep:
        section, _, name = key.partition(".")
        out.append((key, SCHEMA[section][name].kind))
    return out


def _write_index(out: Path, index: dict) -> None:
    write_json_atomically(out / "sweep.json", index)


def run_sweep(
    scenario,
    *,
    backend: Backend | str = Backend.SIM,
    out: str | os.PathLike | None = None,
    modes=None,
    seed: int | None = None,
    workload: WorkloadGenerator | str | None = None,
    faults=None,
    address: str | None = None,
    spark=None,
    aggregate: bool = True,
    progress: Progress | None = None,
    force: bool = False,
    checkpoint_storage: str | None = None,
) -> SweepResult:
    """Run every point of the scenario's ``[sweep]`` in every mode and aggregate the runs in Spark.

    ``scenario``: a path or a ``Scenario`` with a ``[sweep]`` table. ``modes``: None (each point's own mode), a
    mode, a list of modes, or ``"all"`` (aligned, unaligned, at-least-once). ``out``: default
    ``runs/<scenario>-sweep-<UTC stamp>``. ``backend``, ``seed``, ``workload``, ``faults``, ``address`` as in
    ``barriersim.run``. ``spark``: a live SparkSession on Ray (else Spark on Ray is started when needed and
    stopped at the end; with ``backend="ray"`` each run starts its own, and ``spark`` serves the aggregation
    only). ``aggregate=False`` skips the Spark aggregation (``table`` is then None). ``force``: ``out`` may be a
    previous run's or sweep's directory, whose contents are replaced (else a non-empty ``out`` is refused).
    ``checkpoint_storage``: as ``barriersim.run``'s, for every point; everything of the sweep goes under
    ``<storage>/<sweep directory name>/``, laid out as the sweep directory (``<point>/<mode>/``: each run's
    checkpoints and savepoints; ``analytics/``: on ``s3://``, the sweep's analytics, ``sweep.json``
    ``analytics_uri``).
    """
    s = api.as_scenario(scenario)
    points = sweep_points(s)
    # Every point checked before the first run: a bad mode, seed, fault or workload fails fast.
    plans = [
        api.plan(
            p.scenario, backend=backend, mode=modes, seed=seed, faults=faults, workload=workload, mode_origin="--mode"
        )
        for p in points
    ]
    plans = [replace(pl, nest=True) for pl in plans]
    checkpoint_storage = api.check_checkpoint_storage(backend, checkpoint_storage)
    if aggregate:  # what the end of the sweep needs, checked before its first run
        require("spark", "the aggregation in Spark on Ray (--no-analytics skips it)")
    if spark is None and (
        aggregate or any(pl.backend is Backend.RAY or pl.workload is WorkloadGenerator.SPARK for pl in plans)
    ):
        api.check_cluster(address)
    out_dir = Path(out) if out is not None else default_out_dir(s, suffix="-sweep")
    sweep_storage = None if checkpoint_storage is None else child_uri(checkpoint_storage, out_dir.name)
    prepare_out_dir(out_dir, force)
    say = progress or (lambda what, done, total: None)
    total = sum(len(pl.runs) for pl in plans)
    index: dict[str, Any] = {
        "scenario": s.name,
        "path": s.path,
        "backend": plans[0].backend.value,
        "seed": plans[0].scenario.seed,
        "workload": plans[0].workload.value,
        "modes": modes if modes is None or isinstance(modes, str) else list(modes),
        "axes": {key: list(values) for key, values in s.sweep},
        "points": [],
        "analytics": None,
    }
    runs: dict[tuple[str, str], api.ModeRun] = {}
    done = 0
    splits_cache: dict = {}
    with SparkOnDemand(spark, address, app_name=f"barriersim-sweep-{s.name}", log_dir=out_dir / "logs") as session:
        for point, pl in zip(points, plans):
            entry = {"index": point.index, "label": point.label, "settings": point.settings, "runs": []}
            splits = None
            if pl.backend is Backend.SIM and pl.workload is WorkloadGenerator.SPARK:
                w = pl.scenario
                key = (w.workload, tuple((v.name, v.parallelism) for v in w.job.graph.sources), w.seed)
                if key not in splits_cache:
                    if not session.started:
                        say("starting Spark on Ray", done, total)
                        session.get()
                    say(f"{point.label}: generating the workload in Spark", done, total)
                    splits_cache[key] = api.spark_workload_splits(session.get(), w)
                splits = splits_cache[key]
            # The simulator runs one mode at a time; the Ray backend runs a point's modes on one workload and one
            # start of Ray and Spark.
            groups = [(run,) for run in pl.runs] if pl.backend is Backend.SIM else [pl.runs]
            for group in groups:
                # the backend names its phases (the mode among them); each line says the point
                stage = [f"{point.label}: {', '.join(r.checkpointing.mode.value for r in group)}"]

                def backend_says(what: str, _fraction, stage=stage, label=point.label, done=done) -> None:
                    stage[0] = f"{label}: {what}"
                    say(stage[0], done, total)

                # a backend puts a request's runs under <storage>/<its directory's name>: the point's, or the
                # mode's when the point runs one mode (then nested in the point's)
                storage = (
                    None
                    if sweep_storage is None
                    else child_uri(sweep_storage, point.label)
                    if len(group) == 1
                    else sweep_storage
                )
                result = api.execute(
                    replace(pl, runs=group),
                    out_dir / point.label,
                    address=address,
                    splits=splits,
                    progress=backend_says,
                    checkpoint_storage=storage,
                )
                for mode, r in result.items():
                    runs[(point.label, mode)] = r
                    v = r.summary["verification"]
                    entry["runs"].append(
                        {
                            "mode": mode,
                            "dir": f"{point.label}/{mode}",
                            "verdict": v["verdict"],
                            "lost": v["lost"],
                            "duplicated": v["duplicated"],
                            "wrong": v["wrong"],
                            "checkpoints": r.summary.get("checkpoints", {}),
                        }
                    )
                done += len(group)
                say(stage[0], done, total)
            index["points"].append(entry)
            _write_index(out_dir, index)
        _write_index(out_dir, index)
        table = None
        if aggregate:
            if not session.started:
                say("starting Spark on Ray", done, total)
                session.get()
            say("aggregating the runs in Spark", done, total)
            table = aggregate_sweep(session.get(), out_dir, index, axis_types(s))
            index["analytics"] = "analytics/sweep.parquet"
            _write_index(out_dir, index)
            if sweep_storage is not None and is_object_store_uri(sweep_storage):
                say("writing the analytics to the object store", done, total)
                index["analytics_uri"] = export_analytics(analytics_dir(out_dir), child_uri(sweep_storage, "analytics"))
                _write_index(out_dir, index)
    return SweepResult(out_dir=out_dir, index=index, runs=runs, table=table)


def index_rows(index: dict) -> list[dict]:
    """One row per (point, mode) of a sweep's index, keyed as ``barriersim.spark.analytics.sweep_index_columns``."""
    rows = []
    for point in index["points"]:
        for r in point["runs"]:
            rows.append(
                {
                    "run": r["dir"],
                    "point": point["label"],
                    "point_index": point["index"],
                    "mode": r["mode"],
                    **point["settings"],
                    "backend": index["backend"],
                    "seed": index["seed"],
                    "generated_by": index["workload"],
                    "verdict": r["verdict"],
                    "lost": r["lost"],
                    "duplicated": r["duplicated"],
                    "wrong": r["wrong"],
                }
            )
    return rows


def aggregate_sweep(spark, out_dir: Path, index: dict, axes: list[tuple[str, type]]) -> pd.DataFrame:
    """The sweep's table computed in Spark (``OUT/analytics/sweep.parquet``), as pandas."""
    wanted = {r["dir"] for p in index["points"] for r in p["runs"]}
    runs = [r for r in discover_runs(out_dir) if r.label in wanted]
    return compute_sweep_analytics(spark, out_dir, index_rows(index), axes, runs)


# -- the command line ----------------------------------------------------------------------------------------


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``barriersim sweep`` to the ``barriersim`` parser's subcommands."""
    parser = subparsers.add_parser(
        "sweep",
        help="run a scenario's [sweep] matrix and aggregate it in Spark",
        description="Expand the scenario's [sweep] axes into a run matrix, run every point (in every mode) into "
        "OUT/<point>/<mode>/, index it in OUT/sweep.json and aggregate the runs in Spark on Ray into "
        "OUT/analytics/sweep.parquet (one row per point and mode, Flink's summary statistics).",
    )
    parser.add_argument("scenario", help="path of a scenario file (TOML) with a [sweep] table")
    parser.add_argument(
        "--backend",
        choices=api.BACKENDS,
        default="sim",
        help="sim: the deterministic simulator (default); ray: Ray actors with Spark on Ray",
    )
    parser.add_argument(
        "--mode",
        choices=ALL_MODES + ("all",),
        help="checkpointing mode for every point (default: the scenario's); all: aligned, unaligned and at-least-once",
    )
    parser.add_argument("--out", help="sweep directory, new or empty (default: runs/<scenario>-sweep-<UTC timestamp>)")
    parser.add_argument("--force", action="store_true", help="replace the sweep or run in a non-empty --out directory")
    parser.add_argument("--seed", type=seed_argument, help="seed overriding the scenario's")
    parser.add_argument(
        "--workload",
        choices=api.WORKLOADS,
        help="where the simulator's workload is generated (default: local; the Ray backend always uses Spark)",
    )
    parser.add_argument("--address", help="address of an existing Ray cluster (default: start a local one)")
    parser.add_argument("--no-analytics", action="store_true", help="skip the aggregation in Spark")
    parser.add_argument(
        "--checkpoint-storage",
        metavar="URI",
        help="as run's: where every point's checkpoints go (Flink's state.checkpoints.dir: a path, "
        "file:///path or s3://bucket/prefix?options), under URI/<sweep directory name>/; on "
        "s3:// the analytics too",
    )
    parser.set_defaults(handler=main_from_args)
    return parser


SWEEP_TABLE_FIGURES = (
    ("end_to_end_duration", "p50", "ms"),
    ("end_to_end_duration", "p99", "ms"),
    ("alignment_duration", "p99", "ms"),
    ("persisted_data", "p99", "bytes"),
)


def _print_table(console, result: SweepResult) -> None:
    axes = list(result.index["axes"])
    t = result.table
    stats = SWEEP_TABLE_FIGURES if t is not None else ()
    table = new_table(
        f"barriersim sweep: {result.index['scenario']} ({result.index['backend']}, seed {result.index['seed']})",
        *((a.partition(".")[2], "right") for a in axes),
        ("mode", "left"),
        ("verdict", "left"),
        ("checkpoints completed", "right"),
        *((f"{metric} {stat} ({unit})", "right") for metric, stat, unit in stats),
    )
    by_run = {row["run"]: row for row in t.to_dict("records")} if t is not None else {}

    def fmt(row, col):
        value = row.get(col) if row else None
        return "-" if value is None or value != value else f"{value:,.0f}"

    for point in result.index["points"]:
        for r in point["runs"]:
            row = by_run.get(r["dir"])
            figures = [fmt(row, f"{metric}_{stat}") for metric, stat, _ in stats]
            table.add_row(
                *(_format_value(point["settings"][a]) for a in axes),
                r["mode"],
                r["verdict"],
                str(r["checkpoints"].get("completed", "-")),
                *figures,
            )
    console.print(table)


def main_from_args(args) -> int:
    """Run ``barriersim sweep`` from parsed arguments; returns the exit status (0; 1 when a run violated
    exactly-once or at-least-once; 2 with one line on stderr for bad input; 130 on Ctrl-C)."""
    console = Console(stderr=True)
    try:
        with ProgressBar(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=not console.is_terminal,
        ) as bar:
            task = bar.add_task("checking the sweep", total=None)
            shown: set[str] = set()

            def progress(what: str, done: int, total: int) -> None:
                if what not in shown:  # each phase named as it starts, a line that stays
                    shown.add(what)
                    bar.console.print(what, markup=False, highlight=False)
                bar.update(task, description=what, completed=done, total=total)

            result = run_sweep(
                args.scenario,
                backend=args.backend,
                out=args.out,
                modes=args.mode,
                seed=args.seed,
                workload=args.workload,
                address=args.address,
                aggregate=not args.no_analytics,
                progress=progress,
                force=args.force,
                checkpoint_storage=args.checkpoint_storage,
            )
    except (ScenarioError, BarriersimError, FaultScheduleError, RunDirError) as e:
        print(f"barriersim sweep: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("barriersim sweep: interrupted; Spark and Ray were stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    _print_table(table_console(), result)
    print(
        f"wrote {result.out_dir}/sweep.json"
        + (f" and {result.out_dir}/analytics/sweep.parquet" if result.table is not None else "")
    )
    violated = [f"{p}/{m}" for (p, m), v in result.verdicts.items() if v == "violated"]
    failed = [
        (f"{p}/{m}", r.summary["job"].get("failure_reason") or "no reason recorded")
        for (p, m), r in result.runs.items()
        if r.summary["job"]["outcome"] == "failed"
    ]
    if violated:
        print(f"violated: {', '.join(violated)}")
    for run, reason in failed:
        print(f"failed: {run}: {reason}")
    return EXIT_VIOLATED if violated or failed else EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (``python -m barriersim.sweep``); ``barriersim sweep`` goes through the CLI."""
    parser = argparse.ArgumentParser(prog="barriersim")
    register(parser.add_subparsers(dest="command", required=True))
    return main_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
