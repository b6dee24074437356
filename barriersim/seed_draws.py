"""Hypothesis strategies drawn by seed outside a Hypothesis test: seed N always gives the same value, in any process
(a campaign's case N), and a value's choice sequence is shrunk on demand by Hypothesis itself.

``draw(strategy, seed)`` draws from a ``ConjectureData`` fed by ``random.Random(seed)``: the property suite's draws,
without Hypothesis' occasional injection of constants found in the loaded modules (which would make a draw depend
on what the process imported); a draw Hypothesis rejects (a filter, an overrun) is drawn again from the same stream.
``shrink(strategy, choices, test)`` puts the choices in an in-memory example database (its secondary corpus), where
a ``@given`` run's ``reuse`` phase replays them, and lets Hypothesis shrink the failure to its smallest value.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.control import BuildContext
from hypothesis.database import InMemoryExampleDatabase, choices_to_bytes
from hypothesis.errors import StopTest
from hypothesis.internal.conjecture.data import ConjectureData
from hypothesis.internal.conjecture.providers import HypothesisProvider

MAX_ATTEMPTS = 100  # rejected draws of one seed before it gives up (the project's strategies reject none)


class _SeededProvider(HypothesisProvider):
    """Hypothesis' own provider without the constants of the loaded modules."""

    def _maybe_draw_constant(self, choice_type, constraints, *, p: float = 0.05):
        return None


@dataclass(frozen=True)
class Drawn:
    """A value drawn by seed and the choice sequence it was drawn from (what ``shrink`` starts from)."""

    value: Any
    choices: tuple


def draw(strategy, seed: int) -> Drawn:
    """The value ``strategy`` gives for ``seed``."""
    stream = random.Random(seed)
    for _ in range(MAX_ATTEMPTS):
        data = ConjectureData(random=stream, provider=_SeededProvider)
        try:
            with BuildContext(data, wrapped_test=draw):
                value = data.draw(strategy)
        except StopTest:
            continue
        return Drawn(value, tuple(data.choices))
    raise RuntimeError(f"seed {seed}: the strategy rejected {MAX_ATTEMPTS} draws in a row")


def replay(strategy, choices: tuple):
    """The value a choice sequence gives (``draw``'s, or one ``shrink`` found)."""
    data = ConjectureData.for_choices(choices)
    with BuildContext(data, wrapped_test=replay):
        return data.draw(strategy)


_DATABASE_KEY = b"barriersim.seed_draws.shrink"


def shrink(strategy, choices: tuple, test: Callable[[Any], None]) -> tuple[Any, BaseException] | None:
    """Hypothesis' smallest value (and its error) that ``test`` still fails, starting from ``choices``; None when
    the value of ``choices`` passes. Only the failure found first is shrunk."""
    database = InMemoryExampleDatabase()
    # the secondary corpus: Hypothesis takes an example of the primary one as shrunk already
    database.save(_DATABASE_KEY + b".secondary", choices_to_bytes(choices))
    failures: list[tuple[Any, BaseException]] = []

    @settings(
        database=database,
        phases=[Phase.reuse, Phase.shrink],
        deadline=None,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        derandomize=False,
        max_examples=1,
    )
    @given(strategy)
    def property_(value):
        try:
            test(value)
        except Exception as error:
            failures.append((value, error))
            raise

    property_._hypothesis_internal_database_key = _DATABASE_KEY
    try:
        property_()
    except Exception:  # the shrunk failure, re-raised by Hypothesis after its last run of it
        return failures[-1] if failures else None
    return None
