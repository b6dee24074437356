"""A test-only switch that plants known historical checkpointing bugs, so tests can show the property suite
finds each of them.

How this works: ``planted(bug)`` is a context manager that enables one ``PlantedBug`` while it is open; the
runtime checks ``is_planted(bug)`` at exactly the place the historical bug lived. Nothing outside the tests
opens it, so in every normal run each check is one set lookup that returns False. docs/bug-zoo.md names each
bug's Flink issue and fix version, where it is planted and which property finds it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager


class PlantedBug(enum.Enum):
    LATE_BARRIER_OF_CANCELLED_CHECKPOINT = "late_barrier_of_cancelled_checkpoint"
    CHANNELS_NOT_UNBLOCKED_ON_CANCEL = "channels_not_unblocked_on_cancel"
    TRACKER_TRIGGERS_ON_FIRST_BARRIER = "tracker_triggers_on_first_barrier"
    SOURCE_SNAPSHOT_AFTER_BARRIER = "source_snapshot_after_barrier"
    FINISHED_WITHOUT_FINAL_CHECKPOINT = "finished_without_final_checkpoint"  # FLINK-23408
    RESTORE_FROM_OLDER_RETAINED_CHECKPOINT = "restore_from_older_retained_checkpoint"  # FLINK-14145
    SOURCE_POSITIONS_FROM_PREVIOUS_CHECKPOINT = "source_positions_from_previous_checkpoint"
    COMPLETED_MISSING_ONE_ACKNOWLEDGEMENT = "completed_missing_one_acknowledgement"
    SAVEPOINT_BARRIER_OVERTAKES_OUTPUT = "savepoint_barrier_overtakes_output"  # FLINK-18252
    CANCEL_MARKER_IGNORED = "cancel_marker_ignored"
    UNALIGNED_FLAG_FROM_OPTIONS = "unaligned_flag_from_options"  # FLINK-31588
    SAVEPOINT_COMMITS_OUTSIDE_STORE = "savepoint_commits_outside_store"  # FLINK-10354
    RESCALE_IGNORES_NEIGHBOURS_CHANNEL_STATE = "rescale_ignores_neighbours_channel_state"  # FLINK-31963
    INFLIGHT_DATA_OF_WRONG_CHANNELS = "inflight_data_of_wrong_channels"  # FLINK-18139
    POINTWISE_EDGES_PERSIST_INFLIGHT_DATA = "pointwise_edges_persist_inflight_data"  # FLINK-21945
    SAVEPOINT_NOT_RESTORED_ON_RESTART = "savepoint_not_restored_on_restart"  # FLINK-3390
    STOPPING_JOB_RESTARTS_FROM_CHECKPOINT = "stopping_job_restarts_from_checkpoint"  # FLINK-26783
    TIMEOUTABLE_BARRIER_NOT_FORCED_ALIGNED = "timeoutable_barrier_not_forced_aligned"  # FLINK-33693


_PLANTED: set[PlantedBug] = set()


def is_planted(bug: PlantedBug) -> bool:
    return bug in _PLANTED


@contextmanager
def planted(bug: PlantedBug) -> Iterator[None]:
    _PLANTED.add(bug)
    try:
        yield
    finally:
        _PLANTED.discard(bug)
