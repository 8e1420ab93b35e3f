"""The p99 ratio and its paired bootstrap interval: reproducible, wide for a tail of few requests,
and clear of 1 for a candidate that is really slower."""

from __future__ import annotations

import numpy as np

from runner.replay.latency import p99_ratio


def test_the_same_latencies_give_a_ratio_of_one_and_the_same_interval_every_time():
    rng = np.random.default_rng(1)
    seconds = rng.lognormal(-5, 0.3, 300)
    ratio = p99_ratio(seconds, seconds)
    assert (ratio.value, ratio.low, ratio.high) == (1.0, 1.0, 1.0)
    noisy = rng.lognormal(-5, 0.3, 300)
    assert p99_ratio(seconds, noisy) == p99_ratio(seconds, noisy)


def test_a_candidate_twice_as_slow_is_surely_slower():
    base = np.random.default_rng(2).lognormal(-5, 0.3, 500)
    ratio = p99_ratio(base * 2, base * np.random.default_rng(3).lognormal(0, 0.05, 500))
    assert 1.7 < ratio.low <= ratio.value <= ratio.high < 2.3


def test_too_few_pairs_or_a_zero_baseline_give_no_ratio():
    assert p99_ratio([0.1], [0.1]) is None
    assert p99_ratio([0.1, 0.2], [0.0, 0.0]) is None
    assert p99_ratio([0.1, 0.2], [0.1]) is None
