"""The workload's random draws: a pure function of (seed, record_id), Zipf-skewed keys."""

import numpy as np

from barriersim.scenarios.workload import draw_columns, zipf_cdf


def test_draws_depend_only_on_seed_and_record_id():
    cdf = zipf_cdf(100, 1.0)
    ids = np.arange(0, 10_000)
    whole = draw_columns(ids, 7, cdf, 100, 2, 0.5)
    halves = [draw_columns(ids[:5000], 7, cdf, 100, 2, 0.5), draw_columns(ids[5000:], 7, cdf, 100, 2, 0.5)]
    for col in whole:
        assert np.array_equal(whole[col], np.concatenate([h[col] for h in halves]))
    other = draw_columns(ids, 8, cdf, 100, 2, 0.5)
    assert not np.array_equal(whole["key"], other["key"])


def test_zipf_exponent_sets_the_skew():
    ids = np.arange(0, 50_000)
    uniform = draw_columns(ids, 1, zipf_cdf(100, 0.0), 100, 1, 1.0)["key"]
    skewed = draw_columns(ids, 1, zipf_cdf(100, 1.5), 100, 1, 1.0)["key"]
    # Uniform: the hottest key holds about 1%; Zipf(1.5) over 100 keys: about 40%.
    assert np.bincount(uniform).max() / len(ids) < 0.02
    assert np.bincount(skewed).max() / len(ids) > 0.3
    assert uniform.min() >= 0 and uniform.max() <= 99


def test_splits_offsets_values_and_event_times():
    cols = draw_columns(np.arange(0, 10), 3, zipf_cdf(10, 1.0), 5, 2, 0.25)
    assert list(cols["split"]) == [0, 1] * 5
    assert list(cols["offset"]) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert cols["value"].min() >= 1 and cols["value"].max() <= 5
    assert list(cols["event_time"]) == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
