"""Finding Ray and Spark processes a run left behind."""

import psutil

MARKERS = ("raylet", "gcs_server", "raydp", "ray::", "default_worker.py", "RayAppMaster", "dashboard")


def stray_processes(started_after: float) -> list[str]:
    """Ray or RayDP processes created after ``started_after`` (epoch seconds) that are still alive."""
    found = []
    for proc in psutil.process_iter(["pid", "name", "cmdline", "create_time", "status"]):
        try:
            if proc.info["create_time"] < started_after or proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            text = " ".join(proc.info["cmdline"] or []) or proc.info["name"] or ""
            if any(m in text for m in MARKERS):
                found.append(f"{proc.info['pid']}: {text[:120]}")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found
