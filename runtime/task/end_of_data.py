"""How a subtask's data ends and how it finishes: the end of a bounded input, a stop-with-savepoint, and FLIP-147's
final checkpoint.

How this works: ``TaskEndOfData`` is the part of ``runtime.task.stream_task.StreamTask`` (a base class of it, sharing its
state: the operator, the partitions, the input side, the checkpoint steps, the outgoing actions) that Flink's
``StreamTask.endData`` and ``afterInvoke`` are. A task's data ends when its source read its splits to the end,
when ``EndOfData`` arrived on every input channel, or when a source stops for a synchronous savepoint
(``triggerStopWithSavepointAsync``): drained (event time to its end, the operator finishes, every window fires)
unless some input was stopped without ``--drain``; ``EndOfData`` then goes downstream. With checkpoints after tasks
finish (FLIP-147) the task then waits: it finishes once every input channel ended, a checkpoint triggered after its
data ended (or the savepoint it stopped for) completed, and its consumers acknowledged all its data
(``ResultPartition.getAllDataProcessedFuture``); without FLIP-147 it finishes at once. ``lifecycle_report`` tells
where a task stands on this way, for the report of a job that did not end in time.
"""

from __future__ import annotations

from barriersim.runtime.events import MAX_WATERMARK, EndOfData, StopMode
from barriersim.runtime.task.actions import TaskFinished


class TaskEndOfData:
    """The end of data and the finishing of ``StreamTask`` (a part of it, not used alone)."""

    def lifecycle_report(self) -> dict:
        """Where the task stands on its way to finishing, for a driver's report of a job that did not end in time:
        its data ended (``END_OF_DATA``, how), its latest checkpoint and whether its final one completed, its
        input channels that ended (``END_OF_INPUT`` once all did), its partitions whose consumers processed
        all its data, and how many completed checkpoints it was notified of (what a source holding its end for
        ``source_min_checkpoints`` counts)."""
        ended_channels = channels = 0
        if self.input_side is not None:
            channels = len(self.input_side.channel_infos())
            ended_channels = channels - len(self.input_side.unfinished_channels())
        return {"finished": self.finished, "failed": self.failed,
                "data_ended": None if self._end_of_data_mode is None else self._end_of_data_mode.name,
                "latest_checkpoint_id": self.checkpoints.last_checkpoint_id,
                "final_checkpoint_completed": self._final_checkpoint_completed,
                "input_channels_ended": f"{ended_channels}/{channels}",
                "partitions_all_data_processed": f"{sum(p.all_data_processed for p in self.partitions)}/"
                                                 f"{len(self.partitions)}",
                "completed_checkpoints_notified": self._completed_checkpoints_notified}

    def _stop_source_for_savepoint(self, savepoint_id: int, drain: bool) -> None:
        """Flink's ``triggerStopWithSavepointAsync`` of a source task: the source stops reading, its data ends
        (``EndOfData``; with ``--drain`` after ``MAX_WATERMARK`` and the end of input), the savepoint's barrier
        follows, and the task finishes once the savepoint completed."""
        self._synchronous_savepoint_id = savepoint_id
        if self._final_checkpoint_min_id is not None:
            return  # its input had ended already: it waits for a final checkpoint, which the savepoint is
        self._end_data(StopMode.DRAIN if drain else StopMode.NO_DRAIN, savepoint_id)

    def _on_input_data_ended(self) -> None:
        """Every input channel's data ended (``EndOfData`` or end of partition on each)."""
        if self._end_of_data_mode is None and self._final_checkpoint_min_id is None:
            self._end_data(self._input_end_mode(), max(self.checkpoints.last_checkpoint_id, 0) + 1)

    def _input_end_mode(self) -> StopMode:
        return self._network_input.end_mode() if self._network_input is not None else StopMode.DRAIN

    def _end_data(self, mode: StopMode, final_checkpoint_min_id: int) -> None:
        """Flink's ``StreamTask.endData``: with ``DRAIN`` event time advances to its end (every window fires) and
        the operator finishes; with ``NO_DRAIN`` its state stays for the savepoint. ``EndOfData`` goes downstream,
        and the task finishes when a checkpoint from ``final_checkpoint_min_id`` on (the savepoint) completed and
        its consumers processed all its data. A source sends ``MAX_WATERMARK`` only in a job with event time; a
        task downstream passes it on once every input ended (its watermark valve, as it always has)."""
        self._end_of_data_mode = mode
        if mode is StopMode.DRAIN:
            if self.operator.is_source:
                if self.emit_watermarks:
                    self._chain.broadcast_watermark(MAX_WATERMARK)
            else:
                self._network_input.advance_to_end_of_event_time()
            self._chain.end_input(final_checkpoint=True)
        self._chain.broadcast_event(EndOfData(mode))
        self._chain.flush_outputs()
        self._final_checkpoint_min_id = final_checkpoint_min_id

    def _finish(self) -> None:
        """End of all input: a source read its split to the end, or every input channel ended (an upstream without
        checkpoints after tasks finish ends its partitions without ``EndOfData``). With checkpoints after tasks
        finish (FLIP-147) the task's data ends as Flink's ``StreamTask.endData`` ends it at a bounded input's end
        (a FLIP-27 source's ``END_OF_DATA``): drained (event time to its end, every window fires) unless part of
        the input was stopped without ``--drain``, ``EndOfData`` downstream, so that every task of the job ends
        its data at once; the task then finishes once a final checkpoint, one triggered after this point,
        completed and its consumers processed all its data (``_finish_after_final_checkpoint``): no later
        checkpoint can miss data it sent, and the final checkpoint commits what the sinks still hold. Without
        FLIP-147 the task finishes at once."""
        if self.finished:
            return
        if self._final_checkpoint_min_id is not None:  # END_OF_INPUT after END_OF_DATA
            self._finish_after_final_checkpoint()
            return
        if not self._checkpoints_after_tasks_finish:
            self._chain.end_input(final_checkpoint=False)
            self._end_partitions()
            return
        self._end_data(self._input_end_mode(), max(self.checkpoints.last_checkpoint_id, 0) + 1)
        if self._synchronous_savepoint_completed:  # the synchronous savepoint it stopped for was its final checkpoint
            self._final_checkpoint_completed = True
            self._finish_after_final_checkpoint()

    def _finish_after_final_checkpoint(self) -> None:
        """Flink's ``StreamTask.afterInvoke`` with checkpoints after tasks finish: the task ends its partitions and
        finishes once every input channel ended (``END_OF_INPUT``: an upstream task whose data ended after this
        task's final checkpoint was triggered has a later final checkpoint, whose barriers come through this
        task until that upstream finishes), its final checkpoint completed, and every consumer processed all its
        data (``ResultPartition.getAllDataProcessedFuture``), so that, until then, checkpoints still reach its
        consumers through it."""
        if (self._final_checkpoint_completed and (self.input_side is None or self.input_side.is_finished())
                and self._chain.all_data_processed):
            self._end_partitions()

    def _end_partitions(self) -> None:
        if self.finished:
            return
        self._chain.finish_partitions()
        self.finished = True
        self._actions.append(TaskFinished(self.attempt_id))
