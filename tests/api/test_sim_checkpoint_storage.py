"""The simulator with a checkpoint storage URI (``--checkpoint-storage``), on a real S3-compatible server
(``tests.s3_server``): its checkpoints and savepoints go to the bucket under the run directory's name, as a Ray
run's do, with the run's files beside them; a later run restores with ``--from`` the ``s3://`` savepoint pointer
and continues the earlier run's output exactly once; a sweep puts every point's runs under the sweep's name."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from barriersim.cli import main
from barriersim.runtime.storage.memory_storage import NOT_EXTERNALLY_ADDRESSABLE
from tests.api.scenarios import TWO_POINT_SWEEP, write

pytestmark = pytest.mark.timeout(120)
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _summary(out) -> dict:
    return json.loads((out / "summary.json").read_text())


def test_a_simulated_run_keeps_its_snapshots_on_s3_and_a_later_run_restores_from_there(s3_server, tmp_path):
    storage = s3_server.versioned_bucket_uri("runs")
    bucket, query = storage.split("/")[2], storage.split("?", 1)[1]
    first = tmp_path / "first"
    assert (
        main(
            [
                "run",
                "scenarios/quickstart.toml",
                "--backend",
                "sim",
                "--out",
                str(first),
                "--checkpoint-storage",
                storage,
                "--stop-with-savepoint-at",
                "300",
            ]
        )
        == 0
    )
    summary = _summary(first)
    stop = summary["job"]["stopped_with_savepoint"]
    assert stop["path"].startswith(f"s3://{bucket}/runs/first/savepoints/savepoint-"), stop
    keys = s3_server.written_keys(storage)
    # every completed checkpoint was written to the bucket, and the statistics give its directory there
    job = summary["jobs"][0]["job_id"]
    checkpoints = pq.read_table(str(first / "checkpoints.parquet")).to_pandas()
    completed = checkpoints[(checkpoints["status"] == "COMPLETED") & ~checkpoints["is_savepoint"]]
    assert len(completed) >= 1
    assert list(completed["external_path"]) == [f"s3://{bucket}/runs/first/{job}/chk-{i}" for i in completed["id"]]
    assert {f"runs/first/{job}/chk-{i}/_metadata" for i in completed["id"]} <= keys, sorted(keys)[:20]
    assert NOT_EXTERNALLY_ADDRESSABLE not in set(checkpoints["external_path"])
    assert {f"runs/first/{name}" for name in ("scenario.toml", "summary.json", "external_store.msgpack")} <= keys
    assert not (first / "checkpoints").exists() and not (first / "savepoints").exists()

    restored = tmp_path / "restored"
    assert (
        main(
            [
                "run",
                "scenarios/quickstart.toml",
                "--backend",
                "sim",
                "--out",
                str(restored),
                "--checkpoint-storage",
                storage,
                "--from",
                f"{stop['path']}?{query}",
            ]
        )
        == 0
    )
    summary = _summary(restored)
    assert summary["job"]["latest_restored"]["external_path"] == stop["path"]
    v = summary["verification"]
    assert (v["verdict"], v["lost"], v["duplicated"], v["wrong"]) == ("exactly-once", 0, 0, 0), v


def test_an_s3_pointer_without_its_run_beside_it_is_a_one_line_error(s3_server, tmp_path, capsys):
    storage = s3_server.bucket_uri("runs")
    query = storage.split("?", 1)[1]
    assert (
        main(
            [
                "run",
                "scenarios/quickstart.toml",
                "--backend",
                "sim",
                "--out",
                str(tmp_path / "a"),
                "--checkpoint-storage",
                storage,
                "--stop-with-savepoint-at",
                "300",
            ]
        )
        == 0
    )
    stop = _summary(tmp_path / "a")["job"]["stopped_with_savepoint"]["path"]
    filesystem_uri = f"{stop}?{query}"
    from barriersim.runtime.storage.object_storage import object_store_filesystem

    filesystem, path = object_store_filesystem(filesystem_uri)
    filesystem.delete_file(path.rsplit("/savepoints/", 1)[0] + "/summary.json")  # the run is no longer there
    capsys.readouterr()
    assert (
        main(
            [
                "run",
                "scenarios/quickstart.toml",
                "--backend",
                "sim",
                "--out",
                str(tmp_path / "b"),
                "--from",
                filesystem_uri,
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert "restore.from" in err and "not inside a barriersim run directory" in err and len(err.splitlines()) == 1


def test_a_sweep_puts_every_points_runs_under_the_sweeps_name(s3_server, tmp_path):
    storage = s3_server.versioned_bucket_uri("sweeps")
    out = tmp_path / "sweep"
    assert (
        main(
            [
                "sweep",
                str(write(tmp_path, TWO_POINT_SWEEP)),
                "--backend",
                "sim",
                "--mode",
                "all",
                "--out",
                str(out),
                "--checkpoint-storage",
                storage,
                "--no-analytics",
            ]
        )
        == 0
    )
    keys = s3_server.written_keys(storage)
    published = {k for k in keys if k.endswith("/summary.json")}
    assert published == {
        f"sweeps/sweep/zipf_exponent={z}/{mode}/summary.json"
        for z in ("0.0", "2.0")
        for mode in ("aligned", "unaligned", "at-least-once")
    }, sorted(published)
    for point in ("zipf_exponent=0.0", "zipf_exponent=2.0"):
        summary = _summary(out / point / "aligned")
        job = f"sim-{summary['seed']}"  # the simulated job's id
        assert any(k.startswith(f"sweeps/sweep/{point}/aligned/{job}/chk-") and k.endswith("/_metadata") for k in keys)
        assert summary["verification"]["verdict"] == "exactly-once"


def test_a_checkpoint_retained_on_s3_by_a_cancelled_job_is_restored_by_a_later_run(s3_server, tmp_path):
    """Flink's RETAIN_ON_CANCELLATION on an object store: the cancelled job's latest checkpoint stays in the
    bucket (``chk-<n>`` with its ``_metadata``), and ``--from`` its ``s3://`` pointer starts a run that continues
    the cancelled run's output exactly once."""
    storage = s3_server.bucket_uri("runs")
    bucket, query = storage.split("/")[2], storage.split("?", 1)[1]
    first = tmp_path / "cancelled"
    assert (
        main(
            [
                "run",
                "scenarios/quickstart.toml",
                "--backend",
                "sim",
                "--out",
                str(first),
                "--checkpoint-storage",
                storage,
                "--cancel-at",
                "400",
                "--externalized-checkpoint-retention",
                "RETAIN_ON_CANCELLATION",
            ]
        )
        == 0
    )
    retained = _summary(first)["job"]["retained_checkpoint"]
    assert retained is not None and retained.startswith(f"s3://{bucket}/runs/cancelled/sim-"), retained
    assert "/chk-" in retained

    restored = tmp_path / "restored"
    assert (
        main(
            [
                "run",
                "scenarios/quickstart.toml",
                "--backend",
                "sim",
                "--out",
                str(restored),
                "--checkpoint-storage",
                storage,
                "--from",
                f"{retained}?{query}",
            ]
        )
        == 0
    )
    summary = _summary(restored)
    assert summary["job"]["latest_restored"]["external_path"] == retained
    v = summary["verification"]
    assert (v["verdict"], v["lost"], v["duplicated"], v["wrong"]) == ("exactly-once", 0, 0, 0), v


