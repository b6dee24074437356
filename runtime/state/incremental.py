"""An incremental keyed state backend modelled on RocksDB's: sorted runs, flushes, leveled compaction, and checkpoints
that upload only the runs not uploaded before.

Mirrors Flink's ``EmbeddedRocksDBStateBackend`` with ``RocksIncrementalSnapshotStrategy`` and
``RocksDBIncrementalRestoreOperation``. See docs/state-and-rescaling.md, "The incremental keyed state backend".
What Flink does: docs/flink-facts.md, "State backends, incremental checkpoints and the shared-state registry".
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from barriersim.runtime.checkpoint_cost import NO_WORK, SnapshotWork
from barriersim.runtime.events import CheckpointType, SharingFilesStrategy
from barriersim.runtime.state.backend import (
    KeyedRows,
    StateBackendConfig,
    entry_size,
    full_keyed_snapshot,
    full_snapshot_work,
    rows_from_state,
    state_from_rows,
)
from barriersim.runtime.state.snapshot import (
    HandleAndLocalPath,
    IncrementalKeyedStateHandle,
    KeyGroupRange,
    OperatorSubtaskState,
    PlaceholderStateHandle,
    SharedStateHandle,
)

TOMBSTONE = None  # the value of a deleted entry
TOMBSTONE_BYTES = 16  # a tombstone's modelled bytes when entries have a modelled size
Upload = Callable[[str, bytes, int], SharedStateHandle]  # (key, data, modelled bytes) -> the uploaded handle


class IncrementalStateError(Exception):
    """Shared state that cannot be read (missing data, a checksum mismatch, an undecodable run); names the key."""


def inline_upload(key: str, data: bytes, state_size: int) -> SharedStateHandle:
    """Shared state kept inline in the handle (Flink's ``ByteStreamStateHandle``: memory storage, small files)."""
    return SharedStateHandle(key, len(data), zlib.crc32(data), state_size, data)


@dataclass(frozen=True)
class SortedRun:
    """An immutable sorted run (an SST file): entries ``((key group, entry key), value or TOMBSTONE)`` in key order."""

    level: int
    sequence: int
    entries: tuple[tuple[tuple[Any, ...], tuple[Any, ...] | None], ...]
    state_size: int

    @property
    def local_path(self) -> str:
        return local_path(self.level, self.sequence)

    @property
    def smallest(self) -> tuple[Any, ...]:
        return self.entries[0][0]

    @property
    def largest(self) -> tuple[Any, ...]:
        return self.entries[-1][0]

    def overlaps(self, smallest: tuple[Any, ...], largest: tuple[Any, ...]) -> bool:
        return not (self.largest < smallest or largest < self.smallest)

    def encode(self) -> bytes:
        data: bytes = msgpack.packb(
            [[kg, list(key), None if value is None else list(value)] for (kg, key), value in self.entries],
            use_bin_type=True,
        )
        return data


def local_path(level: int, sequence: int) -> str:
    return f"L{level}-{sequence:08d}.sst"


def parse_local_path(path: str) -> tuple[int, int]:
    """``(level, sequence)`` of a run's file name."""
    try:
        level, sequence = path.removesuffix(".sst").removeprefix("L").split("-")
        return int(level), int(sequence)
    except ValueError:
        raise IncrementalStateError(
            f"{path!r} is not the file name of a sorted run (L<level>-<sequence>.sst)"
        ) from None


def decode_run(handle: SharedStateHandle, path: str) -> list[tuple[tuple[Any, ...], tuple[Any, ...] | None]]:
    """The entries of an uploaded run, after checking its size and CRC32."""
    data = handle.data
    if data is None:
        raise IncrementalStateError(f"shared state {handle.key}: its data was not read")
    if len(data) != handle.size or zlib.crc32(data) != handle.crc32:
        raise IncrementalStateError(
            f"shared state {handle.key} ({path}): {len(data)} bytes with crc32 "
            f"0x{zlib.crc32(data):08x}, its handle says {handle.size} bytes, 0x{handle.crc32:08x}"
        )
    try:
        plain = msgpack.unpackb(data, raw=False, use_list=False, strict_map_key=False)
        return [((kg, tuple(key)), None if value is None else tuple(value)) for kg, key, value in plain]
    except (msgpack.UnpackException, ValueError, TypeError) as e:
        raise IncrementalStateError(
            f"shared state {handle.key} ({path}): undecodable run: {e or type(e).__name__}"
        ) from None


def _merge_newest_first(
    runs: Sequence[Iterable[tuple[tuple[Any, ...], tuple[Any, ...] | None]]],
) -> dict[tuple[Any, ...], tuple[Any, ...] | None]:
    merged: dict[tuple[Any, ...], tuple[Any, ...] | None] = {}
    for entries in runs:
        for key, value in entries:
            if key not in merged:
                merged[key] = value
    return merged


def _precedence(path: str) -> tuple[int, int]:
    level, sequence = parse_local_path(path)
    return level, -sequence  # level 0 first, newest first; deeper levels after


def rows_of_incremental_handles(
    handles: Iterable[Any], key_group_range: KeyGroupRange
) -> list[tuple[int, tuple[Any, ...]]]:
    """The rows (``(key group, row)``) in ``key_group_range`` of incremental handles, each handle's runs merged newest
    first (a rescaled restore may get several handles, of disjoint key groups)."""
    rows: list[tuple[int, tuple[Any, ...]]] = []
    for handle in handles:
        if not isinstance(handle, IncrementalKeyedStateHandle):
            rows.extend(
                (kg, row)
                for kg, row in rows_from_state(OperatorSubtaskState(managed_keyed_state=(handle,)))
                if kg in key_group_range
            )
            continue
        entries = sorted(handle.shared_state, key=lambda e: _precedence(e.local_path))
        merged = _merge_newest_first([decode_run(_real(e), e.local_path) for e in entries])
        rows.extend(
            (kg, key + value)
            for (kg, key), value in sorted(merged.items())
            if value is not None and kg in key_group_range
        )
    return rows


def as_full_snapshot(state: OperatorSubtaskState, key_group_range: KeyGroupRange) -> OperatorSubtaskState:
    """``state`` with its incremental handles (a registered checkpoint's: no placeholders) merged into one full
    snapshot of the key groups in ``key_group_range``, the form the keyed operators restore; a full one as it is."""
    if not any(isinstance(h, IncrementalKeyedStateHandle) for h in state.managed_keyed_state):
        return state
    return state_from_rows(rows_of_incremental_handles(state.managed_keyed_state, key_group_range), key_group_range)


def _real(entry: HandleAndLocalPath) -> SharedStateHandle:
    if isinstance(entry.handle, PlaceholderStateHandle):
        raise IncrementalStateError(
            f"shared state {entry.handle.key} ({entry.local_path}) is a placeholder: only a "
            "registered checkpoint's handles can be restored"
        )
    return entry.handle


class IncrementalKeyedStateBackend:
    def __init__(
        self,
        operator: KeyedRows,
        key_group_range: KeyGroupRange,
        config: StateBackendConfig,
        memory_threshold: int,
        rng: random.Random,
        name: str,
        upload: Upload = inline_upload,
    ) -> None:
        self._operator = operator
        self.key_group_range = key_group_range
        self.config = config
        self._threshold = memory_threshold
        self._rng = rng
        self._upload = upload
        self._width = operator.ROW_KEY_WIDTH
        # uploads are named after this instance (subtask, attempt, random bits), never reused by another attempt
        self._upload_prefix = f"{name}-{rng.getrandbits(32):08x}"
        self.backend_id = self._upload_prefix
        self._flushed: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self.levels: list[list[SortedRun]] = [[] for _ in range(config.num_levels)]  # level 0 newest first
        self._sequence = 0
        self._uploads = 0
        self._uploaded: dict[int, dict[str, SharedStateHandle]] = {}  # per checkpoint: run file -> its upload
        self.last_completed_checkpoint_id = -1
        self.last_work: SnapshotWork = NO_WORK
        self.compactions = 0

    # -- sizes ------------------------------------------------------------------------------------------------

    def _size(self, key: tuple[Any, ...], value: tuple[Any, ...] | None) -> int:
        if value is None:
            return TOMBSTONE_BYTES if self.config.entry_bytes else len(msgpack.packb(list(key[1]), use_bin_type=True))
        return entry_size(key[1] + value, self.config.entry_bytes)

    def _target(self, level: int) -> int:
        target: int = self.config.max_bytes_for_level_base * self.config.level_multiplier ** (level - 1)
        return target

    @property
    def live_runs(self) -> list[SortedRun]:
        return [run for level in self.levels for run in level]

    # -- the memtable and its flush ----------------------------------------------------------------------------

    def _changes(self) -> list[tuple[tuple[Any, ...], tuple[Any, ...] | None]]:
        width = self._width
        current: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        for kg, row in self._operator.keyed_rows():
            current[(kg, tuple(row[:width]))] = tuple(row[width:])
        flushed = self._flushed
        changes: list[tuple[tuple[Any, ...], tuple[Any, ...] | None]] = [
            (key, value) for key, value in current.items() if flushed.get(key) != value
        ]
        changes += [(key, TOMBSTONE) for key in flushed if key not in current]
        self._flushed = current
        return sorted(changes, key=lambda e: e[0])

    def _new_run(self, level: int, entries: list[Any]) -> SortedRun:
        self._sequence += 1
        return SortedRun(level, self._sequence, tuple(entries), sum(self._size(k, v) for k, v in entries))

    def _cut(self, entries: list[Any], limit: int) -> list[list[Any]]:
        pieces, piece, size = [], [], 0
        for key, value in entries:
            piece.append((key, value))
            size += self._size(key, value)
            if size >= limit:
                pieces.append(piece)
                piece, size = [], 0
        if piece:
            pieces.append(piece)
        return pieces

    def _flush(self) -> int:
        """The memtable's changes as level-0 runs (several if they outgrew the write buffer); the bytes flushed."""
        changes = self._changes()
        flushed = 0
        for piece in self._cut(changes, self.config.write_buffer_bytes):
            run = self._new_run(0, piece)
            self.levels[0].insert(0, run)
            flushed += run.state_size
        return flushed

    # -- compaction ----------------------------------------------------------------------------------------------

    def _compact(self) -> None:
        last = len(self.levels) - 1
        while True:
            if len(self.levels[0]) >= self.config.level0_compaction_trigger:
                self._merge(0, list(self.levels[0]))
                continue
            over = next(
                (n for n in range(1, last) if sum(r.state_size for r in self.levels[n]) > self._target(n)), None
            )
            if over is None:
                return
            self._merge(over, [self._rng.choice(self.levels[over])])

    def _merge(self, level: int, inputs: list[SortedRun]) -> None:
        """Merge ``inputs`` (of ``level``, newest first) with the runs of the next level they overlap."""
        out_level = level + 1
        smallest = min(r.smallest for r in inputs)
        largest = max(r.largest for r in inputs)
        below = [r for r in self.levels[out_level] if r.overlaps(smallest, largest)]
        merged = _merge_newest_first([r.entries for r in inputs] + [r.entries for r in below])
        deeper = any(self.levels[n] for n in range(out_level + 1, len(self.levels)))
        entries = sorted((k, v) for k, v in merged.items() if v is not None or deeper)
        gone = {id(r) for r in inputs + below}
        self.levels[level] = [r for r in self.levels[level] if id(r) not in gone]
        kept = [r for r in self.levels[out_level] if id(r) not in gone]
        outputs = [self._new_run(out_level, piece) for piece in self._cut(entries, self.config.target_file_bytes)]
        self.levels[out_level] = sorted(kept + outputs, key=lambda r: r.smallest)
        self.compactions += 1

    # -- snapshots ----------------------------------------------------------------------------------------------

    def snapshot(
        self,
        checkpoint_id: int,
        checkpoint_type: CheckpointType = CheckpointType.CHECKPOINT,
    ) -> OperatorSubtaskState:
        if checkpoint_type.is_savepoint:
            return self._canonical_savepoint()
        flushed = self._flush()
        self._compact()
        previous = {}  # a full checkpoint uploads every run again (SharingFilesStrategy.FORWARD)
        if checkpoint_type.sharing_files_strategy is SharingFilesStrategy.FORWARD_BACKWARD:
            previous = self._uploaded.get(self.last_completed_checkpoint_id, {})
        shared: list[HandleAndLocalPath] = []
        uploads: dict[str, SharedStateHandle] = {}
        new_bytes = files = 0
        for run in self.live_runs:
            done = previous.get(run.local_path)
            if done is not None:
                shared.append(HandleAndLocalPath(run.local_path, PlaceholderStateHandle(done.key, done.state_size)))
                uploads[run.local_path] = done
                continue
            self._uploads += 1
            upload = self._upload(f"{self._upload_prefix}-{self._uploads:06d}", run.encode(), run.state_size)
            uploads[run.local_path] = upload
            shared.append(HandleAndLocalPath(run.local_path, upload))
            new_bytes += run.state_size
            files += run.state_size >= self._threshold
        self._uploaded[checkpoint_id] = uploads
        meta = msgpack.packb(
            {"backend": self.backend_id, "checkpoint": checkpoint_id, "key_width": self._width}, use_bin_type=True
        )
        handle = IncrementalKeyedStateHandle(
            self.backend_id, self.key_group_range, checkpoint_id, tuple(shared), meta, new_bytes + len(meta)
        )
        self.last_work = SnapshotWork(copied_bytes=flushed, uploaded_bytes=new_bytes + len(meta), files=files)
        return OperatorSubtaskState(managed_keyed_state=(handle,))

    def _canonical_savepoint(self) -> OperatorSubtaskState:
        """A savepoint in the canonical format: every entry, per key group, self-contained (it refers to no file of
        the checkpoints, which may go before it does). Its synchronous part takes a snapshot of the database and
        copies nothing; the memtable is not flushed and no run is uploaded, so the checkpoints' incremental history
        is untouched (Flink's ``RocksDBKeyedStateBackend.savepoint`` and ``SavepointSnapshotStrategy``, chosen by
        ``StreamOperatorStateHandler`` for a canonical savepoint)."""
        state = full_keyed_snapshot(self._operator, self.config.entry_bytes)
        work = full_snapshot_work(state, self._threshold)
        self.last_work = SnapshotWork(copied_bytes=0, uploaded_bytes=work.uploaded_bytes, files=work.files)
        return state

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        # a savepoint uploaded no runs (not in _uploaded): the next checkpoint stays incremental (FLINK-23949)
        if checkpoint_id > self.last_completed_checkpoint_id and checkpoint_id in self._uploaded:
            self.last_completed_checkpoint_id = checkpoint_id
            for old in [c for c in self._uploaded if c < checkpoint_id]:
                del self._uploaded[old]

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        if checkpoint_id != self.last_completed_checkpoint_id:
            self._uploaded.pop(checkpoint_id, None)

    # -- restore ------------------------------------------------------------------------------------------------

    def restore(self, state: OperatorSubtaskState) -> None:
        handles = state.managed_keyed_state
        rows = rows_of_incremental_handles(handles, self.key_group_range)
        self._operator.restore_state(state_from_rows(rows, self.key_group_range))
        if (
            len(handles) == 1
            and isinstance(handles[0], IncrementalKeyedStateHandle)
            and handles[0].key_group_range == self.key_group_range
        ):
            self._reuse(handles[0])
        # otherwise the state is the operator's, written anew (all of it) at the next checkpoint

    def _reuse(self, handle: IncrementalKeyedStateHandle) -> None:
        """Flink's restore without rescaling: the restored runs are the backend's files, uploaded by the restored
        checkpoint, which counts as the last completed one; the backend keeps its identity."""
        self.backend_id = handle.backend_id
        self.levels = [[] for _ in range(self.config.num_levels)]
        uploads: dict[str, SharedStateHandle] = {}
        for entry in handle.shared_state:
            level, sequence = parse_local_path(entry.local_path)
            real = _real(entry)
            entries = decode_run(real, entry.local_path)
            self.levels[min(level, len(self.levels) - 1)].append(
                SortedRun(level, sequence, tuple(entries), real.state_size)
            )
            uploads[entry.local_path] = real
            self._sequence = max(self._sequence, sequence)
        self.levels[0].sort(key=lambda r: -r.sequence)
        for n in range(1, len(self.levels)):
            self.levels[n].sort(key=lambda r: r.smallest)
        merged = _merge_newest_first([r.entries for r in self.live_runs])
        self._flushed = {k: v for k, v in merged.items() if v is not None}
        self._uploaded = {handle.checkpoint_id: uploads}
        self.last_completed_checkpoint_id = handle.checkpoint_id
