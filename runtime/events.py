"""Immutable values that flow through a job: data buffers, checkpoint barriers, cancel markers, end of partition,
announcements, and the addresses of channels and subpartitions.

Mirrors Flink's ``CheckpointBarrier``, ``CheckpointOptions``, ``CheckpointType``/``SavepointType``,
``CancelCheckpointMarker``, ``EndOfPartitionEvent``, ``EndOfData``, ``EventAnnouncement``,
``SubtaskConnectionDescriptor``, ``EndOfChannelStateEvent``, ``Buffer``, ``InputChannelInfo`` and
``ResultSubpartitionInfo``. See docs/data-plane.md, "Events and addresses".
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from barriersim.runtime.record_batch import RecordBatch, batch_from_bytes, batch_to_bytes
from barriersim.runtime.values import fast_init

# Flink: CheckpointOptions.NO_ALIGNED_CHECKPOINT_TIME_OUT = Long.MAX_VALUE
NO_ALIGNED_CHECKPOINT_TIME_OUT: int = 2**63 - 1


class SharingFilesStrategy(enum.Enum):
    """Flink's ``SnapshotType.SharingFilesStrategy``: which files a snapshot may share with other snapshots."""

    FORWARD_BACKWARD = "FORWARD_BACKWARD"  # it may use the files of earlier snapshots; later ones may use its files
    FORWARD = "FORWARD"  # it uses no earlier snapshot's file; later ones may use its files
    NO_SHARING = "NO_SHARING"  # neither


class CheckpointType(enum.Enum):
    """Flink's ``SnapshotType``: a checkpoint, a full checkpoint, or one of the savepoint kinds (``SavepointType``).

    ``FULL_CHECKPOINT`` is what the coordinator triggers instead of a checkpoint after a restore in ``NO_CLAIM`` mode,
    until a checkpoint completed: an incremental backend uploads every file again, so that the job no longer
    depends on the restored snapshot's files."""

    CHECKPOINT = "CHECKPOINT"
    FULL_CHECKPOINT = "FULL_CHECKPOINT"
    SAVEPOINT = "SAVEPOINT"
    SAVEPOINT_SUSPEND = "SAVEPOINT_SUSPEND"
    SAVEPOINT_TERMINATE = "SAVEPOINT_TERMINATE"

    @property
    def is_savepoint(self) -> bool:
        return self not in (CheckpointType.CHECKPOINT, CheckpointType.FULL_CHECKPOINT)

    @property
    def sharing_files_strategy(self) -> SharingFilesStrategy:
        if self is CheckpointType.CHECKPOINT:
            return SharingFilesStrategy.FORWARD_BACKWARD
        if self is CheckpointType.FULL_CHECKPOINT:
            return SharingFilesStrategy.FORWARD
        return SharingFilesStrategy.NO_SHARING

    @property
    def is_synchronous(self) -> bool:
        """Stop-with-savepoint: the task waits for the savepoint to complete before going on."""
        return self in (CheckpointType.SAVEPOINT_SUSPEND, CheckpointType.SAVEPOINT_TERMINATE)

    @property
    def should_drain(self) -> bool:
        return self is CheckpointType.SAVEPOINT_TERMINATE

    @property
    def rest_name(self) -> str:
        """The ``checkpoint_type`` Flink's REST API shows for a snapshot of this type (``CheckpointStatistics.
        RestAPICheckpointType``): ``CHECKPOINT`` (a full checkpoint's too), ``SAVEPOINT``, or ``SYNC_SAVEPOINT``
        for both kinds of stop-with-savepoint (whether it drained is not in it); a checkpoint that ran unaligned
        shows ``UNALIGNED_CHECKPOINT`` (set by the statistics once a subtask reports it)."""
        if self.is_synchronous:
            return "SYNC_SAVEPOINT"
        return "SAVEPOINT" if self.is_savepoint else "CHECKPOINT"