@pytest.mark.parametrize("as_uri", [False, True], ids=["path", "file-uri"])
def test_a_filesystem_checkpoint_storage_holds_the_runs_savepoints_and_files_where_a_restore_finds_them(
    tmp_path, monkeypatch, as_uri
):
    """A path (or ``file://`` URI) as checkpoint storage is treated as an object store is: the savepoint goes beside
    the checkpoints under ``<storage>/<run>/savepoints/`` (not under a directory named ``file:`` in the working
    directory), the run's files are published beside them, and a later run restores from that savepoint's path and
    continues the earlier output exactly once."""
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "store"
    storage = f"file://{store}" if as_uri else str(store)
    first = tmp_path / "first"
    assert (
        main(
            [
                "run",
                str(SCENARIOS / "quickstart.toml"),
                "--backend",
                "sim",
                "--out",
                str(first),
                "--checkpoint-storage",
                storage,
                "--stop-with-savepoint-at",
                "300",
            ]
        )
        == 0
    )
    stop = _summary(first)["job"]["stopped_with_savepoint"]
    assert stop["path"].startswith(f"{store}/first/savepoints/savepoint-"), stop
    assert (Path(stop["path"]) / "_metadata").is_file()
    assert {p.name for p in (store / "first").iterdir()} >= {
        "savepoints",
        "scenario.toml",
        "summary.json",
        "external_store.msgpack",
    }
    assert not (tmp_path / "file:").exists() and not (first / "savepoints").exists()

    restored = tmp_path / "restored"
    assert (
        main(
            [
                "run",
                str(SCENARIOS / "quickstart.toml"),
                "--backend",
                "sim",
                "--out",
                str(restored),
                "--from",
                stop["path"],
            ]
        )
        == 0
    )
    summary = _summary(restored)
    assert summary["job"]["latest_restored"]["is_savepoint"]
    v = summary["verification"]
    assert (v["verdict"], v["lost"], v["duplicated"], v["wrong"]) == ("exactly-once", 0, 0, 0), v
    # the stop-with-savepoint was the earlier run's last commit: nothing is committed again
    assert summary["restore"]["earlier_output_after_snapshot"] == {"transactions": 0, "records": 0}


