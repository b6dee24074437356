"""The family benchmark: barriersim on every measured configuration beside Flink's runs, figure by figure.

How this works: the figures of every Flink run (``runner``'s raw files) give a range; barriersim simulates the
converted scenario (``converter``) with ``--seeds`` seeds (medians; ``figures``, the same definitions) and each figure
passes within the range widened by 30 % (under 50: by 15), ``benchmarks.alignment_checks``' band: the unaligned flags
per vertex as patterns, the ramp as the median of checkpoints 2-6 (``ramp_level``). Flink's runs are judged against
each other the same way (``self_agreement``). Then the one-dimension pairs (each figure's direction in Flink against
barriersim's) and the spin calibration (the configured cost per record against Flink's busy time per record). Run:
``.venv/bin/python -m benchmarks.flink_family.compare`` (``--only``, ``--json``, ``--seeds``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from barriersim.runtime.sim.job_simulation import JobSimulation
from barriersim.scenarios.simulation_inputs import job_config, workload_splits
from benchmarks.alignment_checks import ratio_text, span_text, within_band
from benchmarks.flink_family.converter import NotExpressible, convert
from benchmarks.flink_family.description import Config, loads
from benchmarks.flink_family.figures import (
    NUMERIC,
    RAMP,
    combined,
    figures,
    flink_measures,
    from_barriersim,
    from_flink,
)
from benchmarks.flink_family.generator import FAMILY_JSON, load_family
from benchmarks.flink_family.runner import RAW_DIR, selected

LABELS = {
    "e2e": "end-to-end median ms",
    "e2e_p90": "end-to-end p90 ms",
    "start_delay": "bottleneck start delay ms",
    "sink_alignment": "sink alignment ms",
    "persisted_kib": "persisted KiB",
    "processed_kib": "processed KiB",
}
MOVE = 0.10  # a figure moves when it changes by more than 10 % (and more than MOVE_SMALL)
MOVE_SMALL = 2.0


@dataclass
class Comparison:
    name: str
    flink_runs: list[dict]
    measures: list[dict]
    barriersim: dict | None = None
    not_expressible: str = ""
    wall_s: float = 0.0
    checks: list[dict] = field(default_factory=list)


def flink_runs(config: Config, raw_dir: Path) -> tuple[list[dict], list[dict]]:
    figures_, measures = [], []
    for path in sorted(raw_dir.glob(f"{config.name}-run*.json.gz")):
        raw = json.loads(gzip.decompress(path.read_bytes()))
        figures_.append(figures(from_flink(raw, config), config))
        measures.append({**flink_measures(raw, config), "loadavg": raw.get("loadavg")})
    return figures_, measures


def simulate(config: Config, seeds: int = 1) -> tuple[dict | None, str, float]:
    scenario = convert(config)
    if isinstance(scenario, NotExpressible):
        return None, scenario.reason, 0.0
    started = time.perf_counter()
    runs = []
    for seed in range(scenario.seed, scenario.seed + seeds):
        result = JobSimulation(job_config(scenario), workload_splits(scenario), seed).run()
        runs.append(figures(from_barriersim(result.checkpoints, result.subtasks, config), config))
    return combined(runs), "", time.perf_counter() - started


def span(runs: list[dict], key: str) -> tuple[float, float] | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return (min(values), max(values)) if values else None


def judge(c: Comparison) -> list[dict]:
    """Each figure: Flink's range, barriersim's figure, the ratio, within the band or not."""
    checks: list = []
    if c.barriersim is None or not c.flink_runs:
        return checks
    for key in NUMERIC:
        flink, ours = span(c.flink_runs, key), c.barriersim.get(key)
        if flink is None:
            continue
        checks.append(
            {
                "figure": LABELS[key],
                "flink": flink,
                "barriersim": ours,
                "ratio": ratio_text(ours, flink),
                "passed": within_band(ours, flink),
            }
        )
    for vertex, ours in c.barriersim.get("flags", {}).items():
        theirs = sorted({r["flags"][vertex] for r in c.flink_runs if "flags" in r})
        checks.append(
            {
                "figure": f"unaligned flags {vertex}",
                "flink": theirs,
                "barriersim": ours,
                "ratio": "",
                "passed": ours in theirs,
            }
        )
    levels = [level for r in c.flink_runs if (level := ramp_level(r["ramp"])) is not None]
    ours_level = ramp_level(c.barriersim["ramp"])
    if levels and ours_level is not None:
        band = (min(levels), max(levels))
        checks.append(
            {
                "figure": "ramp: median of checkpoints 2-6 ms",
                "flink": band,
                "barriersim": ours_level,
                "ratio": ratio_text(ours_level, band),
                "passed": within_band(ours_level, band),
                "detail": "checkpoints 2-6: Flink "
                + " / ".join(" ".join(str(round(v)) for v in r["ramp"][1:RAMP]) for r in c.flink_runs)
                + ", barriersim "
                + " ".join(str(round(v)) for v in c.barriersim["ramp"][1:RAMP]),
            }
        )
    return checks


def ramp_level(ramp: list[float]) -> float | None:
    """The first checkpoints' level: the median end to end of checkpoints 2-6 (None for a shorter ramp). Chosen
    over judging each of them because Flink reproduces it: its two runs agree on it in 67 of 70 comparisons, on
    each of checkpoints 2-6 alike in 35 (``self_agreement``; docs/fidelity-family.md)."""
    return statistics.median(ramp[1:RAMP]) if len(ramp) >= RAMP else None


def self_agreement(done: dict[str, Comparison]) -> dict[str, tuple[int, int]]:
    """Flink against itself: each run's figures judged (``judge``) against each other run of the configuration,
    over the configurations barriersim was judged on; per figure (the flags as one), how many agreed of how many."""
    per: dict[str, tuple[int, int]] = {}
    for c in done.values():
        if not c.checks:
            continue
        for i, mine in enumerate(c.flink_runs):
            for j, other in enumerate(c.flink_runs):
                if i == j:
                    continue
                for check in judge(Comparison(c.name, [other], [], mine)):
                    figure = "unaligned flags" if check["figure"].startswith("unaligned flags") else check["figure"]
                    agreed, compared = per.get(figure, (0, 0))
                    per[figure] = (agreed + check["passed"], compared + 1)
    return per


def _direction(base: float | None, variant: float | None) -> int:
    if base is None or variant is None:
        return 0
    if abs(variant - base) <= max(MOVE * abs(base), MOVE_SMALL):
        return 0
    return 1 if variant > base else -1


def _flink_direction(base: tuple[float, float] | None, variant: tuple[float, float] | None) -> int:
    """Up or down only where the runs' ranges lie apart by more than the move threshold."""
    if base is None or variant is None:
        return 0
    if variant[0] > base[1]:
        return _direction(base[1], variant[0])
    if variant[1] < base[0]:
        return _direction(base[0], variant[1])
    return 0


