"""barriersim: Flink-style checkpointing (asynchronous barrier snapshots) simulated on Ray actors.

Subpackages: ``barriersim.runtime`` (the sans-IO core), ``barriersim.actors`` (thin Ray actors driving it),
``barriersim.scenarios`` (scenario files, their loader and the local workload draws), ``barriersim.spark``
(Spark on Ray: the session, workloads, Spark SQL's reference result, run analytics) and ``barriersim.report``
(HTML reports of run directories).

For notebooks: ``barriersim.run(scenario, backend="sim", mode=None, seed=None, out=None, ...)`` runs a scenario
and returns its results with pandas DataFrames (``barriersim.api.run``); ``barriersim.run_sweep`` runs a
``[sweep]`` and aggregates it in Spark (``barriersim.sweep.run_sweep``).

How ``barriersim.run`` works: the name is also the Ray backend's module (``barriersim/run.py``, with
``run_scenario``), which the import system binds to the same package attribute whenever it is imported. So the
attribute is that module, made callable: calling it calls ``barriersim.api.run``, and
``barriersim.run.run_scenario`` (and ``from barriersim.run import ...``) keep working. Both are loaded lazily,
so ``import barriersim`` stays cheap for the sans-IO core.
"""

import sys
import types

__version__ = "0.1.0"


class _CallableModule(types.ModuleType):
    """``barriersim.run``: the module ``barriersim/run.py`` that, called, runs ``barriersim.api.run``."""

    def __call__(self, *args, **kwargs):
        from barriersim.api import run

        return run(*args, **kwargs)


class _Package(types.ModuleType):
    @property
    def run(self):
        module = self.__dict__.get("_run_module")
        if module is None:
            import importlib

            importlib.import_module("barriersim.run")  # binds the attribute through the setter below
            module = self.__dict__["_run_module"]
        return module

    @run.setter
    def run(self, module):
        if isinstance(module, types.ModuleType) and not isinstance(module, _CallableModule):
            module.__class__ = _CallableModule
        self.__dict__["_run_module"] = module


sys.modules[__name__].__class__ = _Package


def __getattr__(name):
    if name == "run_sweep":
        from barriersim.sweep import run_sweep

        return run_sweep
    if name in ("RunResult", "RunResults"):
        from barriersim import api

        return getattr(api, name)
    raise AttributeError(f"module 'barriersim' has no attribute {name!r}")
