"""The optional extras (pyproject.toml) a command needs beyond the core install, checked before any work.

How this works: ``require(extra, purpose)`` looks up every module the extra brings with
``importlib.util.find_spec`` (nothing is imported: the check costs no Ray or Spark start-up) and raises
``MissingExtra``, one line naming what needs it, the first module missing and the ``pip install`` that brings it.
The simulator (``run --backend sim``, ``replay``) needs no extra; the Ray backend, Spark workloads and every
aggregation in Spark need ``spark`` (Ray, RayDP, PySpark); ``report`` needs ``report`` (matplotlib).
"""

from __future__ import annotations

import importlib.util

from barriersim.errors import BarriersimError

EXTRAS = {
    "ray": ("ray",),
    "spark": ("ray", "raydp", "pyspark"),
    "report": ("matplotlib",),
}


class MissingExtra(BarriersimError):
    """A module of an optional extra is not installed."""


def importable(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it (a finder that refuses it counts as missing)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require(extra: str, purpose: str) -> None:
    """Raise ``MissingExtra`` unless every module of ``extra`` is installed; ``purpose`` says what needs it."""
    for module in EXTRAS[extra]:
        if not importable(module):
            raise MissingExtra(f"{purpose} needs {module}, which is not installed: pip install 'barriersim[{extra}]'")
