"""Fault campaigns: seeds drawn into whole cases (``barriersim.seed_draws``: seed N is always the same case), each
simulated and checked for the property suite's properties (``barriersim.case_checks``), one Parquet row per case.

``run_campaign`` draws from the property suite's strategies: ``generated`` jobs (``strategies.simulated_cases``,
the default distribution) or fault schedules for a scenario file's job (``strategies.scenario_cases``). Seeds go
in batches, in this process or as Ray tasks (``barriersim.ray_tasks``); the rows go to ``OUT/rows/`` in chunks and
a campaign resumes by skipping the seeds written there. A failing case is written as a replayable
``OUT/failures/<seed>-<mode>/scenario.toml``; the verdicts are aggregated in Spark
(``barriersim.spark.campaign_table``). ``shrink_seed`` shrinks a failing seed with Hypothesis. docs/experiments.md
tells the design."""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import shutil
import time
import traceback
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from barriersim import strategies
from barriersim.arguments import seed_range_argument
from barriersim.case_checks import check, violation
from barriersim.errors import ArgumentError, RayStartError, UnsupportedScenario
from barriersim.extras import importable
from barriersim.out_dir import prepare_out_dir
from barriersim.ray_tasks import RayTasks, check_parallelism, worth_ray
from barriersim.runtime.checkpointing_mode import ALL_MODES, SIDE_BY_SIDE_MODES, CheckpointingMode
from barriersim.runtime.storage.atomic_file import AtomicFileWriter
from barriersim.scenarios.documents import dumps, scenario_document
from barriersim.scenarios.loader import effective_scenario, load_scenario, parse_scenario
from barriersim.seed_draws import draw, shrink
from barriersim.sim_backend import replay_command
from barriersim.spark.campaign_table import aggregate_verdicts
from barriersim.summary import write_json_atomically

CAMPAIGN_FILE = "campaign.json"
ROWS_DIR = "rows"
FAILURES_DIR = "failures"
GENERATED = "generated"  # SCENARIO for the property suite's generated jobs
CAMPAIGN_ENTRIES = {CAMPAIGN_FILE, ROWS_DIR, FAILURES_DIR, "shrunk", "analytics", "logs"}  # what a campaign writes

ROW_SCHEMA = pa.schema(
    [
        ("seed", pa.int64()),
        ("mode", pa.string()),
        ("case", pa.string()),
        ("faults", pa.string()),
        ("faults_count", pa.int32()),
        ("status", pa.string()),
        ("problem", pa.string()),
        ("verdict", pa.string()),
        ("outcome", pa.string()),
        ("lost", pa.int64()),
        ("duplicated", pa.int64()),
        ("wrong", pa.int64()),
        ("checkpoints_completed", pa.int64()),
        ("checkpoints_failed", pa.int64()),
        ("restarts", pa.int64()),
        ("records", pa.int64()),
        ("virtual_ms", pa.int64()),
        ("wall_seconds", pa.float64()),
        ("cpu_seconds", pa.float64()),
        ("trace_sha256", pa.string()),
    ]
)
PASSED, VIOLATED, ERROR = "passed", "violated", "error"


# -- what a campaign draws -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseSource:
    """Where a campaign's cases come from: the generated jobs, or a scenario file's job (its document); with
    JobManager and TaskManager faults or not. ``key`` names it (``campaign.json``: a resume must draw the same)."""

    scenario: str  # GENERATED, or the scenario file's path
    document: dict | None = field(default=None, compare=False, repr=False)
    jobmanager_faults: bool = False
    taskmanager_faults: bool = False

    @property
    def key(self) -> dict:
        digest = (
            None
            if self.document is None
            else hashlib.sha256(json.dumps(self.document, sort_keys=True).encode()).hexdigest()
        )
        return {
            "scenario": self.scenario,
            "document_sha256": digest,
            "jobmanager_faults": self.jobmanager_faults,
            "taskmanager_faults": self.taskmanager_faults,
        }

    @property
    def name(self) -> str:
        return GENERATED if self.document is None else self.document["scenario"]["name"]

    def strategy(self, mode: str | None):
        """The strategy of this source's cases in ``mode`` (None: the mode is drawn too, generated jobs only)."""
        key = (json.dumps(self.key, sort_keys=True), mode)
        if key not in _STRATEGIES:
            if self.document is None:
                _STRATEGIES[key] = strategies.simulated_cases(
                    mode=mode, jobmanager_faults=self.jobmanager_faults, taskmanager_faults=self.taskmanager_faults
                )
            else:
                scenario = parse_scenario(self.document, self.scenario)
                if mode is not None:
                    scenario = effective_scenario(scenario, mode=mode, origin="--mode")
                _STRATEGIES[key] = strategies.scenario_cases(
                    scenario, jobmanager_faults=self.jobmanager_faults, taskmanager_faults=self.taskmanager_faults
                )
        return _STRATEGIES[key]