def pair_directions(pairs: list[dict], done: dict[str, Comparison]) -> list[dict]:
    out = []
    for pair in pairs:
        b, v = done.get(pair["base"]), done.get(pair["variant"])
        if (
            b is None
            or v is None
            or b.barriersim is None
            or v.barriersim is None
            or not b.flink_runs
            or not v.flink_runs
        ):
            continue
        for key in NUMERIC:
            flink = _flink_direction(span(b.flink_runs, key), span(v.flink_runs, key))
            ours = _direction(b.barriersim.get(key), v.barriersim.get(key))
            out.append(
                {
                    "pair": pair["dimension"],
                    "base": pair["base"],
                    "figure": LABELS[key],
                    "flink": flink,
                    "barriersim": ours,
                    "opposite": flink * ours < 0,
                }
            )
    return out


def spin_costs(config: Config, measures: list[dict]) -> list[dict]:
    """Per vertex: the configured cost per record (spin, plus the hot key's sleep times its share at the hot
    vertex) against Flink's busy time per record in the measured window."""
    job = loads(config)
    out = []
    for v in config.vertices[1:]:
        hot = 0.0
        if v.name == config.hot_vertex and config.hot_key_share > 0:
            records = sum(job.records_in[v.name])
            hot = (sum(job.busy_us[v.name]) - records * v.spin_us) / records if records else 0.0
        measured = [x for x in (m["busy_us_per_record"].get(v.name) for m in measures) if x is not None]
        out.append(
            {
                "config": config.name,
                "vertex": v.name,
                "spin_us": v.spin_us,
                "configured_us": v.spin_us + hot,
                "flink_busy_us": (min(measured), max(measured)) if measured else None,
            }
        )
    name, i = job.bottleneck
    records = job.records_in[name][i]
    measured = [
        x
        for x in (m["busy_us_per_record_per_subtask"].get(name, [None] * (i + 1))[i] for m in measures)
        if x is not None
    ]
    out.append(
        {
            "config": config.name,
            "vertex": f"{name}#{i} (bottleneck)",
            "spin_us": config.vertices[[v.name for v in config.vertices].index(name)].spin_us,
            "configured_us": job.busy_us[name][i] / records if records else 0.0,
            "flink_busy_us": (min(measured), max(measured)) if measured else None,
        }
    )
    return out


def spin_cost_measurement(family: Path = FAMILY_JSON, raw_dir: Path = RAW_DIR) -> list[dict]:
    """The spin cost, a named measurement for a later calibration of barriersim's per-record cost: for each measured
    calibration job (one worker subtask, one spin, the hot key's sleep in one of them, an idle rate), the worker's
    configured cost per record against Flink's busy time per record: what Flink adds to a spin or a sleep."""
    configs, _ = load_family(family)
    out = []
    for config in configs:
        if config.group == "calibration":
            _, measures = flink_runs(config, raw_dir)
            if measures:
                out += [s for s in spin_costs(config, measures) if s["vertex"] == "work"]
    return out


