"""Input-side checkpointing of a task (Flink's ``streaming.runtime.io.checkpointing``): the barrier handlers
(exactly-once ``SingleCheckpointBarrierHandler`` with its states, at-least-once ``CheckpointBarrierTracker``), the
``CheckpointedInputGate`` and ``InputSide`` (``api``), the one API drivers use. See docs/data-plane.md, "The input
side".
"""
