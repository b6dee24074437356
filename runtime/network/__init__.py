"""The network stack of a task: input gates and channels (``input/``, the receiving side with credit-based
flow control) and result partitions (``output/``, the sending side). Sans-IO, as all of ``runtime/``."""
