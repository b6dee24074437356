"""A scenario simulated and verified as both backends verify a run (``runtime.verification.snapshot.verify_run``):
the helper of tests that replay savepoint, rescale and found cases."""

from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.scenarios.simulation_inputs import job_config, workload_splits


def simulate_and_verify(sc):
    """Simulate scenario ``sc`` with its seed (every completed checkpoint's cut recorded); returns the simulation,
    its result, the verification and what it covers (``"workload"`` or ``"snapshot"``)."""
    config, splits = job_config(sc), workload_splits(sc)
    job = JobSimulation(config, splits, sc.seed, record_cuts=True)
    result = job.run()
    verification, covers = job.verify(result)
    return job, result, verification, covers
