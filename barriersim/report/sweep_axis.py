"""The sweep axis of a report: the swept parameters, the points in order, and which point each run belongs to.

``sweep_axis(root, runs)`` reads ``ROOT/sweep.json`` (written by ``barriersim sweep``: its ``axes`` and, per
point, its settings and its runs' directories). A directory of runs without one whose runs differ in
``workload.zipf_exponent`` gets that one axis. Anything else (one run, ``--mode all``), or a sweep of one point,
has no axis: None. A ``sweep.json`` that cannot be read counts as absent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

POINT = "_point"  # the column ``with_points`` adds: the run's point index


@dataclass(frozen=True)
class SweepAxis:
    parameters: tuple[str, ...]  # dotted keys, e.g. ("workload.zipf_exponent",)
    values: tuple[tuple, ...]  # per point, its value of each parameter
    run_points: dict[str, int] = field(default_factory=dict)  # run label -> point index

    @property
    def name(self) -> str:
        """The x-axis label: the parameters, comma-separated."""
        return ", ".join(self.parameters)

    @property
    def ticks(self) -> list[str]:
        """Per point, its values (comma-separated when several parameters are swept)."""
        return [", ".join(_text(v) for v in point) for point in self.values]

    @property
    def labels(self) -> list[str]:
        """Per point, ``name=value`` of each parameter, named by the key's last part unless two share it."""
        short = [p.rpartition(".")[2] for p in self.parameters]
        names = short if len(set(short)) == len(short) else list(self.parameters)
        return [", ".join(f"{n}={_text(v)}" for n, v in zip(names, point)) for point in self.values]

    def __len__(self) -> int:
        return len(self.values)


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def with_points(df: pd.DataFrame, axis: SweepAxis) -> pd.DataFrame:
    """``df``'s rows of runs that belong to a point, with their point index in column ``POINT``."""
    points = df["run"].map(axis.run_points)
    return df[points.notna()].assign(**{POINT: points[points.notna()].astype(int)})


def _from_index(index: dict, labels: set[str]) -> SweepAxis | None:
    parameters = tuple(index["axes"])
    values: list = []
    run_points: dict = {}
    for point in index["points"]:
        dirs = [r["dir"] for r in point.get("runs", []) if r.get("dir") in labels]
        if not dirs:
            continue
        run_points.update({d: len(values) for d in dirs})
        values.append(tuple(point["settings"][p] for p in parameters))
    return SweepAxis(parameters, tuple(values), run_points) if len(values) > 1 else None


def _from_skew(runs) -> SweepAxis | None:
    skews = sorted({r.zipf_exponent for r in runs if r.zipf_exponent is not None})
    if len(skews) < 2:
        return None
    return SweepAxis(
        ("workload.zipf_exponent",),
        tuple((s,) for s in skews),
        {r.label: skews.index(r.zipf_exponent) for r in runs if r.zipf_exponent is not None},
    )


def sweep_axis(root: str | Path, runs) -> SweepAxis | None:
    """The sweep axis of the runs (``barriersim.rundir.Run``) under ``root``, or None."""
    path = Path(root) / "sweep.json"
    if path.is_file():
        try:
            return _from_index(json.loads(path.read_text()), {r.label for r in runs})
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
    return _from_skew(runs)
