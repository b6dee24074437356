"""Where a request's runs go on a checkpoint storage URI (Flink's ``state.checkpoints.dir``), the same for both
backends: ``storage_uris``."""

from __future__ import annotations

from pathlib import Path

from barriersim.runtime.storage.object_storage import child_uri
from barriersim.scenarios.loader import Scenario


def storage_uris(
    checkpoint_storage: str | None, targets: list[tuple[Path, Scenario]]
) -> tuple[str | None, dict[Path, str | None]]:
    """Where a request's runs go on a checkpoint storage URI: everything under ``<storage>/<the request's
    directory name>`` (returned first), each mode's checkpoints and savepoints there, or in ``<mode>/`` when the
    request has several; ``(None, {target: None})`` without a storage URI."""
    if checkpoint_storage is None:
        return None, {target: None for target, _ in targets}
    several = len(targets) > 1
    root = targets[0][0].parent if several else targets[0][0]
    remote_root = child_uri(checkpoint_storage, root.name)
    return remote_root, {
        target: child_uri(remote_root, target.name) if several else remote_root for target, _ in targets
    }
