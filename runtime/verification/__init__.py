"""Verification of a run's committed output: ``reference`` (the job graph evaluated over its workload, the one
result type and verdict rule of every verification) and ``snapshot`` (the reference of a run that ended with a
savepoint or a cancel, and ``verify_run``, the rule both backends apply)."""
