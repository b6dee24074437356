"""The ``_metadata`` format: ports of Flink's MetadataV3SerializerTest, CheckpointMetadataTest and
CheckpointsTest, plus Hypothesis properties (round trip; any truncation or bit flip is detected)."""

from __future__ import annotations

import random
import struct

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from metadata_testkit import checkpoint_metadata, random_master_states, random_operator_states

from barriersim.runtime.state.snapshot import (
    CheckpointMetadata,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorState,
    OperatorSubtaskState,
)
from barriersim.runtime.storage import metadata_serializer as ms
from barriersim.runtime.storage.errors import CorruptMetadataError, MetadataEncodingError
from barriersim.runtime.storage.fs_storage import FileSystemCheckpointStorage

_RUNS = 30  # Flink loops 100 times; our states are bigger per run, 30 keeps the suite fast


def _checkpoint_id(rnd: random.Random) -> int:
    return rnd.getrandbits(64) & 0x7FFFFFFFFFFFFFFF


def _round_trip(metadata: CheckpointMetadata, tmp_path=None) -> CheckpointMetadata:
    """Flink's ``testCheckpointSerialization``; with ``tmp_path`` (the savepoint variants) the bytes go
    through a real savepoint directory of the filesystem storage."""
    if tmp_path is None:
        return ms.deserialize(ms.serialize(metadata))
    storage = FileSystemCheckpointStorage(
        tmp_path / "checkpoints", "job-a", default_savepoint_directory=tmp_path / "sp"
    )
    location = storage.persist_checkpoint(metadata, is_savepoint=True)
    return storage.load_checkpoint_metadata(location.external_pointer)


def _assert_round_trip(metadata: CheckpointMetadata, tmp_path=None) -> None:
    back = _round_trip(metadata, tmp_path)
    assert back.checkpoint_id == metadata.checkpoint_id
    assert back.operator_states == metadata.operator_states
    assert [s.fully_finished for s in back.operator_states] == [s.fully_finished for s in metadata.operator_states]
    assert back.master_states == metadata.master_states


def test_checkpoint_with_no_state():
    """Port of Flink MetadataV3SerializerTest.testCheckpointWithNoState."""
    rnd = random.Random(1)
    for _ in range(_RUNS):
        _assert_round_trip(CheckpointMetadata(_checkpoint_id(rnd), (), ()))


def test_checkpoint_with_only_master_state():
    """Port of Flink MetadataV3SerializerTest.testCheckpointWithOnlyMasterState."""
    rnd = random.Random(2)
    for _ in range(_RUNS):
        masters = random_master_states(rnd, rnd.randrange(5) + 1)
        _assert_round_trip(CheckpointMetadata(_checkpoint_id(rnd), (), masters))


def _only_task_state(rnd: random.Random, tmp_path, runs: int) -> None:
    for _ in range(runs):
        states = random_operator_states(rnd, rnd.randrange(20) + 1, 0, 0, rnd.randrange(20) + 1)
        _assert_round_trip(CheckpointMetadata(_checkpoint_id(rnd), states, ()), tmp_path)


def test_checkpoint_with_only_task_state_for_checkpoint():
    """Port of Flink MetadataV3SerializerTest.testCheckpointWithOnlyTaskStateForCheckpoint."""
    _only_task_state(random.Random(3), None, 10)


def test_checkpoint_with_only_task_state_for_savepoint(tmp_path):
    """Port of Flink MetadataV3SerializerTest.testCheckpointWithOnlyTaskStateForSavepoint.

    Adapted: the "savepoint" variant writes through a real savepoint directory of the filesystem storage and
    reads it back by pointer (Flink resolves relative handles against the savepoint's base path)."""
    _only_task_state(random.Random(4), tmp_path, 3)


def _master_and_task_state(rnd: random.Random, tmp_path, runs: int) -> None:
    for _ in range(runs):
        states = random_operator_states(rnd, rnd.randrange(20) + 1, 0, 0, rnd.randrange(20) + 1)
        masters = random_master_states(rnd, rnd.randrange(5) + 1)
        _assert_round_trip(CheckpointMetadata(_checkpoint_id(rnd), states, masters), tmp_path)


