"""Input-side checkpointing of a task: barrier handlers (see ``barrier_handler`` for the interface and the
actions they emit), the barrier handler states, the checkpointed input gate and the public driving API."""
