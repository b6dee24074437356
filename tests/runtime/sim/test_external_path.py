"""Flink's ``external_path`` of a completed checkpoint in the statistics (``CompletedCheckpointStats
.getExternalPath``): the checkpoint's directory where the storage put it, or Flink's
``<checkpoint-not-externally-addressable>`` when the checkpoints are kept in the JobManager's memory."""

from __future__ import annotations

from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.runtime.storage.memory_storage import NOT_EXTERNALLY_ADDRESSABLE
from barriersim.scenarios.loader import effective_scenario, load_scenario
from barriersim.scenarios.simulation_inputs import job_config, workload_splits


def _run(checkpoint_directory=None):
    scenario = effective_scenario(load_scenario("scenarios/quickstart.toml"))
    simulation = JobSimulation(
        job_config(scenario), workload_splits(scenario), scenario.seed, checkpoint_directory=checkpoint_directory
    )
    result = simulation.run()
    completed = [c for c in result.checkpoints if c["status"] == "COMPLETED"]
    assert completed
    return simulation, completed


def test_checkpoints_in_the_jobmanagers_memory_are_not_externally_addressable():
    assert NOT_EXTERNALLY_ADDRESSABLE == "<checkpoint-not-externally-addressable>"  # Flink's constant, verbatim
    _, completed = _run()
    assert {c["external_path"] for c in completed} == {NOT_EXTERNALLY_ADDRESSABLE}


def test_checkpoints_in_files_show_their_directory(tmp_path):
    simulation, completed = _run(tmp_path / "checkpoints")
    job = simulation.job_id
    assert [c["external_path"] for c in completed] == [
        str(tmp_path / "checkpoints" / job / f"chk-{c['id']}") for c in completed
    ]