def test_checkpoint_with_master_and_task_state_for_checkpoint():
    """Port of Flink MetadataV3SerializerTest.testCheckpointWithMasterAndTaskStateForCheckpoint."""
    _master_and_task_state(random.Random(5), None, 10)


def test_checkpoint_with_master_and_task_state_for_savepoint(tmp_path):
    """Port of Flink MetadataV3SerializerTest.testCheckpointWithMasterAndTaskStateForSavepoint.

    Adapted: written to and read back from a real savepoint directory (see the task-state variant)."""
    _master_and_task_state(random.Random(6), tmp_path, 3)


def _finished_tasks(rnd: random.Random, tmp_path) -> None:
    states = random_operator_states(
        rnd, rnd.randrange(20) + 1, rnd.randrange(10) + 1, rnd.randrange(10) + 1, rnd.randrange(20) + 1
    )
    assert any(s.fully_finished for s in states) and not all(s.fully_finished for s in states)
    masters = random_master_states(rnd, rnd.randrange(5) + 1)
    _assert_round_trip(CheckpointMetadata(_checkpoint_id(rnd), states, masters), tmp_path)


def test_checkpoint_with_finished_tasks_for_checkpoint():
    """Port of Flink MetadataV3SerializerTest.testCheckpointWithFinishedTasksForCheckpoint."""
    _finished_tasks(random.Random(7), None)


def test_checkpoint_with_finished_tasks_for_savepoint(tmp_path):
    """Port of Flink MetadataV3SerializerTest.testCheckpointWithFinishedTasksForSavepoint.

    Adapted: written to and read back from a real savepoint directory."""
    _finished_tasks(random.Random(8), tmp_path)


def test_serialize_key_groups_state_handle():
    """Port of Flink MetadataV3SerializerTest.testSerializeKeyGroupsStateHandle.

    Adapted: our keyed state handles carry their bytes inline (no stream handle), so the check is that a
    handle of key groups 0..123 comes back as a ``KeyGroupsStateHandle`` with the same range and bytes."""
    handle = KeyGroupsStateHandle(KeyGroupRange(0, 123), {0: bytes([1, 2, 3, 4]), 123: b"\x00"})
    metadata = CheckpointMetadata(
        1, (OperatorState("op", 1, 128, {0: OperatorSubtaskState(managed_keyed_state=(handle,))}),)
    )
    back = ms.deserialize(ms.serialize(metadata)).operator_states[0].subtask_states[0].managed_keyed_state[0]
    assert isinstance(back, KeyGroupsStateHandle)
    assert back.key_group_range == KeyGroupRange(0, 123)
    assert back.key_groups == {0: bytes([1, 2, 3, 4]), 123: b"\x00"}


def _random_channel_handle_fields(rnd: random.Random):
    """Flink's ``generateRandomChannelHandleFields``: any ints for subtask and info, 10..19 "offsets"
    (our buffers, with random sequence numbers)."""
    from barriersim.runtime.events import Buffer

    def any_int() -> int:
        return rnd.randrange(-(2**31), 2**31)

    buffers = tuple(
        Buffer((str(rnd.getrandbits(63)),), rnd.randrange(1, 32768), rnd.getrandbits(63))
        for _ in range(rnd.randrange(10, 20))
    )
    return any_int(), any_int(), any_int(), buffers


def _round_trip_subtask(subtask: OperatorSubtaskState) -> OperatorSubtaskState:
    metadata = CheckpointMetadata(1, (OperatorState("op", 1, 128, {0: subtask}),))
    return ms.deserialize(ms.serialize(metadata)).operator_states[0].subtask_states[0]


def test_serialize_input_handle():
    """Port of Flink ChannelStateHandleSerializerV1Test.testSerializeInputHandle.

    Adapted: channel state handles carry their buffers inline and are serialized as part of the metadata."""
    from barriersim.runtime.events import InputChannelInfo
    from barriersim.runtime.state.snapshot import InputChannelStateHandle

    subtask_index, idx1, idx2, buffers = _random_channel_handle_fields(random.Random(12))
    handle = InputChannelStateHandle(subtask_index, InputChannelInfo(idx1, idx2), buffers)
    assert _round_trip_subtask(OperatorSubtaskState(input_channel_state=(handle,))).input_channel_state == (handle,)


