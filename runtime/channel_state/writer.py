"""Collects the in-flight data (input channel and result subpartition buffers) of unaligned checkpoints and turns it
into state handles. Sans-IO: no writer thread; each request is applied at the call.

Mirrors Flink's ``ChannelStateWriter`` / ``ChannelStateWriterImpl`` with its
``ChannelStateWriteRequestDispatcherImpl`` bookkeeping. See docs/data-plane.md, "Writing in-flight data".
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from barriersim.runtime.events import Buffer, CheckpointOptions, InputChannelInfo, ResultSubpartitionInfo
from barriersim.runtime.state.snapshot import InputChannelStateHandle, ResultSubpartitionStateHandle

# Flink: ChannelStateWriter.SEQUENCE_NUMBER_UNKNOWN / SEQUENCE_NUMBER_RESTORED
SEQUENCE_NUMBER_UNKNOWN = -1
SEQUENCE_NUMBER_RESTORED = -2
# Flink: ChannelStateWriterImpl.DEFAULT_MAX_CHECKPOINTS
DEFAULT_MAX_CHECKPOINTS = 1000

T = TypeVar("T")


# -- errors ----------------------------------------------------------------------------------------


class ChannelStateWriterError(Exception):
    """Base of the writer's errors."""


class ChannelStateArgumentError(ChannelStateWriterError, ValueError):
    """Flink's IllegalArgumentException cases: unknown/finished checkpoint, started twice, event as data,
    result not present."""


class ChannelStateWriterStateError(ChannelStateWriterError, RuntimeError):
    """Flink's IllegalStateException cases: writer not opened or closed, too many concurrent checkpoints."""


class ChannelStateWriteFailure(ChannelStateWriterError):
    """Completes the holders of a result whose write failed or was aborted; ``cause`` is the original."""

    def __init__(self, checkpoint_id: int, cause: BaseException) -> None:
        self.checkpoint_id = checkpoint_id
        self.cause = cause
        super().__init__(f"channel state write of checkpoint {checkpoint_id} failed: {cause!r}")


class WriteOutcome(enum.Enum):
    WRITTEN = "WRITTEN"
    DISCARDED = "DISCARDED"  # the checkpoint was aborted: data dropped (Flink recycles the buffers)


# -- results ---------------------------------------------------------------------------------------


class StateHandlesFuture(Generic[T]):
    """A completed-once holder (Flink's ``CompletableFuture`` of state handles)."""

    def __init__(self) -> None:
        self._done = False
        self._value: T | None = None
        self._error: BaseException | None = None

    def is_done(self) -> bool:
        return self._done

    def is_completed_exceptionally(self) -> bool:
        return self._done and self._error is not None

    @property
    def exception(self) -> BaseException | None:
        return self._error

    def complete(self, value: T) -> bool:
        if self._done:
            return False
        self._done, self._value = True, value
        return True

    def complete_exceptionally(self, error: BaseException) -> bool:
        if self._done:
            return False
        self._done, self._error = True, error
        return True

    def result(self) -> T:
        if not self._done:
            raise ChannelStateWriterStateError("state handles requested before the write completed")
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


@dataclass
class ChannelStateWriteResult:
    """Flink's ``ChannelStateWriteResult``: the handles of one checkpoint's in-flight data."""

    input_channel_state_handles: StateHandlesFuture[tuple[InputChannelStateHandle, ...]] = field(
        default_factory=StateHandlesFuture
    )
    result_subpartition_state_handles: StateHandlesFuture[tuple[ResultSubpartitionStateHandle, ...]] = field(
        default_factory=StateHandlesFuture
    )

    @staticmethod
    def empty() -> ChannelStateWriteResult:
        r = ChannelStateWriteResult()
        r.input_channel_state_handles.complete(())
        r.result_subpartition_state_handles.complete(())
        return r

    def is_done(self) -> bool:
        return self.input_channel_state_handles.is_done() and self.result_subpartition_state_handles.is_done()

    def fail(self, error: BaseException) -> None:
        self.input_channel_state_handles.complete_exceptionally(error)
        self.result_subpartition_state_handles.complete_exceptionally(error)

    @property
    def persisted_input_bytes(self) -> int:
        h = self.input_channel_state_handles
        return sum(x.state_size for x in h.result()) if h.is_done() and not h.is_completed_exceptionally() else 0

    @property
    def persisted_output_bytes(self) -> int:
        h = self.result_subpartition_state_handles
        return sum(x.state_size for x in h.result()) if h.is_done() and not h.is_completed_exceptionally() else 0


