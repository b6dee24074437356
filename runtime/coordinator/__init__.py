"""The checkpoint coordinator as small sans-IO parts: properties, id counter, request decider, failure manager,
checkpoint plan, pending/completed checkpoints, completed checkpoint store, statistics, master hooks, periodic
scheduler, and the ``CheckpointCoordinator`` that assembles them (events in, actions out)."""
