"""The walking skeleton's filesystem checkpoint storage: task-owned state files and a ``_metadata`` file per
completed checkpoint, written atomically, encoded with msgpack.

How this works: layout as Flink's filesystem storage, ``<root>/<job-id>/chk-<n>/``. Each task writes its
snapshot to ``chk-<n>/taskowned/<task>.state`` and acknowledges with the file's path and size; when every
task has acknowledged, the coordinator writes ``chk-<n>/_metadata`` naming those files. Every write goes to a
temporary file in the same directory and is renamed into place, so a crash never leaves a file that looks
complete; a checkpoint directory without ``_metadata`` is not a completed checkpoint. (The full storage with
checksummed metadata, retention and restore lands with the coordinator and storage issue.)
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import msgpack

from barriersim.runtime.state.snapshot import (
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorStateHandle,
    OperatorSubtaskState,
)

SKELETON_MAGIC = 0xBA771E55
SKELETON_FORMAT_VERSION = 1


def atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def encode_subtask_state(state: OperatorSubtaskState) -> bytes:
    return msgpack.packb(
        {
            "operator": [{name: list(parts) for name, parts in h.states.items()} for h in state.managed_operator_state],
            "keyed": [
                [h.key_group_range.start_key_group, h.key_group_range.end_key_group, dict(h.key_groups)]
                for h in state.managed_keyed_state
            ],
        },
        use_bin_type=True,
    )


def decode_subtask_state(data: bytes) -> OperatorSubtaskState:
    raw = msgpack.unpackb(data, raw=False, strict_map_key=False)
    return OperatorSubtaskState(
        managed_operator_state=tuple(
            OperatorStateHandle({name: tuple(parts) for name, parts in h.items()}) for h in raw["operator"]
        ),
        managed_keyed_state=tuple(
            KeyGroupsStateHandle(KeyGroupRange(start, end), groups) for start, end, groups in raw["keyed"]
        ),
    )


class SkeletonCheckpointStorage:
    def __init__(self, root: str | Path, job_id: str):
        self.job_dir = Path(root) / job_id

    def checkpoint_dir(self, checkpoint_id: int) -> Path:
        return self.job_dir / f"chk-{checkpoint_id}"

    def write_task_state(self, checkpoint_id: int, task: str, state: OperatorSubtaskState) -> tuple[str, int]:
        data = encode_subtask_state(state)
        path = self.checkpoint_dir(checkpoint_id) / "taskowned" / f"{task}.state"
        atomic_write(path, data)
        return str(path), len(data)

    def write_metadata(self, checkpoint_id: int, task_files: dict[str, tuple[str, int]]) -> Path:
        path = self.checkpoint_dir(checkpoint_id) / "_metadata"
        body = {
            "magic": SKELETON_MAGIC,
            "version": SKELETON_FORMAT_VERSION,
            "checkpoint_id": checkpoint_id,
            "tasks": {task: {"path": p, "size": size} for task, (p, size) in sorted(task_files.items())},
        }
        atomic_write(path, msgpack.packb(body, use_bin_type=True))
        return path

    def read_metadata(self, checkpoint_id: int) -> dict:
        path = self.checkpoint_dir(checkpoint_id) / "_metadata"
        body = msgpack.unpackb(path.read_bytes(), raw=False)
        if body.get("magic") != SKELETON_MAGIC:
            raise ValueError(f"{path}: not a barriersim checkpoint metadata file")
        return body

    def completed_checkpoints(self) -> list[int]:
        if not self.job_dir.exists():
            return []
        ids = [int(p.name[4:]) for p in self.job_dir.glob("chk-*") if (p / "_metadata").exists()]
        return sorted(ids)
