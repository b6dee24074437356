"""Ports of Flink's ChannelStateWriterImplTest, plus the sans-IO writer's own contract.

Flink's "buffer is recycled" checks become "the writer holds no buffer of that checkpoint any more"
(``num_held_buffers``) and "result is done" keeps its meaning (the holders completed, possibly
exceptionally). Flink runs requests on a (sync) worker and reports dispatch errors later; our writer applies
each request at the call, so errors surface at the call that causes them.
"""

import pytest

from barriersim.runtime.channel_state.writer import (
    NO_OP,
    SEQUENCE_NUMBER_UNKNOWN,
    ChannelStateArgumentError,
    ChannelStateWriteFailure,
    ChannelStateWriterImpl,
    ChannelStateWriterStateError,
    WriteOutcome,
)
from barriersim.runtime.events import (
    Buffer,
    CheckpointBarrier,
    CheckpointOptions,
    InputChannelInfo,
    ResultSubpartitionInfo,
)
from barriersim.runtime.state.snapshot import InputChannelStateHandle, ResultSubpartitionStateHandle

CHECKPOINT_ID = 42
TASK_NAME = "test"


class _TestException(RuntimeError):
    pass


def _writer(max_checkpoints=5) -> ChannelStateWriterImpl:
    w = ChannelStateWriterImpl(0, TASK_NAME, max_checkpoints)
    w.open()
    return w


def _buffer(seq=0) -> Buffer:
    return Buffer(("r",), 123, seq)


def _start(w):
    return w.start(CHECKPOINT_ID, CheckpointOptions.for_checkpoint_with_default_location())


def _add_input(w, *buffers):
    return w.add_input_data(CHECKPOINT_ID, InputChannelInfo(1, 1), 1, buffers or (_buffer(),))


def _finish(w):
    w.finish_input(CHECKPOINT_ID)
    w.finish_output(CHECKPOINT_ID)


def test_add_event_buffer():
    """Port of Flink ChannelStateWriterImplTest.testAddEventBuffer.

    An event among the data is rejected (IllegalArgument) and nothing of the call is retained."""
    w = _writer()
    _start(w)
    with pytest.raises(ChannelStateArgumentError, match="event"):
        w.add_input_data(
            CHECKPOINT_ID,
            InputChannelInfo(1, 1),
            1,
            [CheckpointBarrier(1, 0), _buffer()],  # type: ignore[list-item]
        )
    assert w.num_held_buffers == 0


def test_result_completion():
    """Port of Flink ChannelStateWriterImplTest.testResultCompletion."""
    w = _writer()
    _start(w)
    result = w.get_and_remove_write_result(CHECKPOINT_ID)
    assert not result.result_subpartition_state_handles.is_done()
    assert not result.input_channel_state_handles.is_done()
    w.close()
    assert result.input_channel_state_handles.is_done()
    assert result.result_subpartition_state_handles.is_done()


def test_abort():
    """Port of Flink ChannelStateWriterImplTest.testAbort."""
    w = _writer()
    _start(w)
    result = w.get_and_remove_write_result(CHECKPOINT_ID)
    _add_input(w, _buffer())
    assert w.num_held_buffers == 1
    w.abort(CHECKPOINT_ID, _TestException(), False)
    assert result.is_done()
    assert result.input_channel_state_handles.is_completed_exceptionally()
    assert w.num_held_buffers == 0  # "recycled"


def test_abort_clears_results():
    """Port of Flink ChannelStateWriterImplTest.testAbortClearsResults."""
    w = _writer()
    _start(w)
    w.abort(CHECKPOINT_ID, _TestException(), True)
    with pytest.raises(ChannelStateArgumentError, match="not found"):
        w.get_and_remove_write_result(CHECKPOINT_ID)


def test_abort_does_not_clears_results():
    """Port of Flink ChannelStateWriterImplTest.testAbortDoesNotClearsResults."""
    w = _writer()
    _start(w)
    w.abort(CHECKPOINT_ID, _TestException(), False)
    result = w.get_and_remove_write_result(CHECKPOINT_ID)
    assert result.is_done()
    assert isinstance(result.input_channel_state_handles.exception, ChannelStateWriteFailure)


def test_abort_ignores_missing():
    """Port of Flink ChannelStateWriterImplTest.testAbortIgnoresMissing."""
    w = _writer()
    w.abort(CHECKPOINT_ID, _TestException(), False)
    # data of the aborted (never started) checkpoint is discarded, not an error
    assert _add_input(w) is WriteOutcome.DISCARDED
    assert w.num_results == 0


def test_buffers_recycled_on_error():
    """Port of Flink ChannelStateWriterImplTest.testBuffersRecycledOnError.

    Adapted: Flink's failing worker becomes an injected failure (``fail``); the add raises the cause and
    the buffer is not retained."""
    w = _writer()
    _start(w)
    w.fail(_TestException())
    with pytest.raises(_TestException):
        _add_input(w, _buffer())
    assert w.num_held_buffers == 0


def test_buffers_recycled_on_close():
    """Port of Flink ChannelStateWriterImplTest.testBuffersRecycledOnClose."""
    w = _writer()
    _start(w)
    result = w.get_and_remove_write_result(CHECKPOINT_ID)
    _add_input(w, _buffer())
    assert w.num_held_buffers == 1
    w.close()
    assert w.num_held_buffers == 0
    assert result.input_channel_state_handles.is_completed_exceptionally()


def test_no_add_data_after_finished():
    """Port of Flink ChannelStateWriterImplTest.testNoAddDataAfterFinished."""
    w = _writer()
    _start(w)
    _finish(w)
    with pytest.raises(ChannelStateArgumentError, match="checkpoint 42 is finished"):
        _add_input(w)


