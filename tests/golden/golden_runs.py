"""Golden results of the simulator: every library scenario in every mode and a handful of generated cases, as
their statistics, output digest and trace hash, so that a change to the data path or the drivers that was
meant to change nothing can show it changed nothing.

How this works: ``golden_entry`` runs one case on the simulator and reduces it to plain values: the trace's
SHA-256, Flink's counts, the verdict, the job's outcome and restarts, the virtual time and event count, every
per-checkpoint row and a digest of the per-subtask rows and of the committed output (order-free: sorted).
``python -m tests.golden.golden_runs`` writes ``tests/golden/golden.json``; ``test_golden.py`` recomputes every
entry and compares. A deliberate change regenerates the file in its own commit, whose message says why.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from barriersim.runtime.checkpointing_mode import ALL_MODES as MODES

GOLDEN = Path(__file__).with_name("golden.json")
LIBRARY = Path(__file__).resolve().parents[2] / "scenarios"


def _digest(rows) -> str:
    text = json.dumps(rows, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _run(scenario, mode, seed, faults=None):
    from barriersim.runtime.sim.job_simulation import JobSimulation
    from barriersim.runtime.verification.reference import expected_sink_input, verify
    from barriersim.scenarios.loader import effective_scenario
    from barriersim.scenarios.simulation_inputs import job_config, workload_splits
    from tests.modes import in_test_mode

    scenario = effective_scenario(in_test_mode(scenario, mode), seed=seed, faults=faults)
    config = job_config(scenario)
    splits = workload_splits(scenario)
    result = JobSimulation(config, splits, seed).run()
    verdict = verify(
        expected_sink_input(config.graph, splits),
        result.committed_output,
        at_least_once=not config.checkpointing.mode.exactly_once,
    )
    return result, verdict


def golden_entry(scenario, mode: str, seed: int, faults=None) -> dict:
    result, verdict = _run(scenario, mode, seed, faults)
    return {
        "trace_sha256": result.trace_sha256,
        "outcome": result.outcome.value,
        "counts": dict(result.counts),
        "verdict": {k: v for k, v in verdict.as_dict().items() if k != "reference"},  # recorded without it
        "restarts": result.restarts,
        "restored_checkpoint_ids": list(result.restored_checkpoint_ids),
        "restored_in_flight_bytes": result.restored_in_flight_bytes,
        "virtual_ms": result.virtual_ms,
        "events": result.events,
        "faults_fired": [e["fired"] for e in result.fault_log],
        "checkpoints": result.checkpoints,
        "subtasks_sha256": _digest(result.subtasks),
        "output_sha256": _digest(sorted(map(list, result.committed_output))),
    }


EXACT_SOURCES = ("alignment_latency", "failure_storm", "quickstart", "rescale", "window_join")  # also run exact


def library_cases():
    """Every library scenario in every mode; those of ``EXACT_SOURCES`` also with ``source_emission = "exact"``
    (named ``<scenario>+exact-sources/<mode>``)."""
    import dataclasses

    from barriersim.scenarios.loader import load_scenario

    for path in sorted(LIBRARY.glob("*.toml")):
        scenario = load_scenario(path)
        for mode in MODES:
            yield f"{path.stem}/{mode}", scenario, mode, scenario.seed, None
    for stem in EXACT_SOURCES:
        scenario = load_scenario(LIBRARY / f"{stem}.toml")
        exact = dataclasses.replace(scenario, workload=dataclasses.replace(scenario.workload, source_emission="exact"))
        for mode in MODES:
            yield f"{stem}+exact-sources/{mode}", exact, mode, scenario.seed, None


def generated_cases():
    """Generated cases, kept as documents (so later changes to the strategies do not change them)."""
    from barriersim.runtime.faults.fault_schedule import FaultSchedule
    from barriersim.scenarios.loader import parse_scenario

    data = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    for name, case in sorted(data.get("generated", {}).items()):
        scenario = parse_scenario(case["document"], f"<golden {name}>")
        yield (
            name,
            scenario,
            case["document"]["checkpointing"]["mode"],
            case["seed"],
            FaultSchedule.from_plain(case["faults"]),
        )


def draw_generated(n: int, seed: int = 20261125) -> dict:
    """``n`` generated cases with at least one fault, drawn from the strategies (once: ``golden.json`` keeps them)."""
    import random
    import warnings

    from hypothesis.errors import NonInteractiveExampleWarning

    from barriersim.strategies import simulated_cases

    out = {}
    rng = random.Random(seed)
    modes = list(MODES)
    while len(out) < n:
        mode = modes[len(out) % len(modes)]
        with warnings.catch_warnings():  # drawn once, then kept in golden.json: .example() is what we want here
            warnings.simplefilter("ignore", NonInteractiveExampleWarning)
            example = simulated_cases(mode=mode, jobmanager_faults=len(out) % 2 == 1).example()
        if not len(example.faults):
            continue
        out[f"generated-{len(out):02d}-{mode}"] = {
            "document": example.document,
            "faults": example.faults.to_plain(),
            "seed": rng.randrange(2**32),
        }
    return out


def record(generated: int = 12) -> None:
    data = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    if "generated" not in data:
        data["generated"] = draw_generated(generated)
        GOLDEN.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    entries = {}
    for name, scenario, mode, seed, faults in [*library_cases(), *generated_cases()]:
        entries[name] = golden_entry(scenario, mode, seed, faults)
        print(name, entries[name]["trace_sha256"][:16], entries[name]["verdict"]["verdict"], file=sys.stderr)
    data["entries"] = entries
    GOLDEN.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    record()
