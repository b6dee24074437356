"""The seeded generator of the family: base configurations with their one-dimension variants, calibration
configurations and random draws, written to ``benchmarks/flink/family/family.json``.

How this works: two bases (the facts' job shape in Java, at a busy and at a heavy-backpressure rate) each get one
variant per dimension the fidelity goal watches (``PAIRS``: parallelism 4 -> 8, debloating off -> on, 32 -> 8 KiB,
1 -> 2 TaskManagers), which keeps the base's offered rate; five calibration jobs (one worker subtask, one spin each,
and two with the hot key's sleep of 200 µs and 1 ms) measure what a spin and a sleep cost in Flink. The draws take
each dimension's values from a seeded shuffle repeated over the draws, so every value appears; the offered rate is a
load level times the rate the job can take (``description.loads``). ``python -m benchmarks.flink_family.generator``
rewrites the file; the same seed gives the same family."""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from dataclasses import replace
from pathlib import Path

from benchmarks.flink_family.description import EXCHANGES, MODES, Config, Vertex, loads

DEFAULT_SEED = 46
DRAWS = 20
FAMILY_JSON = Path(__file__).resolve().parent.parent / "flink" / "family" / "family.json"

LOADS = {"idle": 0.2, "busy": 0.6, "backpressure": 1.5, "heavy": 3.0}  # offered rate / the job's capacity
MIN_RATE, MAX_RATE = 100, 20_000  # records/s: what paced sources keep to and barriersim simulates in reasonable time
PARALLELISMS = (1, 2, 4, 8)
SPINS_US = (5.0, 20.0, 80.0)
ZIPF_EXPONENTS = (0.0, 0.7, 1.2)
HOT_KEYS = ((0.0, 0.0), (0.1, 200.0), (0.1, 1000.0), (0.3, 200.0), (0.3, 1000.0))  # (share, extra µs)
PAYLOADS = (16, 100, 1000)
BUFFERS_KIB = (8, 16, 32)
DEBLOAT_TARGETS_MS = (0, 100, 300, 1000)  # 0: debloating off
INTERVALS_MS = (200, 500, 1000, 2000)
ALIGNED_TIMEOUTS_MS = (50, 200, 500)
CLUSTERS = ("1 TaskManager", "2 TaskManagers, half the slots each", "2 TaskManagers, all the slots each")
KEYS = 64
# the one-dimension pairs the fidelity goal watches: name, what changes
PAIRS = {
    "parallelism 4 -> 8": "p8",
    "debloating off -> on": "debloat",
    "32 -> 8 KiB buffers": "8kib",
    "1 -> 2 TaskManagers": "2tm",
}


def _slots(vertices: tuple[Vertex, ...], cluster: str) -> tuple[int, int]:
    """(TaskManagers, slots each) for a cluster layout: with slot sharing the job needs its highest parallelism."""
    needed = max(v.parallelism for v in vertices)
    if cluster == CLUSTERS[0]:
        return 1, needed
    if cluster == CLUSTERS[1]:
        return 2, math.ceil(needed / 2)
    return 2, needed


def _rate(config: Config, level: str) -> int:
    job = loads(config)
    rate = LOADS[level] * min(job.capacity, job.cpu_capacity)
    return int(min(MAX_RATE, max(MIN_RATE, round(rate, -1))))


def _with_rate(config: Config) -> Config:
    return replace(config, rate=_rate(config, config.load))


def _fitted(config: Config) -> Config:
    """``config`` at its load level; where that takes more than ``MAX_RATE``, its bottleneck vertex's spin raised to
    the next of ``SPINS_US`` until it does not (or no spin is left to raise), so that the level holds."""
    while True:
        job = loads(config)
        if LOADS[config.load] * min(job.capacity, job.cpu_capacity) <= MAX_RATE:
            break
        bigger = [
            v for v in sorted(config.vertices[1:], key=lambda v: -max(job.busy_us[v.name])) if v.spin_us < SPINS_US[-1]
        ]
        if not bigger:
            break
        raised = replace(bigger[0], spin_us=min(s for s in SPINS_US if s > bigger[0].spin_us))
        config = replace(config, vertices=tuple(raised if v.name == raised.name else v for v in config.vertices))
    return _with_rate(config)


