"""``run --checkpoint-storage`` / ``checkpoint_storage=``: a URI that names no storage, or an object store the
driver's node cannot reach, is a one-line error before anything starts (on either backend); a plain path is made
absolute."""

import pytest

from barriersim import api
from barriersim.cli import main
from barriersim.errors import ArgumentError


@pytest.mark.parametrize(
    "backend, uri, message",
    [
        ("sim", "s3:///checkpoints", "not an object store URI"),  # the simulator checks a storage as Ray does
        ("ray", "hdfs://namenode/checkpoints", "unknown scheme 'hdfs'"),
        ("ray", "s3:///checkpoints", "not an object store URI"),
        ("ray", "s3://bucket/checkpoints?no_such_option=1", "Unexpected query parameter"),
        # nothing listens on port 1: the driver's node, where the job manager runs, cannot reach the store
        ("ray", "s3://bucket/checkpoints?endpoint_override=127.0.0.1:1&scheme=http", "cannot reach the object store"),
    ],
)
def test_a_storage_uri_that_names_no_storage_is_a_one_line_error_before_anything_starts(
    backend, uri, message, tmp_path, capsys
):
    out = tmp_path / "run"
    code = main(
        ["run", "scenarios/quickstart.toml", "--backend", backend, "--checkpoint-storage", uri, "--out", str(out)]
    )
    err = capsys.readouterr().err
    assert code == 2 and message in err and uri.split("?")[0] in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()
    with pytest.raises(ArgumentError, match=message):
        api.run("scenarios/quickstart.toml", backend=backend, checkpoint_storage=uri, out=out)


def test_a_plain_path_is_made_absolute_and_a_uri_kept(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert api.check_checkpoint_storage("ray", "shared/checkpoints") == str(tmp_path / "shared" / "checkpoints")
    assert api.check_checkpoint_storage("ray", "file:///mnt/shared") == "file:///mnt/shared"
    assert api.check_checkpoint_storage("ray", None) is None