_STRATEGIES: dict = {}  # a worker's strategies, built once per source and mode


def case_source(scenario: str, jobmanager_faults: bool = False, taskmanager_faults: bool = False) -> CaseSource:
    """``scenario``: ``generated`` or a scenario file's path (checked: a file with actions or a restore runs jobs
    the whole-job properties do not cover)."""
    if scenario == GENERATED:
        return CaseSource(GENERATED, None, jobmanager_faults, taskmanager_faults)
    loaded = load_scenario(scenario)
    if len(loaded.actions) or loaded.restore is not None:
        raise UnsupportedScenario(
            f"{scenario}: a campaign checks jobs that run to their end; this scenario has [[actions]] or a [restore]"
        )
    return CaseSource(str(Path(scenario).resolve()), scenario_document(loaded), jobmanager_faults, taskmanager_faults)


def campaign_modes(source: CaseSource, mode) -> list[str | None]:
    """The modes each seed runs in: None for a generated job's drawn mode (or a scenario's own), one mode, or
    ``all`` (aligned, unaligned and at-least-once, as ``barriersim run --mode all``)."""
    if mode is None:
        return [None]
    if mode == "all":
        return [m.value for m in SIDE_BY_SIDE_MODES]
    if mode not in ALL_MODES:
        raise ArgumentError(f"mode: must be one of {', '.join(ALL_MODES)} or all, got {mode!r}")
    return [CheckpointingMode.parse(mode).value]


def parse_seeds(text: str) -> range:
    """``A..B`` (both included) or ``N``; ``ArgumentError`` naming ``--seeds`` otherwise."""
    try:
        return seed_range_argument(text)
    except argparse.ArgumentTypeError as err:
        raise ArgumentError(f"--seeds: {err}") from None


# -- one case --------------------------------------------------------------------------------------------------


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or "(no message)"
    where = traceback.extract_tb(error.__traceback__)[-1] if error.__traceback__ else None
    at = f" at {Path(where.filename).name}:{where.lineno}" if where else ""
    return f"{type(error).__name__}: {text}{at}"


def run_case(source: CaseSource, seed: int, mode: str | None) -> tuple[dict, str | None]:
    """Draw, simulate and check one case: its row, and when it failed the case as a scenario file's text. Python's
    cycle collector pauses while the case runs (the collector, set off by a simulation's many young objects, cost a
    fifth of the CPU; what the case drops is freed by reference counting) and collects what the case left in cycles
    at its end, in the row's time."""
    started, cpu_started = time.perf_counter(), time.process_time()
    gc.disable()
    try:
        row, failing = _run_case(source, seed, mode)
    finally:
        gc.enable()
        gc.collect(0)  # the young generation: everything the case made and left in cycles
    row["wall_seconds"] = time.perf_counter() - started
    row["cpu_seconds"] = time.process_time() - cpu_started  # the drawing, the run, the check and the collection
    return row, failing


