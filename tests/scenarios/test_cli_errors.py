"""What the command line does with a Ray address it cannot reach, a missing extra and a mistyped argument: one
line on stderr, exit status 2, no traceback, nothing written; Ray is never started for such a run (the addresses
are checked, and the extras looked up, before anything starts). The real CLI runs in a subprocess; a missing extra
is made by a ``sitecustomize`` on ``PYTHONPATH`` whose import finder refuses the named packages."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
HANG_GUARD_S = 120  # a hang guard, not a timing assertion: each of these commands must end on its own


def cli(*args, env: dict | None = None, timeout: float = HANG_GUARD_S):
    environment = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "RAY_ADDRESS")}
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "barriersim.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        env=environment,
    )


def one_line(proc) -> str:
    """The one line a refused command prints: exit status 2, nothing else on stderr or stdout."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


# -- Ray addresses ---------------------------------------------------------------------------------------------


@pytest.fixture
def silent_port():
    """A port that takes connections (the kernel completes them) and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield s.getsockname()[1]


@pytest.fixture
def http_port():
    """A port where a server answers, but not as a Ray cluster: an HTTP/1.0 error to whatever it is sent."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    conn.recv(1024)
                    conn.sendall(b"HTTP/1.0 400 Bad request\r\n\r\n")
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(5)
    server.close()


def test_a_refused_address_is_one_line_and_leaves_no_run_directory(tmp_path):
    out = tmp_path / "run"
    line = one_line(cli("run", "quickstart", "--address", "localhost:1", "--out", str(out)))
    assert line == "barriersim: --address localhost:1: no Ray cluster at localhost:1 (connection refused)"
    assert not out.exists()


def test_an_unknown_host_is_one_line(tmp_path):
    line = one_line(cli("run", "quickstart", "--address", "nonsense-host.invalid:6379", "--out", str(tmp_path / "r")))
    assert line.startswith("barriersim: --address nonsense-host.invalid:6379: unknown host 'nonsense-host.invalid' (")
    assert not (tmp_path / "r").exists()


def test_a_ray_client_address_is_refused_in_one_line(tmp_path):
    line = one_line(cli("run", "quickstart", "--address", "ray://localhost:1", "--out", str(tmp_path / "r")))
    assert line.startswith("barriersim: --address ray://localhost:1: a Ray Client address; the run's Spark on Ray")
    assert "HOST:PORT" in line


@pytest.mark.parametrize("address", ["localhost", "localhost:0", "http://localhost:6379", "localhost:port"])
def test_an_address_that_is_no_host_and_port_is_one_line(tmp_path, address):
    line = one_line(cli("run", "quickstart", "--address", address, "--out", str(tmp_path / "r")))
    assert (
        line == f"barriersim: --address {address}: must be the Ray head's GCS address HOST:PORT (port 6379 by default)"
    )


def test_an_address_that_does_not_answer_gives_up_after_the_connect_timeout(tmp_path, silent_port):
    proc = cli(
        "run",
        "quickstart",
        "--address",
        f"127.0.0.1:{silent_port}",
        "--connect-timeout",
        "1",
        "--out",
        str(tmp_path / "r"),
    )
    assert one_line(proc) == (
        f"barriersim: --address 127.0.0.1:{silent_port}: no answer from 127.0.0.1:{silent_port} within 1 s"
    )
    # the timeout from the environment, when the option is not given
    proc = cli(
        "run",
        "quickstart",
        "--address",
        f"127.0.0.1:{silent_port}",
        "--out",
        str(tmp_path / "r"),
        env={"BARRIERSIM_CONNECT_TIMEOUT": "0.5"},
    )
    assert one_line(proc).endswith("within 0.5 s")
    assert not (tmp_path / "r").exists()


def test_a_server_that_is_not_ray_is_one_line(tmp_path, http_port):
    line = one_line(cli("run", "quickstart", "--address", f"127.0.0.1:{http_port}", "--out", str(tmp_path / "r")))
    assert line == (
        f"barriersim: --address 127.0.0.1:{http_port}: 127.0.0.1:{http_port} answers, but not as a Ray "
        "cluster (no gRPC server there; the head's GCS port is 6379 by default)"
    )


