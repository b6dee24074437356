"""The per-record draws of a scenario's workload, in plain numpy: the simulator's local splits use them, and the Spark
workload (``barriersim.spark.workload``) computes the very same draws in Spark's Arrow batch function. See
docs/runs-and-workloads.md, "The per-record draws of a workload".
"""

from __future__ import annotations

import numpy as np

from barriersim.runtime.record_batch import RecordBatch

SOURCE_ID_STRIDE = 10**9  # record ids of source vertex k start at k * SOURCE_ID_STRIDE
_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser over a uint64 array (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = (x + np.uint64(0x9E3779B97F4A7C15)) & _MASK64
        z = ((z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK64
        z = ((z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK64
        return z ^ (z >> np.uint64(31))


def zipf_cdf(keys: int, exponent: float, hot_key_share: float = 0.0) -> np.ndarray:
    """The keys' cumulative distribution: a finite Zipf distribution over ``keys`` keys (exponent 0: uniform); with
    ``hot_key_share`` > 0, key 0 carries that share of the records and the others follow the Zipf distribution over
    the rest (e.g. 64 keys, 30 % on key 0, the rest uniform)."""
    weights = 1.0 / np.power(np.arange(1, keys + 1, dtype=np.float64), exponent)
    if hot_key_share > 0 and keys > 1:
        rest = weights[1:] / weights[1:].sum()
        weights = np.concatenate(([hot_key_share], (1.0 - hot_key_share) * rest))
    cdf = np.cumsum(weights)
    return cdf / cdf[-1]


def active_keys(record_ids: np.ndarray, keys: int, growth_records: int) -> np.ndarray:
    """How many keys exist when each record is drawn: all ``keys`` without growth (``growth_records`` 0); with growth,
    the key space grows linearly over the first ``growth_records`` record ids, from one key to all of them."""
    if not growth_records:
        return np.full(len(record_ids), keys, dtype=np.int64)
    grown = np.ceil(keys * (record_ids.astype(np.float64) + 1.0) / growth_records).astype(np.int64)
    return np.clip(grown, 1, keys)


def draw_columns(
    record_ids: np.ndarray,
    seed: int,
    cdf: np.ndarray,
    max_value: int,
    sources: int,
    ms_per_record: float,
    growth_records: int = 0,
) -> dict[str, np.ndarray]:
    ids = record_ids.astype(np.uint64)
    with np.errstate(over="ignore"):
        base = np.uint64(seed) * np.uint64(0x100000001B3)
        u = (splitmix64(ids ^ base) >> np.uint64(11)).astype(np.float64) / float(1 << 53)
        v = splitmix64(ids ^ (base + np.uint64(0x5851F42D4C957F2D)))
    if growth_records:
        # keys added over time: the draw follows the distribution restricted to the keys that exist by then
        u = u * cdf[active_keys(record_ids, len(cdf), growth_records) - 1]
    keys = np.minimum(np.searchsorted(cdf, u, side="right"), len(cdf) - 1).astype(np.int64)
    return {
        "record_id": record_ids.astype(np.int64),
        "split": (record_ids % sources).astype(np.int32),
        "offset": (record_ids // sources).astype(np.int64),
        "key": keys,
        "value": (v % np.uint64(max_value)).astype(np.int64) + 1,
        "event_time": np.floor(record_ids * ms_per_record).astype(np.int64),
    }


def local_splits(
    records: int,
    keys: int,
    zipf_exponent: float,
    max_value: int,
    sources: int,
    seed: int,
    rate_per_source: int = 0,
    record_id_offset: int = 0,
    hot_key_share: float = 0.0,
    key_growth: bool = False,
) -> list[RecordBatch]:
    """The same workload as ``barriersim.spark.workload.generate_workload`` (the same draws per record),
    computed locally with numpy for the simulator and its property tests, where starting Spark per example would
    dominate: split ``i`` holds records ``i, i + sources, ...`` as a ``RecordBatch`` of
    ``(record_id, key, value, event_time)``."""
    total_rate = rate_per_source * sources
    cdf = zipf_cdf(keys, zipf_exponent, hot_key_share)
    ms_per_record = 1000.0 / total_rate if total_rate else 1.0
    columns = np.empty((4, records), dtype=np.int64)
    for start in range(0, records, _DRAW_CHUNK):  # in chunks, to bound the draws' temporary arrays
        ids = np.arange(start, min(records, start + _DRAW_CHUNK), dtype=np.int64)
        cols = draw_columns(ids, seed, cdf, max_value, sources, ms_per_record, records if key_growth else 0)
        columns[:, start : start + len(ids)] = (
            cols["record_id"] + record_id_offset,
            cols["key"],
            cols["value"],
            cols["event_time"],
        )
    if sources == 1:
        return [RecordBatch(columns)]
    return [RecordBatch(np.ascontiguousarray(columns[:, i::sources])) for i in range(sources)]


_DRAW_CHUNK = 1 << 22
