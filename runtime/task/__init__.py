"""A subtask: ``stream_task`` (Flink's ``StreamTask``) and its parts: its side of checkpointing
(``subtask_checkpoint_coordinator``: cancel-or-continue, pre-barrier, broadcast, output channel state, sync and
async snapshot, acknowledge; ``actions``: what it returns to its driver), its restore (``task_restore``), how its
data ends and it finishes (``end_of_data``), its record writers (``record_writers``) and its crash points
(``crash_points``)."""
