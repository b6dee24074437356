"""The checkpoint coordinator as small sans-IO parts. ``checkpoint_coordinator.CheckpointCoordinator`` takes events
(``messages.py``) and returns actions; its collaborators are ``triggering`` (request queue, the trigger in flight
and its phases, periodic trigger), ``completion`` (acknowledge, complete, abort) and ``restore``; the parts they use
are Flink's: ``properties``, ``id_counter``, ``request_decider``, ``failure_manager``, ``plan`` (FLIP-147),
``pending_checkpoint``, ``completed_store``, ``shared_state_registry``, ``stats_tracker``, ``master_hooks``,
``periodic_scheduler``, ``deactivator``; ``checkpoint_recovery`` rebuilds the completed checkpoint store for a new
JobManager; ``manual_time`` is a manual clock/timer service for tests. Mirrors Flink's
``org.apache.flink.runtime.checkpoint`` package."""
