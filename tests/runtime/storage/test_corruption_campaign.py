"""The corruption campaign: every damage a checkpoint can suffer on disk, on every path that reads a checkpoint,
ends in the typed outcome expected of it; nothing is accepted silently, nothing escapes untyped, no driver
crashes.

Real checkpoints of a simulated job are damaged (``runtime.storage.damage``) and read through every path (a pointer,
a savepoint, the latest checkpoint, a JobManager's recovery), then end to end before a JobManager failover; how:
``test_every_damage_on_every_path_ends_in_its_typed_outcome``."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from barriersim.runtime.checkpoint_cost import Charging
from barriersim.runtime.checkpointing.api import ManualClock, ManualTimerService
from barriersim.runtime.coordinator.checkpoint_recovery import (
    CheckpointRecoveryError,
    recover_completed_checkpoint_store,
)
from barriersim.runtime.coordinator.configuration import CheckpointCoordinatorConfiguration, CheckpointingConfig
from barriersim.runtime.faults.fault_schedule import FaultSchedule
from barriersim.runtime.ids import ExecutionAttemptID
from barriersim.runtime.job.actions import TaskDeploymentDescriptor
from barriersim.runtime.job.config import JobConfig, JobOutcome, WorkloadConfig
from barriersim.runtime.job.deployment import TaskRestoreError, deploy_task
from barriersim.runtime.job.restart_strategy import RestartStrategyConfig
from barriersim.runtime.jobgraph import JobEdge, JobGraph, JobVertex
from barriersim.runtime.jobgraph import OperatorKind as K
from barriersim.runtime.jobgraph import Partitioner as P
from barriersim.runtime.recovery.state_assignment_operation import ExecutionJobVertexInfo, assign_states
from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.runtime.storage.damage import CheckpointDamage as D
from barriersim.runtime.storage.damage import DamageTarget as T
from barriersim.runtime.storage.damage import damage_checkpoint, damage_directory
from barriersim.runtime.storage.errors import (
    CheckpointNotFoundError,
    CheckpointStorageError,
    CheckpointStorageIOError,
    CorruptMetadataError,
    CorruptStateFileError,
)
from barriersim.runtime.storage.fs_storage import FileSystemCheckpointStorage
from barriersim.runtime.storage.layout import METADATA_FILE_NAME
from barriersim.runtime.verification.reference import Verdict, expected_sink_input, verify
from barriersim.scenarios.workload import local_splits

GRAPH = JobGraph(
    (JobVertex("source", K.SOURCE, 2), JobVertex("sum", K.KEYED_SUM, 2), JobVertex("sink", K.TWO_PHASE_COMMIT_SINK, 1)),
    (JobEdge("source", "sum", P.HASH), JobEdge("sum", "sink", P.REBALANCE)),
)
SPLITS = {"source": local_splits(30_000, 1000, 1.0, 100, 2, seed=1, rate_per_source=10_000)}
THRESHOLD = 256  # bytes: the keyed state of each subtask goes to a state file of its own
JOB = "campaign"


def config(faults: str = "[]", max_retained: int = 3, memory_threshold_bytes: int = THRESHOLD) -> JobConfig:
    return JobConfig(
        GRAPH,
        checkpointing=CheckpointingConfig(
            mode="aligned", interval_ms=100, max_retained=max_retained, memory_threshold_bytes=memory_threshold_bytes
        ),
        workload=WorkloadConfig(rate_per_source=10_000),
        restart=RestartStrategyConfig(delay_ms=10, attempts=3),
        faults=FaultSchedule.from_json(faults),
    )


@pytest.fixture(scope="module")
def real_checkpoints(tmp_path_factory):
    """The metadata of three checkpoints a simulated job completed (on the filesystem storage)."""
    job = JobSimulation(
        config(), SPLITS, seed=3, record_cuts=True, checkpoint_directory=tmp_path_factory.mktemp("source-job")
    )
    assert job.run().outcome is JobOutcome.FINISHED
    completed = sorted(job.dispatcher.completed_in_epoch().items())
    return [metadata for _, (_, metadata) in completed[2:5]]


class Case:
    """Three checkpoints and a savepoint of the newest in a fresh storage, with their completed-checkpoint list."""

    def __init__(self, root: Path, checkpoints, threshold: int = THRESHOLD):
        self.storage = FileSystemCheckpointStorage(
            root / "checkpoints", JOB, memory_threshold=threshold, rng=random.Random(1)
        )
        self.storage.initialize_base_locations()
        for metadata in checkpoints:
            self.storage.persist_checkpoint(metadata)
        self.ids = [m.checkpoint_id for m in checkpoints]
        self.storage.update_completed_checkpoints(self.ids)
        self.newest, self.previous = self.ids[-1], self.ids[-2]
        savepoint = self.storage.persist_checkpoint(
            checkpoints[-1], is_savepoint=True, target_location=str(root / "sp")
        )
        self.savepoint = Path(savepoint.external_pointer)

    def damage(self, damage: D, target: T, path: str) -> str:
        if path == "savepoint":
            other = (
                self.previous,
                (self.storage.checkpoint_directory(self.previous) / METADATA_FILE_NAME).read_bytes(),
            )
            return damage_directory(self.savepoint, damage, target, other, THRESHOLD)
        return damage_checkpoint(self.storage, self.newest, damage, target)

    def read(self, path: str):
        """Read the damaged checkpoint through ``path``; returns what was restored (the id) and what was passed over."""
        if path == "pointer":
            loaded = self.storage.load_checkpoint(str(self.storage.checkpoint_directory(self.newest)))
            return restore(loaded.metadata), ()
        if path == "savepoint":
            return restore(self.storage.load_checkpoint(str(self.savepoint)).metadata), ()
        if path == "latest":
            loaded = self.storage.load_latest_checkpoint()
            return restore(loaded.metadata), loaded.skipped
        recovered = recover_completed_checkpoint_store(
            JOB, self.storage, CheckpointCoordinatorConfiguration(max_retained_checkpoints=3)
        )
        return restore(recovered.store.get_latest_checkpoint().metadata), ()


def restore(metadata) -> int:
    """Every subtask restores the state assigned to it (``TaskRestoreError`` if one cannot); the checkpoint's id."""
    infos = [ExecutionJobVertexInfo(v.name, v.parallelism, v.max_parallelism) for v in GRAPH.vertices]
    assignment = assign_states(metadata, infos)
    job = config()
    for vertex in GRAPH.vertices:
        for i in range(vertex.parallelism):
            state = (
                assignment.task_restores[vertex.name][i].task_state_snapshot
                if vertex.name in assignment.task_restores
                else None
            )
            deploy_task(
                job,
                TaskDeploymentDescriptor(ExecutionAttemptID(vertex.name, i, 1), state),
                clock=ManualClock(),
                timer_service=ManualTimerService(),
                rng=random.Random(0),
                charging=Charging.VIRTUAL,
                cost_rng=random.Random(0),
            )
    return metadata.checkpoint_id


