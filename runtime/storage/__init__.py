"""Checkpoint storage: the ``_metadata`` format, in-memory and filesystem storage, pointer resolution."""
