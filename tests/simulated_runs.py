"""A scenario simulated and verified as both backends verify a run (``runtime.snapshot_verification.verify_run``):
the helper of tests that replay savepoint, rescale and found cases."""

from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.runtime.snapshot_verification import verify_run
from barriersim.scenarios.simulation_inputs import job_config, workload_splits


def simulate_and_verify(sc):
    """Simulate scenario ``sc`` with its seed (every completed checkpoint's cut recorded); returns the simulation,
    its result, the verification and what it covers (``"workload"`` or ``"snapshot"``)."""
    config, splits = job_config(sc), workload_splits(sc)
    job = JobSimulation(config, splits, sc.seed, record_cuts=True)
    result = job.run()
    verification, covers = verify_run(config.graph, splits, job.job_master.ending_snapshot, result.committed_output,
                                      job.store.pending_records, at_least_once=not config.mode.exactly_once,
                                      operations=job.report.operations)
    return job, result, verification, covers
