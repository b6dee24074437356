"""A median with a log-normal spread, drawn from an injected random stream: the one rule behind every spread that
the cost model and the simulator draw (checkpoint costs, output flusher overshoots, task initialization, subtask
speeds). A median of 0 or less, or a spread of 0, is returned as it is and draws nothing."""

from __future__ import annotations

import math
import random


def lognormal(median: float, sigma: float, rng: random.Random) -> float:
    """``median`` times ``exp(sigma * N(0, 1))``, the normal draw taken from ``rng``."""
    if median <= 0 or sigma <= 0:
        return median
    return median * math.exp(sigma * rng.gauss(0.0, 1.0))