def test_add_data_not_started():
    """Port of Flink ChannelStateWriterImplTest.testAddDataNotStarted."""
    w = _writer()
    with pytest.raises(ChannelStateArgumentError, match="not started"):
        _add_input(w)


def test_finish_not_started():
    """Port of Flink ChannelStateWriterImplTest.testFinishNotStarted."""
    w = _writer()
    with pytest.raises(ChannelStateArgumentError, match="not started"):
        _finish(w)


def test_rethrow_on_close():
    """Port of Flink ChannelStateWriterImplTest.testRethrowOnClose.

    Adapted: the error that Flink's worker keeps for ``close`` is an injected asynchronous failure here
    (an argument error already surfaced at its call)."""
    w = _writer()
    with pytest.raises(ChannelStateArgumentError):
        _finish(w)
    w.fail(ValueError("async write failed"))
    with pytest.raises(ValueError, match="async write failed"):
        w.close()


def test_rethrow_on_next_call():
    """Port of Flink ChannelStateWriterImplTest.testRethrowOnNextCall."""
    w = _writer()
    w.fail(_TestException())
    with pytest.raises(_TestException):
        _start(w)


def test_limit():
    """Port of Flink ChannelStateWriterImplTest.testLimit."""
    max_checkpoints = 3
    w = _writer(max_checkpoints)
    for i in range(max_checkpoints):
        w.start(i, CheckpointOptions.for_checkpoint_with_default_location())
    with pytest.raises(ChannelStateWriterStateError, match="maximum is 3"):
        w.start(max_checkpoints, CheckpointOptions.for_checkpoint_with_default_location())


def test_start_not_opened():
    """Port of Flink ChannelStateWriterImplTest.testStartNotOpened."""
    w = ChannelStateWriterImpl(0, TASK_NAME)
    with pytest.raises(ChannelStateWriterStateError, match="not opened"):
        _start(w)


def test_no_start_after_close():
    """Port of Flink ChannelStateWriterImplTest.testNoStartAfterClose."""
    w = _writer()
    w.close()
    with pytest.raises(ChannelStateWriterStateError, match="closed"):
        w.start(42, CheckpointOptions.for_checkpoint_with_default_location())


def test_no_add_data_after_close():
    """Port of Flink ChannelStateWriterImplTest.testNoAddDataAfterClose."""
    w = _writer()
    _start(w)
    w.close()
    with pytest.raises(ChannelStateWriterStateError, match="closed"):
        _add_input(w)


# -- our own contract ----------------------------------------------------------------------------


def test_start_twice_is_an_error():
    w = _writer()
    _start(w)
    with pytest.raises(ChannelStateArgumentError, match="already present"):
        _start(w)


def test_result_removed_once():
    w = _writer()
    _start(w)
    w.get_and_remove_write_result(CHECKPOINT_ID)
    with pytest.raises(ChannelStateArgumentError):
        w.get_and_remove_write_result(CHECKPOINT_ID)


def test_handles_per_channel_with_sequence_numbers():
    w = _writer()
    _start(w)
    in1, in2 = InputChannelInfo(0, 1), InputChannelInfo(0, 0)
    out = ResultSubpartitionInfo(0, 3)
    w.add_input_data(CHECKPOINT_ID, in1, 7, [Buffer(("a",), 10), Buffer(("b",), 20)])
    w.add_input_data(CHECKPOINT_ID, in2, SEQUENCE_NUMBER_UNKNOWN, [Buffer(("c",), 5, 3)])
    w.add_output_data(CHECKPOINT_ID, out, SEQUENCE_NUMBER_UNKNOWN, [Buffer(("d",), 1, 11)])
    result = w.get_and_remove_write_result(CHECKPOINT_ID)
    w.finish_input(CHECKPOINT_ID)
    assert result.input_channel_state_handles.is_done()
    assert not result.result_subpartition_state_handles.is_done()
    assert result.input_channel_state_handles.result() == (
        InputChannelStateHandle(0, in2, (Buffer(("c",), 5, 3),)),
        InputChannelStateHandle(0, in1, (Buffer(("a",), 10, 7), Buffer(("b",), 20, 8))),
    )
    w.finish_output(CHECKPOINT_ID)
    assert result.result_subpartition_state_handles.result() == (
        ResultSubpartitionStateHandle(0, out, (Buffer(("d",), 1, 11),)),
    )
    # as Flink's ChannelStateCheckpointWriter sizes a handle: each buffer's 4-byte length and its bytes
    assert result.persisted_input_bytes == 3 * 4 + 35 and result.persisted_output_bytes == 4 + 1
    with pytest.raises(ChannelStateArgumentError, match="finished"):
        w.add_output_data(CHECKPOINT_ID, out, 0, [_buffer()])


def test_start_of_aborted_checkpoint_fails_its_result():
    w = _writer()
    w.abort(7, _TestException())
    assert w.start(7, CheckpointOptions.unaligned()) is WriteOutcome.DISCARDED
    assert w.get_and_remove_write_result(7).input_channel_state_handles.is_completed_exceptionally()


def test_no_op_writer_accepts_everything():
    NO_OP.start(1, CheckpointOptions.unaligned())
    assert NO_OP.add_input_data(1, InputChannelInfo(0, 0), 0, [_buffer()]) is WriteOutcome.DISCARDED
    result = NO_OP.get_and_remove_write_result(1)
    assert result.is_done() and result.input_channel_state_handles.result() == ()
