"""What crosses between the actors of a job run on Ray, as msgpack bytes (never pickle): batches of channel elements,
batches of upstream messages, the JobMaster's messages to a task, acknowledgements with their task state snapshots
and metrics, declines, restore snapshots, and records for the external store. No protocol rule lives here. See
docs/ray-driver.md, "What crosses between actors".
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict

import msgpack

from barriersim.runtime.events import (
    InputChannelInfo,
    ResultSubpartitionInfo,
    from_wire,
    options_from_wire,
    options_to_wire,
    to_wire,
)
from barriersim.runtime.failure_reason import CheckpointFailureReason
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.job.actions import (
    NotifyCheckpointAborted,
    NotifyCheckpointComplete,
    TaskMessage,
    TriggerCheckpoint,
)
from barriersim.runtime.network.input.input_channel import (
    AcknowledgeAllRecordsProcessed,
    AddCredit,
    AnnounceBufferSize,
    ResumeConsumptionUpstream,
)
from barriersim.runtime.network.output.subpartition import BufferAndBacklog
from barriersim.runtime.records_codec import decode_records, decode_split, encode_records, pack, unpack  # noqa: F401 (the actors' records codec)
from barriersim.runtime.state.inflight_data_rescaling import (
    NO_RESCALE,
    InflightDataGateOrPartitionRescalingDescriptor,
    InflightDataRescalingDescriptor,
    MappingType,
)
from barriersim.runtime.state.rescale_mappings import RescaleMappings
from barriersim.runtime.state.snapshot import CheckpointMetadata, OperatorState, TaskStateSnapshot
from barriersim.runtime.storage import metadata_serializer
from barriersim.runtime.task.actions import ReportIncompleteSnapshotStats, TaskCheckpointMetrics

CREDIT, RESUME, BUFFER_SIZE, ALL_RECORDS_PROCESSED = 0, 1, 2, 3  # kinds of upstream messages


# -- data channels -----------------------------------------------------------------------------------


def element_entry(channel: InputChannelInfo, item: BufferAndBacklog) -> list:
    """One element for a consumer: its channel, sequence number, the sender's backlog and the element."""
    return [channel.gate_idx, channel.channel_idx, item.sequence_number, item.buffers_in_backlog, to_wire(item.element)]


INLINE_BYTES = 99 * 1024  # below Ray's max_direct_call_object_size (100 KiB): an argument this small is inlined


def pack_elements(entries: list) -> list[bytes]:
    """A call's element entries as msgpack arrays of at most about ``INLINE_BYTES`` each (an entry larger than that
    alone in its array), in order: Ray inlines each such argument in the call instead of putting it in the object
    store, which costs a round trip to the raylet on the sender's side and one on the receiver's."""
    parts: list[bytes] = []
    group: list[bytes] = []
    size = 0
    for entry in entries:
        packed = msgpack.packb(entry, use_bin_type=True)
        if group and size + len(packed) > INLINE_BYTES:
            parts.append(_array(group))
            group, size = [], 0
        group.append(packed)
        size += len(packed)
    if group:
        parts.append(_array(group))
    return parts


_HEADERS = msgpack.Packer()


def _array(packed: list[bytes]) -> bytes:
    """A msgpack array of the already packed ``packed`` values."""
    return _HEADERS.pack_array_header(len(packed)) + b"".join(packed)


def decode_elements(data: bytes):
    """Yield ``(channel, sequence_number, backlog, element)`` for every entry of a data batch (arrays come
    back as tuples, so records need no conversion)."""
    for gate, channel, seq, backlog, wire in msgpack.unpackb(data, raw=False, use_list=False):
        yield InputChannelInfo(gate, channel), seq, backlog, from_wire(wire)


def upstream_entry(info: ResultSubpartitionInfo, action) -> list:
    if isinstance(action, AddCredit):
        return [info.partition_idx, info.subpartition_idx, CREDIT, action.credit]
    if isinstance(action, ResumeConsumptionUpstream):
        return [info.partition_idx, info.subpartition_idx, RESUME, 0]
    if isinstance(action, AnnounceBufferSize):
        return [info.partition_idx, info.subpartition_idx, BUFFER_SIZE, action.buffer_size]
    if isinstance(action, AcknowledgeAllRecordsProcessed):
        return [info.partition_idx, info.subpartition_idx, ALL_RECORDS_PROCESSED, 0]
    raise TypeError(f"not an upstream message: {action!r}")


def merge_credits(entries: list) -> list:
    """Upstream entries with every subpartition's credits summed into its first credit entry (Flink announces the
    credit that accumulated before it could write as one ``AddCredit``); other entries keep their order."""
    merged: list = []
    first_credit: dict = {}
    for entry in entries:
        if entry[2] == CREDIT:
            at = first_credit.get((entry[0], entry[1]))
            if at is not None:
                merged[at] = [entry[0], entry[1], CREDIT, merged[at][3] + entry[3]]
                continue
            first_credit[(entry[0], entry[1])] = len(merged)
        merged.append(entry)
    return merged


def decode_upstream(data: bytes):
    """Yield ``(subpartition, kind, value)`` for every entry of an upstream batch (value: the credit, the buffer
    size, or 0)."""
    for partition, subpartition, kind, value in unpack(data):
        yield ResultSubpartitionInfo(partition, subpartition), kind, value


# -- control -----------------------------------------------------------------------------------------


def attempt_to_wire(attempt: ExecutionAttemptID) -> list:
    return [attempt.vertex_id, attempt.subtask_index, attempt.attempt_number]