def test_a_local_ray_that_does_not_start_is_one_line_and_leaves_no_run_directory(tmp_path):
    # a real failure of Ray's start (its temporary directory cannot be made), as a raylet that does not come up in
    # Ray's 30 s on a starved machine: the error in one line, no traceback, no run directory
    out = tmp_path / "run"
    (tmp_path / "a-file").write_text("")
    proc = cli("run", "quickstart", "--out", str(out), env={"RAY_TMPDIR": str(tmp_path / "a-file" / "ray")})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.splitlines() == [
        f"barriersim: Ray did not start on this machine: [Errno 20] Not a directory: '{tmp_path / 'a-file' / 'ray'}'"
    ]
    assert not out.exists()


def test_ray_address_from_the_environment_is_checked_and_named(tmp_path):
    line = one_line(cli("run", "quickstart", "--out", str(tmp_path / "r"), env={"RAY_ADDRESS": "localhost:1"}))
    assert line == "barriersim: RAY_ADDRESS localhost:1: no Ray cluster at localhost:1 (connection refused)"


def test_force_keeps_the_previous_run_when_the_address_fails(tmp_path):
    out = tmp_path / "run"
    assert cli("run", "quickstart", "--backend", "sim", "--out", str(out)).returncode == 0
    before = sorted(p.name for p in out.iterdir())
    one_line(cli("run", "quickstart", "--address", "localhost:1", "--out", str(out), "--force"))
    assert sorted(p.name for p in out.iterdir()) == before


def test_report_and_sweep_check_the_address_before_any_work(tmp_path):
    sweep = cli("sweep", "skew", "--address", "localhost:1", "--out", str(tmp_path / "sweep"))
    assert one_line(sweep) == (
        "barriersim sweep: --address localhost:1: no Ray cluster at localhost:1 (connection refused)"
    )
    assert not (tmp_path / "sweep").exists()
    # a run whose statistics the report computes in Spark (one that ran on Ray: none written yet)
    out = tmp_path / "run"
    assert cli("run", "quickstart", "--backend", "sim", "--out", str(out)).returncode == 0
    summary = json.loads((out / "summary.json").read_text())
    (out / "summary.json").write_text(json.dumps({**summary, "backend": "ray"}))
    report = cli("report", str(out), "--address", "localhost:1")
    assert one_line(report) == (
        "barriersim report: --address localhost:1: no Ray cluster at localhost:1 (connection refused)"
    )
    assert not (out / "report").exists() and not (out / "analytics").exists()


# -- missing extras --------------------------------------------------------------------------------------------

BLOCKER = textwrap.dedent('''
    import os, sys

    _BLOCKED = {n for n in os.environ.get("BARRIERSIM_TEST_BLOCKED", "").split(",") if n}


    class _NotInstalled:
        """Refuses the blocked packages as an install without them would."""

        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in _BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None


    sys.meta_path.insert(0, _NotInstalled())
''')


@pytest.fixture
def without(tmp_path):
    """``without("ray,pyspark")``: the environment of a CLI run in which those packages are not installed."""
    site = tmp_path / "blocker"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)

    def env(blocked: str) -> dict:
        return {"PYTHONPATH": str(site), "BARRIERSIM_TEST_BLOCKED": blocked}

    return env


def test_the_blocker_makes_a_package_unimportable(without):
    proc = subprocess.run(
        [sys.executable, "-c", "import pyspark"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **without("pyspark")},
    )
    assert proc.returncode == 1 and "ModuleNotFoundError: No module named 'pyspark'" in proc.stderr


@pytest.mark.parametrize("blocked, module", [("ray,raydp,pyspark", "ray"), ("raydp", "raydp"), ("pyspark", "pyspark")])
def test_the_ray_backend_without_its_extra_is_one_line(tmp_path, without, blocked, module):
    proc = cli("run", "quickstart", "--out", str(tmp_path / "r"), env=without(blocked))
    assert one_line(proc) == (
        f"barriersim: the Ray backend needs {module}, which is not installed: pip install 'barriersim[spark]'"
    )
    assert not (tmp_path / "r").exists()


def test_the_simulator_needs_no_extra(tmp_path, without):
    proc = cli(
        "run",
        "quickstart",
        "--backend",
        "sim",
        "--out",
        str(tmp_path / "r"),
        env=without("ray,raydp,pyspark,matplotlib"),
    )
    assert proc.returncode == 0, proc.stderr
    assert "aligned: verdict: exactly-once" in proc.stdout