def test_serialize_output_handle():
    """Port of Flink ChannelStateHandleSerializerV1Test.testSerializeOutputHandle.

    Adapted as the input-handle variant."""
    from barriersim.runtime.events import ResultSubpartitionInfo
    from barriersim.runtime.state.snapshot import ResultSubpartitionStateHandle

    subtask_index, idx1, idx2, buffers = _random_channel_handle_fields(random.Random(13))
    handle = ResultSubpartitionStateHandle(subtask_index, ResultSubpartitionInfo(idx1, idx2), buffers)
    back = _round_trip_subtask(OperatorSubtaskState(result_subpartition_state=(handle,))).result_subpartition_state
    assert back == (handle,) and [b.sequence_number for b in back[0].buffers] == [b.sequence_number for b in buffers]


def test_construct_and_dispose():
    """Port of Flink CheckpointMetadataTest.testConstructAndDispose.

    Adapted: ``CheckpointMetadata`` is an immutable value without ``dispose`` (discarding is the storage's
    job), so only the construction half is ported: the accessors return what was given, non-empty."""
    rnd = random.Random(9)
    checkpoint_id = rnd.randrange(1, 2**31)
    task_states = random_operator_states(rnd, 4, 0, 0, 16)
    master_states = random_master_states(rnd, 7)
    checkpoint = CheckpointMetadata(checkpoint_id, task_states, master_states)
    assert checkpoint.checkpoint_id == checkpoint_id
    assert checkpoint.operator_states == task_states
    assert checkpoint.master_states == master_states
    assert checkpoint.operator_states and checkpoint.master_states


def test_version3_compatibility():
    """Port of Flink CheckpointsTest.testVersion3Compatibility.

    Adapted: our format has one version (1); the test checks that the reader picks the deserializer from
    the version in the header and that an empty checkpoint round-trips, and that another version is refused."""
    metadata = CheckpointMetadata(1, (), ())
    data = ms.serialize(metadata)
    magic, version, _ = struct.unpack_from(">IIQ", data)
    assert magic == ms.HEADER_MAGIC_NUMBER == 0x4960672D
    assert version == ms.METADATA_FORMAT_VERSION
    back = ms.deserialize(data)
    assert (back.checkpoint_id, back.operator_states, back.master_states) == (1, (), ())
    future = data[:4] + struct.pack(">I", 99) + data[8:]
    with pytest.raises(CorruptMetadataError, match="unsupported metadata format version 99"):
        ms.deserialize(future, "x/_metadata")


# -- our own checks -----------------------------------------------------------------------------------


def test_errors_name_the_file_and_the_problem():
    data = ms.serialize(CheckpointMetadata(3, (), ()))
    with pytest.raises(CorruptMetadataError) as e:
        ms.deserialize(data[:-2], "/ck/job/chk-3/_metadata")
    assert str(e.value).startswith("/ck/job/chk-3/_metadata: truncated")
    assert e.value.source == "/ck/job/chk-3/_metadata"
    flipped = bytearray(data)
    flipped[-1] ^= 0x01
    with pytest.raises(CorruptMetadataError, match=r"^/ck/job/chk-3/_metadata: checksum mismatch"):
        ms.deserialize(bytes(flipped), "/ck/job/chk-3/_metadata")
    with pytest.raises(CorruptMetadataError, match="unexpected magic number"):
        ms.deserialize(b"PK\x03\x04" + data[4:], "f")
    with pytest.raises(CorruptMetadataError, match="trailing bytes"):
        ms.deserialize(data + b"\x00", "f")
    with pytest.raises(CorruptMetadataError, match="shorter than the 20-byte header"):
        ms.deserialize(b"", "f")


def test_well_checksummed_but_malformed_payload_is_reported():
    payload = msgpack.packb({"checkpoint_id": "seven", "operator_states": [], "master_states": []})
    head = struct.pack(">IIQ", ms.HEADER_MAGIC_NUMBER, ms.METADATA_FORMAT_VERSION, len(payload))
    import zlib

    data = head + struct.pack(">I", zlib.crc32(payload, zlib.crc32(head))) + payload
    with pytest.raises(CorruptMetadataError, match="malformed payload: metadata.checkpoint_id is str"):
        ms.deserialize(data, "f")


