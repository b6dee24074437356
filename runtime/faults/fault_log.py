"""Which faults of a schedule fired in a run, how often and first when: the run's account of its faults. See
docs/faults-and-actions.md, "The fault log".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from barriersim.runtime.faults.fault_schedule import Fault, FaultSchedule, MessageKind, fate_of, fault_to_plain


class FaultLog:
    """A ``FaultSchedule`` read by a driver, with a count of what fired."""

    def __init__(self, schedule: FaultSchedule) -> None:
        self.schedule = schedule
        self._counts = [0] * len(schedule.faults)
        self._first_at_ms: list[int | None] = [None] * len(schedule.faults)
        self._index_of_object = {id(f): i for i, f in enumerate(schedule.faults)}  # the schedule's own fault values

    def _index(self, fault: Fault) -> int:
        i = self._index_of_object.get(id(fault))
        if i is not None:
            return i
        try:
            return self.schedule.faults.index(fault)
        except ValueError:
            raise ValueError(f"fired({fault!r}): not a fault of this run's schedule") from None

    def fired(self, fault: Fault, at_ms: int) -> None:
        """``fault`` took effect at ``at_ms`` (on the run's clock)."""
        i = self._index(fault)
        self._counts[i] += 1
        if self._first_at_ms[i] is None:
            self._first_at_ms[i] = at_ms

    def times_fired(self, fault: Fault) -> int:
        return self._counts[self._index(fault)]

    # -- readings that count what matched --------------------------------------------------------------

    def message_fate(self, kind: MessageKind, task: str | None, checkpoint_id: int, at_ms: int) -> tuple[bool, int]:
        if not self.schedule.faults:  # no fault scheduled (the common case): nothing to look up
            return False, 0
        hits = self.schedule.message_faults(kind, task, checkpoint_id)
        for f in hits:
            self.fired(f, at_ms)
        return fate_of(hits)

    def declines(self, task: str, checkpoint_id: int, first_source: str, at_ms: int) -> bool:
        return self._count(self.schedule.decline_fault(task, checkpoint_id, first_source), at_ms)

    def fails_storage_write(self, checkpoint_id: int, at_ms: int) -> bool:
        return self._count(self.schedule.storage_write_fault(checkpoint_id), at_ms)

    def fails_state_write(self, task: str, checkpoint_id: int, at_ms: int) -> bool:
        return self._count(self.schedule.state_write_fault(task, checkpoint_id), at_ms)

    def _count(self, fault: Fault | None, at_ms: int) -> bool:
        if fault is None:
            return False
        self.fired(fault, at_ms)
        return True

    # -- the account -----------------------------------------------------------------------------------

    def report(self) -> list[dict[str, Any]]:
        """One entry per fault of the schedule, in its order: its fields, ``fired`` and ``first_at_ms``."""
        return [
            {**fault_to_plain(f), "fired": n, "first_at_ms": t}
            for f, n, t in zip(self.schedule.faults, self._counts, self._first_at_ms)
        ]


def describe(entry: Mapping[str, Any]) -> str:
    """A report entry (or a plain fault) as one short line: ``crash_task task=sum#3 at_ms=4000``."""
    fields = " ".join(f"{k}={v}" for k, v in entry.items() if k not in ("type", "fired", "first_at_ms"))
    return f"{entry['type']} {fields}".strip()


def fired_line(report: Sequence[Mapping[str, Any]], detail: bool = True) -> str:
    """``2 of 3 fired`` (with ``detail``: plus the faults that did not), for a run's printed summary; 'none'
    without faults."""
    if not report:
        return "none"
    missed = [describe(e) for e in report if not e["fired"]]
    line = f"{len(report) - len(missed)} of {len(report)} fired"
    return line + (f"; not fired: {', '.join(missed)}" if missed and detail else "")
