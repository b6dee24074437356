"""A task actor's reports to the job manager (acknowledgements, declines, the task's end, ...), sent in order by a
thread of their own, each once the external store confirmed the writes the task's sink made before it; an
acknowledgement's snapshot is encoded there, off the task thread. A report goes over the actor's link to the job
manager when there is one (one link, one writer: in order with the reports before it), else as a Ray call.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

import ray

from barriersim.actors.external_store import RemoteExternalStore
from barriersim.actors.messages import attempt_to_wire, encode_metrics, encode_snapshot
from barriersim.actors.socket_links import JOB_MANAGER, REPORT, SocketLinks
from barriersim.runtime.ids import ExecutionAttemptID


class Reporter:
    def __init__(
        self,
        job_manager: Any,
        links: SocketLinks,
        store: RemoteExternalStore | None,
        attempt: ExecutionAttemptID,
        on_error: Callable[[BaseException], None],
    ) -> None:
        """``job_manager``: its actor handle; ``store``: the sink's client of the external store, if any;
        ``on_error(err)``: the store did not take the sink's writes (called on the reporter thread)."""
        self._job_manager = job_manager
        self._links = links
        self._store = store
        self._attempt = attempt
        self._on_error = on_error
        self._reports: queue.SimpleQueue[tuple[str, Any, list[Any]]] = queue.SimpleQueue()  # with store calls

    def start(self, thread_name: str) -> None:
        threading.Thread(target=self._report_in_order, name=thread_name, daemon=True).start()

    def report(self, method: str, args: Any) -> None:
        """A call of the job manager's ``method``: ``args``, or for ``acknowledge`` the ``AcknowledgeCheckpoint``."""
        self._reports.put((method, args, self._store.take_unconfirmed() if self._store is not None else []))

    def _report_in_order(self) -> None:
        while True:
            method, args, store_calls = self._reports.get()
            if store_calls:
                try:
                    ray.get(store_calls)
                except BaseException as err:  # noqa: BLE001 - the store did not take the sink's writes
                    self._on_error(err)
                    continue
            if method == "acknowledge":
                args = (
                    attempt_to_wire(self._attempt),
                    args.checkpoint_id,
                    encode_snapshot(args.task_state_snapshot, self._attempt.subtask_index, args.checkpoint_id),
                    encode_metrics(args.metrics),
                )
            if self._links.has_link_to(JOB_MANAGER):
                self._links.send(JOB_MANAGER, REPORT, [method, args], None)
            else:
                getattr(self._job_manager, method).remote(*args)
