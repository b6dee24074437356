"""The source splits of a job whose workload does not exist yet: object references the job can be deployed with
now, which resolve once the workload is there.

How this works: ``WorkloadHandOff`` is an asyncio actor. ``split(vertex, i)`` returns source subtask ``i`` of
``vertex``'s split, waiting until ``supply`` gave the splits (an Arrow table or msgpack bytes per subtask);
``refs(sources)`` calls it once per source subtask and gives ``{vertex: [ObjectRef per subtask]}``, which the
job manager passes to its source task actors. So the task actors of a job are created (their processes start and
import their code) while Spark starts and generates the workload, and each source builds its task as soon as its
split resolves. ``fail`` makes every waiting and later ``split`` call raise (the workload could not be made).
Ray keeps each returned split in the object store for as long as a reference to it lives, so a restarted
source reads it again.
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
