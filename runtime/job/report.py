"""What a JobMaster reports and keeps about its job: where a restored job's state comes from (``JobRestore``), the
operations asked of it (``Operation``: savepoint, stop-with-savepoint, cancel, and how each ended) and its report
(``JobReport``: outcome, Flink's checkpoint statistics, counts, restarts, faults, deployments).

How this works: plain values the JobMaster (``runtime.job.job_master``) fills in and both drivers read; nothing here
decides anything. ``one_line`` picks the line of a (possibly remote, multi-line) message that says what happened.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from barriersim.runtime.job.config import JobOutcome


@dataclass(frozen=True)
class JobRestore:
    """Where a new job's state comes from: a savepoint or retained checkpoint at ``path``, read through the
    checkpoint storage ``source`` (Flink's ``SavepointRestoreSettings``)."""

    path: str
    source: Any  # runtime.storage.CheckpointStorage that can read ``path``
    allow_non_restored_state: bool = False


@dataclass
class Operation:
    """A savepoint, stop-with-savepoint or cancel asked of the job, and how it ended."""

    operation: str  # savepoint, stop_with_savepoint, cancel
    at_ms: int  # the job's clock when it was asked
    request_id: int = 0
    drain: bool | None = None
    status: str = "IN_PROGRESS"  # IN_PROGRESS, COMPLETED, FAILED
    checkpoint_id: int | None = None
    path: str | None = None  # the savepoint's directory
    savepoint_format: str | None = None
    failure: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class JobReport:
    """What a JobMaster can tell about its run (after the job ended, or at any time)."""

    outcome: JobOutcome | None
    checkpoints: list[dict[str, Any]]
    subtasks: list[dict[str, Any]]
    counts: dict[str, int]
    restarts: int  # restarts the restart strategy allowed (Flink's numRestarts), plus JobManager failovers
    restored_checkpoint_ids: list[int]
    restored_in_flight_bytes: int
    coordinator_failovers: int
    fault_log: list[dict[str, Any]]
    killed: list[str] = field(default_factory=list)  # subtasks killed by the fault schedule, "name@attempt"
    failures: list[str] = field(default_factory=list)  # what failed the job over, one line each
    storage_errors: list[str] = field(default_factory=list)
    # per deployment: its epoch, the checkpoint it restored and the node of each TaskManager (runtime.job.placement)
    deployments: list[dict[str, Any]] = field(default_factory=list)
    failure_reason: str | None = None  # one line, when the outcome is FAILED
    job_id: str = ""
    final_state: str | None = None  # Flink's terminal JobStatus: FINISHED, CANCELED, FAILED
    operations: list[dict[str, Any]] = field(default_factory=list)
    latest_restored: dict[str, Any] | None = (
        None  # Flink's latest.restored: id, restore_timestamp, is_savepoint, external_path
    )
    retained_checkpoint: str | None = None  # the newest checkpoint a cancelled job retained
    parallelism: dict[str, Any] = field(default_factory=dict)  # vertex -> parallelism of the job
    # per source subtask (by name) of the run's first deployment: the records its reader had read once restored,
    # where the run began (0 for a fresh job, the restored offsets for a job started from an earlier run's snapshot)
    source_records_at_start: dict[str, Any] = field(default_factory=dict)


def records_read_in_run(name: str, records_read: int, at_start: Mapping[str, int]) -> int:
    """How many of source subtask ``name``'s ``records_read`` (its reader's offset) this run read itself: less
    where the run's first deployment started (``JobReport.source_records_at_start``), so a run restored from an
    earlier run's snapshot does not count that run's records in its throughput."""
    return records_read - at_start.get(name, 0)


def one_line(text: str) -> str:
    """The line of a (possibly multi-line, e.g. a remote traceback) message that says what happened: its last
    non-empty line."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[-1] if lines else ""