DAMAGES = [  # (damage, target, the problem the typed error reports on a path that reads the file itself)
    (D.TRUNCATE, T.METADATA, "truncated"),
    (D.FLIP_BYTE, T.METADATA, "checksum mismatch"),
    (D.APPEND_JUNK, T.METADATA, "unexpected trailing bytes"),
    (D.PICKLE_PAYLOAD, T.METADATA, "unexpected magic number"),
    (D.DELETE, T.METADATA, "Cannot find meta data file"),
    (D.UNREADABLE, T.METADATA, ""),
    (D.FOREIGN_METADATA, T.METADATA, ""),
    (D.TRUNCATE, T.STATE_FILE, "bytes"),
    (D.FLIP_BYTE, T.STATE_FILE, "checksum mismatch"),
    (D.APPEND_JUNK, T.STATE_FILE, "bytes"),
    (D.PICKLE_PAYLOAD, T.STATE_FILE, "bytes"),
    (D.DELETE, T.STATE_FILE, "missing"),
    (D.UNREADABLE, T.STATE_FILE, ""),
    (D.DELETE, T.DIRECTORY, "Cannot find checkpoint or savepoint"),
    (D.UNREADABLE, T.DIRECTORY, ""),
    (D.MALFORMED_STATE, T.STATE_FILE, ""),
    (D.MALFORMED_STATE, T.METADATA, ""),
]
PATHS = ["pointer", "savepoint", "latest", "jobmanager"]


def expected_error(damage: D, target: T, path: str) -> type:
    """The typed error the damaged newest checkpoint raises on ``path`` (for ``latest``: the one it is passed over
    with; for ``jobmanager``: the one inside the ``CheckpointRecoveryError``)."""
    if damage is D.UNREADABLE:
        return CheckpointStorageIOError  # permission denied, or (as root) a symbolic-link loop
    if target is T.STATE_FILE:
        return CheckpointNotFoundError if damage is D.DELETE else CorruptStateFileError
    if damage is D.DELETE:
        return CheckpointNotFoundError
    return CorruptMetadataError  # on the list's paths: not the file the list points to


def label(value) -> str:
    return getattr(value, "value", value)


