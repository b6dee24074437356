"""Runs of a scenario on the deterministic simulator: one run, or several modes side by side.

How this works: ``simulate_scenario`` builds the simulation from the scenario (``scenarios.simulation_inputs``),
runs it, verifies the committed output against the reference evaluated over the same workload
(``runtime.sim.verification``), and writes the run directory as the Ray backend does: ``summary.json`` (same
fields, ``backend: "sim"``, plus ``trace_sha256`` and the one-line ``replay`` command) and the per-checkpoint and
per-subtask statistics with Flink's names (CSV and Parquet). A run is a pure function of (scenario, seed, mode,
faults).
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

from barriersim.runtime.faults import FaultSchedule
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.runtime.sim.verification import expected_sink_input, verify
from barriersim.scenarios.loader import Scenario
from barriersim.scenarios.simulation_inputs import simulation_config, workload_splits


def replay_command(scenario: Scenario, seed: int, mode: str, faults: FaultSchedule) -> str:
    parts = ["barriersim", "replay", scenario.path, "--seed", str(seed), "--mode", mode]
    if len(faults):
        parts += ["--faults", faults.to_json()]
    return " ".join(shlex.quote(p) for p in parts)


def simulate_scenario(scenario: Scenario, out_dir: Path, seed: int | None = None, mode: str | None = None,
                      faults: FaultSchedule | None = None) -> dict:
    from barriersim.run import versions, write_json_atomically, write_table

    seed = scenario.seed if seed is None else seed
    config = simulation_config(scenario, mode, faults)
    splits = workload_splits(scenario, seed)
    started = time.perf_counter()
    result = JobSimulation(config, splits, seed).run()
    wall = time.perf_counter() - started
    verdict = verify(expected_sink_input(config.graph, splits), result.committed_output)
    counts = result.counts
    summary = {
        "scenario": scenario.name,
        "seed": seed,
        "backend": "sim",
        "mode": config.mode,
        "versions": versions(),
        "workload": {
            "records": sum(len(s) for splits_of in splits.values() for s in splits_of),
            "generated_by": "local",
            "keys": scenario.workload.keys,
            "zipf_exponent": scenario.workload.zipf_exponent,
        },
        "checkpoints": {
            "completed": counts["completed"],
            "aborted": counts["failed"],
            "total": counts["total"],
            "in_progress": counts["in_progress"],
            "failed": counts["failed"],
            "restored": counts["restored"],
        },
        "verification": {"reference": "python", **verdict.as_dict()},
        "simulation": {
            "outcome": result.outcome.value,
            "virtual_seconds": result.virtual_ms / 1000,
            "events": result.events,
            "events_per_second": round(result.events / wall) if wall else None,
            "restarts": result.restarts,
            "restored_checkpoint_ids": result.restored_checkpoint_ids,
            "restored_in_flight_bytes": result.restored_in_flight_bytes,
        },
        "faults": config.faults.to_plain(),
        "trace_sha256": result.trace_sha256,
        "replay": replay_command(scenario, seed, config.mode, config.faults),
        "wall_seconds": round(wall, 3),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    write_table(result.checkpoints, out_dir / "checkpoints")
    write_table(result.subtasks, out_dir / "subtasks")
    write_json_atomically(out_dir / "summary.json", summary)
    return summary