def _run_case(source: CaseSource, seed: int, mode: str | None) -> tuple[dict, str | None]:
    case = draw(source.strategy(mode), seed).value
    row = {
        "seed": seed,
        "mode": case.mode,
        "case": hashlib.sha256(json.dumps(case.document, sort_keys=True).encode()).hexdigest()[:12],
        "faults": json.dumps(case.faults.to_plain()),
        "faults_count": len(case.faults.faults),
        "records": case.document["workload"]["records"],
    }
    try:
        outcome = case.run()
        problem = violation(case, outcome)
        sim, verdict = outcome.simulation, outcome.verdict
        row.update(
            status=PASSED if problem is None else VIOLATED,
            problem=problem,
            verdict=verdict.verdict.value,
            outcome=sim.outcome.value,
            lost=verdict.lost,
            duplicated=verdict.duplicated,
            wrong=verdict.wrong,
            checkpoints_completed=sim.counts["completed"],
            checkpoints_failed=sim.counts["failed"],
            restarts=sim.restarts,
            virtual_ms=sim.virtual_ms,
            trace_sha256=sim.trace_sha256,
        )
    except Exception as error:  # noqa: BLE001 - an error the run raised is a finding, recorded with the case
        row.update(status=ERROR, problem=_one_line(error))
    failing = None
    if row["status"] != PASSED:
        try:
            failing = dumps(scenario_document(case.scenario(f"seed {seed}")))
        except Exception as error:  # noqa: BLE001 - a case that cannot even be written: its row says why
            row["problem"] += f"; the case cannot be written as a scenario ({_one_line(error)})"
    return row, failing


def run_batch(units: list[tuple[int, str | None]], source: CaseSource) -> list[tuple[dict, str | None]]:
    """``run_case`` of each ``(seed, mode)``: one Ray task's work. What the process holds before (modules, the
    strategies) is frozen out of the cycle collector's generations, so that none of its passes traces it again."""
    gc.collect()
    gc.freeze()
    return [run_case(source, seed, mode) for seed, mode in units]


# -- the campaign directory ------------------------------------------------------------------------------------


def _settings(source: CaseSource, modes: list[str | None]) -> dict:
    return {**source.key, "modes": modes}


def open_campaign(out: Path, source: CaseSource, modes: list[str | None], force: bool) -> dict:
    """The campaign directory ``out``: new, empty, or (a resume) one holding a campaign of the same settings;
    ``force`` replaces whatever barriersim wrote there. Returns its ``campaign.json``."""
    settings = _settings(source, modes)
    index_path = out / CAMPAIGN_FILE
    if not force and index_path.is_file():
        try:
            index = json.loads(index_path.read_text())
        except (OSError, ValueError) as err:
            raise ArgumentError(f"{index_path}: not a campaign's index ({err})") from None
        if index.get("settings") != settings:
            differences = _differences(index.get("settings"), settings)
            raise ArgumentError(
                f"--out: {out} holds a campaign of other settings ({differences}); give another "
                "--out, or --force to replace it"
            )
        return index
    if force and index_path.is_file():
        others = sorted(child.name for child in out.iterdir() if child.name not in CAMPAIGN_ENTRIES)
        if others:
            raise ArgumentError(
                f"--out: {out} holds more than a campaign ({', '.join(others[:3])}); it is not replaced"
            )
        for child in out.iterdir():
            shutil.rmtree(child) if child.is_dir() else child.unlink()
    else:
        prepare_out_dir(out, force)
    out.mkdir(parents=True, exist_ok=True)
    index = {"name": source.name, "settings": settings}
    write_json_atomically(index_path, index)
    return index


def _differences(old, new: dict) -> str:
    if not isinstance(old, dict):
        return "no settings"
    return ", ".join(f"{k}: {old.get(k)!r} there, {v!r} here" for k, v in new.items() if old.get(k) != v)


def read_rows(out: Path) -> pa.Table:
    """Every row written under ``out/rows/``."""
    parts = sorted((out / ROWS_DIR).glob("part-*.parquet"))
    if not parts:
        return ROW_SCHEMA.empty_table()
    return pa.concat_tables([pq.read_table(p, schema=ROW_SCHEMA) for p in parts])


