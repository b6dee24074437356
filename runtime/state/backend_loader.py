"""The keyed state backend a job's configuration names (Flink's ``StateBackendLoader``): ``create_keyed_backend``."""

from __future__ import annotations

import random

from barriersim.runtime.state.backend import KeyedRows, StateBackendConfig, StateBackendKind
from barriersim.runtime.state.heap_backend import HeapKeyedStateBackend
from barriersim.runtime.state.incremental import IncrementalKeyedStateBackend
from barriersim.runtime.state.snapshot import KeyGroupRange


def create_keyed_backend(
    operator: KeyedRows,
    key_group_range: KeyGroupRange,
    config: StateBackendConfig,
    memory_threshold: int,
    rng: random.Random,
    name: str,
) -> HeapKeyedStateBackend | IncrementalKeyedStateBackend:
    """The backend ``config`` names for ``operator`` (``name``: the subtask and attempt, part of its files' names;
    ``rng``: the seeded stream of its compaction policy)."""
    if config.backend is StateBackendKind.INCREMENTAL:
        return IncrementalKeyedStateBackend(operator, key_group_range, config, memory_threshold, rng, name)
    return HeapKeyedStateBackend(operator, key_group_range, config, memory_threshold)
