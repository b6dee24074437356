"""The checkpoint coordinator as small sans-IO parts.

How this works: ``checkpoint_coordinator.CheckpointCoordinator`` takes events (``messages.py``) and returns actions;
it assembles one module per idea: ``triggering`` (request, plan, new pending checkpoint, the trigger's phases:
operator coordinators, master hooks, tasks; periodic trigger) and
``completion`` (acknowledge, complete, abort) as its two halves, ``properties`` (CheckpointProperties, retention), ``id_counter``,
``request_decider`` (queue, max concurrent, min pause), ``failure_manager`` (tolerable failures), ``plan`` (tasks
to trigger / wait for / commit to, FLIP-147), ``pending_checkpoint`` (acks, completion, abort), ``completed_store``
(retain N, subsume), ``stats_tracker`` (Flink's REST names), ``master_hooks``, ``periodic_scheduler`` and
``restore`` (coordinator-side recovery checks); ``checkpoint_recovery`` rebuilds the completed checkpoint store
from storage for the coordinator of a new JobManager. ``manual_time`` is a manual clock/timer service for tests.
Mirrors Flink's ``org.apache.flink.runtime.checkpoint`` package.
"""
