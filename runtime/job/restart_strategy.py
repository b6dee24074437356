"""The restart strategy of a job: whether a failed job restarts, and after how long.

How this works: every failure that fails the job over is reported with ``on_failure(now_ms)``, which returns
``RestartDecision.RESTART`` or ``FAIL_JOB``; the restart happens ``backoff_ms(now_ms)`` later. Two of Flink's
strategies, chosen by ``RestartStrategyConfig`` (a scenario's ``[restart]``): fixed-delay
(``FixedDelayRestartBackoffTimeStrategy``) and exponential-delay (``ExponentialDelayRestartBackoffTimeStrategy``,
with its jitter from the injected ``rng``). The strategy belongs to the JobMaster, so a JobManager failover is no
failure it counts. ``docs/architecture.md`` ("Settings: scenario to runtime") says how exponential-delay counts.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass

from barriersim.runtime.settings import AboveAtMost, Between, setting


class RestartDecision(enum.Enum):
    RESTART = "restart"  # restart every task after the delay (global failover)
    FAIL_JOB = "fail_job"  # too many restarts: the job fails for good


class FixedDelayRestartStrategy:
    """Up to ``max_attempts`` restarts, each ``delay_ms`` after its failure."""

    def __init__(self, max_attempts: int, delay_ms: int):
        _refuse_what_flink_refuses(RestartStrategyConfig(RestartStrategyKind.FIXED_DELAY, max_attempts, delay_ms))
        self.max_attempts = max_attempts
        self.delay_ms = delay_ms
        self.failures = 0

    def on_failure(self, now_ms: int = 0) -> RestartDecision:
        self.failures += 1
        return RestartDecision.RESTART if self.failures <= self.max_attempts else RestartDecision.FAIL_JOB

    def backoff_ms(self, now_ms: int = 0) -> int:
        return self.delay_ms

    def __repr__(self) -> str:
        return f"FixedDelayRestartStrategy({self.failures} of {self.max_attempts} failures, delay {self.delay_ms} ms)"


class RestartStrategyKind(enum.Enum):
    FIXED_DELAY = "fixed-delay"
    EXPONENTIAL_DELAY = "exponential-delay"


MAX_INT = 2**31 - 1  # Java's Integer.MAX_VALUE, Flink's default of attempts-before-reset-backoff ("infinite")
JAVA_LONG_MAX = 2**63 - 1


@dataclass(frozen=True)
class RestartStrategyConfig:
    """A job's restart strategy and its settings, as a scenario's ``[restart]`` names them (Flink's
    ``restart-strategy.*`` options); the exponential-delay defaults are Flink's (``RestartStrategyOptions``)."""

    strategy: RestartStrategyKind = setting(
        RestartStrategyKind.FIXED_DELAY,
        "fixed-delay or exponential-delay (restart-strategy.type); barriersim's "
        "default stays fixed-delay, on which the library's fault scenarios are timed",
    )
    attempts: int = setting(
        20, "fixed-delay: restarts before the job fails (restart-strategy.fixed-delay.attempts)", Between(0, 1_000_000)
    )
    delay_ms: int = setting(
        1000,
        "fixed-delay: the wait before each restart, and a JobManager failover's (restart-strategy.fixed-delay.delay)",
        Between(0, 86_400_000),
    )
    initial_backoff_ms: int = setting(1000, "exponential-delay: the first restart's wait", Between(1, 86_400_000))
    max_backoff_ms: int = setting(60_000, "exponential-delay: the longest wait", Between(1, 86_400_000))
    backoff_multiplier: float = setting(
        1.5, "exponential-delay: each restart in a row waits this much longer", AboveAtMost(1, 1000)
    )
    reset_backoff_threshold_ms: int = setting(
        3_600_000,
        "exponential-delay: a failure this long after the last planned restart starts again from the initial backoff",
        Between(1, 10**12),
    )
    jitter_factor: float = setting(
        0.1, "exponential-delay: each wait varies randomly by up to this share either way", Between(0.0, 1.0)
    )
    attempts_before_reset_backoff: int = setting(
        MAX_INT, "exponential-delay: more attempts in a row than this fail the job", Between(1, MAX_INT)
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "strategy", RestartStrategyKind(self.strategy))  # a scenario file's string too

    def problem(self) -> str | None:
        """What Flink refuses in these settings (its strategies' constructors check them), or None."""
        if self.strategy is RestartStrategyKind.FIXED_DELAY:
            if self.attempts < 0 or self.delay_ms < 0:
                return f"attempts ({self.attempts}) and delay_ms ({self.delay_ms}) must be >= 0"
            return None
        problems = [
            (self.initial_backoff_ms >= 1, "initial_backoff_ms must be at least 1"),
            (self.max_backoff_ms >= 1, "max_backoff_ms must be at least 1"),
            (self.initial_backoff_ms <= self.max_backoff_ms, "initial_backoff_ms cannot be higher than max_backoff_ms"),
            (self.backoff_multiplier > 1, "backoff_multiplier must be greater than 1"),
            (self.reset_backoff_threshold_ms >= 1, "reset_backoff_threshold_ms must be at least 1"),
            (0 <= self.jitter_factor <= 1, "jitter_factor must be >= 0 and <= 1"),
            (self.attempts_before_reset_backoff >= 1, "attempts_before_reset_backoff must be at least 1"),
        ]
        return next((text for ok, text in problems if not ok), None)

    def create(self, rng: random.Random | None = None) -> FixedDelayRestartStrategy | ExponentialDelayRestartStrategy:
        """A new JobMaster's strategy (``rng``: the jitter's random stream; exponential-delay needs it); ``ValueError``
        for settings Flink refuses (the strategies' constructors check them)."""
        if self.strategy is RestartStrategyKind.FIXED_DELAY:
            return FixedDelayRestartStrategy(self.attempts, self.delay_ms)
        if rng is None:
            raise ValueError("restart strategy: exponential-delay needs a random stream for its jitter")
        return ExponentialDelayRestartStrategy(self, rng)


