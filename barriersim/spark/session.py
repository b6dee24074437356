"""Ray and Spark-on-Ray (RayDP) lifecycle for a run: start both, hand back the live SparkSession, stop both on every
exit path, and keep their logs out of the user's terminal. See docs/runs-and-workloads.md, "Ray and Spark for a
run". The settings: docs/versions-and-settings.md.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from barriersim.errors import RayStartError, first_line
from barriersim.ray_address import AddressError

JAVA_OPENS = (
    "java.lang",
    "java.lang.invoke",
    "java.io",
    "java.net",
    "java.nio",
    "java.math",
    "java.text",
    "java.util",
    "java.util.concurrent",
    "java.util.concurrent.atomic",
    "sun.nio.ch",
    "sun.nio.cs",
    "sun.security.action",
    "sun.util.calendar",
)
# A run's JVMs live for a minute or so: C1 compilation only (no C2 compiler threads competing for the two cores
# while the JVMs load their classes) halves Spark's start here (docs/versions-and-settings.md).
QUICK_START_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
LOG4J2_PROPERTIES = Path(__file__).with_name("log4j2.properties")
SPARK_DRIVER_LOG = "spark-driver.log"
PYTHON_LOG = "ray-and-spark.log"
_QUIET_LOGGERS = ("ray", "raydp", "py4j", "pyspark")


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
        raise RuntimeError(
            f"Spark on Ray: the Ray cluster could not place {executors} executors of {bundle} "
            f"({strategy}) within {PLACEMENT_GROUP_READY_SECONDS} s"
        )
    nodes = placement_group_table(group)["bundles_to_node_id"]
    return group, [nodes[i] for i in range(executors)]


def _nodes_with_cpus() -> int:
    import ray

    return sum(1 for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0)


def java_options() -> str:
    return " ".join(
        (
            "-XX:+IgnoreUnrecognizedVMOptions",
            *QUICK_START_JVM_OPTIONS,
            *(f"--add-opens=java.base/{pkg}=ALL-UNNAMED" for pkg in JAVA_OPENS),
        )
    )


def spark_configs() -> dict[str, str]:
    opts = java_options()
    return {
        "spark.driver.extraJavaOptions": opts,
        "spark.executor.extraJavaOptions": opts,
        "spark.ray.raydp_app_master.extraJavaOptions": opts,
        # RayDP passes this to the driver JVM as log4j2.configurationFile
        "spark.log4j.config.file.name": str(LOG4J2_PROPERTIES),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.session.timeZone": "UTC",
        # pandas and Arrow data go to Spark as Arrow batches, never row by row, and stay Arrow batches in an RDD
        # (a local relation of 100,000 rows would travel inside every task and be converted there row by row)
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
        "spark.sql.execution.arrow.localRelationThreshold": "0",
    }


def _restore_default_sigint() -> None:
    """PySpark's SparkContext installs a SIGINT handler that calls ``cancelAllJobs`` over py4j when it is created on
    the main thread; a Ctrl-C that lands during another py4j call makes that call re-entrant and py4j logs a
    traceback. Python's own handler raises KeyboardInterrupt instead, and ``close`` stops Spark (cancelling its
    jobs) cleanly."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
    root = logging.getLogger()
    if not any(isinstance(f, _DropPy4jInterruptTraceback) for f in root.filters):
        root.addFilter(_DropPy4jInterruptTraceback())
    if sys.unraisablehook is not _drop_py4j_half_made_connection_error:
        global _previous_unraisablehook
        _previous_unraisablehook = sys.unraisablehook
        sys.unraisablehook = _drop_py4j_half_made_connection_error


_previous_unraisablehook = sys.unraisablehook


def _drop_py4j_half_made_connection_error(unraisable) -> None:
    """``sys.unraisablehook``: a Ctrl-C that lands while py4j makes a connection leaves the object without its
    ``socket`` (its ``__init__`` was interrupted), and its ``__del__`` then fails with ``AttributeError`` when it is
    collected, which Python prints as a traceback ("Exception ignored in ..."); the caller reports the interrupt in
    one line, so that error goes to the py4j logger (the run's Python log file), and every other one to the hook
    that was there before."""
    where = getattr(unraisable.object, "__module__", None) or ""
    if where.startswith("py4j.") and isinstance(unraisable.exc_value, AttributeError):
        logging.getLogger("py4j").info("ignored in %r: %r", unraisable.object, unraisable.exc_value)
        return
    _previous_unraisablehook(unraisable)


