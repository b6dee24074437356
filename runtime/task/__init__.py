"""A task's side of checkpointing: the subtask checkpoint coordinator that runs the checkpoint steps
(cancel-or-continue, pre-barrier, broadcast, output channel state, sync and async snapshot, acknowledge)
and the actions it returns to its driver."""