def _shown(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, tuple):
        return span_text(value)
    if isinstance(value, float):
        return f"{value:.0f}"
    return str(value)


def print_report(
    done: dict[str, Comparison],
    directions: list[dict],
    spins: list[dict],
    agreement: dict[str, tuple[int, int]],
) -> None:
    total = passed = 0
    for c in done.values():
        ends = ", ".join(f"{m['loadavg']['after'][0]:.1f}" for m in c.measures if m.get("loadavg")) or "-"
        print(
            f"\n{c.name}: {len(c.flink_runs)} Flink runs (load average at their end: {ends}), "
            f"barriersim {c.wall_s:.1f} s"
        )
        if c.not_expressible:
            print(f"  not expressible in barriersim: {c.not_expressible}")
            continue
        for check in c.checks:
            total += 1
            passed += check["passed"]
            print(
                f"  {'PASS' if check['passed'] else 'FAIL'}  {check['figure']}: Flink {_shown(check['flink'])}, "
                f"barriersim {_shown(check['barriersim'])} {check['ratio']}"
            )
            if check.get("detail"):
                print(f"        {check['detail']}")
        through = [m["throughput"] for m in c.measures if m.get("throughput")]
        size = [m["bytes_per_record"] for m in c.measures if m.get("bytes_per_record")]
        if through:
            print(
                f"  Flink: sources' records/s {span_text((min(through), max(through)))}; bytes per record out of the "
                f"sources {span_text((min(size), max(size))) if size else '-'}"
            )
    print(
        f"\n{passed} of {total} figures within their band ({100 * passed / total:.0f} %)" if total else "\nno figures"
    )
    if agreement:
        agreed, compared = sum(a for a, _ in agreement.values()), sum(n for _, n in agreement.values())
        print(
            f"Flink against itself (each run's figures against its other run's, the same band): {agreed} of "
            f"{compared} ({100 * agreed / compared:.0f} %); "
            + ", ".join(f"{figure} {a} of {n}" for figure, (a, n) in agreement.items())
        )
    if directions:
        print("\none-dimension pairs (direction: + up, - down, 0 within 10 %/2 units or Flink's runs overlapping):")
        for d in directions:
            mark = "OPPOSITE" if d["opposite"] else "ok"
            print(
                f"  {mark:8s} {d['pair']} at {d['base']}: {d['figure']}: Flink {d['flink']:+d}, "
                f"barriersim {d['barriersim']:+d}"
            )
    if spins:
        print("\nspin calibration: configured cost per record against Flink's busy time per record (µs):")
        for s in spins:
            print(
                f"  {s['config']} {s['vertex']}: spin {s['spin_us']:.0f}, configured {s['configured_us']:.0f}, "
                f"Flink busy {_shown(s['flink_busy_us'])}"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.flink_family.compare", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--family", type=Path, default=FAMILY_JSON)
    parser.add_argument("--raw-dir", type=Path, default=RAW_DIR)
    parser.add_argument("--only", default="", help="comma-separated shell patterns of configuration names")
    parser.add_argument("--json", type=Path, help="also write the comparison to this file")
    parser.add_argument(
        "--seeds", type=int, default=1, help="barriersim's runs per configuration, seeds from its own (medians)"
    )
    parser.add_argument("--spin-cost", action="store_true", help="only the spin cost measurement (no simulations)")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be at least 1, got {args.seeds}")
    if args.spin_cost:
        for s in spin_cost_measurement(args.family, args.raw_dir):
            print(
                f"{s['config']}: configured {s['configured_us']:.0f} µs per record, Flink busy "
                f"{_shown(s['flink_busy_us'])} µs per record"
            )
        return 0
    configs, pairs = load_family(args.family)
    done: dict[str, Comparison] = {}
    spins = []
    for config in selected(configs, args.only):
        runs, measures = flink_runs(config, args.raw_dir)
        if not runs:
            continue
        ours, reason, wall = simulate(config, args.seeds)
        c = Comparison(config.name, runs, measures, ours, reason, wall)
        c.checks = judge(c)
        done[config.name] = c
        spins += spin_costs(config, measures)
    if not done:
        print(f"no measured configuration in {args.raw_dir}: run benchmarks.flink_family.runner first", file=sys.stderr)
        return 1
    directions = pair_directions(pairs, done)
    agreement = self_agreement(done)
    print_report(done, directions, spins, agreement)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "configs": {n: c.__dict__ for n, c in done.items()},
                    "pairs": directions,
                    "spin_costs": spins,
                    "flink_self_agreement": agreement,
                },
                indent=1,
                default=list,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
