"""Property power, measured: for each planted historical bug (``runtime.faults.mutations``) and each mode it can show in,
how many generated examples the whole-job suite runs before it fails, for five random seeds, against the suite's
default budget (the figure CI relies on: the derandomized suite must fail within it).

The suite is the one ``tests/properties/test_planted_bugs.py`` runs: the random-faults property, then the JobManager
property, then (in the modes that persist in-flight data) the cancelled-in-flight property, each at its default
budget; an example counts when the simulator ran it. ``python -m benchmarks.planted_bugs [--seeds 1 2 3 4 5]
[--only BUG ...]``."""

import argparse
import time
import warnings

from hypothesis import HealthCheck, Phase, given, seed, settings

from barriersim.runtime.faults.mutations import planted
from barriersim.strategies import cancelled_in_flight_cases, simulated_cases
from tests.properties.test_planted_bugs import WHOLE_JOB_MODES
from tests.properties.test_whole_job_properties import (
    EXAMPLES_PER_MODE,
    IN_FLIGHT_EXAMPLES_PER_MODE,
    IN_FLIGHT_MODES,
    JOBMANAGER_EXAMPLES_PER_MODE,
    check,
)


def suite_of(mode: str) -> list:
    """(name, strategy, default budget) of each whole-job property that runs in ``mode``, in the suite's order."""
    suite = [("random faults", simulated_cases(mode=mode), EXAMPLES_PER_MODE),
             ("jobmanager", simulated_cases(mode=mode, jobmanager_faults=True), JOBMANAGER_EXAMPLES_PER_MODE)]
    if mode in IN_FLIGHT_MODES:
        suite.append(("in flight", cancelled_in_flight_cases(mode=mode), IN_FLIGHT_EXAMPLES_PER_MODE))
    return suite


def examples_to_failure(mode: str, run_seed: int) -> tuple[int | None, str | None]:
    """Examples the suite ran up to and including the first failing one (None: it did not fail), and the property."""
    total = 0
    for name, strategy, budget in suite_of(mode):
        ran = [0]

        @seed(run_seed)
        @settings(max_examples=budget, deadline=None, database=None, derandomize=False,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck))
        @given(strategy)
        def property_(case):
            ran[0] += 1
            check(case, case.run())

        try:
            property_()
        except Exception:  # the suite found the bug
            return total + ran[0], name
        total += ran[0]
    return None, None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--only", nargs="+", default=None, help="planted bugs (their values) to measure")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    budget = {mode: sum(b for _, _, b in suite_of(mode)) for modes in WHOLE_JOB_MODES.values() for mode in modes}
    print(f"{'planted bug':38} {'mode':22} " + " ".join(f"{'seed ' + str(s):>22}" for s in args.seeds)
          + f" {'suite budget':>13} {'wall s':>7}")
    for bug, modes in WHOLE_JOB_MODES.items():
        if args.only and bug.value not in args.only:
            continue
        for mode in modes:
            started = time.perf_counter()
            cells = []
            with planted(bug):
                for run_seed in args.seeds:
                    count, name = examples_to_failure(mode, run_seed)
                    cells.append(f"{count} ({name})" if count is not None else "not found")
            print(f"{bug.value:38} {mode:22} " + " ".join(f"{c:>22}" for c in cells)
                  + f" {budget[mode]:>13} {time.perf_counter() - started:>7.1f}", flush=True)


if __name__ == "__main__":
    main()
