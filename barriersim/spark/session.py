"""Ray and Spark-on-Ray (RayDP) lifecycle for a run: start both, hand back the live SparkSession, stop both
on every exit path.

How this works: ``RayAndSpark`` is a context manager. Entering it starts Ray (a new local cluster with the
dashboard off, or the cluster at ``address``), applies the RayDP fetch-task workaround, and starts Spark on
that cluster with ``raydp.init_spark`` using the settings found necessary (``docs/versions-and-settings.md``: Java
17 ``--add-opens`` flags for driver, executor and app master; ``PYSPARK_PYTHON``; fault-tolerant mode). On a
cluster of several nodes it starts one executor per node with CPUs (at most ``MAX_SPREAD_EXECUTORS``) in a
placement group of strategy ``SPREAD`` (one bundle per executor, of RayDP's shape: its cores and memory), so the
executors run on different nodes, and records each executor's node (``executor_nodes``); on one node, one
executor.
Leaving it (normally, on an exception, or on Ctrl-C) stops Spark and shuts Ray down, so no Java or Ray process is
left behind.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass, field

JAVA_OPENS = (
    "java.lang", "java.lang.invoke", "java.io", "java.net", "java.nio", "java.math", "java.text",
    "java.util", "java.util.concurrent", "java.util.concurrent.atomic", "sun.nio.ch", "sun.nio.cs",
    "sun.security.action", "sun.util.calendar",
)


MAX_SPREAD_EXECUTORS = 3  # Spark executors on a cluster of several nodes: one per node, at most this many


def spark_executors(nodes_with_cpus: int) -> tuple[int, str | None]:
    """How many executors to start and RayDP's placement group strategy for them: one per node with CPUs (at
    most ``MAX_SPREAD_EXECUTORS``), spread over the nodes; one, anywhere, on a one-node cluster."""
    executors = max(1, min(nodes_with_cpus, MAX_SPREAD_EXECUTORS))
    return executors, ("SPREAD" if executors > 1 else None)


EXECUTOR_CORES = 1
EXECUTOR_MEMORY = "1G"
PLACEMENT_GROUP_READY_SECONDS = 120


def _executor_placement_group(executors: int, strategy: str):
    """A placement group with one bundle per executor, as RayDP would make it (its cores and memory), and the
    node of each bundle once Ray placed them."""
    import ray
    from ray.util.placement_group import placement_group, placement_group_table
    from raydp.utils import parse_memory_size

    bundle = {"CPU": EXECUTOR_CORES, "memory": parse_memory_size(EXECUTOR_MEMORY)}
    group = placement_group([dict(bundle) for _ in range(executors)], strategy=strategy)
    ready, _ = ray.wait([group.ready()], timeout=PLACEMENT_GROUP_READY_SECONDS)
    if not ready:
        from ray.util.placement_group import remove_placement_group

        remove_placement_group(group)
        raise RuntimeError(f"Spark on Ray: the Ray cluster could not place {executors} executors of {bundle} "
                           f"({strategy}) within {PLACEMENT_GROUP_READY_SECONDS} s")
    nodes = placement_group_table(group)["bundles_to_node_id"]
    return group, [nodes[i] for i in range(executors)]


def _nodes_with_cpus() -> int:
    import ray

    return sum(1 for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0)


def java_options() -> str:
    return "-XX:+IgnoreUnrecognizedVMOptions " + " ".join(
        f"--add-opens=java.base/{pkg}=ALL-UNNAMED" for pkg in JAVA_OPENS
    )


def spark_configs() -> dict[str, str]:
    opts = java_options()
    return {
        "spark.driver.extraJavaOptions": opts,
        "spark.executor.extraJavaOptions": opts,
        "spark.ray.raydp_app_master.extraJavaOptions": opts,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.session.timeZone": "UTC",
    }


def _restore_default_sigint() -> None:
    """PySpark's SparkContext installs a SIGINT handler that calls ``cancelAllJobs`` over py4j; a Ctrl-C that lands
    during another py4j call makes that call re-entrant and py4j logs a traceback. Python's own handler raises
    KeyboardInterrupt instead, and leaving ``RayAndSpark`` stops Spark (cancelling its jobs) cleanly."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
    root = logging.getLogger()
    if not any(isinstance(f, _DropPy4jInterruptTraceback) for f in root.filters):
        root.addFilter(_DropPy4jInterruptTraceback())


