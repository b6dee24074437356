"""Filesystem and in-memory checkpoint storage: ports of Flink's AbstractFileCheckpointStorageAccessTestBase
and FsCheckpointStorageAccessTest, plus crash, corruption, listing and retention checks on real files."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from metadata_testkit import random_master_states, random_operator_states

from barriersim.runtime.state.snapshot import CheckpointMetadata, MasterState
from barriersim.runtime.storage import metadata_serializer as ms
from barriersim.runtime.storage.atomic_file import AtomicFileWriter, WriteFault
from barriersim.runtime.storage.damage import corrupt_checkpoint
from barriersim.runtime.storage.errors import (
    CheckpointAlreadyExistsError,
    CheckpointNotFoundError,
    CheckpointStorageError,
    CheckpointStorageWriteError,
    CorruptMetadataError,
    InvalidCheckpointPointerError,
    NoSavepointLocationError,
    NoValidCheckpointError,
)
from barriersim.runtime.storage.fs_storage import FileSystemCheckpointStorage
from barriersim.runtime.storage.layout import METADATA_FILE_NAME
from barriersim.runtime.storage.memory_storage import JobManagerCheckpointStorage
from barriersim.runtime.storage.retention import RetentionDecision, discard_on_termination


def _metadata(checkpoint_id: int, seed: int = 0) -> CheckpointMetadata:
    rnd = random.Random(seed * 1000 + checkpoint_id)
    return CheckpointMetadata(checkpoint_id, random_operator_states(rnd, 2, 0, 0, 2), random_master_states(rnd, 1))


def _fs(tmp_path: Path, job_id: str = "8f1d2c3b4a5e", savepoint_dir: Path | None = None) -> FileSystemCheckpointStorage:
    storage = FileSystemCheckpointStorage(tmp_path / "checkpoints", job_id, default_savepoint_directory=savepoint_dir)
    storage.initialize_base_locations()
    return storage


# -- ports: AbstractFileCheckpointStorageAccessTestBase (run against FsCheckpointStorageAccess) ------------


def test_pointer_path_resolution(tmp_path):
    """Port of Flink AbstractFileCheckpointStorageAccessTestBase.testPointerPathResolution."""
    folder = tmp_path / "some-checkpoint"
    folder.mkdir()
    metadata_file = folder / METADATA_FILE_NAME
    data = ms.serialize(_metadata(7))
    metadata_file.write_bytes(data)
    base_pointer = str(folder.resolve())
    storage = _fs(tmp_path)
    for pointer in (str(metadata_file), str(folder), str(folder) + "/", "file://" + str(folder)):
        completed = storage.resolve_checkpoint(pointer)
        assert completed.external_pointer == base_pointer
        assert Path(completed.metadata_pointer).read_bytes() == data
        assert storage.load_checkpoint_metadata(pointer) == _metadata(7)


def test_failing_pointer_path_resolution(tmp_path):
    """Port of Flink AbstractFileCheckpointStorageAccessTestBase.testFailingPointerPathResolution."""
    storage = _fs(tmp_path)
    with pytest.raises(InvalidCheckpointPointerError):
        storage.resolve_checkpoint(None)
    with pytest.raises(InvalidCheckpointPointerError, match="empty checkpoint pointer"):
        storage.resolve_checkpoint("")
    with pytest.raises(CheckpointStorageError):
        storage.resolve_checkpoint("this-is_not/a#filepath.at.all")
    existing = tmp_path / "a-file"
    existing.write_bytes(b"")
    with pytest.raises(CheckpointNotFoundError, match="_not_existing"):
        storage.resolve_checkpoint(str(existing) + "_not_existing")


def test_persist_multiple_metadata_only_checkpoints(tmp_path):
    """Port of Flink AbstractFileCheckpointStorageAccessTestBase.testPersistMultipleMetadataOnlyCheckpoints."""
    storage1 = FileSystemCheckpointStorage(tmp_path, "job-one")
    storage1.initialize_base_locations()
    storage2 = FileSystemCheckpointStorage(tmp_path, "job-two")
    storage2.initialize_base_locations()
    data1 = CheckpointMetadata(177, (), (MasterState("m", 1, bytes([77, 66, 55, 99, 88])),))
    data2 = CheckpointMetadata(177, (), (MasterState("m", 1, bytes([1, 3, 2, 5, 4])),))
    result1 = storage1.persist_checkpoint(data1).external_pointer
    result2 = storage2.persist_checkpoint(data2).external_pointer
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job-one", "job-two"]  # one directory per storage
    assert any((tmp_path / "job-one").iterdir()) and any((tmp_path / "job-two").iterdir())
    assert (Path(result1) / METADATA_FILE_NAME).exists() and (Path(result2) / METADATA_FILE_NAME).exists()
    # both storages can resolve each other's contents
    for storage in (storage1, storage2):
        assert storage.load_checkpoint_metadata(result1) == data1
        assert storage.load_checkpoint_metadata(result2) == data2


def test_write_to_already_existing_checkpoint_fails(tmp_path):
    """Port of Flink AbstractFileCheckpointStorageAccessTestBase.writeToAlreadyExistingCheckpointFails."""
    storage = _fs(tmp_path)
    storage.persist_checkpoint(_metadata(177))
    with pytest.raises(CheckpointAlreadyExistsError, match="chk-177/_metadata"):
        storage.persist_checkpoint(_metadata(177, seed=1))
    assert storage.load_latest_checkpoint().metadata == _metadata(177)


def _check_savepoint(tmp_path, savepoint_dir, custom_dir, expected_parent):
    storage = _fs(tmp_path, savepoint_dir=savepoint_dir)
    metadata = CheckpointMetadata(52452, (), (MasterState("m", 1, bytes([77, 66, 55, 99, 88])),))
    completed = storage.persist_checkpoint(
        metadata, is_savepoint=True, target_location=None if custom_dir is None else str(custom_dir)
    )
    assert completed.is_savepoint
    assert Path(completed.external_pointer).parent == expected_parent.resolve()
    assert Path(completed.metadata_pointer).parent.parent == expected_parent.resolve()
    assert Path(completed.external_pointer).name.startswith("savepoint-8f1d2c-")
    assert storage.load_checkpoint_metadata(completed.external_pointer) == metadata
    assert storage.load_checkpoint(completed.external_pointer).location.checkpoint_id == 52452
    # a savepoint is not a retained checkpoint of the job
    assert storage.list_retained_checkpoints() == ()


def test_savepoint_path_configured_and_target(tmp_path):
    """Port of Flink AbstractFileCheckpointStorageAccessTestBase.testSavepointPathConfiguredAndTarget."""
    _check_savepoint(tmp_path, tmp_path / "savepoints", tmp_path / "custom", tmp_path / "custom")


def test_savepoint_path_configured_no_target(tmp_path):
    """Port of Flink AbstractFileCheckpointStorageAccessTestBase.testSavepointPathConfiguredNoTarget."""
    _check_savepoint(tmp_path, tmp_path / "savepoints", None, tmp_path / "savepoints")


def test_no_savepoint_path_configured_and_target(tmp_path):
    """Port of Flink AbstractFileCheckpointStorageAccessTestBase.testNoSavepointPathConfiguredAndTarget."""
    _check_savepoint(tmp_path, None, tmp_path / "custom", tmp_path / "custom")


def test_no_savepoint_path_configured_no_target(tmp_path):
    """Port of Flink AbstractFileCheckpointStorageAccessTestBase.testNoSavepointPathConfiguredNoTarget."""
    storage = _fs(tmp_path)
    with pytest.raises(NoSavepointLocationError, match="no default location configured"):
        storage.initialize_location_for_savepoint(1337, None)
    with pytest.raises(NoSavepointLocationError):
        storage.persist_checkpoint(_metadata(1337), is_savepoint=True)


# -- ports: FsCheckpointStorageAccessTest ------------------------------------------------------------------


def test_savepoints_in_one_directory_default_location(tmp_path):
    """Port of Flink FsCheckpointStorageAccessTest.testSavepointsInOneDirectoryDefaultLocation.

    Adapted: our savepoint location is one directory (metadata and any task-owned files go into it), so
    the check is that it is created directly under the default savepoint directory."""
    default = tmp_path / "default-savepoints"
    storage = FileSystemCheckpointStorage(tmp_path / "ck", "8f1d2c3b", default_savepoint_directory=default)
    location = storage.initialize_location_for_savepoint(52452, None)
    assert location.parent == default.resolve() and location.is_dir()


def test_savepoints_in_one_directory_custom_location(tmp_path):
    """Port of Flink FsCheckpointStorageAccessTest.testSavepointsInOneDirectoryCustomLocation.

    Adapted as the default-location variant, with a target directory and no default."""
    custom = tmp_path / "custom"
    storage = FileSystemCheckpointStorage(tmp_path / "ck", "8f1d2c3b")
    location = storage.initialize_location_for_savepoint(52452, str(custom))
    assert location.parent == custom.resolve() and location.is_dir()


def test_task_owned_state_stream(tmp_path):
    """Port of Flink FsCheckpointStorageAccessTest.testTaskOwnedStateStream.

    Adapted: task-owned state is written as one atomic file (no streams, no Java serialization)."""
    import msgpack

    state = ["Flopsy", "Mopsy", "Cotton Tail", "Peter"]
    storage = _fs(tmp_path)
    path = storage.write_task_owned_state("channel-state-1", msgpack.packb(state))
    assert path.parent.name == "taskowned"
    assert msgpack.unpackb(path.read_bytes()) == state


def test_storage_location_mkdirs(tmp_path):
    """Port of Flink FsCheckpointStorageAccessTest.testStorageLocationMkdirs."""
    storage = FileSystemCheckpointStorage(tmp_path / "a", "job")
    assert not storage.checkpoints_directory.exists()
    storage.initialize_base_locations()
    assert storage.checkpoints_directory.is_dir()
    assert storage.shared_state_directory.is_dir() and storage.task_owned_state_directory.is_dir()
    # resolving a location creates nothing
    other = FileSystemCheckpointStorage(tmp_path / "b", "job")
    assert not other.checkpoint_directory(177).exists()
    assert other.list_retained_checkpoints() == ()
    assert not other.checkpoints_directory.exists()


def test_directories_for_exclusive_and_shared_state(tmp_path):
    """Port of Flink FsCheckpointStorageAccessTest.testDirectoriesForExclusiveAndSharedState.

    Adapted: exclusive state is the checkpoint directory's ``_metadata``; the shared directory stays apart."""
    storage = _fs(tmp_path)
    assert storage.shared_state_directory != storage.checkpoint_directory(1)
    assert list(storage.shared_state_directory.iterdir()) == []
    storage.persist_checkpoint(_metadata(1))
    assert [p.name for p in storage.checkpoint_directory(1).iterdir()] == [METADATA_FILE_NAME]
    assert list(storage.shared_state_directory.iterdir()) == []


