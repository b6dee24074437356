"""Why a checkpoint's state cannot be assigned to the subtasks of a job: the typed errors of state assignment
(Flink's ``IllegalStateException`` cases of ``StateAssignmentOperation``), each message naming the checkpoint and
the operator."""


class StateAssignmentError(Exception):
    """The checkpoint's state cannot be mapped onto the job."""


class NonRestoredStateError(StateAssignmentError):
    """State of an operator that is not in the job, and allow-non-restored-state is off."""


class MaxParallelismMismatchError(StateAssignmentError):
    """The job's configured max parallelism differs from the checkpoint's, or is below the new parallelism."""


class ChannelStateRescalingUnsupportedError(StateAssignmentError):
    """In-flight data that cannot be rescaled: no topology to rescale it by, or a partitioner that refuses."""