class _DropPy4jInterruptTraceback(logging.Filter):
    """py4j's ``send_command`` logs ``KeyboardInterrupt while sending command.`` with a traceback through the root
    logger before it re-raises the KeyboardInterrupt; the caller reports the interrupt in one line, so the record is
    dropped. Every other record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (isinstance(exc, KeyboardInterrupt) and record.pathname.endswith("java_gateway.py"))


def _quiet_ray_data() -> None:
    """Ray Data logs every dataset execution and draws progress bars; a run prints its own progress."""
    import ray.data

    ray.data.DataContext.get_current().enable_progress_bars = False
    for name in ("ray.data", "ray.data._internal", "ray"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _patch_raydp_fetch_task() -> None:
    """raydp 1.6.5's fetch task switches the Ray worker it runs in to "load code from local" for good, and
    Ray reuses that worker for later tasks, which then crash. Giving the task its own ``runtime_env`` puts it
    in a separate worker pool (``docs/versions-and-settings.md``)."""
    import ray
    import raydp.spark.dataset as raydp_dataset

    fetch = raydp_dataset._fetch_arrow_table_from_executor
    if getattr(fetch, "_barriersim_patched", False):
        return
    patched = ray.remote(max_retries=-1, runtime_env={"env_vars": {"BARRIERSIM_RAYDP_FETCH_POOL": "1"}})(
        fetch._function
    )
    patched._barriersim_patched = True
    raydp_dataset._fetch_arrow_table_from_executor = patched


@dataclass
class RayAndSpark:
    """Context manager owning Ray and Spark for one run."""

    app_name: str = "barriersim"
    address: str | None = None
    num_cpus: int | None = None
    spark: object = None
    ray_started_seconds: float = 0.0
    spark_started_seconds: float = 0.0
    executors: int = 0  # the Spark executors started (one per node on a cluster of several nodes)
    executor_nodes: list = field(default_factory=list)  # the Ray node of each executor's bundle (spread executors)
    _owns_ray: bool = field(default=False, repr=False)
    _placement_group: object = field(default=None, repr=False)

    def __enter__(self) -> "RayAndSpark":
        import ray

        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        t0 = time.perf_counter()
        try:
            if not ray.is_initialized():
                if self.address:
                    ray.init(address=self.address, log_to_driver=False)
                else:
                    # A run never attaches to a cluster it did not mean to: "local" always starts a new one.
                    ray.init(
                        address="local",
                        num_cpus=self.num_cpus or max(4, os.cpu_count() or 2),
                        include_dashboard=False,
                        log_to_driver=False,
                        logging_level=logging.ERROR,
                    )
                self._owns_ray = True
            self.ray_started_seconds = time.perf_counter() - t0
            _quiet_ray_data()
            _patch_raydp_fetch_task()
            import raydp

            t1 = time.perf_counter()
            self.executors, strategy = spark_executors(_nodes_with_cpus())
            if strategy is not None:
                self._placement_group, self.executor_nodes = _executor_placement_group(self.executors, strategy)
            self.spark = raydp.init_spark(
                self.app_name, self.executors, EXECUTOR_CORES, EXECUTOR_MEMORY, configs=spark_configs(),
                fault_tolerant_mode=True, placement_group=self._placement_group,
            )
            self.spark_started_seconds = time.perf_counter() - t1
            self.spark.sparkContext.setLogLevel("ERROR")
            _restore_default_sigint()
        except BaseException:
            self.close()
            raise
        return self

    @property
    def spark_info(self) -> dict[str, str]:
        sc = self.spark.sparkContext
        info = {"app_id": sc.applicationId, "master": sc.master, "executors": self.executors}
        if self.executor_nodes:
            info["executor_nodes"] = list(self.executor_nodes)
        return info

    def close(self) -> None:
        try:
            if self.spark is not None:
                import raydp

                raydp.stop_spark()
                self.spark = None
        finally:
            if self._placement_group is not None:
                from ray.util.placement_group import remove_placement_group

                remove_placement_group(self._placement_group)
                self._placement_group = None
            if self._owns_ray:
                import ray

                ray.shutdown()
                self._owns_ray = False

    def __exit__(self, *exc: object) -> None:
        self.close()


def ray_address(address: str | None) -> str | None:
    """The cluster to attach to: ``address``, else ``RAY_ADDRESS`` (Ray's convention), else None (start one)."""
    return address or os.environ.get("RAY_ADDRESS") or None


class SparkOnDemand:
    """A SparkSession for as long as it is needed: the caller's, or Spark on Ray started on first use and
    stopped by ``close``."""

    def __init__(self, spark=None, address: str | None = None, app_name: str = "barriersim-api"):
        self._given = spark
        self._address = address
        self._app_name = app_name
        self._cluster = None

    def get(self):
        if self._given is not None:
            return self._given
        if self._cluster is None:
            cluster = RayAndSpark(app_name=self._app_name, address=ray_address(self._address))
            cluster.__enter__()
            self._cluster = cluster
        return self._cluster.spark

    def close(self) -> None:
        if self._cluster is not None:
            cluster, self._cluster = self._cluster, None
            cluster.close()

    def __enter__(self) -> "SparkOnDemand":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
