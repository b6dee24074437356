"""Recovery: assigning a checkpoint's state to the subtasks of a (possibly rescaled) job.

Entry points, re-exported here: ``assign_states`` (Flink's ``StateAssignmentOperation``) with
``ExecutionJobVertexInfo`` in and ``StateAssignment``/``JobManagerTaskRestore`` out, the restore helpers
``restore_latest_checkpoint``/``restore_from_pointer``/``checkpoint_loader``, and ``repartition_state``.
"""

from barriersim.runtime.recovery.errors import (
    ChannelStateRescalingUnsupportedError,
    MaxParallelismMismatchError,
    NonRestoredStateError,
    StateAssignmentError,
)
from barriersim.runtime.recovery.operator_state_repartitioner import repartition_state
from barriersim.runtime.recovery.restore import (
    RestoredState,
    checkpoint_loader,
    restore_from_pointer,
    restore_latest_checkpoint,
)
from barriersim.runtime.recovery.state_assignment_operation import (
    ExecutionJobVertexInfo,
    JobManagerTaskRestore,
    StateAssignment,
    assign_states,
)

__all__ = [
    "repartition_state",
    "RestoredState",
    "checkpoint_loader",
    "restore_from_pointer",
    "restore_latest_checkpoint",
    "ChannelStateRescalingUnsupportedError",
    "ExecutionJobVertexInfo",
    "JobManagerTaskRestore",
    "MaxParallelismMismatchError",
    "NonRestoredStateError",
    "StateAssignment",
    "StateAssignmentError",
    "assign_states",
]
