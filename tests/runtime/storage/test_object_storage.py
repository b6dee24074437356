"""Checkpoint storage on a real S3-compatible server (``tests.s3_server``): the same layout, atomic ``_metadata``
commit, checksums, completed-checkpoint list, savepoints, pointers and retention as the filesystem storage, and
the choice of storage by URI, and the damage faults an object store can take."""

from __future__ import annotations

import random

import pytest

from barriersim.runtime.storage.atomic_file import WriteFault
from barriersim.runtime.storage.damage import (
    CheckpointDamage,
    DamageNotApplicable,
    DamageTarget,
    corrupt_checkpoint,
    damage_checkpoint,
)
from barriersim.runtime.storage.errors import (
    CheckpointAlreadyExistsError,
    CheckpointNotFoundError,
    CheckpointStorageError,
    CheckpointStorageWriteError,
    CorruptMetadataError,
    CorruptStateFileError,
    InvalidCheckpointPointerError,
)
from barriersim.runtime.storage.fs_storage import FileSystemCheckpointStorage
from barriersim.runtime.storage.object_storage import ObjectStoreCheckpointStorage, checkpoint_storage_for
from barriersim.runtime.storage.retention import RetentionDecision
from tests.runtime.storage.test_state_files_and_completed_list import _state

pytestmark = pytest.mark.timeout(120)


def _storage(uri: str, threshold: int = 1024) -> ObjectStoreCheckpointStorage:
    storage = checkpoint_storage_for(
        uri,
        "job-a",
        rng=random.Random(1),
        memory_threshold=threshold,
        default_savepoint_directory=uri.split("?")[0].rsplit("/", 1)[0] + "/savepoints",
    )
    assert isinstance(storage, ObjectStoreCheckpointStorage)
    storage.initialize_base_locations()
    return storage


def _objects(storage: ObjectStoreCheckpointStorage, directory: str) -> list[str]:
    from pyarrow.fs import FileSelector, FileType

    infos = storage.filesystem.get_file_info(FileSelector(directory, recursive=True, allow_not_found=True))
    return sorted(i.path[len(directory) + 1 :] for i in infos if i.type is FileType.File)


def test_checkpoints_state_files_and_the_completed_list_round_trip_through_the_object_store(s3_server):
    storage = _storage(s3_server.bucket_uri())
    for checkpoint_id in (1, 2, 3):
        location = storage.persist_checkpoint(_state(checkpoint_id, 4096))
        assert location.external_pointer == f"s3://{storage.checkpoints_directory}/chk-{checkpoint_id}"
        assert location.state_files, "state above the memory threshold goes to objects of its own"
    storage.update_completed_checkpoints([2, 3])
    objects = _objects(storage, storage.checkpoints_directory)
    assert "chk-3/_metadata" in objects and "_completed_checkpoints" in objects
    assert sum(o.startswith("chk-3/") for o in objects) == 1 + len(location.state_files)

    # a new JobManager on the same URI recovers from the list, and every path checks the files
    recovered = ObjectStoreCheckpointStorage(storage.filesystem, storage.base_path, "job-a")
    assert [p.checkpoint_id for p in recovered.completed_checkpoint_pointers()] == [2, 3]
    latest = recovered.load_latest_checkpoint()
    assert latest.location.checkpoint_id == 3 and latest.metadata == _state(3, 4096)
    assert recovered.load_checkpoint(location.external_pointer).metadata == _state(3, 4096)
    assert recovered.load_checkpoint(location.metadata_pointer).location.checkpoint_id == 3
    assert [loc.checkpoint_id for loc in recovered.list_retained_checkpoints()] == [3, 2, 1]
    recovered.check_state_files(3)


def test_the_metadata_is_committed_last_and_once_and_a_failed_upload_leaves_no_checkpoint(s3_server):
    storage = _storage(s3_server.bucket_uri())
    storage.persist_checkpoint(_state(1, 10))
    with pytest.raises(CheckpointAlreadyExistsError, match="chk-1/_metadata"):
        storage.persist_checkpoint(_state(1, 10))
    for fault in WriteFault:
        storage.fail_next_write(fault)
        with pytest.raises(CheckpointStorageWriteError, match="chk-2/_metadata"):
            storage.persist_checkpoint(_state(2, 10))
        assert [loc.checkpoint_id for loc in storage.list_retained_checkpoints()] == [1]
    with pytest.raises(CheckpointNotFoundError, match="chk-2"):
        storage.load_checkpoint(f"s3://{storage.checkpoints_directory}/chk-2")
    storage.persist_checkpoint(_state(2, 10))
    assert storage.load_latest_checkpoint().location.checkpoint_id == 2


