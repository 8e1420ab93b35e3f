"""How much slower the candidate answers, with the uncertainty a replay of a few hundred requests
leaves: the ratio of the two sides' p99 latencies, and a paired bootstrap interval for it (the same
requests resampled together on both sides, 2,000 times, a fixed seed: the same answers give the same
interval). A p99 is the tail of a few requests: on a shared machine two runs of one model differ by 2×
(measured: 0.8–2.1× on this 2-core machine), so a replay refuses a candidate only when the interval's
lower bound passes max_latency_ratio — bench/replay.py --calibrate prints how often that happens for
a model no slower (false alarms) and for one really slower (power)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RESAMPLES = 2000
CONFIDENCE = 0.95  # the interval is two-sided; its lower bound is what a refusal needs to pass
SEED = 20261128
PERCENTILE = 99


@dataclass(frozen=True)
class Ratio:
    value: float  # candidate p99 / baseline p99
    low: float
    high: float


def p99(seconds) -> float:
    return float(np.percentile(np.asarray(seconds, dtype=float), PERCENTILE))


def p99_ratio(candidate, baseline, resamples: int = RESAMPLES, confidence: float = CONFIDENCE) -> Ratio | None:
    """The p99 ratio of paired latencies (request i's on each side), with its bootstrap interval;
    None with fewer than 2 pairs or a baseline whose p99 is 0."""
    mine, theirs = np.asarray(candidate, dtype=float), np.asarray(baseline, dtype=float)
    if len(mine) < 2 or len(mine) != len(theirs) or p99(theirs) <= 0:
        return None
    picks = np.random.default_rng(SEED).integers(0, len(mine), size=(resamples, len(mine)))
    ratios = np.percentile(mine[picks], PERCENTILE, axis=1) / np.maximum(
        np.percentile(theirs[picks], PERCENTILE, axis=1), 1e-12
    )
    tail = (1 - confidence) / 2
    return Ratio(p99(mine) / p99(theirs), float(np.quantile(ratios, tail)), float(np.quantile(ratios, 1 - tail)))
