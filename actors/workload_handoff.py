"""The source splits of a job whose workload does not exist yet: object references the job can be deployed with now,
which resolve once the workload is there. See docs/ray-driver.md, "Handing over a workload not made yet".
"""

from __future__ import annotations

import asyncio

import ray


@ray.remote(num_cpus=0)
class WorkloadHandOff:
    def __init__(self):
        self._splits: dict[str, list] | None = None
        self._error: str | None = None
        self._ready = asyncio.Event()

    async def supply(self, splits: dict[str, list]) -> None:
        self._splits = splits
        self._ready.set()

    async def fail(self, message: str) -> None:
        self._error = message
        self._ready.set()

    async def split(self, vertex: str, index: int):
        await self._ready.wait()
        if self._error is not None:
            raise RuntimeError(f"no split for {vertex}#{index}: {self._error}")
        assert self._splits is not None  # set before _ready, with _error None
        return self._splits[vertex][index]


def refs(handoff, sources: tuple[tuple[str, int], ...]) -> dict[str, list]:
    """``{vertex: [ref of subtask i's split]}`` for the source vertices ``(name, parallelism)``."""
    return {name: [handoff.split.remote(name, i) for i in range(parallelism)] for name, parallelism in sources}
