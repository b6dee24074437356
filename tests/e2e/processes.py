"""Finding processes a run left behind: every process of a run inherits a marker in its environment
(Ray's GCS, raylet and workers, and RayDP's JVMs are all descendants of the run), so processes of other
Ray sessions on the machine are never mistaken for ours."""

import os
import uuid

import psutil

MARKER_VARIABLE = "BARRIERSIM_TEST_RUN_MARKER"


def marked_environment() -> tuple[dict, str]:
    marker = uuid.uuid4().hex
    return {**os.environ, MARKER_VARIABLE: marker}, marker


def stray_processes(marker: str) -> list[str]:
    """Processes still alive whose environment carries ``marker``."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get(MARKER_VARIABLE) == marker:
                found.append(f"{proc.info['pid']}: {' '.join(proc.info['cmdline'] or [])[:120]}")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found
