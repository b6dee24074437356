"""State files above the memory threshold, the checks on every path that reads a checkpoint (checkpoint id, the
directory it was written to, the completed-checkpoint list's size and CRC32, each state file's handle), the
completed-checkpoint list itself, and typed errors where the operating system says no."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from barriersim.runtime.events import Buffer, InputChannelInfo, ResultSubpartitionInfo
from barriersim.runtime.state.snapshot import (
    CheckpointMetadata,
    InputChannelStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorState,
    OperatorStateHandle,
    OperatorSubtaskState,
    ResultSubpartitionStateHandle,
)
from barriersim.runtime.storage.damage import CheckpointDamage, DamageNotApplicable, DamageTarget, damage_checkpoint
from barriersim.runtime.storage.errors import (
    CheckpointDiscardError,
    CheckpointNotFoundError,
    CheckpointStorageIOError,
    CorruptMetadataError,
    CorruptPointerListError,
    CorruptStateFileError,
)
from barriersim.runtime.storage.fs_storage import FileSystemCheckpointStorage
from barriersim.runtime.storage.layout import COMPLETED_CHECKPOINTS_FILE_NAME, METADATA_FILE_NAME
from barriersim.runtime.storage.memory_storage import JobManagerCheckpointStorage


def _state(checkpoint_id: int, big: int) -> CheckpointMetadata:
    """One operator, two subtasks: keyed state of ``big`` bytes per key group, some operator state, and
    in-flight buffers of the same size on the input and output side."""
    rnd = random.Random(checkpoint_id)

    def blob() -> bytes:
        return bytes(rnd.randrange(256) for _ in range(big))

    subtasks = {}
    for i in range(2):
        buffers = (Buffer(tuple(range(big // 2)), big, 0),)
        subtasks[i] = OperatorSubtaskState(
            managed_operator_state=(OperatorStateHandle({"offsets": (blob()[:64],)}),),
            managed_keyed_state=(
                KeyGroupsStateHandle(KeyGroupRange(i * 64, i * 64 + 63), {i * 64: blob(), i * 64 + 1: blob()}),
            ),
            input_channel_state=(InputChannelStateHandle(i, InputChannelInfo(0, 0), buffers),),
            result_subpartition_state=(ResultSubpartitionStateHandle(i, ResultSubpartitionInfo(0, 0), buffers),),
        )
    return CheckpointMetadata(checkpoint_id, (OperatorState("sum", 2, 128, subtasks),))


def _fs(tmp_path: Path, threshold: int = 20 * 1024) -> FileSystemCheckpointStorage:
    storage = FileSystemCheckpointStorage(
        tmp_path / "checkpoints",
        "job-a",
        memory_threshold=threshold,
        default_savepoint_directory=tmp_path / "savepoints",
    )
    storage.initialize_base_locations()
    return storage


def _state_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.name != METADATA_FILE_NAME)


def test_state_at_or_above_the_memory_threshold_goes_to_files_of_its_own_in_the_checkpoint_directory(tmp_path):
    storage = _fs(tmp_path)
    small, large = _state(1, 100), _state(2, 12 * 1024)
    storage.persist_checkpoint(small)
    location = storage.persist_checkpoint(large)
    assert _state_files(storage.checkpoint_directory(1)) == []  # everything inline, as Flink's ByteStreamStateHandle
    files = _state_files(storage.checkpoint_directory(2))
    # per subtask: keyed state (2 x 12 KiB), channel state (input and output together); operator state stays inline
    assert len(files) == 4 and len(location.state_files) == 4
    assert sorted(h.file for h in location.state_files) == [f.name for f in files]
    assert all(len(f.name) == 36 for f in files)  # UUIDs, as Flink names exclusive state files
    assert (storage.checkpoint_directory(2) / METADATA_FILE_NAME).stat().st_size < 2048
    assert (
        list(storage.shared_state_directory.iterdir()) == []
        and list(storage.task_owned_state_directory.iterdir()) == []
    )
    assert storage.load_checkpoint_metadata(str(storage.checkpoint_directory(2))) == large
    assert storage.load_checkpoint_metadata(str(storage.checkpoint_directory(1))) == small
    # the in-memory storage keeps everything inline
    memory = JobManagerCheckpointStorage("job-a")
    assert memory.persist_checkpoint(large).state_files == ()
    assert memory.load_checkpoint(memory.resolve_checkpoint("jobmanager://job-a/chk-2")).metadata == large


def test_a_zero_threshold_writes_every_state_stream_to_a_file_and_savepoints_are_relocatable(tmp_path):
    storage = _fs(tmp_path, threshold=0)
    savepoint = storage.persist_checkpoint(_state(5, 10), is_savepoint=True)
    assert len(_state_files(Path(savepoint.external_pointer))) == 6  # keyed, operator and channel state per subtask
    moved = tmp_path / "elsewhere" / "savepoint-moved"
    shutil.move(savepoint.external_pointer, moved)
    assert storage.load_checkpoint_metadata(str(moved)) == _state(5, 10)


@pytest.mark.parametrize(
    "damage",
    [
        CheckpointDamage.TRUNCATE,
        CheckpointDamage.FLIP_BYTE,
        CheckpointDamage.APPEND_JUNK,
        CheckpointDamage.PICKLE_PAYLOAD,
    ],
)
def test_a_damaged_state_file_is_found_on_load_and_before_a_restore(tmp_path, damage):
    storage = _fs(tmp_path, threshold=1024)
    storage.persist_checkpoint(_state(3, 4096))
    storage.check_state_files(3)  # intact
    damage_checkpoint(storage, 3, damage, DamageTarget.STATE_FILE)
    first = _state_files(storage.checkpoint_directory(3))[0]
    with pytest.raises(CorruptStateFileError) as loading:
        storage.load_checkpoint(str(storage.checkpoint_directory(3)))
    assert loading.value.source == str(first.resolve()) and (
        "checksum" in str(loading.value) or "bytes" in str(loading.value)
    )
    with pytest.raises(CorruptStateFileError, match=first.name):
        storage.check_state_files(3)


def test_a_missing_state_file_is_named(tmp_path):
    storage = _fs(tmp_path, threshold=1024)
    storage.persist_checkpoint(_state(3, 4096))
    first = _state_files(storage.checkpoint_directory(3))[0]
    first.unlink()
    with pytest.raises(CheckpointNotFoundError, match=f"{first.name}: missing"):
        storage.load_checkpoint(str(storage.checkpoint_directory(3)))
    with pytest.raises(CheckpointNotFoundError, match=first.name):
        storage.check_state_files(3)


def test_another_checkpoints_metadata_is_refused_on_every_path(tmp_path):
    storage = _fs(tmp_path)
    for cid in (11, 12):
        storage.persist_checkpoint(_state(cid, 10))
    storage.update_completed_checkpoints([11, 12])
    savepoint = storage.persist_checkpoint(_state(13, 10), is_savepoint=True)
    chk11 = storage.checkpoint_directory(11) / METADATA_FILE_NAME
    shutil.copyfile(chk11, storage.checkpoint_directory(12) / METADATA_FILE_NAME)
    shutil.copyfile(chk11, Path(savepoint.metadata_pointer))
    with pytest.raises(CorruptMetadataError, match="holds checkpoint 11, not 12"):
        storage.load_checkpoint(str(storage.checkpoint_directory(12)))
    with pytest.raises(CorruptMetadataError, match="not the file the completed-checkpoint list points to"):
        storage.load_checkpoint(storage.completed_checkpoint_pointers()[-1])
    with pytest.raises(CorruptMetadataError, match="metadata of the checkpoint in 'chk-11', not of a savepoint"):
        storage.load_checkpoint(savepoint.external_pointer)
    loaded = storage.load_latest_checkpoint()
    assert loaded.metadata.checkpoint_id == 11 and len(loaded.skipped) == 1 and "chk-12" in str(loaded.skipped[0])


def test_the_completed_checkpoint_list_round_trips_and_is_replaced_atomically(tmp_path):
    storage = _fs(tmp_path)
    for cid in (1, 2, 3):
        storage.persist_checkpoint(_state(cid, 10))
    assert storage.completed_checkpoint_pointers() is None
    storage.update_completed_checkpoints([1, 2])
    storage.update_completed_checkpoints([2, 3])
    pointers = storage.completed_checkpoint_pointers()
    assert [p.checkpoint_id for p in pointers] == [2, 3]
    assert pointers[1].metadata_pointer == str((storage.checkpoint_directory(3) / METADATA_FILE_NAME).resolve())
    assert pointers[1].metadata_size == (storage.checkpoint_directory(3) / METADATA_FILE_NAME).stat().st_size
    assert [p.name for p in storage.checkpoints_directory.iterdir() if p.name.startswith(".")] == []  # no temp files
    # a new JobManager over the same directory reads the same list
    reopened = FileSystemCheckpointStorage(tmp_path / "checkpoints", "job-a")
    assert reopened.completed_checkpoint_pointers() == pointers
    assert reopened.load_checkpoint(pointers[0]).metadata == _state(2, 10)
    storage.update_completed_checkpoints([])
    assert not (storage.checkpoints_directory / COMPLETED_CHECKPOINTS_FILE_NAME).exists()


@pytest.mark.parametrize("damage", [lambda b: b[:-3], lambda b: b + b"x", lambda b: b[:25] + b"\x00" + b[26:]])
def test_a_damaged_completed_checkpoint_list_is_a_typed_error_naming_it(tmp_path, damage):
    storage = _fs(tmp_path)
    storage.persist_checkpoint(_state(1, 10))
    storage.update_completed_checkpoints([1])
    path = storage.checkpoints_directory / COMPLETED_CHECKPOINTS_FILE_NAME
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(CorruptPointerListError, match=COMPLETED_CHECKPOINTS_FILE_NAME):
        storage.completed_checkpoint_pointers()


def test_latest_reads_the_list_and_names_a_listed_checkpoint_whose_metadata_is_gone(tmp_path):
    storage = _fs(tmp_path)
    for cid in (10, 11, 12):
        storage.persist_checkpoint(_state(cid, 10))
    storage.update_completed_checkpoints([10, 11, 12])
    (storage.checkpoint_directory(12) / METADATA_FILE_NAME).unlink()
    loaded = storage.load_latest_checkpoint()
    assert loaded.metadata.checkpoint_id == 11
    assert [type(e) for e in loaded.skipped] == [CheckpointNotFoundError] and "chk-12/_metadata: missing" in str(
        loaded.skipped[0]
    )


def test_an_unreadable_metadata_file_or_directory_is_a_typed_error_and_discarding_it_too(tmp_path):
    storage = _fs(tmp_path)
    for cid in (1, 2):
        storage.persist_checkpoint(_state(cid, 10))
    storage.update_completed_checkpoints([1, 2])
    how_file = damage_checkpoint(storage, 1, CheckpointDamage.UNREADABLE, DamageTarget.METADATA)
    damage_checkpoint(storage, 2, CheckpointDamage.UNREADABLE, DamageTarget.DIRECTORY)
    try:
        for pointer in storage.completed_checkpoint_pointers():
            with pytest.raises(CheckpointStorageIOError) as e:  # permission denied, or (as root) a symbolic-link loop
                storage.load_checkpoint(pointer)
            assert f"chk-{pointer.checkpoint_id}" in str(e.value)
        with pytest.raises(CheckpointDiscardError, match="chk-2"):
            storage.discard_checkpoint(2)
    finally:  # let pytest clean up its temporary directory
        for path in (
            storage.checkpoint_directory(1),
            storage.checkpoint_directory(2),
            storage.checkpoint_directory(1) / METADATA_FILE_NAME,
        ):
            if path.exists() and not path.is_symlink():
                os.chmod(path, 0o755)
    assert "chmod 000" in how_file or "symbolic link" in how_file


@pytest.mark.parametrize("kind", ["files", "memory"])
def test_the_completed_checkpoint_list_can_be_deleted_rolled_back_or_damaged_and_a_reader_sees_it(tmp_path, kind):
    storage = _fs(tmp_path) if kind == "files" else JobManagerCheckpointStorage("job-a")
    for cid in (1, 2, 3):
        storage.persist_checkpoint(_state(cid, 10))
    storage.update_completed_checkpoints([1, 2, 3])
    what = damage_checkpoint(storage, 3, CheckpointDamage.ROLL_BACK, DamageTarget.COMPLETED_LIST)
    assert what.endswith("_completed_checkpoints back to before checkpoint 3: it names [1, 2]"), what
    assert [p.checkpoint_id for p in storage.completed_checkpoint_pointers()] == [1, 2]  # older and intact
    assert [storage.load_checkpoint(p).metadata.checkpoint_id for p in storage.completed_checkpoint_pointers()] == [
        1,
        2,
    ]
    damage_checkpoint(storage, 1, CheckpointDamage.ROLL_BACK, DamageTarget.COMPLETED_LIST)
    assert storage.completed_checkpoint_pointers() is None  # as before the first checkpoint completed
    with pytest.raises(DamageNotApplicable, match="no completed-checkpoint list"):
        damage_checkpoint(storage, 1, CheckpointDamage.DELETE, DamageTarget.COMPLETED_LIST)
    storage.update_completed_checkpoints([2, 3])
    with pytest.raises(DamageNotApplicable, match="names no checkpoint from 4 on"):
        damage_checkpoint(storage, 4, CheckpointDamage.ROLL_BACK, DamageTarget.COMPLETED_LIST)
    damage_checkpoint(storage, 3, CheckpointDamage.FLIP_BYTE, DamageTarget.COMPLETED_LIST)
    with pytest.raises(CorruptPointerListError, match=COMPLETED_CHECKPOINTS_FILE_NAME):
        storage.completed_checkpoint_pointers()
    assert damage_checkpoint(storage, 3, CheckpointDamage.DELETE, DamageTarget.COMPLETED_LIST).startswith("deleted ")
    assert storage.completed_checkpoint_pointers() is None
    with pytest.raises(DamageNotApplicable, match="target completed_list"):
        damage_checkpoint(storage, 3, CheckpointDamage.ROLL_BACK, DamageTarget.METADATA)