def base(name: str, level: str, seed: int) -> Config:
    """The facts' job shape in Java: source (p=2) -> hash -> keyed (p=4, 20 µs, key 0 with 30 % of the records
    sleeping 1 ms) -> rebalance -> sink (p=2, 5 µs); one TaskManager, 32 KiB buffers, aligned, every second."""
    vertices = (Vertex("source", 2), Vertex("keyed", 4, "hash", 20.0), Vertex("sink", 2, "rebalance", 5.0))
    return _with_rate(
        Config(
            name=name,
            group="pair-base",
            seed=seed,
            vertices=vertices,
            keys=KEYS,
            zipf_exponent=0.0,
            hot_key_share=0.3,
            hot_key_extra_us=1000.0,
            hot_vertex="keyed",
            load=level,
            rate=0,
            payload_bytes=100,
            taskmanagers=1,
            slots_per_taskmanager=4,
            buffer_kib=32,
            debloat=False,
            debloat_target_ms=1000,
            mode="aligned",
            aligned_timeout_ms=0,
            interval_ms=1000,
        )
    )


def variant(b: Config, dimension: str) -> Config:
    """``b`` with one dimension changed; the offered rate stays the base's."""
    tag = PAIRS[dimension]
    name = b.name.replace("base", tag)
    if tag == "p8":
        vertices = tuple(replace(v, parallelism=8) if v.name == "keyed" else v for v in b.vertices)
        return replace(b, name=name, group="pair-variant", vertices=vertices, slots_per_taskmanager=8)
    if tag == "debloat":
        return replace(b, name=name, group="pair-variant", debloat=True)
    if tag == "8kib":
        return replace(b, name=name, group="pair-variant", buffer_kib=8)
    return replace(b, name=name, group="pair-variant", taskmanagers=2, slots_per_taskmanager=2)


def calibration(name: str, spin_us: float, seed: int, hot: tuple[float, float] = (0.0, 0.0)) -> Config:
    """One worker subtask with one spin (and the hot key's sleep): what they cost as Flink measures its busy time."""
    vertices = (Vertex("source", 1), Vertex("work", 1, "rebalance", spin_us), Vertex("sink", 1, "rebalance", 5.0))
    return _with_rate(
        Config(
            name=name,
            group="calibration",
            seed=seed,
            vertices=vertices,
            keys=KEYS,
            zipf_exponent=0.0,
            hot_key_share=hot[0],
            hot_key_extra_us=hot[1],
            hot_vertex="work",
            load="idle",
            rate=0,
            payload_bytes=100,
            taskmanagers=1,
            slots_per_taskmanager=1,
            buffer_kib=32,
            debloat=False,
            debloat_target_ms=1000,
            mode="aligned",
            aligned_timeout_ms=0,
            interval_ms=1000,
        )
    )


def _strata(rnd: random.Random, values, n: int) -> list:
    """``n`` values that take every one of ``values`` in turn, in a seeded order per round."""
    out: list = []
    while len(out) < n:
        round_ = list(values)
        rnd.shuffle(round_)
        out += round_
    return out[:n]


def draw(rnd: random.Random, index: int, seed: int, picks: dict) -> Config:
    """One random configuration from the ``picks`` of its stratum (the dimensions drawn in turn)."""
    exchanges = []
    for i in range(picks["exchanges"]):
        last = i == picks["exchanges"] - 1
        # barriersim's sinks are not keyed (its job graph takes a hash exchange only into a keyed operator)
        exchanges.append(rnd.choice([e for e in EXCHANGES if not (last and e == "hash")]))
    if picks["exchange"] not in exchanges and not (picks["exchange"] == "hash" and len(exchanges) == 1):
        exchanges[0 if picks["exchange"] == "hash" else -1] = picks["exchange"]
    vertices = [Vertex("source", rnd.choice(PARALLELISMS))]
    for i, exchange in enumerate(exchanges, start=1):
        last = i == len(exchanges)
        name = "sink" if last else f"v{i}"
        p = vertices[-1].parallelism if exchange == "forward" else rnd.choice(PARALLELISMS)
        if exchange == "broadcast":
            p = min(p, 4)  # every subtask takes every record: keep the copies few
        vertices.append(Vertex(name, p, exchange, rnd.choice(SPINS_US)))
    if picks["parallelism"] not in {v.parallelism for v in vertices}:
        free = [
            i
            for i, v in enumerate(vertices)
            if i
            and v.input != "forward"
            and v.input != "broadcast"
            and not (i + 1 < len(vertices) and vertices[i + 1].input == "forward")
        ]
        if free:
            vertices[free[0]] = replace(vertices[free[0]], parallelism=picks["parallelism"])
    drawn = tuple(vertices)
    hot_vertex = next((v.name for v in drawn if v.keyed), drawn[1].name)
    share, extra = picks["hot_key"]
    debloat = picks["debloat"]
    taskmanagers, slots = _slots(drawn, picks["cluster"])
    return _fitted(
        Config(
            name=f"draw-{index:02d}",
            group="draw",
            seed=seed,
            vertices=drawn,
            keys=KEYS,
            zipf_exponent=picks["zipf"],
            hot_key_share=share,
            hot_key_extra_us=extra,
            hot_vertex=hot_vertex,
            load=picks["load"],
            rate=0,
            payload_bytes=picks["payload"],
            taskmanagers=taskmanagers,
            slots_per_taskmanager=slots,
            buffer_kib=picks["buffer"],
            debloat=debloat > 0,
            debloat_target_ms=debloat or 1000,
            mode=picks["mode"],
            aligned_timeout_ms=picks["timeout"] if picks["mode"] == "aligned-with-timeout" else 0,
            interval_ms=picks["interval"],
        )
    )


