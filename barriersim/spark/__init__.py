"""Spark on Ray (RayDP): everything barriersim computes in Spark.

How this works: ``session`` starts Ray and Spark on that Ray cluster for one run and stops both on every exit
path; ``workload`` generates a scenario's workload as a Spark DataFrame (with the per-record draws of
``scenarios.workload``, so it equals the simulator's local splits) and hands it to the source tasks through
Ray's object store; ``reference`` verifies a run's output with Spark SQL against that DataFrame (or, for other
graph shapes, with ``runtime.verification.reference`` in a Ray task) and returns the runtime's ``Verification``;
``analytics`` computes Flink's checkpoint statistics of run directories in Spark (both send tables through
``frames``). Spark is started only through ``session``; the sans-IO core and the scenario library never import
this package."""
