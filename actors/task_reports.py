"""A task's reports to the job manager, from their wire forms (``actors.messages``) to the JobMaster's events:
``TaskReports`` decodes an acknowledgement, a decline, a closed asynchronous part's figures, a finished notice or a
crash at a protocol point (a call's arguments, or what came over the task's link), hands the event on and counts
the reports per transport. No protocol rule lives here. See docs/ray-driver.md, "What crosses between actors"."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from barriersim.actors.messages import (
    attempt_from_wire,
    decode_metrics,
    decode_snapshot,
    incomplete_stats_from_wire,
    reason_from_wire,
)
from barriersim.runtime.faults.fault_schedule import ProtocolPoint
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.job import events as je


class TaskReports:
    """A task's reports, decoded into the JobMaster's events (see the module)."""

    def __init__(self, deliver: Callable[[Callable[[], je.JobEvent]], None]) -> None:
        """``deliver(event_of)``: hand the event ``event_of()`` builds to the JobMaster (what it raises, building
        the event or handling it, is the run's error)."""
        self._deliver = deliver
        self.counts = {"link": 0, "call": 0}  # the reports told, per transport
        self._decoders: dict[str, Callable[..., None]] = {
            "acknowledge": self._acknowledged,
            "report_incomplete_snapshot_stats": self.incomplete,
            "decline": self._declined,
            "task_finished": self._finished,
            "crashed_at_protocol_point": self._crashed_at,
        }
        self.names = frozenset(self._decoders)  # the reports a task may tell

    def told(self, transport: str, method: str, args: Sequence[Any]) -> None:
        """A task's report ``method(*args)`` (the wire forms), come by ``transport``: handed on."""
        self.counts[transport] += 1
        self._decoders[method](attempt_from_wire(args[0]), *args[1:])

    def incomplete(self, attempt: ExecutionAttemptID, report: list) -> None:
        """A closed asynchronous part's report (``incomplete_stats_to_wire``)."""
        stats = incomplete_stats_from_wire(report)
        self._deliver(lambda: je.IncompleteStatsReported(attempt, stats))

    def _acknowledged(self, attempt: ExecutionAttemptID, checkpoint_id: int, snapshot: bytes, metrics: bytes) -> None:
        state = decode_snapshot(snapshot, attempt.subtask_index)
        self._deliver(lambda: je.CheckpointAcknowledged(attempt, checkpoint_id, state, decode_metrics(metrics)))

    def _declined(self, attempt: ExecutionAttemptID, checkpoint_id: int, reason: str, detail: str) -> None:
        self._deliver(lambda: je.CheckpointDeclined(attempt, checkpoint_id, reason_from_wire(reason), detail))

    def _finished(self, attempt: ExecutionAttemptID, _records: int) -> None:
        self._deliver(lambda: je.TaskFinished(attempt))

    def _crashed_at(self, attempt: ExecutionAttemptID, point: str, checkpoint_id: int) -> None:
        self._deliver(lambda: je.TaskCrashedAt(attempt, ProtocolPoint(point), checkpoint_id))