def generate(seed: int = DEFAULT_SEED, draws: int = DRAWS) -> dict:
    """The family: its configurations (bases, variants, calibration, draws) and its one-dimension pairs."""
    rnd = random.Random(seed)
    configs: list[Config] = []
    pairs: list = []
    for level in ("busy", "heavy"):
        b = base(f"base-{level}", level, seed * 1000 + len(configs))
        configs.append(b)
        for dimension in PAIRS:
            v = variant(b, dimension)  # the base's seed too: the one dimension is all that changes
            configs.append(v)
            pairs.append({"dimension": dimension, "base": b.name, "variant": v.name})
    for spin in SPINS_US:
        configs.append(calibration(f"calibration-spin-{spin:.0f}us", spin, seed * 1000 + len(configs)))
    configs.append(calibration("calibration-sleep-200us", 20.0, seed * 1000 + len(configs), (0.3, 200.0)))
    strata = {
        "exchanges": _strata(rnd, (1, 2, 3), draws),
        "exchange": _strata(rnd, EXCHANGES, draws),
        "parallelism": _strata(rnd, PARALLELISMS, draws),
        "cluster": _strata(rnd, CLUSTERS, draws),
        "zipf": _strata(rnd, ZIPF_EXPONENTS, draws),
        "hot_key": _strata(rnd, HOT_KEYS, draws),
        "load": _strata(rnd, tuple(LOADS), draws),
        "payload": _strata(rnd, PAYLOADS, draws),
        "buffer": _strata(rnd, BUFFERS_KIB, draws),
        "debloat": _strata(rnd, DEBLOAT_TARGETS_MS, draws),
        "mode": _strata(rnd, MODES, draws),
        "interval": _strata(rnd, INTERVALS_MS, draws),
        "timeout": _strata(rnd, ALIGNED_TIMEOUTS_MS, draws),
    }
    timeouts = iter(strata["timeout"])
    for i in range(draws):
        picks = {k: v[i] for k, v in strata.items()}
        if picks["mode"] == "aligned-with-timeout":
            picks["timeout"] = next(timeouts)
        configs.append(draw(rnd, i + 1, seed * 1000 + len(configs), picks))
    # the hot key's longer sleep (most hot keys of the family sleep 1 ms), after the draws so that their seeds stay
    configs.append(calibration("calibration-sleep-1000us", 20.0, seed * 1000 + len(configs), (0.3, 1000.0)))
    return {"seed": seed, "configs": [c.to_json() for c in configs], "pairs": pairs}


def load_family(path: Path = FAMILY_JSON) -> tuple[list[Config], list[dict]]:
    doc = json.loads(path.read_text())
    return [Config.from_json(c) for c in doc["configs"]], doc["pairs"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.flink_family.generator", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--draws", type=int, default=DRAWS)
    parser.add_argument("--out", type=Path, default=FAMILY_JSON)
    args = parser.parse_args(argv)
    family = generate(args.seed, args.draws)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(family, indent=1) + "\n")
    print(f"{len(family['configs'])} configurations, {len(family['pairs'])} pairs: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