def test_a_restore_from_a_savepoint_older_than_the_earlier_runs_last_commit_says_what_it_commits_again(
    tmp_path, capsys
):
    """A savepoint taken mid-run, restored once the run finished: that run had committed the output after the
    savepoint, which the restored run processes and commits again, as Flink's restore of an older savepoint does.
    The summary and one printed line say how much (the transactions committed after the savepoint's pre-committed
    ones, and their records), and it is exactly what the verification counts as duplicated."""
    first = tmp_path / "first"
    assert (
        main(
            [
                "run",
                str(SCENARIOS / "quickstart.toml"),
                "--backend",
                "sim",
                "--out",
                str(first),
                "--savepoint-at",
                "800",
            ]
        )
        == 0
    )
    savepoint = _summary(first)["actions"][0]["path"]
    capsys.readouterr()
    assert (
        main(
            [
                "run",
                str(SCENARIOS / "quickstart.toml"),
                "--backend",
                "sim",
                "--out",
                str(tmp_path / "again"),
                "--from",
                savepoint,
            ]
        )
        == 1
    )
    summary = _summary(tmp_path / "again")
    after = summary["restore"]["earlier_output_after_snapshot"]
    v = summary["verification"]
    assert after["transactions"] >= 1 and after["records"] > 0, after
    assert (v["verdict"], v["lost"], v["duplicated"], v["wrong"]) == ("violated", 0, after["records"], 0), v
    out = capsys.readouterr().out
    assert (
        f"the restored snapshot is older than the earlier run's last commit: that run had committed "
        f"{after['records']:,} records in {after['transactions']:,} transactions after it"
    ) in out, out