class RowWriter:
    """Rows to ``out/rows/part-<n>.parquet``, a chunk at a time (each file written whole, atomically), so an
    interrupted campaign loses at most the rows of its last unwritten chunk."""

    def __init__(self, out: Path, chunk_rows: int = 2_000, chunk_seconds: float = 30.0):
        self.directory = out / ROWS_DIR
        self.directory.mkdir(parents=True, exist_ok=True)
        self.chunk_rows, self.chunk_seconds = chunk_rows, chunk_seconds
        self._rows: list[dict] = []
        self._since = time.monotonic()

    def add(self, rows: list[dict]) -> None:
        self._rows.extend(rows)
        if len(self._rows) >= self.chunk_rows or time.monotonic() - self._since >= self.chunk_seconds:
            self.flush()

    def flush(self) -> None:
        if not self._rows:
            return
        n = len(list(self.directory.glob("part-*.parquet")))
        while (self.directory / f"part-{n:05d}.parquet").exists():
            n += 1
        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pylist(self._rows, schema=ROW_SCHEMA), sink)
        AtomicFileWriter().write(self.directory / f"part-{n:05d}.parquet", sink.getvalue().to_pybytes())
        self._rows, self._since = [], time.monotonic()


def failure_dir(out: Path, seed: int, mode: str) -> Path:
    return out / FAILURES_DIR / f"{seed}-{mode}"


def write_failure(out: Path, row: dict, scenario_text: str) -> Path:
    """The failing case as ``failures/<seed>-<mode>/scenario.toml`` (``barriersim replay`` runs it) and what failed
    (``failure.json``)."""
    directory = failure_dir(out, row["seed"], row["mode"])
    directory.mkdir(parents=True, exist_ok=True)
    writer = AtomicFileWriter()
    writer.write(directory / "scenario.toml", scenario_text.encode())
    what = {
        "seed": row["seed"],
        "mode": row["mode"],
        "status": row["status"],
        "problem": row["problem"],
        "replay": replay_command(directory / "scenario.toml"),
    }
    writer.write(directory / "failure.json", (json.dumps(what, indent=2) + "\n").encode())
    return directory


# -- running ---------------------------------------------------------------------------------------------------

Progress = Callable[[str, int, int], None]


@dataclass
class CampaignResult:
    out_dir: Path
    rows: pa.Table = field(repr=False)
    ran: int  # cases run by this call (the rest were written before)
    interrupted: bool = False
    table: object = field(default=None, repr=False)  # the verdict table (pandas), when aggregated

    def count(self, status: str) -> int:
        return sum(1 for s in self.rows.column("status").to_pylist() if s == status)


def batches_of(units: list, size: int) -> list[list]:
    return [units[i : i + size] for i in range(0, len(units), size)]


DEFAULT_BATCH = 25  # cases per Ray task: about a second or two of work