class _DropPy4jInterruptTraceback(logging.Filter):
    """py4j's ``GatewayClient.send_command`` logs through the root logger, with a traceback: ``KeyboardInterrupt while
    sending command.`` before it re-raises a Ctrl-C (the caller reports the interrupt in one line, so the record is
    dropped), and ``Exception while sending command.`` when the JVM's answer is gone (after a Ctrl-C stopped it, the
    ``Py4JNetworkError`` "Answer from Java side is empty"; the call then fails, and the caller reports that). Such a
    record goes to the py4j logger's own handler instead, the run's Python log file while Spark runs, or nowhere.
    Every other record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.pathname.endswith(f"{os.sep}py4j{os.sep}java_gateway.py"):
            return True
        exc = record.exc_info[1] if record.exc_info else None
        py4j = logging.getLogger("py4j")
        if not isinstance(exc, KeyboardInterrupt) and py4j.handlers and not py4j.propagate:
            py4j.handle(record)
        return False


class _PythonLogs:
    """The Python loggers of Ray, RayDP, py4j and PySpark into one file for as long as Ray and Spark run (their
    warnings are no business of the user's terminal); restored on ``close``."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.handler = logging.FileHandler(path, encoding="utf-8")
        self.handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        self.saved = {}
        for name in _QUIET_LOGGERS:
            logger = logging.getLogger(name)
            self.saved[name] = (list(logger.handlers), logger.propagate, logger.level)
            logger.handlers = [self.handler]
            logger.propagate = False
            logger.setLevel(logging.INFO)

    def quiet_ray_again(self) -> None:
        """``ray.init`` sets up the "ray" logger's own terminal handler: move it into the file again."""
        logger = logging.getLogger("ray")
        logger.handlers = [self.handler]
        logger.propagate = False
        logger.setLevel(logging.INFO)

    def close(self) -> None:
        for name, (handlers, propagate, level) in self.saved.items():
            logger = logging.getLogger(name)
            logger.handlers, logger.propagate = handlers, propagate
            logger.setLevel(level)
        self.handler.close()


_gateway_lock = threading.Lock()


def _launch_driver_jvm_beside_the_app_master(driver_log: Path | None, launched: list):
    """RayDP starts its app master (a Python actor that launches a JVM), then the Spark driver JVM, one after the
    other; this starts the driver JVM (PySpark's py4j gateway, through ``spark-submit`` with RayDP's prepared
    settings) on a thread while the app master starts, with its output in ``driver_log``. PySpark's SparkContext
    then finds the gateway running; it is appended to ``launched``. Returns the function that undoes the patch."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from raydp.spark.ray_cluster import SparkCluster

    original = SparkCluster._set_up_master

    def set_up_master(self, resources, kwargs):
        if SparkContext._gateway is not None:  # a driver JVM of this process is up (it outlives Spark's stop)
            return original(self, resources, kwargs)
        conf = SparkConf(loadDefaults=False, _jvm=None)
        for key, value in self._configs.items():
            conf.set(key, value)
        started: Future = Future()

        def launch() -> None:
            try:
                out = open(driver_log, "ab") if driver_log is not None else None  # noqa: SIM115 - the JVM holds it
                try:
                    popen = {"stdout": out, "stderr": out} if out is not None else None
                    started.set_result(launch_gateway(conf, popen_kwargs=popen))
                finally:
                    if out is not None:
                        out.close()  # the JVM has its own descriptor
            except BaseException as err:  # noqa: BLE001 - re-raised on the caller's thread
                started.set_exception(err)

        threading.Thread(target=launch, name="spark-driver-jvm", daemon=True).start()
        try:
            original(self, resources, kwargs)
        finally:
            gateway = started.result()
            with SparkContext._lock:
                if SparkContext._gateway is None:
                    SparkContext._gateway = gateway
                    SparkContext._jvm = gateway.jvm
                    launched.append(gateway)

    SparkCluster._set_up_master = set_up_master
    return lambda: setattr(SparkCluster, "_set_up_master", original)


@dataclass
class RayAndSpark:
    """Ray and Spark for one run (see the module's docstring)."""

    app_name: str = "barriersim"
    address: str | None = None
    num_cpus: int | None = None
    log_dir: Path | None = None
    spark: Any = None  # a pyspark SparkSession (pyspark is untyped)
    ray_started_seconds: float = 0.0
    spark_started_seconds: float = 0.0
    executors: int = 0  # the Spark executors started (one per node on a cluster of several nodes)
    executor_nodes: list = field(default_factory=list)  # the Ray node of each executor's bundle (spread executors)
    prepared: object = None
    _driver_gateway: object = field(default=None, repr=False)
    _owns_ray: bool = field(default=False, repr=False)
    _placement_group: object = field(default=None, repr=False)
    _spark_future: Future | None = field(default=None, repr=False)
    _logs: _PythonLogs | None = field(default=None, repr=False)

    # -- starting --------------------------------------------------------------------------------------

    def start_ray(self) -> None:
        """Start Ray (or attach to ``address``) on the calling thread, the main one."""
        import ray

        if self.log_dir is not None and self._logs is None:
            self._logs = _PythonLogs(Path(self.log_dir) / PYTHON_LOG)
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        t0 = time.perf_counter()
        if not ray.is_initialized():
            if self.address:
                try:
                    ray.init(address=self.address, log_to_driver=False, logging_level=logging.ERROR)
                except Exception as err:  # noqa: BLE001 - Ray's version mismatch, authentication, GCS errors
                    raise AddressError(f"Ray cluster at {self.address}: {first_line(err)}") from None
            else:
                # A run never attaches to a cluster it did not mean to: "local" always starts a new one.
                try:
                    ray.init(
                        address="local",
                        num_cpus=self.num_cpus or max(4, os.cpu_count() or 2),
                        include_dashboard=False,
                        log_to_driver=False,
                        logging_level=logging.ERROR,
                    )
                except Exception as err:  # noqa: BLE001 - the raylet or the GCS did not come up in Ray's time
                    ray.shutdown()  # what did start (the GCS, a raylet) stops with it
                    raise RayStartError(f"Ray did not start on this machine: {first_line(err)}") from None
            self._owns_ray = True
        if self._logs is not None:
            self._logs.quiet_ray_again()
            logging.getLogger("raydp").info("Ray's session logs: %s", _ray_logs_dir())
        self.ray_started_seconds = time.perf_counter() - t0
        _restore_default_sigint()

    def start_spark(self, prepare=None):
        """Start Spark on Ray (blocking) and return the SparkSession. ``prepare(spark)``, if given, runs on the
        driver while Spark's executor starts (it must not run a Spark job); its result is ``self.prepared``."""
        import raydp

        t1 = time.perf_counter()
        self.executors, strategy = spark_executors(_nodes_with_cpus())
        if strategy is not None and self._placement_group is None:
            self._placement_group, self.executor_nodes = _executor_placement_group(self.executors, strategy)
        driver_log = Path(self.log_dir) / SPARK_DRIVER_LOG if self.log_dir is not None else None
        launched: list = []
        with _gateway_lock:
            undo = _launch_driver_jvm_beside_the_app_master(driver_log, launched)
            try:
                spark = raydp.init_spark(
                    self.app_name,
                    self.executors,
                    EXECUTOR_CORES,
                    EXECUTOR_MEMORY,
                    configs=spark_configs(),
                    fault_tolerant_mode=True,
                    placement_group=self._placement_group,
                )
            finally:
                undo()
                self._driver_gateway = launched[0] if launched else None
        if prepare is not None:
            self.prepared = prepare(spark)
        _wait_for_an_executor(spark)
        self.spark = spark
        self.spark_started_seconds = time.perf_counter() - t1
        return spark

    def start_spark_in_background(self, prepare=None) -> None:
        """Start Spark on a thread (``start_spark``); ``wait_for_spark`` gives the session (or raises what the start
        raised)."""
        future: Future = Future()

        def start() -> None:
            try:
                future.set_result(self.start_spark(prepare))
            except BaseException as err:  # noqa: BLE001 - re-raised by wait_for_spark
                future.set_exception(err)

        self._spark_future = future
        threading.Thread(target=start, name="spark-on-ray-start", daemon=True).start()

    def wait_for_spark(self):
        if self.spark is None and self._spark_future is not None:
            self._spark_future.result()
        return self.spark

    def __enter__(self) -> RayAndSpark:
        try:
            self.start_ray()
            self.start_spark()
        except BaseException:
            self.close()
            raise
        return self

    # -- using -----------------------------------------------------------------------------------------

    @property
    def spark_info(self) -> dict[str, str]:
        sc = self.spark.sparkContext
        info = {"app_id": sc.applicationId, "master": sc.master, "executors": self.executors}
        if self.executor_nodes:
            info["executor_nodes"] = list(self.executor_nodes)
        return info

    # -- stopping --------------------------------------------------------------------------------------

    def close(self) -> None:
        try:
            if self._spark_future is not None:
                future, self._spark_future = self._spark_future, None
                try:  # a start under way finishes first: RayDP cannot be stopped half-started
                    future.result()
                except BaseException:  # noqa: BLE001 - the caller hears of it from wait_for_spark
                    pass
            if self.spark is not None:
                import raydp

                raydp.stop_spark()
                self.spark = None
        finally:
            if self._placement_group is not None:
                from ray.util.placement_group import remove_placement_group

                remove_placement_group(self._placement_group)
                self._placement_group = None
            driver_jvm = None
            if self._driver_gateway is not None:
                gateway, self._driver_gateway = self._driver_gateway, None
                driver_jvm = _stop_driver_jvm(gateway)
            try:
                if self._owns_ray:
                    import ray

                    ray.shutdown()
                    self._owns_ray = False
            finally:
                if driver_jvm is not None:
                    _wait_for_exit(driver_jvm)
                if self._logs is not None:
                    self._logs.close()
                    self._logs = None

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stop_driver_jvm(gateway):
    """Tell the driver JVM this module launched to end (it would end on its own only after this process, when its
    stdin closes), let PySpark launch a new one for the next session of this process, and return its process."""
    from pyspark import SparkContext

    with SparkContext._lock:
        if SparkContext._gateway is gateway:
            SparkContext._gateway = None
            SparkContext._jvm = None
    try:
        gateway.shutdown()
    except Exception:  # noqa: BLE001 - the JVM may be gone already
        pass
    proc = getattr(gateway, "proc", None)
    if proc is not None:
        try:
            proc.stdin.close()  # the gateway server exits at the end of its stdin
        except OSError:
            pass
    return proc


def _wait_for_exit(proc, timeout: float = 10.0) -> None:
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)


EXECUTOR_START_TIMEOUT_SECONDS = 180.0


def _wait_for_an_executor(spark) -> None:
    """Wait until Spark's executor has registered: RayDP returns the session while its executor (a Ray actor
    running a JVM) still starts, and the start of Spark is only over when a job can run."""
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus  # the driver and every registered executor
    deadline = time.monotonic() + EXECUTOR_START_TIMEOUT_SECONDS
    while status().size() < 2:
        if time.monotonic() > deadline:
            raise RuntimeError(f"Spark's executor did not register within {EXECUTOR_START_TIMEOUT_SECONDS:.0f} s")
        time.sleep(0.1)


def _ray_logs_dir() -> str:
    try:
        import ray

        return ray._private.worker._global_node.get_logs_dir_path()  # type: ignore[attr-defined]  # None: caught
    except Exception:  # noqa: BLE001 - only for the log's first line
        return "(unknown)"


def ray_address(address: str | None) -> str | None:
    """The cluster to attach to: ``address``, else ``RAY_ADDRESS`` (Ray's convention), else None (start one)."""
    return address or os.environ.get("RAY_ADDRESS") or None


class SparkOnDemand:
    """A SparkSession for as long as it is needed: the caller's, or Spark on Ray started on first use (its logs in
    ``log_dir``) and stopped by ``close``."""

    def __init__(
        self, spark=None, address: str | None = None, app_name: str = "barriersim-api", log_dir: Path | None = None
    ):
        self._given = spark
        self._address = address
        self._app_name = app_name
        self._log_dir = log_dir
        self._cluster: RayAndSpark | None = None

    @property
    def started(self) -> bool:
        return self._given is not None or self._cluster is not None

    def get(self):
        if self._given is not None:
            return self._given
        if self._cluster is None:
            cluster = RayAndSpark(app_name=self._app_name, address=ray_address(self._address), log_dir=self._log_dir)
            cluster.__enter__()
            self._cluster = cluster
        return self._cluster.spark

    def close(self) -> None:
        if self._cluster is not None:
            cluster, self._cluster = self._cluster, None
            cluster.close()

    def __enter__(self) -> SparkOnDemand:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
