"""Runs on the deterministic simulator: one effective scenario simulated, verified, and written as a run directory.

How this works: ``simulate`` takes the effective scenario of one run (its mode, seed, faults and overrides already
applied: ``barriersim.api.plan``), builds the job's settings (``scenarios.simulation_inputs.job_config``), draws
the workload locally unless ``splits`` are given (Spark's, for ``workload="spark"``), simulates, verifies the
committed output against the reference evaluated over the same workload (``runtime.verification``), and writes
the run directory as the Ray backend does (``barriersim.summary``, with the offered and achieved rate of each
source subtask, measured on the virtual clock until the subtask finished): ``scenario.toml``, ``summary.json`` (with
``backend: "sim"``, the ``simulation`` section, ``trace_sha256`` and the one-line ``replay`` command, which
re-runs that ``scenario.toml``) and the per-checkpoint and per-subtask statistics. Savepoints are written as files
in ``savepoints/`` (Flink's JobManager storage with a savepoint directory); the checkpoints a cancelled job
retained, kept in memory while the run lasts, are written to ``checkpoints/<job-id>/`` at its end; the external
system the sinks wrote goes to ``external_store.msgpack``, so that a later run restored from one of them
continues it (``barriersim.continuation``). A run whose last job ended by a stop or a cancel is verified against
that snapshot (``runtime.snapshot_verification.verify_run``). A run is a pure function of its effective scenario
(and, restored, of the run it continues).
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

from barriersim.continuation import previous_run, publish_run, write_external_store
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.runtime.storage.fs_storage import FileSystemCheckpointStorage
from barriersim.runtime.storage.object_storage import savepoint_directory_for
from barriersim.scenarios.loader import Scenario
from barriersim.scenarios.simulation_inputs import job_config, workload_splits
from barriersim.summary import (
    SCENARIO_FILE,
    build_summary,
    jobs_sections,
    placement_rows,
    placement_section,
    source_rates,
    with_channel_kinds,
    write_run_directory,
)


def replay_command(scenario_file: Path | str) -> str:
    """The one-line command that re-runs the simulation a scenario file (a run's ``scenario.toml``) holds."""
    return " ".join(shlex.quote(p) for p in ("barriersim", "replay", str(scenario_file)))


def simulate(scenario: Scenario, out_dir: Path, *, splits: dict | None = None, generated_by: str = "local",
             checkpoint_files: bool = False, checkpoint_storage: str | None = None) -> dict:
    """Simulate the effective ``scenario`` into ``out_dir``; ``splits`` (``{source vertex: [records per
    subtask]}``) replace the locally drawn workload, and ``generated_by`` says where they came from.
    ``checkpoint_files``: keep the checkpoints in ``out_dir/checkpoints/<job-id>/`` (the filesystem checkpoint
    storage, as a Ray run does) instead of in memory; ``checkpoint_storage``: keep them at this storage URI
    instead (a path, ``file://`` or ``s3://``: ``runtime.storage.object_storage.checkpoint_storage_for``), its
    savepoints in its ``savepoints/`` (``savepoint_directory_for``) and the run's files beside them
    (``barriersim.continuation.publish_run``), as a Ray run does. The simulation is the same."""
    out_dir = Path(out_dir)
    config = job_config(scenario)
    if splits is None:
        splits = workload_splits(scenario)
    previous = previous_run(scenario)
    started = time.perf_counter()
    checkpoints, savepoints = _storage_directories(out_dir, checkpoint_files, checkpoint_storage)
    simulation = JobSimulation(config, splits, scenario.seed, checkpoint_directory=checkpoints,
                               savepoint_directory=savepoints, store=previous.store if previous else None,
                               first_attempt_number=previous.next_attempt_number if previous else 0)
    progress = _SourceProgress(simulation)
    result = simulation.run()
    wall = time.perf_counter() - started
    read = progress.records_read()
    source_runs = {f"{vertex}#{i}": (read.get((vertex, i), 0), progress.last_record_ms.get((vertex, i)))
                   for vertex, parts in splits.items() for i in range(len(parts))}
    report = simulation.report
    _externalize_retained_checkpoints(simulation, report, out_dir)
    verdict, scope = simulation.verify(result)
    records = sum(len(s) for splits_of in splits.values() for s in splits_of)
    virtual_seconds = result.virtual_ms / 1000
    through = sum(read.values())
    summary = build_summary(
        scenario=scenario, backend="sim", generated_by=generated_by, records=records,
        counts=result.counts, verification=verdict.as_dict(),
        outcome=result.outcome.value, restarts=result.restarts,
        restored_checkpoint_ids=result.restored_checkpoint_ids,
        restored_in_flight_bytes=result.restored_in_flight_bytes,
        records_per_second=through / virtual_seconds if virtual_seconds else None, throughput_clock="virtual",
        source_rates=source_rates(scenario.workload.rate_per_source, source_runs),
        faults_fired=result.fault_log, failure_reason=result.failure_reason,
        **jobs_sections(report, simulation.job_master.next_attempt_number, scope),
        backend_sections={
            "simulation": {
                "outcome": result.outcome.value,
                "virtual_seconds": virtual_seconds,
                "events": result.events,
                "events_per_second": round(result.events / wall) if wall else None,
                "restarts": result.restarts,
                "restored_checkpoint_ids": result.restored_checkpoint_ids,
                "restored_in_flight_bytes": result.restored_in_flight_bytes,
            },
            "trace_sha256": result.trace_sha256,
            "replay": replay_command(out_dir / SCENARIO_FILE),
        },
        wall_seconds=wall,
        placement=placement_section(config, result.deployments),
    )
    write_run_directory(out_dir, scenario, summary, result.checkpoints, with_channel_kinds(result.subtasks, config),
                        placement_rows(config, result.deployments))
    write_external_store(out_dir, simulation.store)
    if checkpoint_storage is not None:
        publish_run(out_dir, checkpoint_storage)
    return summary


def _storage_directories(out_dir: Path, checkpoint_files: bool, checkpoint_storage: str | None):
    """Where the simulation keeps its checkpoints (None: in memory) and writes its savepoints."""
    savepoints = savepoint_directory_for(checkpoint_storage, out_dir)
    if checkpoint_storage is None:
        return (out_dir / "checkpoints" if checkpoint_files else None), savepoints
    return checkpoint_storage, savepoints


def _externalize_retained_checkpoints(sim: JobSimulation, report, out_dir: Path) -> None:
    """The checkpoints a cancelled job retained live in the simulator's memory: write them to
    ``checkpoints/<job-id>/chk-<n>/_metadata`` (Flink's externalized checkpoints), where a later run can
    restore them, and report that path."""
    for job_report in report.jobs:
        pointer = job_report.retained_checkpoint
        storage = sim.storages.get(job_report.job_id)
        if pointer is None or storage is None or not pointer.startswith("jobmanager://"):
            continue
        metadata = storage.load_checkpoint_metadata(pointer)
        files = FileSystemCheckpointStorage(out_dir / "checkpoints", job_report.job_id)
        job_report.retained_checkpoint = files.persist_checkpoint(metadata).external_pointer
    if report.jobs:
        report.retained_checkpoint = report.jobs[-1].retained_checkpoint


class _SourceProgress:
    """How far the run's source subtasks read, observed while the simulation runs (nothing else changes: the trace
    and every outcome stay the same): at the first deployment's ``tasks_started`` (the JobMaster's, wrapped) it
    notes where the readers start (0 for a fresh job, the restored offsets for a job restored from an earlier run's
    savepoint or checkpoint), and after each task step (the data plane's ``_step``, wrapped) that moved a source's
    reader, when that step's work ended (the step's records are paced over it). ``records_read()`` is then how far
    the last deployment's readers got, less where the first started: the records that went through the job, also
    when it ended before its input did (a stop-with-savepoint, a cancel, a failure the restart strategy gave up
    on); ``last_record_ms`` the job's ms (the fault schedule's clock) of each source subtask's last record."""

    def __init__(self, simulation: JobSimulation):
        self._simulation = simulation
        self.at_start: dict[tuple[str, int], int] | None = None
        self.last_record_ms: dict[tuple[str, int], int] = {}
        job_master = simulation.job_master
        tasks_started = job_master.tasks_started
        step = simulation._step

        def started(epoch):
            if self.at_start is None:
                self.at_start = {key: reader.records_read for key, reader in self._readers().items()}
            return tasks_started(epoch)

        def stepped(key, epoch):
            task = simulation.tasks.get(key)
            reader = task.operator.reader if task is not None and task.operator.is_source else None
            before = reader.records_read if reader is not None else 0
            step(key, epoch)
            if reader is not None and reader.records_read != before:
                ended_us = simulation._busy_until[key]
                self.last_record_ms[key] = ended_us // 1000 - (job_master.started_ms or 0)

        job_master.tasks_started = started
        simulation._step = stepped

    def _readers(self) -> dict[tuple[str, int], object]:
        return {key: task.operator.reader for key, task in self._simulation.tasks.items() if task.operator.is_source}

    def records_read(self) -> dict[tuple[str, int], int]:
        at_start = self.at_start or {}
        return {key: reader.records_read - at_start.get(key, 0) for key, reader in self._readers().items()}
