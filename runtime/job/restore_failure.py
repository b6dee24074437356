"""What becomes of a job whose restore fails, one rule for both drivers: ``RESTORE_ERRORS`` are the typed errors a
restore raises (the checkpoint storage's, the completed checkpoint store's recovery, the coordinator's state mapping
and master hooks, the state assignment's) and ``RestorePhase`` says what each ends, by when the restore runs: the
job's first deployment (a snapshot given to start from) fails to start, a failover's restore is a global failure
the restart strategy decides on, a new JobManager's recovery fails the job. ``JobFailover.restore_failed`` is the one
place they end up. Mirrors Flink's JobMaster creation (``JobInitializationException``), ``DefaultScheduler
.restartTasks`` (``handleGlobalFailure``) and a JobManager failover's ``createAndRestoreExecutionGraph``;
docs/job-failover.md.
"""

from __future__ import annotations

import enum

from barriersim.runtime.coordinator.checkpoint_recovery import CheckpointRecoveryError
from barriersim.runtime.coordinator.master_hooks import MasterHookError
from barriersim.runtime.coordinator.restore import StateRestoreError
from barriersim.runtime.recovery.errors import StateAssignmentError
from barriersim.runtime.storage.errors import CheckpointStorageError

RESTORE_ERRORS = (
    CheckpointStorageError,
    CheckpointRecoveryError,
    StateRestoreError,
    MasterHookError,
    StateAssignmentError,
)


class RestorePhase(enum.Enum):
    START = "start"  # the job's first deployment: it fails to start
    FAILOVER = "failover"  # a restart's deployment: a global failure, the restart strategy decides
    JOBMANAGER_RECOVERY = "jobmanager recovery"  # a new JobManager's first deployment: the job fails


def describe(err: BaseException) -> str:
    """A restore error in one line: its type and message."""
    return f"{type(err).__name__}: {' '.join(str(err).split())}"