def attempt_from_wire(v) -> ExecutionAttemptID:
    return ExecutionAttemptID(v[0], int(v[1]), int(v[2]))


def _mappings_to_wire(m: RescaleMappings) -> list:
    return [m.is_identity, m.number_of_sources, m.number_of_targets, [list(t) for t in m.mappings]]


def _mappings_from_wire(v) -> RescaleMappings:
    identity, sources, targets, mappings = v
    return RescaleMappings(sources, mappings, targets, identity=identity)


def _descriptor_to_wire(d: InflightDataRescalingDescriptor):
    if d.is_no_rescale:
        return None
    return [
        [
            list(g.old_subtask_indexes),
            _mappings_to_wire(g.rescale_mappings),
            sorted(g.ambiguous_subtask_indexes),
            g.mapping_type.value,
        ]
        for g in d.gate_or_partition_descriptors
    ]


def _descriptor_from_wire(v) -> InflightDataRescalingDescriptor:
    if v is None:
        return NO_RESCALE
    return InflightDataRescalingDescriptor(
        tuple(
            InflightDataGateOrPartitionRescalingDescriptor(
                tuple(old), _mappings_from_wire(m), frozenset(amb), MappingType(t)
            )
            for old, m, amb, t in v
        )
    )


def encode_snapshot(snapshot: TaskStateSnapshot | None, subtask_index: int, checkpoint_id: int = 0) -> bytes | None:
    if snapshot is None:
        return None
    metadata = CheckpointMetadata(
        checkpoint_id,
        tuple(
            OperatorState(op, subtask_index + 1, max(128, subtask_index + 1), {subtask_index: state})
            for op, state in snapshot.subtask_states_by_operator.items()
        ),
    )
    rescaling = {
        op: [
            _descriptor_to_wire(s.input_rescaling_descriptor),
            _descriptor_to_wire(s.output_rescaling_descriptor),
            list(s.end_of_channel_state_gates),
            list(s.end_of_channel_state_partitions),
        ]
        for op, s in snapshot.subtask_states_by_operator.items()
        if not (
            s.input_rescaling_descriptor.is_no_rescale
            and s.output_rescaling_descriptor.is_no_rescale
            and not s.end_of_channel_state_gates
            and not s.end_of_channel_state_partitions
        )
    }
    return pack(
        [
            snapshot.is_task_finished,
            snapshot.is_task_deployed_as_finished,
            metadata_serializer.serialize(metadata),
            rescaling,
        ]
    )


def decode_snapshot(data: bytes | None, subtask_index: int) -> TaskStateSnapshot | None:
    if data is None:
        return None
    finished, deployed_finished, metadata_bytes, *rest = unpack(data)
    rescaling = rest[0] if rest else {}
    metadata = metadata_serializer.deserialize(metadata_bytes, "<task state snapshot>")
    states = {}
    for s in metadata.operator_states:
        state = s.subtask_states[subtask_index]
        if s.operator_id in rescaling:
            in_desc, out_desc, gates, partitions = rescaling[s.operator_id]
            state = dataclasses.replace(
                state,
                input_rescaling_descriptor=_descriptor_from_wire(in_desc),
                output_rescaling_descriptor=_descriptor_from_wire(out_desc),
                end_of_channel_state_gates=tuple(gates),
                end_of_channel_state_partitions=tuple(partitions),
            )
        states[s.operator_id] = state
    return TaskStateSnapshot(states, is_task_finished=finished, is_task_deployed_as_finished=deployed_finished)


def encode_metrics(metrics: TaskCheckpointMetrics) -> bytes:
    return pack(asdict(metrics))


def decode_metrics(data: bytes) -> TaskCheckpointMetrics:
    return TaskCheckpointMetrics(**unpack(data))


def incomplete_stats_to_wire(report: ReportIncompleteSnapshotStats) -> list:
    """A closed asynchronous part's report: ``[checkpoint id, metrics (msgpack), state size, checkpointed size]``."""
    return [report.checkpoint_id, encode_metrics(report.metrics), report.state_size, report.checkpointed_size]


def incomplete_stats_from_wire(v) -> ReportIncompleteSnapshotStats:
    checkpoint_id, metrics, state_size, checkpointed_size = v
    return ReportIncompleteSnapshotStats(checkpoint_id, decode_metrics(metrics), state_size, checkpointed_size)


TRIGGER, COMPLETE, ABORTED = 0, 1, 2  # kinds of messages from the JobMaster to a task


def task_message_to_wire(message: TaskMessage) -> bytes:
    if type(message) is TriggerCheckpoint:
        return pack([TRIGGER, message.checkpoint_id, message.timestamp, options_to_wire(message.options)])
    if type(message) is NotifyCheckpointComplete:
        return pack([COMPLETE, message.checkpoint_id])
    if type(message) is NotifyCheckpointAborted:
        return pack([ABORTED, message.checkpoint_id, message.latest_completed_checkpoint_id])
    raise TypeError(f"not a message for a task: {message!r}")


def task_message_from_wire(data: bytes) -> TaskMessage:
    kind, checkpoint_id, *rest = unpack(data)
    if kind == TRIGGER:
        return TriggerCheckpoint(checkpoint_id, rest[0], options_from_wire(rest[1]))
    if kind == COMPLETE:
        return NotifyCheckpointComplete(checkpoint_id)
    return NotifyCheckpointAborted(checkpoint_id, rest[0])


def reason_from_wire(name: str) -> CheckpointFailureReason:
    return CheckpointFailureReason[name]
