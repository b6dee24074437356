"""The socket links of one deployment, as the job manager sets them up: ``DeploymentLinks`` links every two task
actors that exchange messages on one Ray node, and the job manager with every task actor on its node, both ways
(``actors.socket_links``); it owns the job manager's end, sends the JobMaster's messages to a linked task over it and
hands the tasks' reports that come over it to the job manager's loop. See docs/ray-driver.md, "Socket links on one
node"."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from collections.abc import Callable, Collection
from typing import Any

from barriersim.actors.socket_links import JOB_MANAGER, REPORT, TASK_MESSAGE, SocketLinks, plan_links
from barriersim.runtime.job.actions import SubtaskKey
from barriersim.runtime.job.config import JobConfig
from barriersim.runtime.job.wiring import Wiring


class DeploymentLinks:
    """The current deployment's links, and the job manager's end of them (see the module)."""

    def __init__(
        self, *, reports: Collection[str], told: Callable[[str, Any], None], on_error: Callable[[str], None]
    ) -> None:
        """``reports``: the names of the reports a task may write to its link; ``told(method, args)``: a task's
        report came over its link (on the loop); ``on_error(text)``: a link carried a value it should not have."""
        self._reports = frozenset(reports)
        self._told = told
        self._on_error = on_error
        self._links: SocketLinks | None = None  # to and from the current deployment's tasks on this node
        self._linked: set[SubtaskKey] = set()  # subtask keys of the current deployment with a link to this actor

    def new_deployment(self) -> None:
        """Until the new deployment's links are up, its messages go as calls."""
        self._linked = set()

    def send(self, key: SubtaskKey, message: Any) -> bool:
        """Send ``message`` (``task_message_to_wire``) to task ``key`` over its link, in order with the messages
        before it (one link, one writer); False if it has no link (the message goes as a call)."""
        if self._links is None or key not in self._linked:
            return False
        self._links.send(key, TASK_MESSAGE, message, None)
        return True

    def close(self) -> None:
        links, self._links, self._linked = self._links, None, set()
        if links is not None:
            links.close()

    async def link(
        self,
        config: JobConfig,
        handles: dict[SubtaskKey, Any],
        connected: dict[SubtaskKey, dict],
        secret: bytes,
        node_id: str,
    ) -> None:
        """Links (``actors.socket_links``) between every two task actors that exchange messages and run on one Ray
        node, and between this actor (on ``node_id``) and every task actor on its node (both ways): each writer
        connects to its peers' addresses while each reader accepts as many links as it has writers (a writer's
        connection completes once its reader accepted it)."""
        loop = asyncio.get_running_loop()
        writes = plan_links(Wiring(config.graph), {key: c["ray_node_id"] for key, c in connected.items()})
        here = sorted(key for key, c in connected.items() if c["ray_node_id"] == node_id)
        self.close()

        def on_value(kind: int, payload: Any) -> None:
            """What a task on this node wrote to its link (the links' reader thread): a report, on the loop."""
            if kind == REPORT and payload[0] in self._reports:
                loop.call_soon_threadsafe(self._told, payload[0], payload[1])
            else:
                loop.call_soon_threadsafe(self._on_error, f"a link value of unknown kind {kind!r}")

        links = SocketLinks("job manager", on_value, lambda _token: None)
        addresses = {writer: {r: connected[r]["link_address"] for r in readers} for writer, readers in writes.items()}
        writers_of: dict = defaultdict(int)
        for readers in writes.values():
            for reader in readers:
                writers_of[reader] += 1
        mine = []
        if here:
            address = links.listen(secret)
            for key in here:
                writers_of[key] += 1
                addresses.setdefault(key, {})[JOB_MANAGER] = address
            mine = [
                _in_thread(loop, links.accept, len(here)),
                _in_thread(loop, links.connect_to, {key: connected[key]["link_address"] for key in here}, secret),
            ]
        self._links = links
        await asyncio.gather(
            *(handles[reader].accept_links.remote(count) for reader, count in writers_of.items()),
            *(handles[writer].connect_links.remote(peers, secret) for writer, peers in addresses.items()),
            *mine,
        )
        self._linked = set(here)


def _in_thread(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any) -> asyncio.Future:
    """``fn(*args)`` on a thread of its own (a link's accept or connect waits for its peer): its outcome."""
    done = loop.create_future()

    def settle(outcome: Any, error: BaseException | None) -> None:
        if not done.done():
            done.set_exception(error) if error is not None else done.set_result(outcome)

    def run() -> None:
        try:
            outcome, error = fn(*args), None
        except BaseException as err:  # noqa: BLE001 - handed to the loop
            outcome, error = None, err
        loop.call_soon_threadsafe(settle, outcome, error)

    threading.Thread(target=run, name="job manager links", daemon=True).start()
    return done
