"""Sweeps: a scenario's ``[sweep]`` axes expanded into a run matrix (``scenarios.loader.expand_sweep``), every point
run in every mode into ``OUT/<point-label>/<mode>/``, indexed in ``OUT/sweep.json`` and aggregated into one table,
``OUT/analytics/sweep.parquet`` (``barriersim.sweep_table``: pandas for small sweeps, else Spark on Ray).

Everything is checked before the first run. On the simulator the runs go in this process or as Ray tasks
(``barriersim.ray_tasks``), whichever ``run_sweep``'s rule picks; the results are the same either way. The
Ray backend runs one job at a time, or N at once in driver processes (``barriersim.ray_jobs``). ``register``
adds ``barriersim sweep SCENARIO`` to the CLI; bad input costs one line naming the file and key, and exit
status 2. docs/experiments.md tells the design.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console

from barriersim import api, sweep_table
from barriersim.analytics_export import export_analytics
from barriersim.arguments import positive_argument, seed_argument
from barriersim.backends import Backend, WorkloadGenerator
from barriersim.errors import ArgumentError, BarriersimError, RayStartError, first_line
from barriersim.extras import require
from barriersim.out_dir import prepare_out_dir
from barriersim.progress import CountedProgress
from barriersim.ray_jobs import Ended, Said, cpus_for
from barriersim.ray_jobs import map_unordered as in_driver_processes
from barriersim.ray_tasks import (
    RayTasks,
    check_parallelism,
    in_drivers_directory,
    node_ip,
    pack_files,
    ray_installed,
    remove_tree,
    unpack_files,
    worth_ray,
)
from barriersim.rundir import RunDirError, discover_runs
from barriersim.runtime.checkpointing_mode import ALL_MODES
from barriersim.runtime.faults.fault_schedule import FaultScheduleError
from barriersim.runtime.storage.object_storage import child_uri, is_object_store_uri
from barriersim.scenarios.loader import Scenario, ScenarioError, expand_sweep
from barriersim.scenarios.schema import SCHEMA
from barriersim.spark.analytics import analytics_dir
from barriersim.spark.session import SparkOnDemand
from barriersim.summary import default_out_dir, write_json_atomically
from barriersim.sweep_table import ENGINES
from barriersim.tables import console as table_console
from barriersim.tables import new_table

EXIT_OK = 0
EXIT_VIOLATED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
DRIVER_STDOUT = "driver-stdout.log"  # a Ray-backend job's driver process's prints (Ray's warnings), in its logs/

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


@dataclass(frozen=True)
class SweepJob:
    """What one backend call of a sweep runs: a point's runs (one mode on the simulator, all of the point's on Ray)
    into its directory ``out``, with its checkpoint storage URI."""

    point: SweepPoint
    plan: api.Plan
    out: Path
    storage: str | None

    @property
    def records(self) -> int:
        return sum(s.workload.records for s in self.plan.runs)


def run_job(job: SweepJob, splits=None, progress=None, address: str | None = None) -> dict[str, dict]:
    """Run ``job``; mode -> summary."""
    result = api.execute(
        job.plan, job.out, address=address, splits=splits, progress=progress, checkpoint_storage=job.storage
    )
    return {mode: r.summary for mode, r in result.items()}


def run_job_task(job: SweepJob, splits, driver: tuple[str, str]) -> tuple[dict[str, dict], dict | None]:
    """``run_job`` in a Ray task, in the driver's working directory ``driver = (ip, cwd)`` (a relative ``--out``
    means the same there): on the driver's node the run directories are written in place; on another node they
    are sent back (``ray_tasks.pack_files``) and removed there."""
    in_drivers_directory(driver[1])
    return _run_job_on(job, splits, node_ip() != driver[0], pack_files, remove_tree)


def _run_job_on(job: SweepJob, splits, elsewhere: bool, pack, remove) -> tuple[dict[str, dict], dict | None]:
    summaries = run_job(job, splits)
    if not elsewhere:
        return summaries, None
    targets = [target for target, _ in job.plan.targets(job.out)]
    files = {f"{target.name}/{name}": data for target in targets for name, data in pack(target).items()}
    for target in targets:
        remove(target)
    return summaries, files


def _job_in_driver(job: SweepJob, say: Callable[[str], None], address: str) -> dict[str, dict]:
    """``run_job`` in a driver process of its own (``barriersim.ray_jobs``), attached to the sweep's Ray cluster."""
    return run_job(job, progress=lambda what, _fraction: say(what), address=address)


