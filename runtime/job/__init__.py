"""The job level, sans-IO, for both drivers: ``job_master`` (one job: ``handle(event)``, ``events`` in,
``actions`` out) with its collaborators ``execution_deployer`` (deployments), ``checkpointing`` (the coordinator of
each JobManager generation), ``fault_injection`` (the fault schedule), ``failover`` (restarts, JobManager
failover) and ``operations`` (savepoints, stop-with-savepoint, cancel); ``dispatcher`` (the jobs of one run);
``config``, ``report``, ``restart_strategy``, ``restore_failure``, ``deployment`` (a task built from its deployment
descriptor), ``placement`` (TaskManagers, slots and nodes) and ``wiring`` (which subpartition feeds which input
channel)."""
