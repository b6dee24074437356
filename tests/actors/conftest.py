"""A real local Ray cluster for the actor tests: started once, shut down at the end, and no process of it
left behind (every process of the cluster inherits a marker in its environment)."""

import os

import psutil
import pytest
import ray

from tests.e2e.processes import MARKER_VARIABLE, marked_environment


@pytest.fixture(scope="session")
def ray_cluster():
    _, marker = marked_environment()
    previous = os.environ.get(MARKER_VARIABLE)
    os.environ[MARKER_VARIABLE] = marker
    try:
        ray.init(address="local", include_dashboard=False, num_cpus=4, log_to_driver=False)
    finally:
        # Only the cluster's processes (spawned by ray.init and, later, by its raylet) carry the marker; a process
        # this pytest process starts later (e.g. PySpark's driver JVM in a Spark test, alive until pytest exits)
        # must not.
        if previous is None:
            os.environ.pop(MARKER_VARIABLE, None)
        else:
            os.environ[MARKER_VARIABLE] = previous
    try:
        yield
    finally:
        ray.shutdown()
        left = _marked_processes(marker)
        _, alive = psutil.wait_procs(left, timeout=30)
        assert not alive, f"processes of the test cluster left behind: {[p.pid for p in alive]}"


def _marked_processes(marker: str) -> list:
    found = []
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == os.getpid():
            continue
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get(MARKER_VARIABLE) == marker:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found