class AlignmentType(enum.Enum):
    """Flink's ``CheckpointOptions.AlignmentType``."""

    AT_LEAST_ONCE = "AT_LEAST_ONCE"
    ALIGNED = "ALIGNED"
    UNALIGNED = "UNALIGNED"
    FORCED_ALIGNED = "FORCED_ALIGNED"


@dataclass(frozen=True)
class CheckpointOptions:
    """Flink's ``CheckpointOptions`` (without the storage location reference, which lives in storage).

    ``aligned_checkpoint_timeout`` is in milliseconds; ``NO_ALIGNED_CHECKPOINT_TIME_OUT`` means never.
    """

    checkpoint_type: CheckpointType = CheckpointType.CHECKPOINT
    alignment: AlignmentType = AlignmentType.ALIGNED
    aligned_checkpoint_timeout: int = NO_ALIGNED_CHECKPOINT_TIME_OUT

    # -- factories, as Flink's static methods ------------------------------------------------------

    @staticmethod
    def for_config(
        checkpoint_type: CheckpointType,
        *,
        exactly_once: bool,
        unaligned_enabled: bool,
        aligned_checkpoint_timeout: int,
    ) -> CheckpointOptions:
        """Flink's ``CheckpointOptions.forConfig``: unaligned only for plain checkpoints in exactly-once
        mode; a positive timeout means start aligned and switch to unaligned after the timeout, except
        ``NO_ALIGNED_CHECKPOINT_TIME_OUT`` (Java's ``Long.MAX_VALUE``), which Flink 2.3 reads as no timeout: unaligned
        from the start, as 0."""
        if not exactly_once:
            return CheckpointOptions.not_exactly_once(checkpoint_type)
        if checkpoint_type.is_savepoint:
            return CheckpointOptions.aligned(checkpoint_type)
        if not unaligned_enabled:
            return CheckpointOptions.aligned(checkpoint_type)
        if 0 < aligned_checkpoint_timeout < NO_ALIGNED_CHECKPOINT_TIME_OUT:
            return CheckpointOptions.aligned_with_timeout(checkpoint_type, aligned_checkpoint_timeout)
        return CheckpointOptions.unaligned(checkpoint_type)

    @staticmethod
    def not_exactly_once(checkpoint_type: CheckpointType = CheckpointType.CHECKPOINT) -> CheckpointOptions:
        return CheckpointOptions(checkpoint_type, AlignmentType.AT_LEAST_ONCE, NO_ALIGNED_CHECKPOINT_TIME_OUT)

    @staticmethod
    def aligned(checkpoint_type: CheckpointType = CheckpointType.CHECKPOINT) -> CheckpointOptions:
        return CheckpointOptions(checkpoint_type, AlignmentType.ALIGNED, NO_ALIGNED_CHECKPOINT_TIME_OUT)

    @staticmethod
    def unaligned(checkpoint_type: CheckpointType = CheckpointType.CHECKPOINT) -> CheckpointOptions:
        if checkpoint_type.is_savepoint:
            raise ValueError("savepoints cannot be unaligned")
        return CheckpointOptions(checkpoint_type, AlignmentType.UNALIGNED, NO_ALIGNED_CHECKPOINT_TIME_OUT)

    @staticmethod
    def aligned_with_timeout(checkpoint_type: CheckpointType, aligned_checkpoint_timeout: int) -> CheckpointOptions:
        if checkpoint_type.is_savepoint:
            raise ValueError("savepoints cannot switch to unaligned")
        return CheckpointOptions(checkpoint_type, AlignmentType.ALIGNED, aligned_checkpoint_timeout)

    @staticmethod
    def for_checkpoint_with_default_location() -> CheckpointOptions:
        return CheckpointOptions.aligned(CheckpointType.CHECKPOINT)

    # -- accessors, as Flink's ------------------------------------------------------------------

    @cached_property  # options are frozen: each read after the first is an attribute
    def is_exactly_once_mode(self) -> bool:
        return self.alignment is not AlignmentType.AT_LEAST_ONCE

    @cached_property
    def is_unaligned_checkpoint(self) -> bool:
        return self.alignment is AlignmentType.UNALIGNED

    @cached_property
    def needs_alignment(self) -> bool:
        return self.is_exactly_once_mode and (self.checkpoint_type.is_savepoint or not self.is_unaligned_checkpoint)

    @cached_property
    def is_timeoutable(self) -> bool:
        return (
            self.alignment is AlignmentType.ALIGNED
            and 0 < self.aligned_checkpoint_timeout < NO_ALIGNED_CHECKPOINT_TIME_OUT
        )

    def to_unaligned(self) -> CheckpointOptions:
        """Flink's ``CheckpointOptions.toUnaligned``: only a timeoutable aligned checkpoint switches."""
        if self.alignment is not AlignmentType.ALIGNED:
            raise ValueError(f"cannot switch {self.alignment.value} checkpoint options to unaligned")
        return CheckpointOptions.unaligned(self.checkpoint_type)

    def with_unaligned_unsupported(self) -> CheckpointOptions:
        """Flink's ``withUnalignedUnsupported``: used where a channel cannot carry unaligned barriers
        (e.g. pointwise or forward connections after rescale); an unaligned request becomes FORCED_ALIGNED."""
        if self.is_unaligned_checkpoint or self.is_timeoutable:
            return CheckpointOptions(
                self.checkpoint_type, AlignmentType.FORCED_ALIGNED, self.aligned_checkpoint_timeout
            )
        return self

    def with_unaligned_supported(self) -> CheckpointOptions:
        if self.alignment is AlignmentType.FORCED_ALIGNED:
            if self.aligned_checkpoint_timeout < NO_ALIGNED_CHECKPOINT_TIME_OUT:
                return CheckpointOptions.aligned_with_timeout(self.checkpoint_type, self.aligned_checkpoint_timeout)
            return CheckpointOptions.unaligned(self.checkpoint_type)
        return self