def test_report_without_matplotlib_is_one_line(tmp_path, without):
    out = tmp_path / "r"
    assert cli("run", "quickstart", "--backend", "sim", "--out", str(out)).returncode == 0
    proc = cli("report", str(out), env=without("matplotlib"))
    assert one_line(proc) == (
        "barriersim report: plotting needs matplotlib, which is not installed: pip install 'barriersim[report]'"
    )
    assert not (out / "report").exists()


def test_sweep_without_spark_is_one_line_before_its_first_run(tmp_path, without):
    # a small sweep aggregates in pandas without Spark; one asked to aggregate in Spark needs it
    proc = cli(
        "sweep", "skew", "--analytics", "spark", "--out", str(tmp_path / "sweep"), env=without("ray,raydp,pyspark")
    )
    assert one_line(proc) == (
        "barriersim sweep: the aggregation in Spark on Ray (--analytics pandas or "
        "--no-analytics: without it) needs ray, which is not installed: "
        "pip install 'barriersim[spark]'"
    )
    assert not (tmp_path / "sweep").exists()


# -- arguments and names ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["run", "quickstart", "--mode", "fast"],
            "barriersim run: argument --mode: invalid choice: 'fast' (choose from 'aligned', 'unaligned', "
            "'aligned-with-timeout', 'at-least-once', 'all') (see barriersim run --help)",
        ),
        (["run"], "barriersim run: the following arguments are required: scenario (see barriersim run --help)"),
        (
            ["frob"],
            "barriersim: argument COMMAND: invalid choice: 'frob' (choose from 'run', 'replay', 'report', "
            "'sweep', 'campaign', 'scenarios') (see barriersim --help)",
        ),
        (
            ["run", "quickstart", "--connect-timeout", "0"],
            "barriersim run: argument --connect-timeout: must be a number of seconds > 0, got '0' (see barriersim run "
            "--help)",
        ),
    ],
)
def test_an_argument_error_is_one_line_with_a_hint(args, line):
    assert one_line(cli(*args)) == line


@pytest.mark.parametrize(
    "setting, problem",
    [
        (
            "checkpointing.nosuch=5",
            "overrides.checkpointing.nosuch: unknown key 'nosuch' in [checkpointing]; its keys: "
            "mode, interval_ms, timeout_ms,",
        ),
        (
            "checkpointing.interval=5",
            "overrides.checkpointing.interval: unknown key 'interval' in [checkpointing] (did you "
            "mean checkpointing.interval_ms?); its keys: mode, interval_ms,",
        ),
        (
            "checkpoint.interval_ms=5",
            "overrides.checkpoint.interval_ms: unknown section 'checkpoint' (did you mean "
            "checkpointing.interval_ms?); the sections: workload, checkpointing, network,",
        ),
        ("interval_ms=5", "overrides.interval_ms: must be SECTION.KEY (did you mean checkpointing.interval_ms?)"),
    ],
)
def test_the_set_message_names_the_unknown_key_and_the_known_ones(tmp_path, setting, problem):
    line = one_line(cli("run", "quickstart", "--backend", "sim", "--set", setting, "--out", str(tmp_path / "r")))
    assert line.startswith("barriersim: ") and problem in line
    assert not (tmp_path / "r").exists()


def test_a_bundled_scenario_runs_by_name_and_scenarios_lists_them(tmp_path):
    proc = cli("run", "backpressure-slow-sink", "--backend", "sim", "--out", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    assert "barriersim sim: backpressure-slow-sink (seed 5)" in proc.stdout
    listing = cli("scenarios")
    assert listing.returncode == 0, listing.stderr
    for name, words in (
        ("quickstart", "Two sources, a keyed running sum"),
        ("backpressure_slow_sink", "Unthrottled"),
        ("large/high_rate", "One source at 1,000,000 records/s"),
    ):
        assert [line for line in listing.stdout.splitlines() if f"│ {name} " in line and words in line], listing.stdout
    assert max(len(line) for line in listing.stdout.splitlines()) <= 120
    unknown = one_line(cli("run", "quickstartt", "--backend", "sim"))
    assert unknown == (
        "barriersim: quickstartt: no such scenario file, nor a bundled scenario of that name "
        "(barriersim scenarios lists them)"
    )
