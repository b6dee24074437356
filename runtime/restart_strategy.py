"""The restart strategy of a job: whether a failed job restarts, and after how long.

How this works: every task failure that fails the job over is reported with ``on_failure()``, which counts it
and returns ``RestartDecision.RESTART`` while the count is at most ``max_attempts`` and
``RestartDecision.FAIL_JOB`` after that; a restart happens ``delay_ms`` after the failure. The strategy belongs
to the JobMaster's scheduler, so a JobManager failover (the coordinator crashed and a new one recovered) is no
failure it counts, and the new JobMaster starts a new strategy with a count of zero. Both drivers (the
simulator's ``runtime.sim.failover`` and the Ray job manager's ``actors.failover``) decide through it. Mirrors
Flink's ``FixedDelayRestartBackoffTimeStrategy`` (``notifyFailure``, ``canRestart``, ``getBackoffTime``).
"""

from __future__ import annotations

import enum


class RestartDecision(enum.Enum):
    RESTART = "restart"  # restart every task after the delay (global failover)
    FAIL_JOB = "fail_job"  # too many restarts: the job fails for good


class FixedDelayRestartStrategy:
    """Up to ``max_attempts`` restarts, each ``delay_ms`` after its failure."""

    def __init__(self, max_attempts: int, delay_ms: int):
        if max_attempts < 0 or delay_ms < 0:
            raise ValueError(f"restart strategy: max_attempts ({max_attempts}) and delay_ms ({delay_ms}) must be >= 0")
        self.max_attempts = max_attempts
        self.delay_ms = delay_ms
        self.failures = 0

    def on_failure(self) -> RestartDecision:
        self.failures += 1
        return RestartDecision.RESTART if self.failures <= self.max_attempts else RestartDecision.FAIL_JOB

    def __repr__(self) -> str:
        return f"FixedDelayRestartStrategy({self.failures} of {self.max_attempts} failures, delay {self.delay_ms} ms)"