# -- crash mid-write, corruption, listing, discarding ---------------------------------------------------------


def test_crash_mid_write_leaves_no_complete_checkpoint_and_the_previous_one_is_loaded(tmp_path):
    storage = _fs(tmp_path)
    storage.persist_checkpoint(_metadata(1))
    storage.fail_next_write(WriteFault.CRASH_MID_WRITE)
    with pytest.raises(CheckpointStorageWriteError, match="injected crash after writing"):
        storage.persist_checkpoint(_metadata(2))
    chk2 = storage.checkpoint_directory(2)
    leftovers = list(chk2.iterdir())
    assert len(leftovers) == 1 and leftovers[0].name.endswith(".tmp")  # half a temp file, as after a crash
    assert 0 < leftovers[0].stat().st_size < len(ms.serialize(_metadata(2)))
    assert not (chk2 / METADATA_FILE_NAME).exists()
    assert [loc.checkpoint_id for loc in storage.list_retained_checkpoints()] == [1]
    with pytest.raises(CheckpointNotFoundError, match="Cannot find meta data file"):
        storage.resolve_checkpoint(str(chk2))
    # a new storage over the same directory (a restarted job manager) sees the same
    reopened = FileSystemCheckpointStorage(tmp_path / "checkpoints", storage.job_id)
    loaded = reopened.load_latest_checkpoint()
    assert loaded.metadata == _metadata(1) and loaded.skipped == ()
    # the next attempt at checkpoint 2 succeeds despite the leftover
    storage.persist_checkpoint(_metadata(2))
    assert reopened.load_latest_checkpoint().metadata == _metadata(2)


