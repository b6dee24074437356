"""Where a run runs and where its workload comes from, as typed values: ``Backend`` (the deterministic simulator or
Ray actors with Spark on Ray) and ``WorkloadGenerator`` (drawn locally, or in Spark on Ray).

How this works: ``parse`` is the only place either is read from text (the CLI's ``--backend`` and ``--workload``,
the API's ``backend=`` and ``workload=``; a member passes through); an unknown name is one ``ArgumentError`` line
naming where it came from and the choices. ``ran_on(summary)`` reads a run directory's ``summary.json`` back.
``BACKENDS`` and ``WORKLOADS`` are the names, for argument parsers. As ``runtime.checkpointing_mode`` does the mode.
"""

from __future__ import annotations

import enum

from barriersim.errors import ArgumentError


class _Parsed(enum.Enum):
    @classmethod
    def parse(cls, text: object, where: str):
        """The member ``text`` names (a member passes through); ``ArgumentError`` naming ``where`` and the choices."""
        if isinstance(text, cls):
            return text
        try:
            return cls(text)
        except ValueError:
            raise ArgumentError(f"{where}: must be one of {', '.join(m.value for m in cls)}, got {text!r}") from None

    def __str__(self) -> str:
        return self.value


class WorkloadGenerator(_Parsed):
    LOCAL = "local"  # numpy in the driver (the simulator's default)
    SPARK = "spark"  # one Spark job on Ray (RayDP), handing the splits over as Arrow tables: the Ray backend's

    @classmethod
    def parse(cls, text: object, where: str = "workload") -> WorkloadGenerator:
        return super().parse(text, where)


class Backend(_Parsed):
    SIM = "sim"  # the deterministic simulator: virtual time, one seed, a trace hash
    RAY = "ray"  # Ray actors in real time, the workload and its reference in Spark on Ray

    @classmethod
    def parse(cls, text: object, where: str = "backend") -> Backend:
        return super().parse(text, where)

    @property
    def default_workload(self) -> WorkloadGenerator:
        """Where the backend's workload comes from unless the caller says: the Ray backend always uses Spark."""
        return WorkloadGenerator.SPARK if self is Backend.RAY else WorkloadGenerator.LOCAL


def ran_on(summary: dict) -> Backend | None:
    """The backend a run's ``summary.json`` says it ran on (None: it says none this version knows)."""
    try:
        return Backend(summary.get("backend"))
    except ValueError:
        return None


BACKENDS: tuple[str, ...] = tuple(b.value for b in Backend)
WORKLOADS: tuple[str, ...] = tuple(w.value for w in WorkloadGenerator)
