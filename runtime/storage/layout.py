"""The directory layout every checkpoint storage shares (Flink's ``AbstractFsCheckpointStorageAccess`` constants):
``<job>/chk-<n>/_metadata`` with its state files, ``<job>/shared/``, ``<job>/taskowned/``, the completed-checkpoint
list ``<job>/_completed_checkpoints`` and savepoint directories ``savepoint-<jobid6>-<12 hex>``."""

from __future__ import annotations

import random

METADATA_FILE_NAME = "_metadata"
COMPLETED_CHECKPOINTS_FILE_NAME = "_completed_checkpoints"
CHECKPOINT_DIR_PREFIX = "chk-"
CHECKPOINT_SHARED_STATE_DIR = "shared"
CHECKPOINT_TASK_OWNED_STATE_DIR = "taskowned"
SAVEPOINT_DIR_PREFIX = "savepoint-"
RANDOM_FILE_NAME_LENGTH = 12


def checkpoint_directory_name(checkpoint_id: int) -> str:
    return f"{CHECKPOINT_DIR_PREFIX}{checkpoint_id}"


def checkpoint_id_of(directory_name: str) -> int | None:
    """The checkpoint id of a ``chk-<n>`` directory name; None for any other name."""
    if directory_name.startswith(CHECKPOINT_DIR_PREFIX) and directory_name[len(CHECKPOINT_DIR_PREFIX) :].isdigit():
        return int(directory_name[len(CHECKPOINT_DIR_PREFIX) :])
    return None


def savepoint_directory_name(job_id: str, rng: random.Random) -> str:
    """A fresh ``savepoint-<first 6 chars of the job id>-<12 hex>`` name, drawn from ``rng``."""
    return f"{SAVEPOINT_DIR_PREFIX}{job_id[:6]}-" + "".join(
        rng.choice("0123456789abcdef") for _ in range(RANDOM_FILE_NAME_LENGTH)
    )


def is_file_name(name: str) -> bool:
    """Whether ``name`` names a file in a directory (no separator, not ``.``/``..``, not empty)."""
    return "/" not in name and name not in ("", ".", "..")