# -- the interface ----------------------------------------------------------------------------------


class ChannelStateWriter(abc.ABC):
    """Flink's ``ChannelStateWriter``."""

    @abc.abstractmethod
    def start(self, checkpoint_id: int, options: CheckpointOptions) -> WriteOutcome: ...

    @abc.abstractmethod
    def add_input_data(
        self, checkpoint_id: int, info: InputChannelInfo, start_seq_num: int, buffers: Iterable[Buffer]
    ) -> WriteOutcome: ...

    @abc.abstractmethod
    def add_output_data(
        self, checkpoint_id: int, info: ResultSubpartitionInfo, start_seq_num: int, buffers: Iterable[Buffer]
    ) -> WriteOutcome: ...

    @abc.abstractmethod
    def finish_input(self, checkpoint_id: int) -> None: ...

    @abc.abstractmethod
    def finish_output(self, checkpoint_id: int) -> None: ...

    @abc.abstractmethod
    def abort(self, checkpoint_id: int, cause: BaseException, cleanup: bool = False) -> None: ...

    @abc.abstractmethod
    def get_and_remove_write_result(self, checkpoint_id: int) -> ChannelStateWriteResult: ...

    def open(self) -> None:  # noqa: B027 - optional, as in Flink
        """Flink's ``open``: the default needs none."""

    def close(self) -> None:  # noqa: B027 - optional, as in Flink
        """Flink's ``close``: the default holds nothing."""


class _NoOpChannelStateWriter(ChannelStateWriter):
    """Flink's ``ChannelStateWriter.NO_OP``: accepts everything, persists nothing, returns empty results."""

    def start(self, checkpoint_id: int, options: CheckpointOptions) -> WriteOutcome:
        return WriteOutcome.DISCARDED

    def add_input_data(
        self, checkpoint_id: int, info: InputChannelInfo, start_seq_num: int, buffers: Iterable[Buffer]
    ) -> WriteOutcome:
        return WriteOutcome.DISCARDED

    def add_output_data(
        self, checkpoint_id: int, info: ResultSubpartitionInfo, start_seq_num: int, buffers: Iterable[Buffer]
    ) -> WriteOutcome:
        return WriteOutcome.DISCARDED

    def finish_input(self, checkpoint_id: int) -> None:
        pass

    def finish_output(self, checkpoint_id: int) -> None:
        pass

    def abort(self, checkpoint_id: int, cause: BaseException, cleanup: bool = False) -> None:
        pass

    def get_and_remove_write_result(self, checkpoint_id: int) -> ChannelStateWriteResult:
        return ChannelStateWriteResult.empty()


NO_OP: ChannelStateWriter = _NoOpChannelStateWriter()


# -- the implementation ---------------------------------------------------------------------------


class _Request:
    """A request to the writer, named in its errors only: ``str()`` gives ``name(checkpoint_id, channel)``, put
    together when an error needs it, not for every request (a channel's info prints as a dataclass)."""

    __slots__ = ("name", "checkpoint_id", "channel")

    def __init__(self, name: str, checkpoint_id: int, channel: object) -> None:
        self.name, self.checkpoint_id, self.channel = name, checkpoint_id, channel

    def __str__(self) -> str:
        return f"{self.name}({self.checkpoint_id}, {self.channel})"


@dataclass
class _CheckpointWrite:
    checkpoint_id: int
    options: CheckpointOptions
    result: ChannelStateWriteResult
    input_data: dict[InputChannelInfo, list[Buffer]] = field(default_factory=dict)
    output_data: dict[ResultSubpartitionInfo, list[Buffer]] = field(default_factory=dict)
    input_finished: bool = False
    output_finished: bool = False

    @property
    def finished(self) -> bool:
        return self.input_finished and self.output_finished