def outcome(case: Case, damage: D, target: T, path: str) -> str:
    """What reading the damaged checkpoint through ``path`` gives, as a line (the campaign's table)."""
    try:
        restored, skipped = case.read(path)
    except TaskRestoreError as e:
        return f"TaskRestoreError: {e}"
    except CheckpointRecoveryError as e:
        return f"CheckpointRecoveryError({type(e.__cause__).__name__}): {e}"
    except CheckpointStorageError as e:
        return f"{type(e).__name__}: {e}"
    return f"restored {restored}" + (f", passed over: {type(skipped[0]).__name__}: {skipped[0]}" if skipped else "")


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    ("damage", "target", "problem"), DAMAGES, ids=lambda v: label(v) if not isinstance(v, str) else None
)
def test_every_damage_on_every_path_ends_in_its_typed_outcome(
    real_checkpoints, tmp_path, damage, target, problem, path
):
    """How this works: real checkpoints come from a simulated job (``FileSystemCheckpointStorage``, a memory threshold
    low enough that its keyed state goes to state files); each case writes three of them (and a savepoint of the
    newest) into a fresh storage with its completed-checkpoint list, damages the newest (``runtime.storage.damage``:
    its ``_metadata``, its first state file or its directory) and reads it through one path:
    - ``pointer``: ``load_checkpoint`` of its directory, then every subtask restores the state assigned to it;
    - ``savepoint``: the same through the savepoint's directory (the savepoint damaged instead);
    - ``latest``: ``load_latest_checkpoint`` over the completed-checkpoint list (the damaged newest is passed over
      and reported, and the previous one restored), then the restore;
    - ``jobmanager``: ``recover_completed_checkpoint_store``, a new JobManager's recovery, then the restore.
    A state blob made malformed under valid checksums passes every check of the storage (its bytes are opaque) and is
    found by the restore, as in Flink: the task cannot restore (``TaskRestoreError``). Then, end to end on the
    simulator, each damage strikes the newest checkpoint of a running job just before a JobManager failover: the run
    ends ``FAILED`` with a one-line reason naming the checkpoint, and nothing is raised. The cases the storage once
    got wrong silently (a missing newest ``_metadata``, another checkpoint's ``_metadata``, an unreadable checkpoint
    directory at a discard) have tests of their own at the end."""
    threshold = 1024 * 1024 if (damage, target) == (D.MALFORMED_STATE, T.METADATA) else THRESHOLD  # inline state
    case = Case(tmp_path, real_checkpoints, threshold)
    try:
        case.damage(damage, target, path)
        if damage is D.MALFORMED_STATE:  # valid checksums everywhere: only the restore can tell
            with pytest.raises(TaskRestoreError, match=r"sum#\d: could not restore its state: \w+Error"):
                case.read(path)
            return
        expected = expected_error(damage, target, path)
        if path == "latest":
            restored, skipped = case.read(path)
            assert restored == case.previous  # the newest is passed over, and the summary of the read says why
            assert [type(e) for e in skipped] and isinstance(skipped[0], expected), skipped
            assert f"chk-{case.newest}" in str(skipped[0])
        elif path == "jobmanager":
            with pytest.raises(CheckpointRecoveryError, match=f"could not retrieve checkpoint {case.newest} ") as e:
                case.read(path)
            assert isinstance(e.value.__cause__, expected), e.value.__cause__
            assert "\n" not in str(e.value)
        else:
            with pytest.raises(expected, match=problem or None) as e:
                case.read(path)
            where = case.savepoint.name if path == "savepoint" else f"chk-{case.newest}"
            assert where in str(e.value) and "\n" not in str(e.value)
            if damage is D.FOREIGN_METADATA:
                assert (
                    f"holds checkpoint {case.previous}, not {case.newest}" in str(e.value)
                    if path == "pointer"
                    else f"metadata of the checkpoint in 'chk-{case.previous}', not of a savepoint" in str(e.value)
                )
    finally:
        _readable_again(tmp_path)


def _readable_again(root: Path) -> None:
    """Undo ``chmod 000`` so that pytest can remove the temporary directory."""
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory) / name
            if not path.is_symlink():
                os.chmod(path, 0o755)


# -- end to end: a JobManager failover after the damage -----------------------------------------------------


def run(faults: str, tmp_path: Path, max_retained: int = 3, threshold: int = THRESHOLD):
    job = JobSimulation(
        config(faults, max_retained, memory_threshold_bytes=threshold), SPLITS, seed=3, checkpoint_directory=tmp_path
    )
    result = job.run()  # never raises: every storage or recovery error is the run's outcome
    return result, verify(expected_sink_input(GRAPH, SPLITS), result.committed_output)


