"""Simulator work spread over a Ray cluster as tasks (a sweep's points, a campaign's batches of seeds).

``RayTasks`` starts a local Ray (or attaches to ``address``) through ``barriersim.spark.session.RayAndSpark``, so
Spark started later shares it; ``map_unordered`` runs a module-level function over items as Ray tasks, at most
``parallelism`` at a time (default: this machine's cores, or the cluster's CPUs), and yields each result as its
task ends; a start that fails is one ``RayStartError`` line (a caller that chose Ray itself goes on in-process).
``worth_ray`` is the rule for starting Ray at all. A task that writes files on a node that is not the driver's
sends them back (``pack_files``) for the driver to write (``unpack_files``), so a run directory ends up where the
caller asked, whatever node ran it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from barriersim.errors import ArgumentError, RayStartError, first_line
from barriersim.extras import importable
from barriersim.ray_address import AddressError
from barriersim.runtime.storage.atomic_file import AtomicFileWriter
from barriersim.spark.session import RayAndSpark, ray_address

# Ray's start and stop cost about 4-5 s on this 2-core machine: work that would take less than this in one process
# stays in it.
RAY_WORTH_SECONDS = 10.0


def ray_installed() -> bool:
    return importable("ray")


def worth_ray(first_seconds: float, rest_per_first: float) -> bool:
    """Whether the rest of some work (``rest_per_first`` times the part that took ``first_seconds`` in this
    process) is worth starting Ray for, over this machine's cores."""
    return first_seconds * rest_per_first >= RAY_WORTH_SECONDS and (os.cpu_count() or 1) >= 2 and ray_installed()


def default_parallelism(address: str | None) -> int:
    """One task per core of this machine, or per CPU of the cluster at ``address`` (Ray must be connected)."""
    if address is None:
        return max(1, os.cpu_count() or 1)
    import ray

    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def check_parallelism(parallelism: int | None) -> int | None:
    if parallelism is not None and (
        isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1
    ):
        raise ArgumentError(f"parallelism: must be an integer >= 1, got {parallelism!r}")
    return parallelism


class RayTasks:
    """Ray for a command's tasks: started (or attached to) on creation, shut down by ``close`` if it started it;
    ``num_cpus``: a local Ray's logical CPUs (default: ``RayAndSpark``'s)."""

    def __init__(
        self,
        address: str | None = None,
        parallelism: int | None = None,
        log_dir: Path | None = None,
        app_name: str = "barriersim-tasks",
        num_cpus: int | None = None,
    ):
        import ray

        self.address = ray_address(address)
        self._ray = RayAndSpark(app_name=app_name, address=self.address, log_dir=log_dir, num_cpus=num_cpus)
        try:
            self._ray.start_ray()
            self.driver_ip = ray.util.get_node_ip_address()
            # what another driver attaches to: the address given, or the GCS of the Ray started here
            self.cluster_address = self.address or ray.get_runtime_context().gcs_address
            self.parallelism = parallelism or default_parallelism(self.address)
        except (AddressError, KeyboardInterrupt):
            self._ray.close()
            raise
        except Exception as err:  # noqa: BLE001 - Ray's start raises bare Exceptions (a raylet or GCS timeout)
            self._ray.close()
            ray.shutdown()  # what a failed start left
            raise RayStartError(f"Ray did not start: {first_line(err)}") from None
        except BaseException:
            self._ray.close()
            raise

    def map_unordered(self, fn: Callable, items: Iterable, shared: tuple = ()) -> Iterator[tuple[int, Any]]:
        """``(i, fn(item_i, *shared))`` for each item, as the tasks end; ``shared`` values are put in Ray's object
        store once. A task's error is raised here (its own exception, not Ray's wrapper)."""
        import ray

        remote = ray.remote(num_cpus=1)(fn)
        refs = tuple(ray.put(value) for value in shared)
        pending = iter(enumerate(items))
        running: dict = {}
        try:
            while True:
                while len(running) < self.parallelism:
                    nxt = next(pending, None)
                    if nxt is None:
                        break
                    running[remote.remote(nxt[1], *refs)] = nxt[0]
                if not running:
                    return
                [ready], _ = ray.wait(list(running), num_returns=1)
                index = running.pop(ready)
                try:
                    result = ray.get(ready)
                except ray.exceptions.RayTaskError as err:
                    cause = getattr(err, "cause", None)
                    raise (cause if isinstance(cause, BaseException) else err) from None
                yield index, result
        finally:
            for ref in running:
                ray.cancel(ref, force=True)

    def close(self) -> None:
        self._ray.close()

    def __enter__(self) -> RayTasks:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def node_ip() -> str:
    import ray

    return ray.util.get_node_ip_address()


def in_drivers_directory(cwd: str) -> None:
    """A task works in the driver's working directory where this node has it (relative paths mean the same)."""
    if os.path.isdir(cwd) and os.getcwd() != cwd:
        os.chdir(cwd)


def pack_files(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory``, by its path relative to it."""
    directory = Path(directory)
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def unpack_files(directory: Path, files: dict[str, bytes]) -> None:
    """Write what ``pack_files`` packed under ``directory``."""
    writer = AtomicFileWriter()
    for name, data in files.items():
        path = Path(directory) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        writer.write(path, data)


def remove_tree(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
