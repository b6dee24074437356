"""A sink that keeps everything it received, with its output in its checkpointed state.

How this works: the walking skeleton's sink appends every record to its output and snapshots the output so
far as operator state, so a restore brings back exactly what was emitted up to the checkpoint. (The
two-phase-commit exactly-once sink of the simulator issue replaces this: pre-commit at the snapshot, commit
on checkpoint completion.)
"""

from __future__ import annotations

from typing import Iterable

from barriersim.runtime.operators.records import pack, unpack
from barriersim.runtime.state.snapshot import OperatorStateHandle, OperatorSubtaskState

OUTPUT_STATE = "sink-output"


class CollectSink:
    def __init__(self) -> None:
        self.output: list[tuple] = []

    def invoke_all(self, records: Iterable[tuple]) -> None:
        self.output.extend(records)

    def snapshot_state(self) -> OperatorSubtaskState:
        handle = OperatorStateHandle({OUTPUT_STATE: (pack([list(r) for r in self.output]),)})
        return OperatorSubtaskState(managed_operator_state=(handle,))

    def restore_state(self, state: OperatorSubtaskState) -> None:
        self.output = []
        for handle in state.managed_operator_state:
            for part in handle.states.get(OUTPUT_STATE, ()):
                self.output.extend(tuple(r) for r in unpack(part))
