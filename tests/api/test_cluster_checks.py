"""The API checks a Ray address and its timeout before anything is written, as the command line does: a notebook's
``barriersim.run(..., backend="ray", address=...)`` that cannot reach its cluster raises ``AddressError`` (a
``BarriersimError``, one line) and leaves the run directory, or a previous run in it, alone."""

from __future__ import annotations

import socket

import pytest

import barriersim
from barriersim.errors import BarriersimError
from barriersim.ray_address import AddressError, check_address, connect_timeout


def test_an_unreachable_cluster_is_one_line_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(AddressError) as info:
        barriersim.run("quickstart", backend="ray", address="localhost:1", out=tmp_path / "run")
    assert isinstance(info.value, BarriersimError)
    assert str(info.value) == "--address localhost:1: no Ray cluster at localhost:1 (connection refused)"
    assert not (tmp_path / "run").exists()


def test_a_previous_run_survives_a_forced_run_whose_cluster_does_not_answer(tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    out = tmp_path / "run"
    barriersim.run("quickstart", backend="sim", out=out)
    before = sorted(p.name for p in out.iterdir())
    with socket.socket() as silent:  # takes connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        port = silent.getsockname()[1]
        with pytest.raises(AddressError, match=f"no answer from 127.0.0.1:{port} within 0.3 s"):
            barriersim.run(
                "quickstart", backend="ray", address=f"127.0.0.1:{port}", out=out, force=True, connect_timeout=0.3
            )
    assert sorted(p.name for p in out.iterdir()) == before


@pytest.mark.parametrize("value", [0, -1, "soon", True])
def test_a_timeout_that_is_no_positive_number_is_refused(value):
    with pytest.raises(AddressError, match="connect_timeout: must be a number of seconds > 0"):
        connect_timeout(value)


def test_the_timeout_comes_from_the_environment_else_30_s(monkeypatch):
    monkeypatch.delenv("BARRIERSIM_CONNECT_TIMEOUT", raising=False)
    assert connect_timeout() == 30.0
    monkeypatch.setenv("BARRIERSIM_CONNECT_TIMEOUT", "4.5")
    assert connect_timeout() == 4.5 and connect_timeout(2) == 2.0
    monkeypatch.setenv("BARRIERSIM_CONNECT_TIMEOUT", "never")
    with pytest.raises(AddressError, match="BARRIERSIM_CONNECT_TIMEOUT: must be a number of seconds > 0, got 'never'"):
        connect_timeout()


def test_no_address_starts_a_local_cluster_and_local_is_passed_on(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert check_address(None) is None and check_address("local") == "local"
