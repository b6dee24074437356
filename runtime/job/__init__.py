"""The job level, sans-IO, for both drivers: ``config`` (a job's settings and outcome), ``job_master`` (the
JobMaster: the checkpoint coordinator and the messages to and from tasks), with its parts ``execution_deployer``
(deployments), ``failover`` (the fault schedule, failover and JobManager failover), ``restart_strategy`` (whether
a failed job restarts, and when) and ``operations`` (savepoints, stop-with-savepoint, cancel); ``dispatcher`` (the
jobs of one run), ``report`` (what a JobMaster reports), ``actions`` (what it asks a driver to do), ``deployment``
(a task built from its deployment descriptor), ``placement`` (TaskManagers, slots and nodes) and ``wiring`` (which
subpartition feeds which input channel)."""
