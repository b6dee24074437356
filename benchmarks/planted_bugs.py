"""Property power, measured: for each planted bug (``runtime.faults.mutations``) and each mode it can show in, how
many generated examples the whole-job suite runs before it fails, for five random seeds, against the suite's
default budget (CI's derandomized suite must fail within it in some mode), and per bug the seeds in which some mode
found it. The suite is ``tests/properties/test_planted_bugs.py``'s
``suite_parts``: random faults, JobManager faults, cancelled-in-flight checkpoints (modes persisting in-flight data),
TaskManager and node loss, rescale sequences; an example counts when the simulator ran it.
``python -m benchmarks.planted_bugs [--seeds 1 2 3 4 5] [--only BUG ...]``."""

import argparse
import time
import warnings

from hypothesis import HealthCheck, Phase, given, seed, settings

from barriersim.runtime.faults.mutations import planted
from tests.properties.test_planted_bugs import WHOLE_JOB_MODES, suite_parts


def examples_to_failure(mode: str, run_seed: int) -> tuple[int | None, str | None]:
    """Examples the suite ran up to and including the first failing one (None: it did not fail), and the property."""
    total = 0
    for name, strategy, budget, check in suite_parts(mode):
        ran, failed = _run_property(strategy, budget, check, run_seed)
        if failed:  # the suite found the bug
            return total + ran, name
        total += ran
    return None, None


def _run_property(strategy, budget: int, check, run_seed: int) -> tuple[int, bool]:
    """One part of the suite: the examples it ran, and whether one of them failed."""
    ran = [0]

    @seed(run_seed)
    @settings(
        max_examples=budget,
        deadline=None,
        database=None,
        derandomize=False,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def property_(case):
        ran[0] += 1
        check(case, case.run())

    try:
        property_()
    except Exception:
        return ran[0], True
    return ran[0], False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--only", nargs="+", default=None, help="planted bugs (their values) to measure")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    budget = {mode: sum(b for _, _, b, _ in suite_parts(mode)) for modes in WHOLE_JOB_MODES.values() for mode in modes}
    print(
        f"{'planted bug':38} {'mode':22} "
        + " ".join(f"{'seed ' + str(s):>22}" for s in args.seeds)
        + f" {'suite budget':>13} {'wall s':>7}"
    )
    found_by_seed: dict[str, set[int]] = {}  # per bug: the seeds in which some mode's suite found it
    for bug, modes in WHOLE_JOB_MODES.items():
        if args.only and bug.value not in args.only:
            continue
        found_by_seed[bug.value] = set()
        for mode in modes:
            started = time.perf_counter()
            cells = []
            with planted(bug):
                for run_seed in args.seeds:
                    count, name = examples_to_failure(mode, run_seed)
                    cells.append(f"{count} ({name})" if count is not None else "not found")
                    if count is not None:
                        found_by_seed[bug.value].add(run_seed)
            print(
                f"{bug.value:38} {mode:22} "
                + " ".join(f"{c:>22}" for c in cells)
                + f" {budget[mode]:>13} {time.perf_counter() - started:>7.1f}",
                flush=True,
            )
    print("\nper bug, the seeds in which the whole-job suite found it in some mode:")
    for value, seeds in found_by_seed.items():
        print(f"{value:38} {len(seeds)}/{len(args.seeds)}", flush=True)


if __name__ == "__main__":
    main()
