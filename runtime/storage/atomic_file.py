"""Atomic file writes with a fault-injection hook: a file is either absent or complete, never half-written.

How this works: ``AtomicFileWriter.write`` writes the bytes to a temporary file in the target's directory
(``.<name>.<random>.tmp``), flushes and fsyncs it, gives it the mode a plain ``open()`` would (0666 less the
umask), then ``os.replace``s it onto the target (atomic on POSIX) and fsyncs the directory. A crash before the rename
leaves at most a temporary file that nothing reads, so a checkpoint directory counts as complete only once its
``_metadata`` exists. ``fail_next_write`` arms a ``WriteFault`` for the next write, which simulates a failing or
crashing storage write (tests, the "fail a checkpoint storage write" fault): it raises ``CheckpointStorageWriteError``
and leaves the disk as the named crash would. Mirrors Flink's ``FsCheckpointMetadataOutputStream``
(``closeAndFinalizeCheckpoint`` commits the metadata file) with an explicit temp-and-rename."""

from __future__ import annotations

import enum
import os
import tempfile
from collections import deque
from pathlib import Path

from barriersim.runtime.storage.errors import CheckpointStorageWriteError


class WriteFault(enum.Enum):
    """What an injected write failure leaves behind."""

    FAIL_BEFORE_WRITE = "FAIL_BEFORE_WRITE"  # the write is refused; nothing touches the disk
    CRASH_MID_WRITE = "CRASH_MID_WRITE"  # half the bytes reach the temporary file, then the "process dies"
    CRASH_BEFORE_RENAME = "CRASH_BEFORE_RENAME"  # all bytes are in the fsynced temp file, but no rename


class AtomicFileWriter:
    """Writes whole files atomically; ``fail_next_write`` injects failures, one per armed fault."""

    def __init__(self) -> None:
        self._faults: deque[WriteFault] = deque()

    def fail_next_write(self, fault: WriteFault = WriteFault.FAIL_BEFORE_WRITE) -> None:
        self._faults.append(fault)

    @property
    def armed_faults(self) -> tuple[WriteFault, ...]:
        return tuple(self._faults)

    def take_fault(self) -> WriteFault | None:
        """Consume the next armed fault (storages without files use this to honour the same switch)."""
        return self._faults.popleft() if self._faults else None

    def write(self, path: Path, data: bytes, *, exclusive: bool = False) -> None:
        """Write ``data`` to ``path`` atomically. With ``exclusive``, refuse (``FileExistsError``) if ``path``
        exists when the write starts."""
        path = Path(path)
        fault = self.take_fault()
        if fault is WriteFault.FAIL_BEFORE_WRITE:
            raise CheckpointStorageWriteError(f"{path}: injected write failure ({fault.value}); nothing was written")
        if exclusive and path.exists():
            raise FileExistsError(f"{path}: already exists")
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        crashed = False
        try:
            with os.fdopen(fd, "wb") as f:
                if fault is WriteFault.CRASH_MID_WRITE:
                    f.write(data[: len(data) // 2])
                    f.flush()
                    crashed = True
                    raise CheckpointStorageWriteError(
                        f"{path}: injected crash after writing {len(data) // 2} of {len(data)} bytes to {tmp}"
                    )
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
                os.fchmod(f.fileno(), _FILE_MODE)  # mkstemp makes it 0600; a finished file is as any other
            if fault is WriteFault.CRASH_BEFORE_RENAME:
                crashed = True
                raise CheckpointStorageWriteError(f"{path}: injected crash before renaming {tmp} into place")
            if exclusive and path.exists():
                raise FileExistsError(f"{path}: already exists")
            os.replace(tmp, path)
            _fsync_directory(path.parent)
        except BaseException:
            # a real crash would leave the temporary file behind; a simulated crash does too
            if not crashed and os.path.exists(tmp):
                os.unlink(tmp)
            raise


def _file_mode() -> int:
    """0666 less the process's umask, as ``open()`` would create a file (read without changing the umask:
    ``/proc/self/status`` on Linux, else the usual 022)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except OSError:
        pass
    return 0o644


_FILE_MODE = _file_mode()


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