@pytest.mark.parametrize(
    ("damage", "target", "problem"), DAMAGES, ids=lambda v: label(v) if not isinstance(v, str) else None
)
def test_a_jobmanager_failover_after_any_damage_ends_the_run_failed_with_the_reason(tmp_path, damage, target, problem):
    faults = (
        f'[{{"type":"damage_checkpoint","at_ms":1000,"damage":"{damage.value}","target":"{target.value}"}},'
        '{"type":"crash_coordinator","at_ms":1000}]'
    )
    threshold = 1024 * 1024 if (damage, target) == (D.MALFORMED_STATE, T.METADATA) else THRESHOLD  # inline state
    try:
        result, verdict = run(faults, tmp_path, threshold=threshold)
    finally:
        _readable_again(tmp_path)
    assert [e["fired"] for e in result.fault_log] == [1, 1]
    assert result.outcome is JobOutcome.FAILED and "\n" not in result.failure_reason
    if damage is D.MALFORMED_STATE:  # recovered, but no deployment can restore it: the restart strategy gives up
        assert result.failure_reason.startswith("the restart strategy gave up after 4 failures"), result.failure_reason
        assert "deploy failed restoring checkpoint " in result.failure_reason
        assert "could not restore its state" in result.failure_reason
    else:
        assert result.failure_reason.startswith("JobManager failover: job sim-3: could not retrieve checkpoint ")
        assert "which the completed-checkpoint list names" in result.failure_reason
    assert verdict.verdict is Verdict.VIOLATED  # what a failed job committed: not all of it


# -- the cases that once went wrong silently ----------------------------------------------------------------------


@pytest.mark.parametrize("max_retained", [1, 3])
def test_a_missing_newest_metadata_fails_the_recovery_instead_of_duplicating(tmp_path, max_retained):
    faults = '[{"type":"damage_checkpoint","at_ms":1000,"damage":"delete"},{"type":"crash_coordinator","at_ms":1000}]'
    result, verdict = run(faults, tmp_path, max_retained)
    assert result.outcome is JobOutcome.FAILED
    assert (
        "could not retrieve checkpoint 10 from " in result.failure_reason
        and "/chk-10/_metadata, " in result.failure_reason
    )
    assert "names: missing" in result.failure_reason and verdict.duplicated == 0
    assert result.restored_checkpoint_ids == []  # nothing older was restored in its place


@pytest.mark.parametrize("which", ["newest", "older"])
def test_another_checkpoints_metadata_or_a_damaged_older_one_fails_the_recovery(real_checkpoints, tmp_path, which):
    """Flink's retrieveCompletedCheckpoints fails on any listed checkpoint it cannot retrieve, the older ones
    too (running on with an incomplete set of checkpoints could violate consistency)."""
    case = Case(tmp_path, real_checkpoints)
    if which == "newest":  # max_retained = 1: the list names only the newest, and the older one's file is copied in
        case.storage.update_completed_checkpoints([case.newest])
        shutil.copyfile(
            case.storage.checkpoint_directory(case.previous) / METADATA_FILE_NAME,
            case.storage.checkpoint_directory(case.newest) / METADATA_FILE_NAME,
        )
        victim = case.newest
    else:
        victim = case.ids[0]
        damage_checkpoint(case.storage, victim, D.FLIP_BYTE)
    with pytest.raises(
        CheckpointRecoveryError, match=f"could not retrieve checkpoint {victim} .*chk-{victim}/_metadata"
    ):
        recover_completed_checkpoint_store(
            JOB, case.storage, CheckpointCoordinatorConfiguration(max_retained_checkpoints=3)
        )


def test_an_unreadable_checkpoint_directory_at_a_discard_is_reported_and_the_job_goes_on(tmp_path):
    faults = '[{"type":"damage_checkpoint","at_ms":1000,"damage":"unreadable","target":"directory"}]'
    try:
        result, verdict = run(faults, tmp_path, max_retained=1)
    finally:
        _readable_again(tmp_path)
    assert result.outcome is JobOutcome.FINISHED and verdict.verdict is Verdict.EXACTLY_ONCE
    assert len(result.storage_errors) == 1 and result.storage_errors[0].startswith("discarding checkpoint ")


def test_a_damaged_state_file_fails_the_restore_after_a_task_failure_until_the_restart_strategy_gives_up(tmp_path):
    """A task failover restores from the checkpoint the JobMaster holds, but the tasks read their state files
    (Flink: from the file system at restore): each restore fails, with no fallback to an older checkpoint."""
    faults = (
        '[{"type":"damage_checkpoint","at_ms":1000,"damage":"flip_byte","target":"state_file"},'
        '{"type":"crash_task","task":"sum#0","at_ms":1010}]'
    )
    result, verdict = run(faults, tmp_path)
    assert [e["fired"] for e in result.fault_log] == [1, 1]
    assert result.outcome is JobOutcome.FAILED and result.restored_checkpoint_ids == []
    assert result.failure_reason.startswith(
        "the restart strategy gave up after 4 failures (at most 3 restarts); "
        "the last: restore: could not restore checkpoint "
    )
    assert "checksum" in result.failure_reason or "crc32" in result.failure_reason
    # the crash and the first two restores that could not read their state restarted the job; the third failed it
    assert result.restarts == 3
