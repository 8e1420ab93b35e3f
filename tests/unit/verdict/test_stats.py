"""The verdict's statistics on constructed evidence: the four verdicts, the sign for minimize, the
variance components, one-seed sides, bad shapes, and a small calibration check (bench/verdict.py
measures it at full size)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special  # noqa: F401  at collection: numpy.testing, which it imports, runs lscpu (a process) once

from runner.verdict.stats import SEEDLESS, Goal, Verdict, compare, components


def evidence(accuracy: float, seeds: int, examples: int, rng, spread: float = 0.0) -> np.ndarray:
    shift = rng.normal(0, spread, (seeds, 1))
    return (rng.random((seeds, examples)) < accuracy + shift).astype(float)


def test_identical_evidence_is_never_better_or_worse():
    rng = np.random.default_rng(1)
    scores = evidence(0.9, 3, 5000, rng)
    result = compare(scores, scores.copy())
    assert result.delta == 0 and result.p_better == 0.5 and result.verdict == Verdict.INCONCLUSIVE
    assert result.ci[0] == pytest.approx(-result.ci[1]) and result.ci[1] > 0  # the seeds' spread, on both sides
    assert result.components.examples == 0  # every example's seed-averaged score is the same on both sides
    assert compare(scores, scores.copy(), margin=2 * result.ci[1]).verdict == Verdict.EQUIVALENT


def test_a_clear_drop_is_worse_and_a_clear_gain_better():
    rng = np.random.default_rng(2)
    low, high = evidence(0.90, 3, 20_000, rng), evidence(0.95, 3, 20_000, rng)
    worse = compare(low, high, margin=0.005)
    assert worse.verdict == Verdict.WORSE and worse.ci[1] < -0.005 and worse.p_better < 0.01 and not worse.non_inferior
    better = compare(high, low, margin=0.005)
    assert better.verdict == Verdict.BETTER and better.ci[0] > 0.005 and better.p_better > 0.99
    assert better.seeds == (3, 3) and better.examples == 20_000
    assert abs(better.delta - (better.candidate_mean - better.baseline_mean)) < 1e-12


def test_minimize_flips_which_way_is_better():
    rng = np.random.default_rng(3)
    low_loss, high_loss = rng.normal(0.10, 0.02, (3, 5000)), rng.normal(0.20, 0.02, (3, 5000))
    result = compare(low_loss, high_loss, Goal.MINIMIZE)
    assert result.delta < 0 and result.ci[1] < 0  # Δ and its interval stay in the metric's units
    assert result.verdict == Verdict.BETTER and result.p_better > 0.99
    assert compare(high_loss, low_loss, Goal.MINIMIZE).verdict == Verdict.WORSE


def test_the_seed_part_is_each_sides_spread_of_seed_means_over_its_seeds():
    base = np.tile(np.linspace(0, 1, 100), (3, 1))
    candidate = base + np.array([[0.0], [0.1], [0.2]])  # seeds that shift every example alike
    _, parts = components(candidate, base)
    assert parts.candidate_seeds == pytest.approx(0.01 / 3)  # var(0, .1, .2) = 0.01, over 3 seeds
    assert parts.baseline_seeds == 0 and parts.examples == pytest.approx(0)
    assert parts.df == pytest.approx(2)  # the only spread has S − 1 degrees of freedom


def test_three_seeds_widen_the_interval_as_two_degrees_of_freedom_must():
    rng = np.random.default_rng(4)
    candidate = evidence(0.95, 3, 10_000, rng, spread=0.01)
    baseline = evidence(0.95, 3, 10_000, rng, spread=0.01)
    result = compare(candidate, baseline)
    half = (result.ci[1] - result.ci[0]) / 2
    assert half > 1.96 * result.components.se * 1.2  # t with few degrees of freedom, not the normal's 1.96


def test_one_seed_on_a_side_borrows_the_other_sides_seed_variance():
    rng = np.random.default_rng(5)
    candidate, baseline = evidence(0.9, 1, 2000, rng, spread=0.01), evidence(0.9, 3, 2000, rng, spread=0.01)
    result = compare(candidate, baseline)
    assert "one seed on the candidate: its seed variance is the baseline's" in result.method and result.seeds == (1, 3)
    assert result.as_json()["seeds"] == {"candidate": 1, "baseline": 3}
    # the one run's draw is as uncertain as one of the baseline's runs: 3× the baseline's seed part
    assert result.components.candidate_seeds == pytest.approx(3 * result.components.baseline_seeds)
    assert "its seed variance is the candidate's" in compare(baseline, candidate).method


def test_one_seed_on_each_side_says_the_seeds_variance_is_not_estimated():
    rng = np.random.default_rng(5)
    result = compare(evidence(0.9, 1, 2000, rng), evidence(0.9, 1, 2000, rng))
    assert SEEDLESS in result.method and result.components.candidate_seeds == result.components.baseline_seeds == 0


def test_an_inconclusive_verdict_says_what_would_decide_it():
    rng = np.random.default_rng(6)
    result = compare(evidence(0.951, 3, 2000, rng, 0.005), evidence(0.950, 3, 2000, rng, 0.005), margin=0.002)
    assert result.verdict == Verdict.INCONCLUSIVE and result.decide and "×" in result.decide
    assert set(result.as_json()) >= {
        "verdict",
        "metric" if False else "goal",
        "delta",
        "ci",
        "confidence",
        "margin",
        "p_better",
        "seeds",
        "examples",
        "method",
    }


@pytest.mark.parametrize(
    ("candidate", "baseline", "kwargs", "message"),
    [
        (np.zeros((2, 3)), np.zeros((2, 4)), {}, "same examples"),
        (np.zeros(3), np.zeros(3), {}, "seeds × examples"),
        (np.zeros((2, 0)), np.zeros((2, 0)), {}, "same examples"),
        (np.zeros((2, 3)), np.zeros((2, 3)), {"margin": -0.1}, "not negative"),
        (np.zeros((2, 3)), np.zeros((2, 3)), {"confidence": 1.0}, "between 0.5 and 1"),
    ],
)
def test_bad_shapes_and_settings_are_refused(candidate, baseline, kwargs, message):
    with pytest.raises(ValueError, match=message):
        compare(candidate, baseline, **kwargs)


def test_false_alarms_stay_near_the_confidence_level():
    """A small version of bench/verdict.py's check: 300 comparisons of one distribution, 3 seeds each."""
    rng = np.random.default_rng(20261128)
    alarms = 0
    for _ in range(300):
        difficulty = rng.normal(0, 1.5, 2000)

        def seeds(difficulty=difficulty):
            logit = 3.5 + rng.normal(0, 0.15, (3, 1)) - difficulty[None, :] + rng.normal(0, 0.6, (3, 2000))
            return (rng.random(logit.shape) < 1 / (1 + np.exp(-logit))).astype(float)

        alarms += compare(seeds(), seeds()).verdict in (Verdict.BETTER, Verdict.WORSE)
    assert alarms / 300 <= 0.09  # 0.05 at most, and three binomial standard errors (0.013 each) of room
