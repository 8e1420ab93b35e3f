"""The verdict's calibration, by simulation: how often it calls two models of the same distribution
"better" or "worse" (false alarms; goal ≤ 0.05 at confidence 0.95), how often it calls a real
1-point accuracy drop "worse" with 3 seeds × 10,000 examples (power; goal ≥ 0.8), and what one
verdict costs for 5 seeds × 100,000 examples (goal ≤ 1 s).

The world it simulates (each comparison draws a new evaluation set and new seeds):
- example i has a difficulty z[i] ~ N(0, 1.5²) on the logit scale, shared by both models (paired);
- a model's training run (a seed) has an effect b ~ N(0, τ²) on its logit, and each (run, example)
  a disagreement e ~ N(0, σ²): the examples a run gets right move from seed to seed;
- correct[run, i] ~ Bernoulli(sigmoid(θ + b − z[i] + e)), θ set for the model's accuracy.
The defaults put a seed's accuracy spread at ~0.1–0.2 points around 97 %, as MNIST's is; --tau and
--sigma change it. Each figure is a share of --trials comparisons, with its binomial standard error.

    .venv/bin/python bench/verdict.py                  # 1,000 comparisons per row
    .venv/bin/python bench/verdict.py --trials 4000 --tau 0.1 --sigma 1.0
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]

from runner.verdict.stats import Goal, Verdict, compare  # noqa: E402


def logit_for(accuracy: float, difficulty_sd: float, sigma: float, rng: np.random.Generator) -> float:
    """θ whose population accuracy is `accuracy` (found by bisection on a large sample)."""
    z = rng.normal(0, difficulty_sd, 400_000) + rng.normal(0, sigma, 400_000)
    lo, hi = -20.0, 20.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if (1 / (1 + np.exp(-(mid - z)))).mean() < accuracy:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def runs(
    theta: float, difficulty: np.ndarray, seeds: int, tau: float, sigma: float, rng: np.random.Generator
) -> np.ndarray:
    effect = rng.normal(0, tau, (seeds, 1))
    disagreement = rng.normal(0, sigma, (seeds, difficulty.size))
    p = 1 / (1 + np.exp(-(theta + effect - difficulty[None, :] + disagreement)))
    return (rng.random(p.shape) < p).astype(np.float64)


def rate(
    args,
    accuracy_c: float,
    accuracy_b: float,
    seeds: int,
    examples: int,
    margin: float,
    wanted: set[Verdict],
    rng,
    baseline_seeds: int | None = None,
) -> tuple[float, float]:
    """`baseline_seeds`: the baseline's, when it has fewer (a release made before evidence, evaluated once)."""
    theta_c = logit_for(accuracy_c, args.difficulty, args.sigma, rng)
    theta_b = logit_for(accuracy_b, args.difficulty, args.sigma, rng)
    hits = 0
    for _ in range(args.trials):
        difficulty = rng.normal(0, args.difficulty, examples)
        candidate = runs(theta_c, difficulty, seeds, args.tau, args.sigma, rng)
        baseline = runs(theta_b, difficulty, baseline_seeds or seeds, args.tau, args.sigma, rng)
        hits += compare(candidate, baseline, Goal.MAXIMIZE, margin, 0.95).verdict in wanted
    share = hits / args.trials
    return share, (share * (1 - share) / args.trials) ** 0.5


def seed_spread(args, rng) -> float:
    """The standard deviation of one run's accuracy over seeds, on a fixed evaluation set of 10,000."""
    theta = logit_for(0.97, args.difficulty, args.sigma, rng)
    difficulty = rng.normal(0, args.difficulty, 10_000)
    return float(runs(theta, difficulty, 200, args.tau, args.sigma, rng).mean(axis=1).std(ddof=1))


def timing(rng) -> float:
    candidate = (rng.random((5, 100_000)) < 0.97).astype(np.float64)
    baseline = (rng.random((5, 100_000)) < 0.97).astype(np.float64)
    compare(candidate, baseline)  # scipy's import, once
    times = []
    for _ in range(7):
        start = time.perf_counter()
        compare(candidate, baseline, Goal.MAXIMIZE, 0.005, 0.95)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=1000, help="comparisons per row (default 1000)")
    parser.add_argument("--tau", type=float, default=0.05, help="a seed's effect on the logit, sd (default 0.05)")
    parser.add_argument("--sigma", type=float, default=0.8, help="a run's disagreement per example, sd (default 0.8)")
    parser.add_argument("--difficulty", type=float, default=1.5, help="the examples' difficulty, sd (default 1.5)")
    parser.add_argument("--seed", type=int, default=20261128)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(
        f"world: difficulty sd {args.difficulty}, seed effect sd {args.tau}, per-example disagreement sd {args.sigma}; "
        f"one run's accuracy spreads by {100 * seed_spread(args, rng):.2f} points over seeds (10,000 examples)"
    )
    print(f"{args.trials} comparisons per row, confidence 0.95")
    print("\nfalse alarms (two models of one distribution, accuracy 0.97; called better or worse; goal ≤ 0.05):")
    alarms = {Verdict.BETTER, Verdict.WORSE}
    for seeds, examples, margin in (
        (1, 10_000, 0.0),
        (2, 10_000, 0.0),
        (3, 10_000, 0.0),
        (5, 10_000, 0.0),
        (3, 1_000, 0.0),
        (3, 10_000, 0.005),
    ):
        share, se = rate(args, 0.97, 0.97, seeds, examples, margin, alarms, rng)
        print(f"  {seeds} seeds × {examples:>6,} examples, margin {margin:<5}: {share:.3f} ± {se:.3f}")
    share, se = rate(args, 0.97, 0.97, 3, 10_000, 0.0, alarms, rng, baseline_seeds=1)
    print(f"  3 seeds against 1 (a release re-evaluated) × 10,000 examples: {share:.3f} ± {se:.3f}")
    print(
        "\npower (candidate 0.96 against baseline 0.97, a real 1-point drop; called worse; goal ≥ 0.8 at 3 × 10,000):"
    )
    for seeds, examples, margin in ((3, 10_000, 0.0), (3, 10_000, 0.005), (5, 10_000, 0.0), (3, 1_000, 0.0)):
        share, se = rate(args, 0.96, 0.97, seeds, examples, margin, {Verdict.WORSE}, rng)
        print(f"  {seeds} seeds × {examples:>6,} examples, margin {margin:<5}: {share:.3f} ± {se:.3f}")
    share, se = rate(args, 0.96, 0.97, 3, 10_000, 0.0, {Verdict.WORSE}, rng, baseline_seeds=1)
    print(f"  3 seeds against 1 (a release re-evaluated) × 10,000 examples: {share:.3f} ± {se:.3f}")
    print(
        f"\none verdict, 5 seeds × 100,000 examples (no resampling: the interval is analytic): {1000 * timing(rng):.1f}"
        " ms (goal ≤ 1000 ms)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
