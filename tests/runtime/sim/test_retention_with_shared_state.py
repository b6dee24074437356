"""What a job's checkpoints and their shared state leave on disk when it ends, per Flink's
``ExternalizedCheckpointRetention``: after a
finished, a cancelled and a failed job (simulator, filesystem storage, incremental backend with shared files):
nothing at all, or the retained checkpoints with exactly the shared files they refer to, each loadable."""

from __future__ import annotations

import dataclasses

import pytest

from barriersim.runtime.job.config import JobOutcome
from barriersim.runtime.job.events import CancelJob
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.scenarios.loader import effective_scenario, parse_scenario
from barriersim.scenarios.simulation_inputs import job_config, workload_splits

KEPT = {  # (retention, how the job ended) -> whether its retained checkpoints stay
    ("NO_EXTERNALIZED_CHECKPOINTS", "finished"): False,
    ("NO_EXTERNALIZED_CHECKPOINTS", "canceled"): False,
    ("NO_EXTERNALIZED_CHECKPOINTS", "failed"): False,
    ("DELETE_ON_CANCELLATION", "finished"): False,
    ("DELETE_ON_CANCELLATION", "canceled"): False,
    ("DELETE_ON_CANCELLATION", "failed"): True,
    ("RETAIN_ON_CANCELLATION", "finished"): False,
    ("RETAIN_ON_CANCELLATION", "canceled"): True,
    ("RETAIN_ON_CANCELLATION", "failed"): True,
}


def simulation(retention: str, ending: str, tmp_path) -> JobSimulation:
    faults = [{"type": "crash_task", "task": "keyed-sum#0", "at_ms": 900}] if ending == "failed" else []
    s = effective_scenario(
        parse_scenario(
            {
                "scenario": {"name": "retention", "seed": 2},
                "workload": {"records": 8_000, "keys": 2_000, "rate_per_source": 4_000, "key_growth": True},
                "checkpointing": {
                    "interval_ms": 100,
                    "max_retained": 2,
                    "memory_threshold_bytes": 0,
                    "externalized_checkpoint_retention": retention,
                },
                "state": {
                    "backend": "incremental",
                    "entry_bytes": 100,
                    "write_buffer_bytes": 20_000,
                    "target_file_bytes": 30_000,
                    "level0_compaction_trigger": 2,
                    "max_bytes_for_level_base": 60_000,
                },
                "job": {"source_parallelism": 2, "keyed_sum_parallelism": 2},
                "faults": faults,
            }
        )
    )
    config = job_config(s)
    if ending == "failed":
        config = dataclasses.replace(config, restart=dataclasses.replace(config.restart, attempts=0))
    sim = JobSimulation(config, workload_splits(s), s.seed, checkpoint_directory=tmp_path)
    if ending == "canceled":
        sim.sim.schedule_at(900_000, lambda: sim._carry_out(sim.dispatcher.handle(CancelJob())))
    return sim


@pytest.mark.parametrize("retention, ending", sorted(KEPT))
def test_what_the_checkpoints_leave_behind(retention, ending, tmp_path):
    sim = simulation(retention, ending, tmp_path)
    result = sim.run()
    assert result.outcome is JobOutcome(ending)
    completed = [c["id"] for c in result.checkpoints if c["status"] == "COMPLETED"]
    assert len(completed) >= 3
    storage = sim.storage
    retained = storage.list_retained_checkpoints()
    if not KEPT[(retention, ending)]:
        assert retained == () and storage.shared_state_files() == set()
        return
    # the store's retained checkpoints (the newest two) stay, each loadable with every shared file it refers to
    assert [loc.checkpoint_id for loc in retained] == sorted(completed)[-2:][::-1]
    referenced = set()
    for location in retained:
        loaded = storage.load_checkpoint(location)
        referenced |= {
            h.file.removeprefix("shared/") for h in loaded.location.state_files if h.file.startswith("shared/")
        }
    assert referenced and storage.shared_state_files() == referenced