def _driver_stdout(job: SweepJob) -> Path:
    """Where a job's driver process prints: its run's log directory (``ray_backend``'s: the point's for several
    modes, else the mode's)."""
    targets = job.plan.targets(job.out)
    root = targets[0][0].parent if len(targets) > 1 else targets[0][0]
    return root / "logs" / DRIVER_STDOUT


def _check_parallelism(backend: Backend, parallelism: int | None, address: str | None) -> None:
    check_parallelism(parallelism)
    asked = address is not None or (parallelism is not None and parallelism > 1)
    if backend is Backend.SIM and parallelism != 1 and asked and not ray_installed():
        raise ArgumentError(
            "parallelism: running points as Ray tasks needs Ray (pip install 'barriersim[ray]'); "
            "--parallelism 1 runs them in this process"
        )


def run_sweep(
    scenario,
    *,
    backend: Backend | str = Backend.SIM,
    out: str | os.PathLike | None = None,
    modes=None,
    seed: int | None = None,
    workload: str | None = None,
    faults=None,
    address: str | None = None,
    spark=None,
    aggregate: bool = True,
    progress: Progress | None = None,
    force: bool = False,
    checkpoint_storage: str | None = None,
    analytics: str = "auto",
    parallelism: int | None = None,
) -> SweepResult:
    """Run every point of the scenario's ``[sweep]`` in every mode and aggregate the runs into one table.

    ``scenario``: a path or a ``Scenario`` with a ``[sweep]`` table. ``modes``: None (each point's own mode), a
    mode, a list of modes, or ``"all"`` (aligned, unaligned, at-least-once). ``out``: default
    ``runs/<scenario>-sweep-<UTC stamp>``. ``backend``, ``seed``, ``workload``, ``faults`` as in
    ``barriersim.run``. ``parallelism`` (sim backend): 1 runs the points in this process, N > 1 as Ray tasks, N
    at a time; None: as Ray tasks over the cores when the first run says the rest would take longer than
    ``ray_tasks.RAY_WORTH_SECONDS`` in one process, else in it; with ``address`` (an existing Ray cluster, also
    Spark's), as Ray tasks over the cluster's CPUs; when Ray was this rule's choice and does not start, the rest
    runs in this process. The Ray backend runs one point's job at a time; ``parallelism`` N > 1: up to N at once
    on one Ray cluster (the local one started here, or ``address``), each job in a driver process of its own (a
    job that raises ends its point: no job starts after it, the running ones finish, then its error is raised).
    ``analytics``: where the runs' statistics are
    computed, ``auto`` (as ``barriersim.run`` does: in the Spark that is up, else in pandas when the tables are
    small, else in Spark on Ray), ``pandas`` or ``spark``; ``aggregate=False`` skips the aggregation (``table``
    is then None). ``spark``: a live SparkSession on Ray (else Spark on Ray is started when needed and stopped at
    the end). ``force``: ``out`` may be a previous run's or sweep's directory, whose contents are replaced (else a
    non-empty ``out`` is refused). ``checkpoint_storage``: as ``barriersim.run``'s, for every point; everything of
    the sweep goes under ``<storage>/<sweep directory name>/``, laid out as the sweep directory
    (``<point>/<mode>/``: each run's checkpoints and savepoints; ``analytics/``: on ``s3://``, the sweep's
    analytics, ``sweep.json`` ``analytics_uri``).
    """
    backend = Backend.parse(backend)
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
    if analytics not in ENGINES:
        raise ArgumentError(f"analytics: must be one of {', '.join(ENGINES)}, got {analytics!r}")
    _check_parallelism(backend, parallelism, address)
    if aggregate and analytics == "spark" and spark is None:  # what the end of the sweep needs, checked first
        require("spark", "the aggregation in Spark on Ray (--analytics pandas or --no-analytics: without it)")
    if spark is None and (
        address is not None
        or (aggregate and analytics == "spark")
        or any(pl.backend is Backend.RAY or pl.workload is WorkloadGenerator.SPARK for pl in plans)
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
    jobs: list[SweepJob] = []
    for point, pl in zip(points, plans):
        # The simulator runs one mode at a time; the Ray backend runs a point's modes on one workload and one
        # start of Ray and Spark. A backend puts a request's runs under <storage>/<its directory's name>: the
        # point's, or the mode's when the point runs one mode (then nested in the point's).
        for group in [(run,) for run in pl.runs] if pl.backend is Backend.SIM else [pl.runs]:
            storage = (
                None
                if sweep_storage is None
                else child_uri(sweep_storage, point.label)
                if len(group) == 1
                else sweep_storage
            )
            jobs.append(SweepJob(point, replace(pl, runs=group), out_dir / point.label, storage))
    runs: dict[tuple[str, str], api.ModeRun] = {}
    finished: dict[int, dict[str, dict]] = {}
    splits_cache: dict = {}

    def record(i: int, summaries: dict[str, dict]) -> None:
        finished[i] = summaries
        for mode, summary in summaries.items():
            runs[(jobs[i].point.label, mode)] = api.ModeRun(jobs[i].out / mode, summary)
        index["points"] = _index_points(points, jobs, finished)
        _write_index(out_dir, index)

    # Ray started for the tasks outlives Spark started later on it: Spark is stopped first
    with (
        contextlib.ExitStack() as ray_tasks,
        SparkOnDemand(spark, address, app_name=f"barriersim-sweep-{s.name}", log_dir=out_dir / "logs") as session,
    ):

        def splits_of(job: SweepJob):
            if job.plan.backend is not Backend.SIM or job.plan.workload is not WorkloadGenerator.SPARK:
                return None
            w = job.plan.scenario
            key = (w.workload, tuple((v.name, v.parallelism) for v in w.job.graph.sources), w.seed)
            if key not in splits_cache:
                if not session.started:
                    say("starting Spark on Ray", len(runs), total)
                    session.get()
                say(f"{job.point.label}: generating the workload in Spark", len(runs), total)
                splits_cache[key] = api.spark_workload_splits(session.get(), w)
            return splits_cache[key]

        def run_here(i: int) -> None:
            job = jobs[i]
            # the backend names its phases (the mode among them); each line says the point
            stage = [f"{job.point.label}: {', '.join(job.plan.modes)}"]

            def backend_says(what: str, _fraction, stage=stage, label=job.point.label) -> None:
                stage[0] = f"{label}: {what}"
                say(stage[0], len(runs), total)

            record(i, run_job(job, splits_of(job), backend_says, address))
            say(stage[0], len(runs), total)

        # the Ray backend: one job at a time, or N at once (each in a driver process of its own)
        concurrent = backend is Backend.RAY and parallelism is not None and parallelism > 1
        serial = (backend is Backend.RAY and not concurrent) or parallelism == 1
        probe = not serial and not concurrent and parallelism is None and address is None
        started = time.perf_counter()
        for i, job in enumerate(jobs):
            if not serial and not probe:
                break
            run_here(i)
            if probe:
                rest = sum(j.records for j in jobs[i + 1 :]) / max(1, job.records)
                serial = not worth_ray(time.perf_counter() - started, rest)
                probe = False
        remaining = [i for i in range(len(jobs)) if i not in finished]
        tasks = None
        if remaining:
            say(f"starting Ray for the {'jobs' if concurrent else 'simulations'}", len(runs), total)
            try:
                tasks = ray_tasks.enter_context(
                    RayTasks(
                        address,
                        parallelism,
                        log_dir=out_dir / "logs",
                        app_name=f"barriersim-sweep-{s.name}",
                        num_cpus=cpus_for(parallelism) if concurrent and parallelism is not None else None,
                    )
                )
            except RayStartError as err:
                if parallelism is not None or address is not None:  # asked for: refused in one line
                    raise
                say(f"{err}; simulating the rest in this process", len(runs), total)
                for i in remaining:
                    run_here(i)
        if tasks is not None and concurrent:
            _run_drivers(jobs, remaining, tasks, record, lambda what: say(what, len(runs), total))
        elif tasks is not None:
            work = [(jobs[i], splits_of(jobs[i])) for i in remaining]
            what = (
                f"simulating {sum(len(jobs[i].plan.runs) for i in remaining)} runs as Ray tasks, "
                f"{tasks.parallelism} at a time"
            )
            say(what, len(runs), total)
            driver = (tasks.driver_ip, os.getcwd())
            for k, (summaries, files) in tasks.map_unordered(_job_in_task, work, shared=(driver,)):
                if files is not None:
                    unpack_files(jobs[remaining[k]].out, files)
                record(remaining[k], summaries)
                say(what, len(runs), total)
        _write_index(out_dir, index)
        runs = {(job.point.label, mode): runs[(job.point.label, mode)] for job in jobs for mode in job.plan.modes}
        table = None
        if aggregate:
            done = len(runs)

            def spark_session():
                if not session.started:
                    say("starting Spark on Ray", done, total)
                return session.get()

            table, index["analytics_engine"] = aggregate_sweep(
                out_dir,
                index,
                axis_types(s),
                engine=analytics,
                spark=spark_session,
                spark_up=session.started,
                say=lambda what: say(what, done, total),
            )
            index["analytics"] = "analytics/sweep.parquet"
            _write_index(out_dir, index)
            if sweep_storage is not None and is_object_store_uri(sweep_storage):
                say("writing the analytics to the object store", done, total)
                index["analytics_uri"] = export_analytics(analytics_dir(out_dir), child_uri(sweep_storage, "analytics"))
                _write_index(out_dir, index)
    return SweepResult(out_dir=out_dir, index=index, runs=runs, table=table)


def _run_drivers(jobs: list[SweepJob], remaining: list[int], tasks: RayTasks, record, say) -> None:
    """The Ray backend's jobs ``remaining``, ``tasks.parallelism`` at once, each in a driver process of its own on
    ``tasks``' cluster; each finished job recorded as it ends. A job that raises ends its point only: no job starts
    after it, the running ones finish and are recorded, then its error is raised (the first, if several)."""
    failures: list[BaseException] = []
    say(f"running {len(remaining)} jobs on Ray, {tasks.parallelism} at a time")
    events = in_driver_processes(
        partial(_job_in_driver, address=tasks.cluster_address),
        [jobs[i] for i in remaining],
        tasks.parallelism,
        more=lambda: not failures,
        stdout=_driver_stdout,
    )
    with contextlib.closing(events):  # closed (its drivers ended) on every exit, a Ctrl-C's too
        for event in events:
            i = remaining[event.index]
            label = jobs[i].point.label
            if isinstance(event, Said):
                say(f"{label}: {event.what}")
            elif isinstance(event, Ended) and event.error is not None:
                failures.append(event.error)
                say(f"{label}: failed: {first_line(event.error)}")
            else:
                record(i, event.result)
                say(f"{label}: done")
    if failures:
        raise failures[0]


def _job_in_task(work: tuple, driver: tuple[str, str]):
    job, splits = work
    return run_job_task(job, splits, driver)


def _index_points(points: list[SweepPoint], jobs: list[SweepJob], finished: dict[int, dict[str, dict]]) -> list[dict]:
    """``sweep.json``'s points: each point with a finished run, its runs in the plan's mode order."""
    entries = []
    for point in points:
        summaries: dict[str, dict] = {}
        for i, job in enumerate(jobs):
            if job.point.index == point.index and i in finished:
                summaries.update(finished[i])
        if not summaries:
            continue
        order = [m for job in jobs if job.point.index == point.index for m in job.plan.modes]
        entry: dict[str, Any] = {"index": point.index, "label": point.label, "settings": point.settings, "runs": []}
        for mode in sorted(summaries, key=order.index):
            summary = summaries[mode]
            v = summary["verification"]
            entry["runs"].append(
                {
                    "mode": mode,
                    "dir": f"{point.label}/{mode}",
                    "verdict": v["verdict"],
                    "lost": v["lost"],
                    "duplicated": v["duplicated"],
                    "wrong": v["wrong"],
                    "checkpoints": summary.get("checkpoints", {}),
                }
            )
        entries.append(entry)
    return entries


def index_rows(index: dict) -> list[dict]:
    """One row per (point, mode) of a sweep's index, keyed as ``barriersim.sweep_table.sweep_index_columns``."""
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


def aggregate_sweep(
    out_dir: Path,
    index: dict,
    axes: list[tuple[str, type]],
    engine: str = "auto",
    spark=None,
    spark_up: bool = False,
    say=lambda what: None,
) -> tuple[pd.DataFrame, str]:
    """The sweep's table (``OUT/analytics/sweep.parquet``) as pandas, and the engine that computed its statistics
    (``barriersim.sweep_table.aggregate``)."""
    wanted = {r["dir"] for p in index["points"] for r in p["runs"]}
    runs = [r for r in discover_runs(out_dir) if r.label in wanted]
    return sweep_table.aggregate(
        out_dir, index_rows(index), axes, runs, engine=engine, spark=spark, spark_up=spark_up, say=say
    )


# -- the command line ----------------------------------------------------------------------------------------


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``barriersim sweep`` to the ``barriersim`` parser's subcommands."""
    parser = subparsers.add_parser(
        "sweep",
        help="run a scenario's [sweep] matrix and aggregate it into one table",
        description="Expand the scenario's [sweep] axes into a run matrix, run every point (in every mode) into "
        "OUT/<point>/<mode>/, index it in OUT/sweep.json and aggregate the runs into "
        "OUT/analytics/sweep.parquet (one row per point and mode, Flink's summary statistics; pandas for "
        "a small sweep, else Spark on Ray).",
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
    parser.add_argument(
        "--address",
        help="address of an existing Ray cluster, for the simulator's Ray tasks, the Ray backend's "
        "jobs and Spark (default: start a local one when needed)",
    )
    parser.add_argument("--no-analytics", action="store_true", help="skip the aggregation")
    parser.add_argument(
        "--analytics",
        choices=ENGINES,
        default="auto",
        help="where the runs' statistics are computed: auto (default: as run does, in the Spark "
        "that is up, else in pandas when the tables are small, else in Spark on Ray), pandas or "
        "spark",
    )
    parser.add_argument(
        "--parallelism",
        type=positive_argument,
        metavar="N",
        help="sim backend: 1 runs the points in this process; N > 1 runs them as Ray tasks, N at a "
        "time (default: as Ray tasks over the cores, or over the cluster at --address, when "
        "the first run says the sweep would take more than a few seconds in one process); ray "
        "backend: up to N points' jobs at once on one Ray cluster, each a Ray job with its own "
        "driver process, actors and Spark (default: one at a time)",
    )
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
    try:
        with CountedProgress(Console(stderr=True), "checking the sweep") as progress:
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
                analytics=args.analytics,
                parallelism=args.parallelism,
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