@dataclass(frozen=True)
class CheckpointBarrier:
    """Flink's ``CheckpointBarrier``: ``timestamp`` is the coordinator's trigger time in ms (the aligned
    checkpoint timeout counts from it)."""

    id: int
    timestamp: int
    options: CheckpointOptions = field(default_factory=CheckpointOptions.aligned)

    @property
    def checkpoint_id(self) -> int:
        return self.id

    @property
    def is_checkpoint(self) -> bool:
        return not self.options.checkpoint_type.is_savepoint

    def as_unaligned(self) -> CheckpointBarrier:
        return (
            self
            if self.options.is_unaligned_checkpoint
            else CheckpointBarrier(self.id, self.timestamp, self.options.to_unaligned())
        )

    def with_options(self, options: CheckpointOptions) -> CheckpointBarrier:
        return CheckpointBarrier(self.id, self.timestamp, options)


@dataclass(frozen=True)
class CancelCheckpointMarker:
    """Flink's ``CancelCheckpointMarker``: tells downstream tasks that checkpoint ``checkpoint_id`` is
    aborted."""

    checkpoint_id: int


@dataclass(frozen=True)
class EndOfPartition:
    """Flink's ``EndOfPartitionEvent``: the producer of this channel has finished."""


END_OF_PARTITION = EndOfPartition()


class StopMode(enum.Enum):
    """Flink's ``StopMode``: how a stop-with-savepoint ends the data (``--drain`` or not)."""

    DRAIN = "DRAIN"  # the operators finish: MAX_WATERMARK, end of input, every window fires
    NO_DRAIN = "NO_DRAIN"  # the sources just stop: operators keep their state for the savepoint


@dataclass(frozen=True)
class EndOfData:
    """Flink's ``EndOfData``: the producer sends no more records: its input ended (``DRAIN``: a bounded source at
    the end of its split, and every task downstream of ended inputs) or a stop-with-savepoint stopped its sources
    (then the synchronous savepoint's barrier follows it)."""

    mode: StopMode


@dataclass(frozen=True)
class SubtaskConnectionDescriptor:
    """Flink's ``SubtaskConnectionDescriptor``: the recovered buffers that follow on this channel are in-flight
    data of the *virtual channel* between old downstream subtask ``input_subtask_index`` and old upstream subtask
    ``output_subtask_index`` (sent only when a rescaled restore redistributes in-flight data)."""

    input_subtask_index: int
    output_subtask_index: int


