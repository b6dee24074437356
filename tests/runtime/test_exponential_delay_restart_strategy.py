"""Flink's ``ExponentialDelayRestartBackoffTimeStrategy``, ported from its
``ExponentialDelayRestartBackoffTimeStrategyTest`` (the clock is the ``now_ms`` each call is given; Flink's
``notifyFailure`` returns whether the failure was a new attempt, here ``failures`` counts the attempts), and the
strategy driving a simulated job's restarts."""

from __future__ import annotations

import random

import pytest

from barriersim.runtime.job.restart_strategy import (
    MAX_INT,
    ExponentialDelayRestartStrategy,
    RestartDecision,
    RestartStrategyConfig,
    RestartStrategyKind,
)

EXPONENTIAL = RestartStrategyKind.EXPONENTIAL_DELAY


def strategy(initial, maximum, multiplier, reset_threshold, jitter, attempts, seed=0):
    config = RestartStrategyConfig(
        EXPONENTIAL,
        initial_backoff_ms=initial,
        max_backoff_ms=maximum,
        backoff_multiplier=multiplier,
        reset_backoff_threshold_ms=reset_threshold,
        jitter_factor=jitter,
        attempts_before_reset_backoff=attempts,
    )
    return ExponentialDelayRestartStrategy(config, random.Random(seed))


def test_max_attempts():
    s, now = strategy(1, 3, 1.2, 10, 0.25, 13), 0
    decisions = []
    for _ in range(14):
        decisions.append(s.on_failure(now))
        now += 3 + 1
    assert decisions[:13] == [RestartDecision.RESTART] * 13 and decisions[13] is RestartDecision.FAIL_JOB


def test_the_backoff_needs_a_failure_first():
    with pytest.raises(ValueError, match="no failure was reported yet"):
        strategy(42, 45, 2.0, 8, 0, 10).backoff_ms(0)


def test_initial_backoff():
    s = strategy(42, 45, 2.0, 8, 0, MAX_INT)
    s.on_failure(0)
    assert s.backoff_ms(0) == 42


def test_max_backoff():
    s = strategy(1, 6, 2.0, 8, 0.25, MAX_INT)
    for _ in range(10):
        s.on_failure(0)
        assert s.backoff_ms(0) <= 6


def test_reset_backoff():
    s, now = strategy(1, 5, 2.0, 8, 0.25, MAX_INT), 0
    s.on_failure(now)
    now += 8 + s.backoff_ms(now) - 1
    s.on_failure(now)
    assert s.backoff_ms(now) == 2  # increased
    now += 8 + s.backoff_ms(now)
    s.on_failure(now)
    assert s.backoff_ms(now) == 1  # reset


def test_backoff_multiplier():
    s, now, backoffs = strategy(4, 300, 2.3, MAX_INT, 0, 10), 0, []
    for _ in range(3):
        s.on_failure(now)
        backoffs.append(s.backoff_ms(now))
        now += 300 + 1
    assert backoffs == [4, 9, 21]  # 4, 4 * 2.3, 4 * 2.3 * 2.3, each cut to whole ms


def backoffs_after(failures: int, initial: int, maximum: int, jitter: float) -> set[int]:
    """The backoffs the ``failures``-th failure in a row gets over many random streams (Flink's
    ``assertCorrectRandomRangeWithFailureCount``)."""
    seen = set()
    for seed in range(300):
        s, now = strategy(initial, maximum, 2.0, MAX_INT, jitter, MAX_INT, seed), 0
        for _ in range(failures):
            now += maximum + 1
            s.on_failure(now)
        seen.add(s.backoff_ms(now))
    return seen


def test_jitter():
    assert backoffs_after(2, 2, 7, 0.25) == {3, 4, 5}
    assert backoffs_after(3, 2, 7, 0.25) == {6, 7}
    assert backoffs_after(4, 2, 7, 0.25) == {7}


