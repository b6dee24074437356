"""The job level, sans-IO, for both drivers: ``config`` (a job's settings and outcome), ``job_master`` (the
JobMaster: deployments, the checkpoint coordinator, the fault schedule, failover and JobManager failover),
``actions`` (what it asks a driver to do), ``deployment`` (a task built from its deployment descriptor) and
``wiring`` (which subpartition feeds which input channel)."""
