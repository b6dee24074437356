"""The figures a closed asynchronous part reports: Flink's ``CheckpointMetricsBuilder.buildIncomplete``. See
docs/data-plane.md, "What a closed asynchronous part reports".
"""

from __future__ import annotations

from barriersim.runtime.checkpointing.barrier_handler import CheckpointMetrics
from barriersim.runtime.state.snapshot import OperatorSubtaskState
from barriersim.runtime.task.actions import UNSET, ReportIncompleteSnapshotStats, TaskCheckpointMetrics


def build_incomplete(
    checkpoint_id: int,
    sync_duration_ms: float,
    input_metrics: CheckpointMetrics | None,
    uploaded: OperatorSubtaskState | None,
) -> ReportIncompleteSnapshotStats:
    """The report of a part closed now: ``input_metrics`` as the barrier handler last gave them (the final ones
    if every barrier arrived; None for a source), ``uploaded`` the snapshot if its upload had finished."""
    m = input_metrics
    alignment = m.alignment_duration_ms if m is not None else 0
    processed = m.bytes_processed_during_alignment if m is not None else 0
    size = uploaded.state_size if uploaded is not None else 0
    metrics = TaskCheckpointMetrics(
        checkpoint_id,
        sync_duration_ms=round(sync_duration_ms),
        async_duration_ms=UNSET,
        alignment_duration_ms=alignment if alignment is not None else 0,
        checkpoint_start_delay_ms=m.checkpoint_start_delay_ms if m is not None else 0,
        bytes_processed_during_alignment=processed if processed is not None else UNSET,
        bytes_persisted_during_alignment=UNSET,
        total_bytes_persisted=size,
        unaligned_checkpoint=False,
    )
    return ReportIncompleteSnapshotStats(
        checkpoint_id, metrics, size, uploaded.checkpointed_size if uploaded is not None else 0
    )
