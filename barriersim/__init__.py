"""barriersim: Flink-style checkpointing (asynchronous barrier snapshots) simulated on Ray actors and on a
deterministic simulator.

Subpackages: ``barriersim.runtime`` (the sans-IO core), ``barriersim.actors`` (thin Ray actors driving it),
``barriersim.scenarios`` (scenario files and their loader), ``barriersim.spark`` (Spark on Ray). For notebooks:
``barriersim.run(scenario, backend="sim", ...)`` runs a scenario and returns a ``RunResult``; ``run_sweep`` runs a
``[sweep]``, ``run_campaign`` a fault campaign. The errors bad input raises are exported (``ScenarioError``,
``FaultScheduleError``, ``ActionScheduleError``: ``ValueError``-like; the rest ``BarriersimError``), and the typed
choices (``CheckpointingMode``, ``Backend``, ``WorkloadGenerator``). Names load on first use.
"""

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "run": ("barriersim.api", "run"),
    "plan": ("barriersim.api", "plan"),
    "execute": ("barriersim.api", "execute"),
    "RunResult": ("barriersim.api", "RunResult"),
    "ModeRun": ("barriersim.api", "ModeRun"),
    "run_sweep": ("barriersim.sweep", "run_sweep"),
    "run_campaign": ("barriersim.campaign", "run_campaign"),
    "load_scenario": ("barriersim.scenarios.loader", "load_scenario"),
    "ScenarioError": ("barriersim.scenarios.loader", "ScenarioError"),
    "FaultScheduleError": ("barriersim.runtime.faults.fault_schedule", "FaultScheduleError"),
    "ActionScheduleError": ("barriersim.runtime.faults.experiment", "ActionScheduleError"),
    "BarriersimError": ("barriersim.errors", "BarriersimError"),
    "UnsupportedScenario": ("barriersim.errors", "UnsupportedScenario"),
    "ArgumentError": ("barriersim.errors", "ArgumentError"),
    "CheckpointingMode": ("barriersim.runtime.checkpointing_mode", "CheckpointingMode"),
    "Backend": ("barriersim.backends", "Backend"),
    "WorkloadGenerator": ("barriersim.backends", "WorkloadGenerator"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        module, attribute = _EXPORTS[name]
        value = getattr(importlib.import_module(module), attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'barriersim' has no attribute {name!r}")
