"""barriersim: Flink-style checkpointing (asynchronous barrier snapshots) simulated on Ray actors.

Subpackages: ``barriersim.runtime`` (the sans-IO core), ``barriersim.actors`` (thin Ray actors driving it),
``barriersim.scenarios`` (scenario files, Spark-on-Ray workloads and reference results).
"""

__version__ = "0.1.0"