@dataclass(frozen=True)
class EndOfChannelStateEvent:
    """Flink's ``EndOfChannelStateEvent``: the recovered in-flight data of this channel ends here."""


END_OF_CHANNEL_STATE = EndOfChannelStateEvent()


@dataclass(frozen=True)
class EventAnnouncement:
    """Flink's ``EventAnnouncement``: a priority message telling the receiver that ``announced_event``
    is queued in the channel at ``sequence_number`` (used for aligned barriers that may time out)."""

    announced_event: CheckpointBarrier
    sequence_number: int


@fast_init
@dataclass(frozen=True)
class Buffer:
    """A network buffer of serialized records: ``records`` is its content (on the data path a
    ``runtime.record_batch.RecordBatch``, or ``StreamElements`` when watermarks travel between the records; the
    network layer treats it as opaque, and its tests use tuples of values), ``size`` the number of bytes it
    occupies (``records x record_size``, at most the memory segment size, 32 KiB by default), and
    ``sequence_number`` its position in its channel (Flink's ``BufferConsumerWithPartialRecordLength``
    and ``RemoteInputChannel`` sequence numbers)."""

    records: Any
    size: int
    sequence_number: int = 0

    def with_sequence_number(self, sequence_number: int) -> Buffer:
        return Buffer(self.records, self.size, sequence_number)


@dataclass(frozen=True)
class Watermark:
    """Flink's ``Watermark``: a stream element travelling inside buffers with the records; event time up to
    ``timestamp`` (ms) is complete. ``MAX_WATERMARK`` is sent at the end of input."""

    timestamp: int


MAX_WATERMARK = Watermark(2**63 - 1)


