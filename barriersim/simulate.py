"""Runs of a scenario on the deterministic simulator: one run, or several modes side by side.

How this works: ``simulate_scenario`` builds the simulation from the scenario (``scenarios.simulation_inputs``),
runs it, verifies the committed output against the reference evaluated over the same workload
(``runtime.verification``), and writes the run directory as the Ray backend does (``barriersim.summary``):
``summary.json`` (same fields and layout, ``backend: "sim"``, plus the ``simulation`` section, ``trace_sha256``
and the one-line ``replay`` command) and the per-checkpoint and per-subtask statistics with Flink's names (CSV
and Parquet). A run is a pure function of (scenario, seed, mode,
faults).
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

from barriersim.runtime.faults import FaultSchedule
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.runtime.verification import expected_sink_input, verify
from barriersim.scenarios.loader import Scenario
from barriersim.summary import build_summary, write_run_directory
from barriersim.scenarios.simulation_inputs import simulation_config, workload_splits


def replay_command(scenario: Scenario, seed: int, mode: str, faults: FaultSchedule) -> str:
    parts = ["barriersim", "replay", scenario.path, "--seed", str(seed), "--mode", mode]
    if len(faults):
        parts += ["--faults", faults.to_json()]
    return " ".join(shlex.quote(p) for p in parts)


def simulate_scenario(scenario: Scenario, out_dir: Path, seed: int | None = None, mode: str | None = None,
                      faults: FaultSchedule | None = None, splits: dict | None = None) -> dict:
    """Simulate ``scenario``; ``splits`` (``{source vertex: [records per subtask]}``) replaces the workload drawn
    from the scenario and seed (``workload_splits``) when given."""
    seed = scenario.seed if seed is None else seed
    config = simulation_config(scenario, mode, faults)
    if splits is None:
        splits = workload_splits(scenario, seed)
    started = time.perf_counter()
    result = JobSimulation(config, splits, seed).run()
    wall = time.perf_counter() - started
    verdict = verify(expected_sink_input(config.graph, splits), result.committed_output,
                     at_least_once=not config.mode.exactly_once)
    records = sum(len(s) for splits_of in splits.values() for s in splits_of)
    virtual_seconds = result.virtual_ms / 1000
    summary = build_summary(
        scenario=scenario, seed=seed, backend="sim", mode=config.mode.value, generated_by="local", records=records,
        counts=result.counts, verification={"reference": "python", **verdict.as_dict()},
        outcome=result.outcome.value, restarts=result.restarts,
        restored_checkpoint_ids=result.restored_checkpoint_ids,
        restored_in_flight_bytes=result.restored_in_flight_bytes,
        records_per_second=records / virtual_seconds if virtual_seconds else None, throughput_clock="virtual",
        faults=config.faults.to_plain(), faults_fired=result.fault_log,
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
            "replay": replay_command(scenario, seed, config.mode.value, config.faults),
        },
        wall_seconds=wall,
    )
    write_run_directory(out_dir, summary, result.checkpoints, result.subtasks)
    return summary