def test_damaged_objects_are_typed_errors_naming_them(s3_server):
    storage = _storage(s3_server.bucket_uri())
    location = storage.persist_checkpoint(_state(1, 4096))
    state_file = f"{storage.checkpoint_directory(1)}/{location.state_files[0].file}"
    storage.objects.put(state_file, b"junk")
    with pytest.raises(CorruptStateFileError, match=location.state_files[0].file):
        storage.load_checkpoint(location.external_pointer)
    corrupt_checkpoint(storage, 1, lambda data: data[:-3])
    with pytest.raises(CorruptMetadataError, match="chk-1/_metadata"):
        storage.load_checkpoint(location.external_pointer)
    with pytest.raises(InvalidCheckpointPointerError, match="gs://"):
        storage.resolve_checkpoint("gs://elsewhere/chk-1")


def test_savepoints_go_to_their_own_directory_and_retention_discards_as_flink_does(s3_server):
    storage = _storage(s3_server.bucket_uri())
    for checkpoint_id in (1, 2):
        storage.persist_checkpoint(_state(checkpoint_id, 4096))
    savepoint = storage.persist_checkpoint(_state(3, 4096), is_savepoint=True)
    assert "/savepoints/savepoint-job-a-" in savepoint.external_pointer
    assert storage.resolve_checkpoint(savepoint.external_pointer).is_savepoint
    assert storage.load_checkpoint(savepoint.external_pointer).metadata == _state(3, 4096)

    assert storage.discard_checkpoint(1)
    assert not any(o.startswith("chk-1/") for o in _objects(storage, storage.checkpoints_directory))
    decisions = storage.apply_retention_policy("RETAIN_ON_CANCELLATION", "CANCELED")
    assert decisions == {2: RetentionDecision.RETAINED}
    decisions = storage.apply_retention_policy("NEVER_RETAIN_AFTER_TERMINATION", "FINISHED")
    assert decisions == {2: RetentionDecision.DISCARDED}
    assert storage.list_retained_checkpoints() == ()
    assert storage.load_checkpoint(savepoint.external_pointer).location.is_savepoint, "savepoints stay"


def test_the_storage_is_chosen_by_uri(tmp_path):
    assert isinstance(checkpoint_storage_for(tmp_path, "j"), FileSystemCheckpointStorage)
    storage = checkpoint_storage_for(f"file://{tmp_path}", "j")
    assert isinstance(storage, FileSystemCheckpointStorage) and storage.checkpoint_base_directory == tmp_path
    with pytest.raises(InvalidCheckpointPointerError, match="unknown scheme 'hdfs'"):
        checkpoint_storage_for("hdfs://namenode/checkpoints", "j")
    with pytest.raises(InvalidCheckpointPointerError, match="s3://"):
        checkpoint_storage_for("s3:///no-bucket", "j")


@pytest.mark.parametrize(
    "damage",
    [
        d
        for d in CheckpointDamage
        if d not in (CheckpointDamage.UNREADABLE, CheckpointDamage.MALFORMED_STATE, CheckpointDamage.ROLL_BACK)
    ],
)
@pytest.mark.parametrize("target", [DamageTarget.METADATA, DamageTarget.STATE_FILE])
def test_damage_faults_strike_the_objects_and_every_read_names_the_damaged_one(s3_server, damage, target):
    storage = _storage(s3_server.bucket_uri())
    for checkpoint_id in (1, 2):
        storage.persist_checkpoint(_state(checkpoint_id, 4096))
    if damage is CheckpointDamage.FOREIGN_METADATA and target is DamageTarget.STATE_FILE:
        with pytest.raises(DamageNotApplicable):
            damage_checkpoint(storage, 2, damage, target)
        return
    what = damage_checkpoint(storage, 2, damage, target)
    assert "chk-2/" in what
    with pytest.raises(CheckpointStorageError, match=r"chk-2\b"):
        storage.load_checkpoint(f"s3://{storage.checkpoint_directory(2)}")
    assert storage.load_checkpoint(f"s3://{storage.checkpoint_directory(1)}").metadata == _state(1, 4096)


def test_damage_an_object_store_cannot_take_is_not_applicable(s3_server):
    storage = _storage(s3_server.bucket_uri())
    storage.persist_checkpoint(_state(1, 4096))
    for damage, target in (
        (CheckpointDamage.UNREADABLE, DamageTarget.METADATA),
        (CheckpointDamage.DELETE, DamageTarget.DIRECTORY),
    ):
        with pytest.raises(DamageNotApplicable, match="object store"):
            damage_checkpoint(storage, 1, damage, target)


def test_savepoints_go_beside_the_checkpoints_on_any_storage_else_into_the_run_directory(tmp_path):
    from barriersim.runtime.storage.object_storage import savepoint_directory_for

    run = tmp_path / "run"
    assert savepoint_directory_for(None, run) == str(run / "savepoints")
    store = tmp_path / "store" / "run"
    assert savepoint_directory_for(str(store), run) == str(store / "savepoints")
    assert savepoint_directory_for(f"file://{tmp_path}/store/run", run) == f"{tmp_path}/store/run/savepoints"
    assert (
        savepoint_directory_for("s3://bucket/runs/run?endpoint_override=localhost:9000", run)
        == "bucket/runs/run/savepoints"
    )