class ExponentialDelayRestartStrategy:
    """Flink's ``ExponentialDelayRestartBackoffTimeStrategy`` (``notifyFailure``, ``canRestart``,
    ``getBackoffTime``): see the module."""

    def __init__(self, config: RestartStrategyConfig, rng: random.Random):
        _refuse_what_flink_refuses(config)
        self.config = config
        self._rng = rng
        self.failures = 0  # Flink's currentRestartAttempt: attempts since the backoff was last reset
        self.max_attempts = config.attempts_before_reset_backoff
        self._next_restart_ms: int | None = None  # Flink's nextRestartTimestamp (None: its Integer.MIN_VALUE)

    def on_failure(self, now_ms: int) -> RestartDecision:
        c = self.config
        if self._next_restart_ms is None or now_ms > self._next_restart_ms:  # else merged into the planned restart
            if self._next_restart_ms is None or now_ms - self._next_restart_ms >= c.reset_backoff_threshold_ms:
                self.failures = 0
            self._next_restart_ms = now_ms + self._backoff()
            self.failures += 1
        return RestartDecision.RESTART if self.failures <= self.max_attempts else RestartDecision.FAIL_JOB

    def backoff_ms(self, now_ms: int) -> int:
        if self._next_restart_ms is None:
            raise ValueError("restart strategy: no failure was reported yet")
        return max(0, self._next_restart_ms - now_ms)

    def _backoff(self) -> int:
        c = self.config
        try:
            exact = c.initial_backoff_ms * c.backoff_multiplier**self.failures
        except OverflowError:  # many failures in a row: Java's Math.pow gives infinity
            exact = float("inf")
        current = int(min(exact, JAVA_LONG_MAX))  # Java's (long) cast, which saturates
        jitter = 0
        if c.jitter_factor:
            offset = int(current * c.jitter_factor)
            jitter = self._rng.randint(-offset, offset)  # Flink: nextLong(-offset, offset + 1)
        return max(c.initial_backoff_ms, min(current + jitter, c.max_backoff_ms))

    def __repr__(self) -> str:
        return (
            f"ExponentialDelayRestartStrategy({self.failures} attempts, next restart at {self._next_restart_ms} ms, "
            f"{self.config})"
        )


def _refuse_what_flink_refuses(config: RestartStrategyConfig) -> None:
    """A strategy's constructor check, as Flink's ``checkArgument``s: ``ValueError`` naming the problem."""
    problem = config.problem()
    if problem is not None:
        raise ValueError(f"restart strategy: {problem}")