class StreamElements:
    """What a buffer holds when watermarks travel between its records (Flink serializes ``StreamRecord`` and
    ``Watermark`` elements into the same buffers): ``parts``, in order, each a ``RecordBatch`` (a run of records)
    or a ``Watermark``. Iterating gives records (tuples) and watermarks; equal to a list or tuple of those."""

    __slots__ = ("parts",)

    def __init__(self, parts: Sequence[RecordBatch | Watermark]) -> None:
        self.parts = tuple(parts)

    @property
    def record_count(self) -> int:
        return sum(len(p) for p in self.parts if type(p) is RecordBatch)

    def __len__(self) -> int:
        return sum(len(p) if type(p) is RecordBatch else 1 for p in self.parts)

    def __iter__(self) -> Iterator[tuple[int, ...] | Watermark]:
        for part in self.parts:
            if type(part) is RecordBatch:
                yield from part
            else:
                yield part

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StreamElements):
            return len(self.parts) == len(other.parts) and all(a == b for a, b in zip(self.parts, other.parts))
        if isinstance(other, (list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.parts)

    def __repr__(self) -> str:
        return f"StreamElements({list(self.parts)!r})"


# Everything that can travel through a channel.
ChannelEvent = (
    CheckpointBarrier
    | CancelCheckpointMarker
    | EndOfPartition
    | EventAnnouncement
    | EndOfData
    | SubtaskConnectionDescriptor
    | EndOfChannelStateEvent
)
ChannelElement = Buffer | ChannelEvent


@dataclass(frozen=True, order=True)
class InputChannelInfo:
    """Flink's ``InputChannelInfo``: the index of the input gate in its task and of the channel in the gate."""

    gate_idx: int
    channel_idx: int


@dataclass(frozen=True, order=True)
class ResultSubpartitionInfo:
    """Flink's ``ResultSubpartitionInfo``: the index of the result partition in its task and of the
    subpartition in the partition."""

    partition_idx: int
    subpartition_idx: int


# -- wire encoding (msgpack-ready plain values, never pickle) --------------------------------------


def options_to_wire(o: CheckpointOptions) -> list[Any]:
    return [o.checkpoint_type.value, o.alignment.value, o.aligned_checkpoint_timeout]


def options_from_wire(v: list[Any]) -> CheckpointOptions:
    return CheckpointOptions(CheckpointType(v[0]), AlignmentType(v[1]), int(v[2]))


def to_wire(element: ChannelElement) -> list[Any]:
    """Encode a channel element as plain lists, tuples, bytes and scalars (msgpack-ready).

    A buffer of records as columns (a ``RecordBatch``: the data path) travels as its column buffers, one bytes
    value (tag ``"R"``, ``runtime.records_codec.batch_to_bytes``); one that also carries watermarks as its parts,
    each a column buffer or a tagged watermark (tag ``"S"``). A buffer of record tuples (the network layer's own
    tests) keeps its tuple of record tuples as it is: msgpack packs the nested tuples as arrays in C, and
    ``msgpack.unpackb(..., use_list=False)`` gives them back as tuples (tag ``"B"``); with watermarks among them,
    each watermark is tagged (tag ``"M"``)."""
    if isinstance(element, Buffer):
        records = element.records
        kind = type(records)
        if kind is RecordBatch:
            return ["R", batch_to_bytes(records), element.size, element.sequence_number]
        if kind is StreamElements:
            parts = [["W", p.timestamp] if isinstance(p, Watermark) else batch_to_bytes(p) for p in records.parts]
            return ["S", parts, element.size, element.sequence_number]
        if Watermark not in map(type, records):
            return ["B", records, element.size, element.sequence_number]
        mixed = [["W", r.timestamp] if isinstance(r, Watermark) else r for r in records]
        return ["M", mixed, element.size, element.sequence_number]
    if isinstance(element, CheckpointBarrier):
        return ["C", element.id, element.timestamp, options_to_wire(element.options)]
    if isinstance(element, CancelCheckpointMarker):
        return ["X", element.checkpoint_id]
    if isinstance(element, EndOfPartition):
        return ["E"]
    if isinstance(element, EventAnnouncement):
        return ["A", to_wire(element.announced_event), element.sequence_number]
    if isinstance(element, EndOfData):
        return ["D", element.mode.value]
    if isinstance(element, SubtaskConnectionDescriptor):
        return ["V", element.input_subtask_index, element.output_subtask_index]
    if isinstance(element, EndOfChannelStateEvent):
        return ["Q"]
    raise TypeError(f"not a channel element: {element!r}")


def from_wire(v: list[Any]) -> ChannelElement:
    tag = v[0]
    if tag == "R":
        return Buffer(batch_from_bytes(v[1]), int(v[2]), int(v[3]))
    if tag == "S":
        parts = [Watermark(int(p[1])) if isinstance(p, (list, tuple)) else batch_from_bytes(p) for p in v[1]]
        return Buffer(StreamElements(parts), int(v[2]), int(v[3]))
    if tag == "B":
        records = v[1]
        if type(records) is not tuple or (records and type(records[0]) is not tuple):  # decoded with lists
            records = tuple(tuple(r) if isinstance(r, list) else r for r in records)
        return Buffer(records, int(v[2]), int(v[3]))
    if tag == "M":
        records = tuple(
            Watermark(int(r[1])) if r and r[0] == "W" else tuple(r) if isinstance(r, list) else r for r in v[1]
        )
        return Buffer(records, int(v[2]), int(v[3]))
    if tag == "C":
        return CheckpointBarrier(int(v[1]), int(v[2]), options_from_wire(v[3]))
    if tag == "X":
        return CancelCheckpointMarker(int(v[1]))
    if tag == "E":
        return END_OF_PARTITION
    if tag == "A":
        barrier = from_wire(v[1])
        assert isinstance(barrier, CheckpointBarrier)
        return EventAnnouncement(barrier, int(v[2]))
    if tag == "D":
        return EndOfData(StopMode(v[1]))
    if tag == "V":
        return SubtaskConnectionDescriptor(int(v[1]), int(v[2]))
    if tag == "Q":
        return END_OF_CHANNEL_STATE
    raise ValueError(f"unknown channel element tag {tag!r}")