def test_crash_before_rename_and_refused_write_leave_nothing_visible(tmp_path):
    storage = _fs(tmp_path)
    storage.fail_next_write(WriteFault.CRASH_BEFORE_RENAME)
    storage.fail_next_write(WriteFault.FAIL_BEFORE_WRITE)
    with pytest.raises(CheckpointStorageWriteError, match="before renaming"):
        storage.persist_checkpoint(_metadata(1))
    with pytest.raises(CheckpointStorageWriteError, match="nothing was written"):
        storage.persist_checkpoint(_metadata(2))
    assert storage.load_latest_checkpoint() is None
    storage.persist_checkpoint(_metadata(3))
    assert storage.load_latest_checkpoint().metadata.checkpoint_id == 3


def test_corrupt_newest_checkpoint_is_reported_and_the_previous_one_loaded(tmp_path):
    storage = _fs(tmp_path)
    for i in (1, 2, 3):
        storage.persist_checkpoint(_metadata(i))
    metadata3 = storage.checkpoint_directory(3) / METADATA_FILE_NAME
    metadata3.write_bytes(metadata3.read_bytes()[:-5])  # truncated on disk
    flipped = bytearray((storage.checkpoint_directory(2) / METADATA_FILE_NAME).read_bytes())
    flipped[len(flipped) // 2] ^= 0x10
    (storage.checkpoint_directory(2) / METADATA_FILE_NAME).write_bytes(bytes(flipped))
    loaded = storage.load_latest_checkpoint()
    assert loaded.metadata == _metadata(1)
    assert [e.source for e in loaded.skipped] == [
        str(metadata3.resolve()),
        str((storage.checkpoint_directory(2) / METADATA_FILE_NAME).resolve()),
    ]
    assert "chk-3/_metadata: truncated" in str(loaded.skipped[0])
    assert "chk-2/_metadata: checksum mismatch" in str(loaded.skipped[1])
    with pytest.raises(CorruptMetadataError, match="chk-3/_metadata: truncated"):
        storage.load_checkpoint_metadata(str(storage.checkpoint_directory(3)))


def test_all_retained_checkpoints_corrupt_is_an_error_naming_each_file(tmp_path):
    storage = _fs(tmp_path)
    for i in (1, 2):
        storage.persist_checkpoint(_metadata(i))
        corrupt_checkpoint(storage, i, lambda b: b[:10])
    with pytest.raises(NoValidCheckpointError) as e:
        storage.load_latest_checkpoint()
    assert "chk-2/_metadata: truncated" in str(e.value) and "chk-1/_metadata: truncated" in str(e.value)
    assert len(e.value.errors) == 2


def test_list_retained_checkpoints_newest_first_and_discard(tmp_path):
    storage = _fs(tmp_path)
    for i in (3, 10, 2, 7):
        storage.persist_checkpoint(_metadata(i))
    storage.initialize_location_for_checkpoint(11)  # in progress: no _metadata yet
    assert [loc.checkpoint_id for loc in storage.list_retained_checkpoints()] == [10, 7, 3, 2]
    assert storage.discard_checkpoint(10) is True
    assert not storage.checkpoint_directory(10).exists()
    assert storage.discard_checkpoint(10) is False
    assert storage.discard_checkpoint(11) is True  # an incomplete checkpoint's directory goes too
    assert not storage.checkpoint_directory(11).exists()
    assert [loc.checkpoint_id for loc in storage.list_retained_checkpoints()] == [7, 3, 2]
    assert storage.load_latest_checkpoint().metadata == _metadata(7)


@pytest.mark.parametrize(
    ("policy", "status", "discarded"),
    [
        ("NEVER_RETAIN_AFTER_TERMINATION", "FINISHED", True),
        ("NEVER_RETAIN_AFTER_TERMINATION", "CANCELED", True),
        ("NEVER_RETAIN_AFTER_TERMINATION", "FAILED", True),
        ("RETAIN_ON_FAILURE", "FINISHED", True),
        ("RETAIN_ON_FAILURE", "CANCELED", True),
        ("RETAIN_ON_FAILURE", "FAILED", False),
        ("RETAIN_ON_CANCELLATION", "FINISHED", True),
        ("RETAIN_ON_CANCELLATION", "CANCELED", False),
        ("RETAIN_ON_CANCELLATION", "FAILED", False),
    ],
)
def test_retention_policy_applied_when_the_job_ends(tmp_path, policy, status, discarded):
    storage = _fs(tmp_path, savepoint_dir=tmp_path / "sp")
    for i in (1, 2):
        storage.persist_checkpoint(_metadata(i))
    savepoint = storage.persist_checkpoint(_metadata(3), is_savepoint=True)
    decisions = storage.apply_retention_policy(policy, status)
    expected = RetentionDecision.DISCARDED if discarded else RetentionDecision.RETAINED
    assert decisions == {2: expected, 1: expected}
    assert [loc.checkpoint_id for loc in storage.list_retained_checkpoints()] == ([] if discarded else [2, 1])
    assert storage.checkpoints_directory.exists() is not discarded
    # savepoints belong to the user: never discarded by the system
    assert storage.load_checkpoint_metadata(savepoint.external_pointer) == _metadata(3)


def test_retention_accepts_enums_by_value_and_rejects_non_terminal_status():
    import enum

    class Policy(enum.Enum):
        RETAIN_ON_FAILURE = "RETAIN_ON_FAILURE"

    class Status(enum.Enum):
        FAILED = "FAILED"
        RUNNING = "RUNNING"

    assert discard_on_termination(Policy.RETAIN_ON_FAILURE, Status.FAILED) is False
    with pytest.raises(ValueError, match="not terminal"):
        discard_on_termination(Policy.RETAIN_ON_FAILURE, Status.RUNNING)
    with pytest.raises(ValueError, match="unknown checkpoint retention policy"):
        discard_on_termination("KEEP_FOREVER", "FAILED")


def test_atomic_writer_never_exposes_a_partial_file(tmp_path):
    writer = AtomicFileWriter()
    target = tmp_path / "d" / "file"
    writer.write(target, b"old contents")
    writer.fail_next_write(WriteFault.CRASH_MID_WRITE)
    with pytest.raises(CheckpointStorageWriteError):
        writer.write(target, b"new contents that never fully arrive")
    assert target.read_bytes() == b"old contents"
    assert writer.armed_faults == ()
    with pytest.raises(FileExistsError):
        writer.write(target, b"x", exclusive=True)


def test_savepoint_names_come_from_the_injected_random(tmp_path):
    a = FileSystemCheckpointStorage(tmp_path / "a", "abcdef123", rng=random.Random(5))
    b = FileSystemCheckpointStorage(tmp_path / "b", "abcdef123", rng=random.Random(5))
    pa = a.initialize_location_for_savepoint(1, str(tmp_path / "spa"))
    pb = b.initialize_location_for_savepoint(1, str(tmp_path / "spb"))
    assert (
        pa.name == pb.name and pa.name.startswith("savepoint-abcdef-") and len(pa.name) == len("savepoint-abcdef-") + 12
    )
    # a name collision is retried with a fresh name
    c = FileSystemCheckpointStorage(tmp_path / "c", "abcdef123", rng=random.Random(5))
    pc = c.initialize_location_for_savepoint(1, str(tmp_path / "spa"))
    assert pc != pa and pc.parent == pa.parent


# -- the in-memory storage behaves the same way ---------------------------------------------------------------


def test_job_manager_storage_round_trip_listing_faults_and_retention():
    storage = JobManagerCheckpointStorage("job-m")
    for i in (1, 2, 3):
        storage.persist_checkpoint(_metadata(i))
    assert [loc.checkpoint_id for loc in storage.list_retained_checkpoints()] == [3, 2, 1]
    with pytest.raises(CheckpointAlreadyExistsError):
        storage.persist_checkpoint(_metadata(3))
    storage.fail_next_write(WriteFault.CRASH_MID_WRITE)
    with pytest.raises(CheckpointStorageWriteError, match="nothing was stored"):
        storage.persist_checkpoint(_metadata(4))
    corrupt_checkpoint(storage, 3, lambda b: b[:-1])
    loaded = storage.load_latest_checkpoint()
    assert loaded.metadata == _metadata(2)
    assert str(loaded.skipped[0]).startswith("jobmanager://job-m/chk-3/_metadata: truncated")
    pointer = storage.list_retained_checkpoints()[1].external_pointer
    assert storage.load_checkpoint_metadata(pointer + "/_metadata") == _metadata(2)
    savepoint = storage.persist_checkpoint(_metadata(9), is_savepoint=True)
    assert savepoint.external_pointer.startswith("jobmanager://savepoints/savepoint-job-m-")
    with pytest.raises(CheckpointNotFoundError):
        storage.resolve_checkpoint("jobmanager://job-m/chk-77")
    with pytest.raises(InvalidCheckpointPointerError):
        storage.resolve_checkpoint("")
    assert storage.apply_retention_policy("NEVER_RETAIN_AFTER_TERMINATION", "CANCELED") == {
        3: RetentionDecision.DISCARDED,
        2: RetentionDecision.DISCARDED,
        1: RetentionDecision.DISCARDED,
    }
    assert storage.load_latest_checkpoint() is None
    assert storage.load_checkpoint_metadata(savepoint.external_pointer) == _metadata(9)


def test_storage_modules_use_no_clock_threads_or_pickle():
    import barriersim.runtime.storage as pkg

    for name in os.listdir(os.path.dirname(pkg.__file__)):
        if name.endswith(".py"):
            source = open(os.path.join(os.path.dirname(pkg.__file__), name)).read()
            for banned in ("import time", "import threading", "import asyncio", "import pickle", "from time"):
                assert banned not in source, f"{name} has {banned!r}"


# -- ports: FsCheckpointMetadataOutputStreamTest (the atomic metadata writer) -----------------------------------


def test_file_existence(tmp_path):
    """Port of Flink FsCheckpointMetadataOutputStreamTest.testFileExistence.

    Adapted to the recoverable-writer flavour: the metadata file does not exist while its bytes are being
    written (here: all bytes in the temporary file, the "process" stops before the commit), and exists
    after a committed write."""
    path = tmp_path / "some-dir" / METADATA_FILE_NAME
    writer = AtomicFileWriter()
    writer.fail_next_write(WriteFault.CRASH_BEFORE_RENAME)
    with pytest.raises(CheckpointStorageWriteError):
        writer.write(path, b"\x42" * 100)
    assert not path.exists()
    assert [p.stat().st_size for p in path.parent.iterdir()] == [100]  # only the temporary file
    writer.write(path, b"\x42" * 100)
    assert path.read_bytes() == b"\x42" * 100


def test_cleanup_when_closed(tmp_path):
    """Port of Flink FsCheckpointMetadataOutputStreamTest.testCleanupWhenClosed.

    Adapted: a write that is abandoned before it is committed (a failure while writing) leaves no metadata
    file and no temporary file."""
    path = tmp_path / "some-dir" / METADATA_FILE_NAME
    writer = AtomicFileWriter()
    with pytest.raises(TypeError):
        writer.write(path, object())  # writing fails after the temporary file was created: no commit
    assert not path.exists()
    assert list(path.parent.iterdir()) == []


def test_cleanup_when_commit_failed(tmp_path, monkeypatch):
    """Port of Flink FsCheckpointMetadataOutputStreamTest.testCleanupWhenCommitFailed.

    Adapted: the commit is the rename; it fails with an OS error, which surfaces as a storage write error
    naming the file, and neither the metadata file nor the temporary file remains."""
    import barriersim.runtime.storage.atomic_file as atomic_file

    storage = _fs(tmp_path)

    def failing_replace(src, dst):
        raise OSError("rename failed")

    monkeypatch.setattr(atomic_file.os, "replace", failing_replace)
    with pytest.raises(CheckpointStorageWriteError, match=r"chk-5/_metadata: writing checkpoint 5 metadata failed"):
        storage.persist_checkpoint(_metadata(5))
    assert list(storage.checkpoint_directory(5).iterdir()) == []
    monkeypatch.undo()
    assert storage.load_latest_checkpoint() is None


# -- Hypothesis: whatever writes fail or crash, the newest committed checkpoint is what loads ------------------


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.none(), st.sampled_from(list(WriteFault))), min_size=1, max_size=6))
def test_property_newest_committed_checkpoint_survives_any_write_faults(faults):
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        storage = FileSystemCheckpointStorage(tmp, "job")
        committed = []
        for checkpoint_id, fault in enumerate(faults, start=1):
            if fault is not None:
                storage.fail_next_write(fault)
            try:
                storage.persist_checkpoint(
                    CheckpointMetadata(checkpoint_id, (), (MasterState("m", 1, bytes([checkpoint_id])),))
                )
            except CheckpointStorageWriteError:
                assert fault is not None
                continue
            assert fault is None
            committed.append(checkpoint_id)
        reopened = FileSystemCheckpointStorage(tmp, "job")
        assert [loc.checkpoint_id for loc in reopened.list_retained_checkpoints()] == committed[::-1]
        loaded = reopened.load_latest_checkpoint()
        if committed:
            assert loaded.metadata.checkpoint_id == committed[-1] and loaded.skipped == ()
        else:
            assert loaded is None
