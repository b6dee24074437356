"""Input-side checkpointing of a task (Flink's ``streaming.runtime.io.checkpointing``).

Modules:

* ``barrier_handler`` -- the ``CheckpointBarrierHandler`` interface, the injected ``Clock`` /
  ``TimerService`` protocols, ``CheckpointMetrics`` and the action values handlers push into their sink.
* ``barrier_handler_state`` -- the states of the exactly-once handler (``WaitingForFirstBarrier``,
  ``CollectingBarriers``, ``AlternatingWaitingForFirstBarrier``, ``AlternatingCollectingBarriers``,
  ``AlternatingWaitingForFirstBarrierUnaligned``, ``AlternatingCollectingBarriersUnaligned``, ``ChannelState``).
* ``single_checkpoint_barrier_handler`` -- ``SingleCheckpointBarrierHandler`` (aligned / unaligned /
  alternating factories).
* ``tracker`` -- the at-least-once ``CheckpointBarrierTracker`` (owned by the output-side engineer).
* ``checkpointed_input_gate`` -- ``CheckpointedInputGate`` and ``GateActionRouter``.
* ``api`` -- the public driving API: ``InputSide`` (build for gates/channels/mode with an injected clock and
  timer service; ``on_element``, ``poll_next``, ``process_priority_events``; observe
  ``triggered_checkpoints``, ``aborted_checkpoints``, ``blocked_channels()``, ``latest_checkpoint_id``,
  ``is_checkpoint_pending()``, ``persisted_input_data(id)``, ``metrics(id)``, ``drain_actions()``), plus
  ``ManualClock`` and ``ManualTimerService``. Drivers (tests, simulator, Ray actors) use only this.
"""