def test_unencodable_record_is_a_typed_error():
    from barriersim.runtime.events import Buffer, InputChannelInfo
    from barriersim.runtime.state.snapshot import InputChannelStateHandle

    handle = InputChannelStateHandle(0, InputChannelInfo(0, 0), (Buffer((object(),), 1, 0),))
    metadata = CheckpointMetadata(
        5, (OperatorState("op", 1, 128, {0: OperatorSubtaskState(input_channel_state=(handle,))}),)
    )
    with pytest.raises(MetadataEncodingError, match="checkpoint 5"):
        ms.serialize(metadata)


def test_watermarks_in_persisted_buffers_round_trip():
    """Unaligned checkpoints of windowed jobs persist buffers holding watermarks beside records (found when the
    simulator began writing ``_metadata`` while finalizing: every such checkpoint failed to encode)."""
    from barriersim.runtime.events import MAX_WATERMARK, Buffer, InputChannelInfo, Watermark
    from barriersim.runtime.state.snapshot import InputChannelStateHandle

    records = ((1, 7, 10, 100), Watermark(99), (2, 7, 20, 101), MAX_WATERMARK, Watermark(-5))
    handle = InputChannelStateHandle(0, InputChannelInfo(0, 1), (Buffer(records, 128, 3),))
    back = _round_trip_subtask(OperatorSubtaskState(input_channel_state=(handle,))).input_channel_state
    assert back == (handle,) and back[0].buffers[0].records[1] == Watermark(99)


def test_an_unknown_extension_value_is_malformed():
    payload = msgpack.packb({"checkpoint_id": 1, "operator_states": [msgpack.ExtType(9, b"x")], "master_states": []})
    head = struct.pack(">IIQ", ms.HEADER_MAGIC_NUMBER, ms.METADATA_FORMAT_VERSION, len(payload))
    import zlib

    data = head + struct.pack(">I", zlib.crc32(payload, zlib.crc32(head))) + payload
    with pytest.raises(CorruptMetadataError, match="unknown msgpack extension type 9"):
        ms.deserialize(data, "f")


def test_never_uses_pickle():
    import barriersim.runtime.storage.metadata_serializer as mod

    source = open(mod.__file__).read()
    assert "import pickle" not in source and "pickle." not in source


# -- Hypothesis properties ------------------------------------------------------------------------------

_SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(checkpoint_metadata())
def test_property_metadata_round_trips(metadata):
    assert ms.deserialize(ms.serialize(metadata)) == metadata


@_SETTINGS
@given(checkpoint_metadata(), st.data())
def test_property_any_truncation_is_detected(metadata, data):
    encoded = ms.serialize(metadata)
    cut = data.draw(st.integers(0, len(encoded) - 1), label="kept bytes")
    with pytest.raises(CorruptMetadataError) as e:
        ms.deserialize(encoded[:cut], "chk/_metadata")
    assert str(e.value).startswith("chk/_metadata: ")


@_SETTINGS
@given(checkpoint_metadata(), st.data())
def test_property_any_single_bit_flip_is_detected(metadata, data):
    encoded = bytearray(ms.serialize(metadata))
    bit = data.draw(st.integers(0, len(encoded) * 8 - 1), label="flipped bit")
    encoded[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(CorruptMetadataError) as e:
        ms.deserialize(bytes(encoded), "chk/_metadata")
    assert str(e.value).startswith("chk/_metadata: ")


def test_every_truncation_and_bit_flip_of_one_file_is_detected_exhaustively():
    rnd = random.Random(11)
    metadata = CheckpointMetadata(42, random_operator_states(rnd, 2, 1, 1, 3), random_master_states(rnd, 2))
    encoded = ms.serialize(metadata)
    for cut in range(len(encoded)):
        with pytest.raises(CorruptMetadataError):
            ms.deserialize(encoded[:cut])
    for bit in range(len(encoded) * 8):
        flipped = bytearray(encoded)
        flipped[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(CorruptMetadataError):
            ms.deserialize(bytes(flipped))