class ChannelStateWriterImpl(ChannelStateWriter):
    """Flink's ``ChannelStateWriterImpl`` (see the module docstring for the sans-IO completion rule)."""

    def __init__(
        self, subtask_index: int = 0, task_name: str = "", max_checkpoints: int = DEFAULT_MAX_CHECKPOINTS
    ) -> None:
        if max_checkpoints <= 0:
            raise ValueError(f"max_checkpoints must be positive, got {max_checkpoints}")
        self.subtask_index = subtask_index
        self.task_name = task_name
        self.max_checkpoints = max_checkpoints
        self._results: dict[int, ChannelStateWriteResult] = {}
        self._writes: dict[int, _CheckpointWrite] = {}
        self._aborted: dict[int, BaseException] = {}
        self._opened = False
        self._closed = False
        self._thrown: BaseException | None = None

    # -- lifecycle ------------------------------------------------------------------------------------

    def open(self) -> None:
        if self._closed:
            raise ChannelStateWriterStateError(f"open: channel state writer of {self.task_name!r} is closed")
        self._opened = True

    def close(self) -> None:
        """Fails every unfinished result, forgets all results; re-raises an injected failure."""
        if self._closed:
            return
        self._closed = True
        closed = ChannelStateWriterStateError(f"channel state writer of {self.task_name!r} closed")
        for write in self._writes.values():
            write.result.fail(ChannelStateWriteFailure(write.checkpoint_id, closed))
        for result in self._results.values():
            result.fail(closed)
        self._writes.clear()
        self._results.clear()
        if self._thrown is not None:
            raise self._thrown

    def fail(self, cause: BaseException) -> None:
        """The driver injects a failure of the asynchronous writer (e.g. the storage failed)."""
        if self._thrown is None:
            self._thrown = cause
        for write in self._writes.values():
            write.result.fail(ChannelStateWriteFailure(write.checkpoint_id, cause))
        self._writes.clear()

    def _check_running(self, what: object) -> None:
        if self._thrown is not None:
            raise self._thrown
        if not self._opened or self._closed:
            state = "closed" if self._closed else "not opened"
            raise ChannelStateWriterStateError(f"{what}: channel state writer of {self.task_name!r} is {state}")

    # -- requests ---------------------------------------------------------------------------------

    def start(self, checkpoint_id: int, options: CheckpointOptions) -> WriteOutcome:
        self._check_running(f"start({checkpoint_id})")
        if checkpoint_id in self._results:
            raise ChannelStateArgumentError(
                f"start({checkpoint_id}): result future already present for checkpoint {checkpoint_id}"
            )
        if len(self._results) >= self.max_checkpoints:
            raise ChannelStateWriterStateError(
                f"start({checkpoint_id}): {len(self._results)} results held, the maximum is {self.max_checkpoints}"
            )
        result = ChannelStateWriteResult()
        self._results[checkpoint_id] = result
        if checkpoint_id in self._aborted:
            result.fail(ChannelStateWriteFailure(checkpoint_id, self._aborted[checkpoint_id]))
            return WriteOutcome.DISCARDED
        self._writes[checkpoint_id] = _CheckpointWrite(checkpoint_id, options, result)
        return WriteOutcome.WRITTEN

    def _write_for(self, what: object, checkpoint_id: int) -> _CheckpointWrite | None:
        """The open write, or None when the checkpoint was aborted (data is discarded)."""
        self._check_running(what)
        write = self._writes.get(checkpoint_id)
        if write is not None:
            return write
        if checkpoint_id in self._aborted:
            return None
        state = "finished" if checkpoint_id in self._results else "not started (or finished and removed)"
        raise ChannelStateArgumentError(f"{what}: checkpoint {checkpoint_id} is {state}")

    @staticmethod
    def _data_buffers(what: object, buffers: Iterable[Buffer]) -> list[Buffer]:
        data = list(buffers)
        for b in data:
            if not isinstance(b, Buffer):
                raise ChannelStateArgumentError(f"{what}: {b!r} is an event, not a data buffer")
        return data

    @staticmethod
    def _numbered(start_seq_num: int, data: list[Buffer]) -> list[Buffer]:
        if start_seq_num < 0:  # SEQUENCE_NUMBER_UNKNOWN/RESTORED: keep the buffers' own numbers
            return data
        # a buffer that has its number already is kept (frozen: the same value a renumbered copy would be)
        return [
            b if b.sequence_number == start_seq_num + i else b.with_sequence_number(start_seq_num + i)
            for i, b in enumerate(data)
        ]

    def add_input_data(
        self, checkpoint_id: int, info: InputChannelInfo, start_seq_num: int, buffers: Iterable[Buffer]
    ) -> WriteOutcome:
        """Buffers keep their own sequence numbers unless ``start_seq_num`` >= 0 renumbers them from it."""
        what = _Request("add_input_data", checkpoint_id, info)
        data = self._data_buffers(what, buffers)
        write = self._write_for(what, checkpoint_id)
        if write is None:
            return WriteOutcome.DISCARDED
        if write.input_finished:
            raise ChannelStateArgumentError(f"{what}: input of checkpoint {checkpoint_id} is already finished")
        write.input_data.setdefault(info, []).extend(self._numbered(start_seq_num, data))
        return WriteOutcome.WRITTEN

    def add_output_data(
        self, checkpoint_id: int, info: ResultSubpartitionInfo, start_seq_num: int, buffers: Iterable[Buffer]
    ) -> WriteOutcome:
        what = _Request("add_output_data", checkpoint_id, info)
        data = self._data_buffers(what, buffers)
        write = self._write_for(what, checkpoint_id)
        if write is None:
            return WriteOutcome.DISCARDED
        if write.output_finished:
            raise ChannelStateArgumentError(f"{what}: output of checkpoint {checkpoint_id} is already finished")
        write.output_data.setdefault(info, []).extend(self._numbered(start_seq_num, data))
        return WriteOutcome.WRITTEN

    def finish_input(self, checkpoint_id: int) -> None:
        write = self._write_for(f"finish_input({checkpoint_id})", checkpoint_id)
        if write is None or write.input_finished:
            return
        write.input_finished = True
        write.result.input_channel_state_handles.complete(
            tuple(
                InputChannelStateHandle(self.subtask_index, info, tuple(bufs))
                for info, bufs in sorted(write.input_data.items())
                if bufs
            )
        )
        self._retire_if_finished(write)

    def finish_output(self, checkpoint_id: int) -> None:
        write = self._write_for(f"finish_output({checkpoint_id})", checkpoint_id)
        if write is None or write.output_finished:
            return
        write.output_finished = True
        write.result.result_subpartition_state_handles.complete(
            tuple(
                ResultSubpartitionStateHandle(self.subtask_index, info, tuple(bufs))
                for info, bufs in sorted(write.output_data.items())
                if bufs
            )
        )
        self._retire_if_finished(write)

    def _retire_if_finished(self, write: _CheckpointWrite) -> None:
        if write.finished:
            del self._writes[write.checkpoint_id]

    def abort(self, checkpoint_id: int, cause: BaseException, cleanup: bool = False) -> None:
        """Fails the checkpoint's result (if still open) and drops its data; ``cleanup`` also forgets the
        result. Aborting an unknown checkpoint is not an error (later data for it is discarded)."""
        if self._closed:
            return
        self._aborted[checkpoint_id] = cause
        if len(self._aborted) > self.max_checkpoints:  # bounded memory: forget the oldest aborted ids
            del self._aborted[min(self._aborted)]
        write = self._writes.pop(checkpoint_id, None)
        if write is not None:
            write.result.fail(ChannelStateWriteFailure(checkpoint_id, cause))
        if cleanup:
            self._results.pop(checkpoint_id, None)

    def get_and_remove_write_result(self, checkpoint_id: int) -> ChannelStateWriteResult:
        self._check_running(f"get_and_remove_write_result({checkpoint_id})")
        result = self._results.pop(checkpoint_id, None)
        if result is None:
            raise ChannelStateArgumentError(
                f"get_and_remove_write_result({checkpoint_id}): channel state write result not found "
                f"(never started, already removed or cleaned up by abort)"
            )
        return result

    # -- introspection ------------------------------------------------------------------------------

    def is_started(self, checkpoint_id: int) -> bool:
        return checkpoint_id in self._writes

    def is_aborted(self, checkpoint_id: int) -> bool:
        return checkpoint_id in self._aborted

    @property
    def num_results(self) -> int:
        return len(self._results)

    @property
    def num_held_buffers(self) -> int:
        """Buffers of open writes not yet turned into handles (Flink: buffers not yet recycled)."""
        return sum(len(b) for w in self._writes.values() for d in (w.input_data, w.output_data) for b in d.values())