def test_jitter_no_higher_than_max():
    assert backoffs_after(1, 1, 7, 1.0) == {1, 2}
    assert backoffs_after(2, 1, 7, 1.0) == {1, 2, 3, 4}
    assert backoffs_after(3, 1, 7, 1.0) == {1, 2, 3, 4, 5, 6, 7}


def test_multiple_settings():
    s, now = strategy(1, 9, 2.0, 80, 0.25, MAX_INT), 0
    assert s.on_failure(now) is RestartDecision.RESTART and s.backoff_ms(now) == 1
    now += 80 + 1  # the backoff is the initial one after the first failure
    assert s.on_failure(now) is RestartDecision.RESTART and s.backoff_ms(now) == 1
    now += 4  # it increases until the threshold is reached
    assert s.on_failure(now) is RestartDecision.RESTART and s.backoff_ms(now) == 2
    now += 80 + 9 + 1  # reset once the threshold is reached
    assert s.on_failure(now) is RestartDecision.RESTART and s.backoff_ms(now) == 1
    now += 9 + 1  # and it increases again
    assert s.on_failure(now) is RestartDecision.RESTART and s.backoff_ms(now) == 2


def check_merged(s: ExponentialDelayRestartStrategy, now: int, backoff: int) -> int:
    """Every failure until the planned restart joins it: one attempt, the backoff counting down."""
    assert s.on_failure(now) is RestartDecision.RESTART  # a new attempt
    attempts = s.failures
    for advance in range(backoff):
        for _ in range(10):
            assert s.on_failure(now) is RestartDecision.RESTART
            assert s.failures == attempts and s.backoff_ms(now) == backoff - advance
        now += 1
    return now


@pytest.mark.parametrize("rounds", [1, 10])
def test_failures_while_a_restart_is_planned_merge_into_one_attempt(rounds):
    s, now = strategy(2, 6, 2.0, 80, 0, 3), 0
    for _ in range(rounds):
        now = check_merged(s, now, 2)
        now = check_merged(s, now + 1, 4)
        now = check_merged(s, now + 1, 6)
        if rounds == 1:
            assert s.on_failure(now + 1) is RestartDecision.FAIL_JOB  # a new round: the fourth attempt
        now += 80


@pytest.mark.parametrize(
    "settings, problem",
    [
        (dict(initial_backoff_ms=0), "initial_backoff_ms must be at least 1"),
        (dict(initial_backoff_ms=70_000), "initial_backoff_ms cannot be higher than max_backoff_ms"),
        (dict(backoff_multiplier=1.0), "backoff_multiplier must be greater than 1"),
        (dict(jitter_factor=1.5), "jitter_factor must be >= 0 and <= 1"),
        (dict(attempts_before_reset_backoff=0), "attempts_before_reset_backoff must be at least 1"),
    ],
)
def test_settings_flink_refuses_are_refused(settings, problem):
    config = RestartStrategyConfig(EXPONENTIAL, **settings)
    assert config.problem() == problem
    with pytest.raises(ValueError, match=problem):
        config.create(random.Random(0))


def test_flinks_defaults():
    c = RestartStrategyConfig(EXPONENTIAL)
    assert (
        c.initial_backoff_ms,
        c.max_backoff_ms,
        c.backoff_multiplier,
        c.reset_backoff_threshold_ms,
        c.jitter_factor,
        c.attempts_before_reset_backoff,
    ) == (1000, 60_000, 1.5, 3_600_000, 0.1, 2**31 - 1)


def test_thousands_of_failures_in_a_row_stay_at_the_maximum_backoff():
    """``1.5 ** 5000`` overflows a double: Flink's ``Math.pow`` gives infinity and its ``(long)`` cast saturates, so
    the backoff stays at the maximum (Python's float power raises instead, which must not reach the JobMaster)."""
    s, now = strategy(1000, 60_000, 1.5, 3_600_000, 0.1, MAX_INT), 0
    for _ in range(5000):
        assert s.on_failure(now) is RestartDecision.RESTART
        now += s.backoff_ms(now) + 1
    assert s.failures == 5000 and s.backoff_ms(now - 60_001) == 60_000
