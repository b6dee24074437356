"""How a subtask's data ends and how it finishes: the end of a bounded input, a stop-with-savepoint, and FLIP-147's
final checkpoint (Flink's ``StreamTask.endData`` and ``afterInvoke``). ``TaskEndOfData`` owns where the task stands
on that way: how its data ended, its final checkpoint, and the synchronous savepoint it stopped for. See
``docs/architecture.md``, "The data plane".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from barriersim.runtime.events import EndOfData, StopMode
from barriersim.runtime.faults.mutations import PlantedBug, is_planted
from barriersim.runtime.task.operator_chain import OperatorChain
from barriersim.runtime.task.subtask_checkpoint_coordinator import SubtaskCheckpointCoordinator


class TaskInput(Protocol):
    """What the end of data asks of a task's input (``SourceInput`` or ``StreamTaskNetworkInput``)."""

    def advance_to_end_of_event_time(self) -> None: ...

    def end_mode(self) -> StopMode: ...

    def input_channels_ended(self) -> bool: ...


class TaskEndOfData:
    def __init__(
        self,
        chain: OperatorChain,
        task_input: TaskInput,
        checkpoints: SubtaskCheckpointCoordinator,
        *,
        checkpoints_after_tasks_finish: bool,
        end_partitions: Callable[[], None],
    ):
        """``checkpoints``: the task's checkpoint steps (the final checkpoint comes after their last one);
        ``end_partitions``: the task finishes (its partitions end, ``TaskFinished``)."""
        self._chain = chain
        self._input = task_input
        self._checkpoints = checkpoints
        self._checkpoints_after_tasks_finish = checkpoints_after_tasks_finish
        self._end_partitions = end_partitions
        self.mode: StopMode | None = None  # how the task's data ended (read-only outside)
        self.final_checkpoint_min_id: int | None = None  # set once the data ended (FLIP-147) (read-only outside)
        self.final_checkpoint_completed = False  # then it finishes once its consumers processed all its data
        # stop-with-savepoint: the synchronous savepoint the task stopped for, and whether it completed
        self._synchronous_savepoint_id: int | None = None
        self._synchronous_savepoint_completed = False

    def on_synchronous_savepoint(self, savepoint_id: int) -> None:
        """The barrier of a synchronous savepoint (stop-with-savepoint) triggers the task's checkpoint."""
        self._synchronous_savepoint_id = savepoint_id

    def is_synchronous_savepoint(self, checkpoint_id: int) -> bool:
        return checkpoint_id == self._synchronous_savepoint_id

    def stop_source_for_savepoint(self, savepoint_id: int, drain: bool) -> None:
        """Flink's ``triggerStopWithSavepointAsync`` of a source task: the source stops reading, its data ends
        (``EndOfData``; with ``--drain`` after ``MAX_WATERMARK`` and the end of input), the savepoint's barrier
        follows, and the task finishes once the savepoint completed."""
        self._synchronous_savepoint_id = savepoint_id
        if self.final_checkpoint_min_id is not None:
            return  # its input had ended already: it waits for a final checkpoint, which the savepoint is
        self._end_data(StopMode.DRAIN if drain else StopMode.NO_DRAIN, savepoint_id)

    def on_input_data_ended(self) -> None:
        """Every input channel's data ended (``EndOfData`` or end of partition on each): drained only if no
        channel's data was stopped without draining (``TaskInput.end_mode``)."""
        if self.mode is None and self.final_checkpoint_min_id is None:
            self._end_data(self._input.end_mode(), max(self._checkpoints.last_checkpoint_id, 0) + 1)

    def _end_data(self, mode: StopMode, final_checkpoint_min_id: int) -> None:
        """Flink's ``StreamTask.endData``: with ``DRAIN`` event time advances to its end (every window fires) and
        the operator finishes; with ``NO_DRAIN`` its state stays for the savepoint. ``EndOfData`` goes downstream,
        and the task finishes when a checkpoint from ``final_checkpoint_min_id`` on (the savepoint) completed and
        its consumers processed all its data. A source sends ``MAX_WATERMARK`` only in a job with event time; a
        task downstream passes it on once every input ended (its watermark valve, as it always has)."""
        self.mode = mode
        if mode is StopMode.DRAIN:
            self._input.advance_to_end_of_event_time()
            self._chain.end_input(final_checkpoint=True)
        self._chain.broadcast_event(EndOfData(mode))
        self._chain.flush_outputs()
        self.final_checkpoint_min_id = final_checkpoint_min_id

    def end_of_input(self) -> None:
        """End of all input of a running task: a source read its split to the end, or every input channel ended (an
        upstream without checkpoints after tasks finish ends its partitions without ``EndOfData``). With
        checkpoints after tasks finish (FLIP-147) the task's data ends as Flink's ``StreamTask.endData`` ends it at
        a bounded input's end (a FLIP-27 source's ``END_OF_DATA``): drained (event time to its end, every window
        fires) unless part of the input was stopped without ``--drain``, ``EndOfData`` downstream, so that every
        task of the job ends its data at once; the task then finishes once a final checkpoint, one triggered after
        this point, completed and its consumers processed all its data (``finish_after_final_checkpoint``): no
        later checkpoint can miss data it sent, and the final checkpoint commits what the sinks still hold.
        Without FLIP-147 the task finishes at once."""
        if self.final_checkpoint_min_id is not None:  # END_OF_INPUT after END_OF_DATA
            self.finish_after_final_checkpoint()
            return
        if not self._checkpoints_after_tasks_finish:
            self._chain.end_input(final_checkpoint=False)
            self._end_partitions()
            return
        self._end_data(self._input.end_mode(), max(self._checkpoints.last_checkpoint_id, 0) + 1)
        if is_planted(PlantedBug.FINISHED_WITHOUT_FINAL_CHECKPOINT):
            self.finish_after_final_checkpoint()
        if self._synchronous_savepoint_completed:  # the synchronous savepoint it stopped for was its final checkpoint
            self.final_checkpoint_completed = True
            self.finish_after_final_checkpoint()

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """A completed checkpoint ends a synchronous savepoint or FLIP-147's final checkpoint."""
        if checkpoint_id == self._synchronous_savepoint_id:
            # Flink's StreamTask: the synchronous savepoint completes the task's final checkpoint
            self._synchronous_savepoint_completed = True
        if self.final_checkpoint_min_id is not None and (
            checkpoint_id >= self.final_checkpoint_min_id or self._synchronous_savepoint_completed
        ):
            self.final_checkpoint_completed = True
            self.finish_after_final_checkpoint()

    def finish_after_final_checkpoint(self) -> None:
        """Flink's ``StreamTask.afterInvoke`` with checkpoints after tasks finish: the task ends its partitions and
        finishes once every input channel ended (``END_OF_INPUT``: an upstream task whose data ended after this
        task's final checkpoint was triggered has a later final checkpoint, whose barriers come through this
        task until that upstream finishes), its final checkpoint completed, and every consumer processed all its
        data (``ResultPartition.getAllDataProcessedFuture``), so that, until then, checkpoints still reach its
        consumers through it."""
        if is_planted(PlantedBug.FINISHED_WITHOUT_FINAL_CHECKPOINT):  # FLINK-23408: no wait for the final checkpoint
            self.final_checkpoint_completed = True
        if self.final_checkpoint_completed and self._input.input_channels_ended() and self._chain.all_data_processed:
            self._end_partitions()