def test_a_restore_whose_run_has_a_damaged_external_store_is_a_one_line_error(tmp_path, capsys):
    first = tmp_path / "first"
    assert (
        main(
            [
                "run",
                str(SCENARIOS / "quickstart.toml"),
                "--backend",
                "sim",
                "--out",
                str(first),
                "--stop-with-savepoint-at",
                "300",
            ]
        )
        == 0
    )
    stop = _summary(first)["job"]["stopped_with_savepoint"]["path"]
    (first / "external_store.msgpack").write_bytes(b"\xfc not msgpack")
    capsys.readouterr()
    assert (
        main(
            [
                "run",
                str(SCENARIOS / "quickstart.toml"),
                "--backend",
                "sim",
                "--out",
                str(tmp_path / "b"),
                "--from",
                stop,
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "restore.from" in err, err
    assert f"{first / 'external_store.msgpack'}: not a readable external store" in err, err
    assert not (tmp_path / "b").exists()


INCREMENTAL_CANCEL = [
    "--backend",
    "sim",
    "--cancel-at",
    "4000",
    "--externalized-checkpoint-retention",
    "RETAIN_ON_CANCELLATION",
    "--set",
    "checkpointing.memory_threshold_bytes=1024",
]


def test_a_retained_incremental_checkpoint_is_restored_from_its_own_directory_whatever_the_working_directory(
    tmp_path, monkeypatch
):
    """An incremental checkpoint's shared files (``<job>/shared/``, beside its ``chk-<n>``) are read relative to the
    checkpoint's own location, as every other file of it: ``--from`` finds them from any working directory (it
    looked for them under ``./restore/shared/``)."""
    first = tmp_path / "first"
    assert (
        main(
            [
                "run",
                str(SCENARIOS / "state_growth.toml"),
                "--out",
                str(first),
                "--checkpoint-files",
                *INCREMENTAL_CANCEL,
            ]
        )
        == 0
    )
    retained = Path(_summary(first)["job"]["retained_checkpoint"])
    assert retained.parent.name.startswith("sim-") and (retained / "_metadata").is_file(), retained
    assert any((retained.parent / "shared").iterdir())  # the checkpoint refers to shared files
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    restored = tmp_path / "restored"
    assert (
        main(
            [
                "run",
                str(SCENARIOS / "state_growth.toml"),
                "--backend",
                "sim",
                "--out",
                str(restored),
                "--checkpoint-files",
                "--from",
                str(retained),
            ]
        )
        == 0
    )
    summary = _summary(restored)
    assert summary["job"]["latest_restored"]["external_path"] == str(retained)
    v = summary["verification"]
    assert (v["verdict"], v["lost"], v["duplicated"], v["wrong"]) == ("exactly-once", 0, 0, 0), v


def test_a_retained_incremental_checkpoint_on_s3_keeps_its_shared_files_beside_it_and_is_restored_from_there(
    s3_server, tmp_path, monkeypatch
):
    """On an object store an incremental checkpoint's shared files go to ``<job>/shared/`` too (Flink's
    ``FsCheckpointStorageAccess`` on S3), and ``--from`` the ``s3://`` pointer reads them beside the checkpoint."""
    storage = s3_server.bucket_uri("runs")
    bucket, query = storage.split("/")[2], storage.split("?", 1)[1]
    monkeypatch.chdir(tmp_path)
    first = tmp_path / "first"
    assert (
        main(
            [
                "run",
                str(SCENARIOS / "state_growth.toml"),
                "--out",
                str(first),
                "--checkpoint-storage",
                storage,
                *INCREMENTAL_CANCEL,
            ]
        )
        == 0
    )
    retained = _summary(first)["job"]["retained_checkpoint"]
    assert retained.startswith(f"s3://{bucket}/runs/first/sim-") and "/chk-" in retained, retained
    from pyarrow.fs import FileSelector

    from barriersim.runtime.storage.object_storage import object_store_filesystem

    filesystem, path = object_store_filesystem(f"{retained}?{query}")
    shared = filesystem.get_file_info(FileSelector(path.rsplit("/", 1)[0] + "/shared", allow_not_found=True))
    assert shared, "the incremental checkpoint refers to shared files"
    restored = tmp_path / "restored"
    assert (
        main(
            [
                "run",
                str(SCENARIOS / "state_growth.toml"),
                "--backend",
                "sim",
                "--out",
                str(restored),
                "--checkpoint-storage",
                storage,
                "--from",
                f"{retained}?{query}",
            ]
        )
        == 0
    )
    summary = _summary(restored)
    assert summary["job"]["latest_restored"]["external_path"] == retained
    v = summary["verification"]
    assert (v["verdict"], v["lost"], v["duplicated"], v["wrong"]) == ("exactly-once", 0, 0, 0), v