def run_campaign(
    scenario: str,
    seeds: range,
    *,
    out: str | os.PathLike,
    mode=None,
    jobmanager_faults: bool = False,
    taskmanager_faults: bool = False,
    parallelism: int | None = None,
    address: str | None = None,
    batch: int | None = None,
    aggregate: bool = True,
    force: bool = False,
    spark=None,
    progress: Progress | None = None,
    chunk_rows: int = 2_000,
) -> CampaignResult:
    """Run (or resume) a campaign into ``out``: every seed of ``seeds`` in every mode (``campaign_modes``) not
    written there yet. ``parallelism``: 1 runs the cases in this process, N > 1 as Ray tasks, N at a time; None:
    as Ray tasks over the cores (or the cluster at ``address``) when the first batch says the rest would take
    longer than ``ray_tasks.RAY_WORTH_SECONDS`` in one process. ``aggregate``: the verdict table in Spark on Ray
    (``analytics/verdicts.parquet``; ``spark``: a live SparkSession to use). A Ctrl-C writes the rows done and
    returns ``interrupted``."""
    check_parallelism(parallelism)
    batch = DEFAULT_BATCH if batch is None else batch
    if batch < 1:
        raise ArgumentError(f"batch: must be >= 1, got {batch}")
    if aggregate and spark is None and not importable("raydp"):
        raise ArgumentError(
            "analytics: the verdict table is computed in Spark on Ray, which is not installed (pip "
            "install 'barriersim[spark]'); --no-analytics skips it"
        )
    source = case_source(scenario, jobmanager_faults, taskmanager_faults)
    modes = campaign_modes(source, mode)
    for m in modes:  # a mode the scenario cannot run in fails here, before anything is written
        source.strategy(m)
    out_dir = Path(out)
    open_campaign(out_dir, source, modes, force)
    say = progress or (lambda what, done, total: None)
    written = read_rows(out_dir)
    done_keys = set(zip(written.column("seed").to_pylist(), _asked_modes(written, modes)))
    units = [(seed, m) for seed in seeds for m in modes if (seed, m) not in done_keys]
    total, done = len(units), 0
    writer = RowWriter(out_dir, chunk_rows=chunk_rows)
    interrupted, table = False, None

    def take(results: list[tuple[dict, str | None]]) -> None:
        nonlocal done
        for row, failing in results:
            if failing is not None:
                write_failure(out_dir, row, failing)
        writer.add([row for row, _ in results])
        done += len(results)

    if len(done_keys):
        say(
            f"resuming: {len(seeds) * len(modes) - total} of {len(seeds) * len(modes)} cases written before",
            done,
            total,
        )
    work = batches_of(units, batch)
    try:
        with ExitStack() as stack:
            serial = parallelism == 1
            probe = parallelism is None and address is None
            started = time.perf_counter()
            if serial or probe:
                say(f"running {total} cases in this process", done, total)
            while work and (serial or probe):
                take(run_batch(work.pop(0), source))
                say(f"running {total} cases in this process", done, total)
                if probe:
                    serial, probe = not worth_ray(time.perf_counter() - started, sum(map(len, work)) / done), False
            tasks = None
            if work:
                say("starting Ray", done, total)
                try:
                    tasks = stack.enter_context(
                        RayTasks(address, parallelism, log_dir=out_dir / "logs", app_name="barriersim-campaign")
                    )
                except RayStartError as err:
                    if parallelism is not None or address is not None:  # asked for: refused in one line
                        raise
                    what = f"{err}; running the rest in this process"
                    while work:
                        take(run_batch(work.pop(0), source))
                        say(what, done, total)
            if tasks is not None:
                what = f"running {total - done} cases as Ray tasks, {tasks.parallelism} at a time"
                say(what, done, total)
                for _, results in tasks.map_unordered(run_batch, work, shared=(source,)):
                    take(results)
                    say(what, done, total)
            writer.flush()
            rows = read_rows(out_dir)
            if aggregate and rows.num_rows:  # in a Spark on the Ray that is up, if one is
                table = aggregate_verdicts(
                    out_dir, rows, spark=spark, address=address, say=lambda what: say(what, done, total)
                )
    except KeyboardInterrupt:
        interrupted = True
    finally:
        writer.flush()
    return CampaignResult(out_dir, read_rows(out_dir), done, interrupted, None if interrupted else table)


def _asked_modes(rows: pa.Table, modes: list[str | None]) -> list[str | None]:
    """The mode each written row was asked for: its own, or None in a campaign of drawn modes."""
    return [None] * rows.num_rows if modes == [None] else rows.column("mode").to_pylist()


# -- shrinking -------------------------------------------------------------------------------------------------


def shrink_seed(
    scenario: str,
    seed: int,
    *,
    out: str | os.PathLike,
    mode=None,
    jobmanager_faults: bool = False,
    taskmanager_faults: bool = False,
) -> list[tuple[str, str | None, Path | None]]:
    """Shrink each failing case of ``seed`` (in each mode asked) with Hypothesis; per case ``(mode, problem,
    shrunk scenario file)``, problem and file None when the case passes. The shrunk case is written as
    ``out/shrunk/<seed>-<mode>/scenario.toml``."""
    source = case_source(scenario, jobmanager_faults, taskmanager_faults)
    found: list[tuple[str, str | None, Path | None]] = []
    for m in campaign_modes(source, mode):
        strategy = source.strategy(m)
        drawn = draw(strategy, seed)
        if violation(drawn.value, drawn.value.run()) is None:
            found.append((drawn.value.mode, None, None))
            continue
        smallest = shrink(strategy, drawn.choices, lambda case: check(case, case.run()))
        if smallest is None:  # it passed when Hypothesis ran it: not reproducible
            raise RuntimeError(f"seed {seed}: the case failed, then passed when run again")
        case, error = smallest
        directory = Path(out) / "shrunk" / f"{seed}-{drawn.value.mode}"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "scenario.toml"
        path.write_text(dumps(scenario_document(case.scenario(str(path)))))
        found.append(
            (drawn.value.mode, _one_line(error) if not isinstance(error, AssertionError) else str(error), path)
        )
    return found
