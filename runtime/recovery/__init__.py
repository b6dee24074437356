"""Recovery: assigning a checkpoint's state to the subtasks of a (possibly rescaled) job."""
