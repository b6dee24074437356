"""The walking skeleton's thin aligned path: a task and a coordinator just deep enough to run one
checkpointed job end to end. The task-side core (``runtime/checkpointing``, ``runtime/network``) and the
coordinator (``runtime/coordinator``) replace these pieces as they land; the actors drive them through the
same events-in, actions-out shape.
"""
