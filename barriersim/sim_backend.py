"""Runs on the deterministic simulator: ``simulate`` takes one effective scenario (``barriersim.api.plan``), builds
the job's settings and workload, simulates it (``runtime.sim.job_simulation``), writes the checkpoints a cancelled
job retained, verifies the committed output (against the reference over the same workload, or the snapshot a
stopped or cancelled last job ended with) and writes the run directory as the Ray backend does: ``scenario.toml``,
``summary.json`` (``backend: "sim"``, the ``simulation`` section, ``trace_sha256``, the one-line ``replay``
command), the statistics, savepoints and the external system. A run is a pure function of its effective scenario
(and, restored, of the run it continues). docs/architecture.md ("The drivers") has the narrative."""

from __future__ import annotations

import shlex
import time
from pathlib import Path

from barriersim.backends import Backend, WorkloadGenerator
from barriersim.continuation import output_after_snapshot, previous_run, publish_run, write_external_store
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


def simulate(
    scenario: Scenario,
    out_dir: Path,
    *,
    splits: dict | None = None,
    generated_by: WorkloadGenerator | str = WorkloadGenerator.LOCAL,
    checkpoint_files: bool = False,
    checkpoint_storage: str | None = None,
) -> dict:
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
    simulation = JobSimulation(
        config,
        splits,
        scenario.seed,
        checkpoint_directory=checkpoints,
        savepoint_directory=savepoints,
        store=previous.store if previous else None,
        first_attempt_number=previous.next_attempt_number if previous else 0,
    )
    result = simulation.run()
    wall = time.perf_counter() - started
    progress = simulation.source_progress()  # what each source read, also when the job ended before its input did
    source_runs = {
        f"{vertex}#{i}": progress.get((vertex, i), (0, None))
        for vertex, parts in splits.items()
        for i in range(len(parts))
    }
    report = simulation.report
    _externalize_retained_checkpoints(simulation, report, out_dir)
    verdict, scope = simulation.verify(result)
    records = sum(len(s) for splits_of in splits.values() for s in splits_of)
    virtual_seconds = result.virtual_ms / 1000
    through = sum(records for records, _ in progress.values())
    summary = build_summary(
        scenario=scenario,
        backend=Backend.SIM,
        generated_by=WorkloadGenerator.parse(generated_by, "generated_by"),
        records=records,
        counts=result.counts,
        verification=verdict.as_dict(),
        outcome=result.outcome.value,
        restarts=result.restarts,
        restored_checkpoint_ids=result.restored_checkpoint_ids,
        restored_in_flight_bytes=result.restored_in_flight_bytes,
        records_per_second=through / virtual_seconds if virtual_seconds else None,
        throughput_clock="virtual",
        source_rates=source_rates(scenario.workload.rate_per_source, source_runs),
        faults_fired=result.fault_log,
        failure_reason=result.failure_reason,
        **jobs_sections(report, simulation.dispatcher.next_attempt_number(), scope),
        backend_sections={
            "simulation": {
                "outcome": result.outcome.value,
                "virtual_seconds": virtual_seconds,
                "events": result.events,
                "events_per_second": round(result.events / wall) if wall else None,
                "restarts": result.restarts,
                "restored_checkpoint_ids": result.restored_checkpoint_ids,
                "restored_in_flight_bytes": result.restored_in_flight_bytes,
                # storage faults the job went on after (a failed discard, a dropped acknowledgement), never silent
                "storage_errors": result.storage_errors,
            },
            "trace_sha256": result.trace_sha256,
            "replay": replay_command(out_dir / SCENARIO_FILE),
        },
        wall_seconds=wall,
        placement=placement_section(config, result.deployments),
        output_after_snapshot=output_after_snapshot(previous),
    )
    write_run_directory(
        out_dir,
        scenario,
        summary,
        result.checkpoints,
        with_channel_kinds(result.subtasks, config),
        placement_rows(config, result.deployments),
    )
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
