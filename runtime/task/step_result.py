"""What one unit of a task's work did (``StreamTask.process_next``): its outcome, and the records it processed."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from barriersim.runtime.values import fast_init


class StepOutcome(enum.Enum):
    PROCESSED = "processed"
    IDLE = "idle"  # nothing to read now
    BACKPRESSURED = "backpressured"  # an output partition is full: do not take input
    FINISHED = "finished"


@fast_init
@dataclass(frozen=True)
class StepResult:
    outcome: StepOutcome
    records: int = 0
    hot_key_records: int = 0
