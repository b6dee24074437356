"""A Ray cluster of several nodes on one machine, for the tests, the benchmarks and for trying multi-node runs
before a real cluster: a head node and worker nodes, each a raylet of its own with its own logical CPUs and
object store, so that TaskManagers spread over nodes and a ``kill_node`` fault kills a real raylet.

How this works: ``LocalCluster`` starts the nodes with Ray's ``ray.cluster_utils.Cluster`` (every process a child
of this one), and connects this process to the head as the cluster's driver unless told not to. Ray declares a
node dead when its health checks fail; the head is started with short checks (``HEALTH_CHECKS``: every 500 ms,
dead after 4 failures), so a killed node is seen within seconds. ``replace_dead_nodes`` removes what is left of
nodes that died (a ``kill_node`` fault) and starts new ones in their place; ``shutdown`` disconnects and stops
every node. ``address`` is what ``barriersim run --address`` takes."""

from __future__ import annotations

import os
from contextlib import contextmanager

# The head's GCS checks every node's raylet; a raylet that does not answer 4 checks 500 ms apart is dead.
HEALTH_CHECKS = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 500, "health_check_failure_threshold": 4}
OBJECT_STORE_BYTES = 100 * 1024 * 1024  # per node: small, as the tests' data is


@contextmanager
def _environment(extra: dict[str, str]):
    """Run with ``extra`` in the environment (processes started meanwhile inherit it)."""
    previous = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for k, v in previous.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class LocalCluster:
    """``nodes`` Ray nodes on this machine: a head with ``head_cpus`` logical CPUs and workers with
    ``worker_cpus`` each. ``environment``: variables every process of the cluster gets (e.g. a marker to find
    them by)."""

    def __init__(
        self,
        nodes: int = 3,
        head_cpus: int = 2,
        worker_cpus: int = 1,
        connect: bool = True,
        environment: dict[str, str] | None = None,
    ):
        from ray.cluster_utils import Cluster

        self._environment = dict(environment or {})
        self._worker_cpus = worker_cpus
        with _environment(self._environment):
            self.cluster = Cluster(
                initialize_head=True,
                head_node_args={
                    "num_cpus": head_cpus,
                    "object_store_memory": OBJECT_STORE_BYTES,
                    "include_dashboard": False,
                    "_system_config": HEALTH_CHECKS,
                },
            )
            try:
                for _ in range(nodes - 1):
                    self._add_worker()
                self.cluster.wait_for_nodes()
            except BaseException:
                self.cluster.shutdown()
                raise
        self.connected = False
        if connect:
            self.connect()

    @property
    def address(self) -> str:
        return self.cluster.address

    def _add_worker(self):
        with _environment(self._environment):
            return self.cluster.add_node(num_cpus=self._worker_cpus, object_store_memory=OBJECT_STORE_BYTES)

    def connect(self) -> None:
        import ray

        ray.init(address=self.address, log_to_driver=False)
        self.connected = True

    def alive_node_ids(self) -> set[str]:
        import ray

        return {n["NodeID"] for n in ray.nodes() if n["Alive"]}

    def replace_dead_nodes(self) -> int:
        """Remove the worker nodes that died (their processes, if any are left) and start as many new ones;
        returns how many were replaced."""
        alive = self.alive_node_ids()
        dead = [node for node in self.cluster.worker_nodes if node.node_id not in alive]
        for node in dead:
            self.cluster.remove_node(node, allow_graceful=False)
        for _ in dead:
            self._add_worker()
        if dead:
            self.cluster.wait_for_nodes()
        return len(dead)

    def shutdown(self) -> None:
        import ray

        if self.connected:
            ray.shutdown()
            self.connected = False
        self.cluster.shutdown()
