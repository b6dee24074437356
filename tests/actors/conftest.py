"""A real local Ray cluster of three nodes for the actor tests (``barriersim.local_cluster.LocalCluster``: a head
with 3 logical CPUs and two worker nodes with 2 each, every node a raylet of its own), this process its driver:
started once, shut down at the end, and no process of it left behind (every process of the cluster inherits a
marker in its environment). A job's TaskManagers spread over the three nodes; a single-TaskManager job runs on
the head, the driver's node. ``replaced_nodes`` replaces after a test the nodes a ``kill_node`` fault killed."""

import os

import psutil
import pytest

from barriersim.local_cluster import LocalCluster
from tests.e2e.processes import MARKER_VARIABLE, marked_environment

NODES = 3


@pytest.fixture(scope="session")
def ray_cluster():
    _, marker = marked_environment()
    # Only the cluster's processes (its nodes' and, later, what their raylets start) carry the marker; a process
    # this pytest process starts later (e.g. PySpark's driver JVM in a Spark test, alive until pytest exits) must not.
    cluster = LocalCluster(NODES, head_cpus=3, worker_cpus=2, environment={MARKER_VARIABLE: marker})
    try:
        yield cluster
    finally:
        cluster.shutdown()
        left = _marked_processes(marker)
        _, alive = psutil.wait_procs(left, timeout=30)
        assert not alive, f"processes of the test cluster left behind: {[p.pid for p in alive]}"


@pytest.fixture
def replaced_nodes(ray_cluster):
    """The cluster, with the nodes the test killed replaced afterwards (so every test starts with all nodes)."""
    try:
        yield ray_cluster
    finally:
        ray_cluster.replace_dead_nodes()


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
