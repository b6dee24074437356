"""A subtask: ``stream_task`` (Flink's ``StreamTask``) and the collaborators it is composed of: its input
(``source_input``, ``network_input``), its operator and outputs (``operator_chain``, ``record_writers``), its side of
checkpointing (``subtask_checkpoint_coordinator`` with ``async_checkpoint_runnable``; ``actions``: what it returns to
its driver), its restore (``task_restore``), how its data ends and it finishes (``end_of_data``) and its crash points
(``crash_points``)."""
