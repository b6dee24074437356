"""What a subtask's snapshot writes, by the state it holds: the work the checkpoint cost model charges.

How this works: ``full_snapshot_work`` is the work of a full snapshot (Flink's heap backend and operator state
backend): every state stream (one per keyed-state handle, one per operator-state handle) is copied in the
synchronous part and uploaded in the asynchronous part; a stream at or above the memory threshold is a file of
its own, a smaller one travels inline in the acknowledgement. Sizes are the handles' state sizes.
"""

from __future__ import annotations

from barriersim.runtime.checkpoint_cost import SnapshotWork
from barriersim.runtime.state.snapshot import OperatorSubtaskState


def full_snapshot_work(state: OperatorSubtaskState, memory_threshold: int) -> SnapshotWork:
    """The work of writing every state stream of ``state`` (channel state aside: its writer charges it)."""
    sizes = [h.state_size for h in state.managed_keyed_state] + [h.state_size for h in state.managed_operator_state]
    total = sum(sizes)
    return SnapshotWork(copied_bytes=total, uploaded_bytes=total,
                        files=sum(1 for size in sizes if size > 0 and size >= memory_threshold))
