"""Ray-backend jobs several at a time, each driven by a process of its own: a second driver of the same Ray cluster,
as ``barriersim run --address`` is (a process, not a thread: RayDP keeps one Spark per process, and a run's
logging, SIGINT handler and Ray connection are per process too). ``map_unordered`` runs ``fn(item, say)`` in
such a process per item, at most ``parallelism`` at a time, and yields each progress line (``Said``) and each end
(``Ended``: the result, or the error, of that item only) as it comes. Each driver runs in a process group of its
own, so a Ctrl-C reaches it once, from here; drivers left when the caller stops are interrupted, then ended.
docs/experiments.md ("Ray-backend jobs at once") tells the design.
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, cast

from barriersim.errors import BarriersimError

# A driver interrupted (its job's actors killed, Spark and its Ray connection closed) gets this long to end.
GRACE_SECONDS = 60.0
# Logical CPUs one job holds at most on Ray: Spark's executor (1), the verification task (0.5), its actors (0.01 each).
CPUS_PER_JOB = 2


class DriverError(BarriersimError):
    """A job's driver process ended without a result, or raised an error that cannot cross processes."""


@dataclass(frozen=True)
class Said:
    """Item ``index``'s driver named its phase ``what``."""

    index: int
    what: str


@dataclass(frozen=True)
class Ended:
    """Item ``index``'s driver ended: its ``result``, or its ``error``."""

    index: int
    result: Any = None
    error: BaseException | None = None


def cpus_for(parallelism: int) -> int:
    """The logical CPUs of a local Ray for ``parallelism`` jobs at once: at least Ray's start's own default."""
    return max(4, os.cpu_count() or 2, CPUS_PER_JOB * parallelism)


def _portable(err: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(err))
    except Exception:  # noqa: BLE001 - any error that does not survive the pipe goes as its one line
        return DriverError(f"{type(err).__name__}: {err}")
    return err


class _FileOnFirstWrite(io.TextIOBase):
    """A driver's standard output: Ray prints the cluster's warnings to every driver's (each would repeat them on
    the terminal); they go to a file, created on the first write."""

    def __init__(self, path: Path):
        self.path = path
        self.file: io.TextIOBase | None = None

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - open for the process's life
        written = self.file.write(text)
        self.file.flush()
        return written


def _drive(fn: Callable, item: Any, conn: Connection, stdout: Path | None) -> None:
    """A driver process: in a group of its own (SIGINT was ignored at its start), it runs ``fn(item, say)``."""
    os.setpgid(0, 0)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if stdout is not None:
        sys.stdout = _FileOnFirstWrite(stdout)
    last: list[str] = []

    def say(what: str) -> None:
        if last != [what]:
            last[:] = [what]
            conn.send(("say", what))

    try:
        conn.send(("done", fn(item, say)))
    except BaseException as err:  # noqa: BLE001 - every end goes back to the caller, a Ctrl-C too
        conn.send(("error", _portable(err)))
    finally:
        conn.close()


@contextlib.contextmanager
def _sigint_ignored():
    """SIGINT ignored while a driver process starts: it inherits that, so a Ctrl-C reaches it only from here."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def map_unordered(
    fn: Callable,
    items: Iterable,
    parallelism: int,
    more: Callable[[], bool] = lambda: True,
    stdout: Callable[[Any], Path] | None = None,
) -> Generator[Said | Ended, None, None]:
    """Each item's driver process, at most ``parallelism`` at a time (no new one once ``more()`` is false); every
    ``Said`` and ``Ended`` as it comes. ``fn`` is a module-level function (it is pickled by name); ``stdout(item)``:
    the file the driver's standard output goes to (default: this process's)."""
    context = multiprocessing.get_context("spawn")  # no fork of a process with Ray's and Spark's threads
    pending = iter(enumerate(items))
    running: dict[Connection, tuple[int, Any]] = {}
    try:
        while True:
            while len(running) < parallelism and more():
                nxt = next(pending, None)
                if nxt is None:
                    break
                receive, send = context.Pipe(duplex=False)
                process = context.Process(
                    target=_drive,
                    args=(fn, nxt[1], send, None if stdout is None else stdout(nxt[1])),
                    name=f"barriersim-driver-{nxt[0]}",
                )
                with _sigint_ignored():
                    process.start()
                send.close()
                running[receive] = (nxt[0], process)
            if not running:
                return
            for ready in wait(list(running)):
                conn = cast(Connection, ready)
                index, process = running[conn]
                try:
                    kind, value = conn.recv()
                except EOFError:
                    kind, value = "error", None
                if kind == "say":
                    yield Said(index, value)
                    continue
                del running[conn]
                conn.close()
                process.join()
                if kind == "done":
                    yield Ended(index, result=value)
                else:
                    error = value or DriverError(
                        f"the job's driver process ended (exit status {process.exitcode}) without a result"
                    )
                    yield Ended(index, error=error)
    finally:
        _end([process for _, process in running.values()])
        for conn in running:
            conn.close()


def _end(processes: list) -> None:
    """Interrupt the drivers still running (each ends its job as a Ctrl-C does), then end those that did not."""
    for process in processes:
        if process.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGINT)
    for process in processes:
        process.join(GRACE_SECONDS)
        if process.is_alive():
            process.kill()
            process.join()
