"""Sans-IO stream operators: sources over replayable splits, keyed functions, sinks.

How this works: an operator is a plain object that turns input records into output records and can
snapshot its state into an ``OperatorSubtaskState`` (``runtime/state/snapshot.py``) and restore from one.
It knows nothing of channels, barriers or actors: the task that runs it (the simulator's or the Ray actor's,
both through ``runtime/``) decides when to call it.
"""
