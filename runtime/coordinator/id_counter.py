"""The checkpoint id counter: ids start at 1 and only grow; a restore moves the counter past the restored id.

How this works: ``StandaloneCheckpointIDCounter`` hands out ``get_and_increment()`` ids to checkpoints and
savepoints alike. ``set_count(n)`` is used after restoring a checkpoint or savepoint so that the next id is
``restored_id + 1``. Mirrors Flink's ``CheckpointIDCounter`` / ``StandaloneCheckpointIDCounter``
(``INITIAL_CHECKPOINT_ID = 1``).
"""

from __future__ import annotations

INITIAL_CHECKPOINT_ID = 1


class CheckpointIDCounterError(Exception):
    """A misuse of the counter (naming the call and the counter's state)."""


class StandaloneCheckpointIDCounter:
    def __init__(self) -> None:
        self._count = INITIAL_CHECKPOINT_ID
        self._shut_down = False

    def start(self) -> None:
        self._shut_down = False

    def shutdown(self) -> None:
        self._shut_down = True

    def get_and_increment(self) -> int:
        if self._shut_down:
            raise CheckpointIDCounterError(f"get_and_increment: counter is shut down at {self._count}")
        current = self._count
        self._count += 1
        return current

    def get(self) -> int:
        return self._count

    def set_count(self, new_count: int) -> None:
        if new_count < INITIAL_CHECKPOINT_ID:
            raise CheckpointIDCounterError(f"set_count({new_count}): ids start at {INITIAL_CHECKPOINT_ID}")
        self._count = new_count
