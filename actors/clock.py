"""Real time for the Ray backend: the one place that reads the wall clock and injects it into runtime/."""

from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)
