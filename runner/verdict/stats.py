"""The verdict's statistics: is the candidate better than the baseline, on paired per-example
evidence from several seeds of each?

Each side is a matrix of per-example scores, one row per seed (a training run), one column per
evaluation example; both sides' columns are the same examples, in the same order. The statistic is
the difference of the grand means, Δ = candidate − baseline (its sign flipped for `goal: minimize`,
so that a positive Δ is always an improvement).

Its variance has three parts, estimated by the method of moments of a crossed random-effects model
(y[s, i] = μ + α[i] + β[s] + γ[s, i]: example difficulty, seed effect, their interaction):

- each side's seeds: Var_s(row means) / S estimates σβ²/S + σγ²/(S·N) exactly (a two-way ANOVA's
  seed mean square over S·N), with S − 1 degrees of freedom;
- the examples: Var_i(d[i]) / N, where d[i] is the difference of the seed-averaged scores of
  example i, less the interaction the seed parts already hold (each side's residual mean square
  over its S), with N − 1 degrees of freedom. A shared difficulty (α) cancels in the pairing.

The interval is Δ ± t·SE with Student's t at the Welch–Satterthwaite degrees of freedom of the
three parts, so that 3 seeds widen it as 2 degrees of freedom must (a bootstrap over 3 seeds alone
is too narrow). P(better) is the t distribution's mass above 0. A side with one seed has no seed
part of its own: it borrows the other side's (the same training on another commit); with one seed
on both sides the seeds' variance is not estimated at all, which the method says. bench/verdict.py
measures the calibration (false alarms and power) by simulation.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np


class Goal(str, Enum):
    MAXIMIZE = "maximize"
    MINIMIZE = "minimize"


class Verdict(str, Enum):
    """For the interval [lo, hi] of Δ (signed so that positive is better) and a margin m ≥ 0."""

    BETTER = "better"  # lo > +m
    WORSE = "worse"  # hi < −m
    EQUIVALENT = "equivalent"  # −m ≤ lo and hi ≤ +m, m > 0
    INCONCLUSIVE = "inconclusive"  # anything else

    def __str__(self) -> str:
        return self.value


METHOD = "paired variance components (seeds and examples), Welch-Satterthwaite t interval"
SEEDLESS = "one seed on each side: the seeds' variance is not estimated (examples only)"
BORROWED = "one seed on the {side}: its seed variance is the {other}'s"


@dataclass(frozen=True)
class Components:
    """SE² = candidate seeds + baseline seeds + examples, and the t degrees of freedom."""

    candidate_seeds: float
    baseline_seeds: float
    examples: float
    df: float

    @property
    def se(self) -> float:
        return float(np.sqrt(self.candidate_seeds + self.baseline_seeds + self.examples))


@dataclass(frozen=True)
class Comparison:
    verdict: Verdict
    goal: Goal
    delta: float  # candidate − baseline, in the metric's units (not sign-flipped)
    ci: tuple[float, float]  # the interval of delta (not sign-flipped)
    confidence: float
    margin: float
    p_better: float
    seeds: tuple[int, int]  # candidate, baseline
    examples: int
    candidate_mean: float
    baseline_mean: float
    candidate_seed_means: tuple[float, ...]
    baseline_seed_means: tuple[float, ...]
    binary: bool  # every per-example value is 0 or 1: the metric is a share (accuracy), read in points
    components: Components
    non_inferior: bool  # the interval's worse end is above −margin
    decide: str | None  # what would decide an inconclusive verdict
    method: str

    def as_json(self) -> dict:
        return {
            "verdict": self.verdict.value,
            "goal": self.goal.value,
            "delta": self.delta,
            "ci": list(self.ci),
            "confidence": self.confidence,
            "margin": self.margin,
            "p_better": self.p_better,
            "seeds": {"candidate": self.seeds[0], "baseline": self.seeds[1]},
            "examples": self.examples,
            "candidate": {"mean": self.candidate_mean, "seed_means": list(self.candidate_seed_means)},
            "baseline": {"mean": self.baseline_mean, "seed_means": list(self.baseline_seed_means)},
            "non_inferior": self.non_inferior,
            "decide": self.decide,
            "method": self.method,
        }


def _side(scores: np.ndarray) -> tuple[np.ndarray, float | None, float | None]:
    """(per-example seed means, seed part of SE², residual mean square) of one side's S×N matrix."""
    seeds, examples = scores.shape
    per_example = scores.mean(axis=0)
    if seeds < 2:
        return per_example, None, None
    row_means = scores.mean(axis=1)
    seed_part = float(row_means.var(ddof=1)) / seeds
    residual = scores - row_means[:, None] - per_example[None, :] + per_example.mean()
    dof = (seeds - 1) * (examples - 1)
    residual_ms = float(np.einsum("ij,ij->", residual, residual)) / dof if dof > 0 else 0.0
    return per_example, seed_part, residual_ms


def components(candidate: np.ndarray, baseline: np.ndarray) -> tuple[np.ndarray, Components]:
    """The per-example differences and the variance components of their grand mean. A side with
    one seed borrows the other side's seed variance (the same training, another commit): its one
    run's draw is as uncertain as any of the other's. Its interaction with the examples stays in
    the example part (it is not estimated on that side): counted twice, on the safe side."""
    cand_examples, cand_seeds, cand_residual = _side(candidate)
    base_examples, base_seeds, base_residual = _side(baseline)
    counts = [candidate.shape[0], baseline.shape[0]]
    dofs = [counts[0] - 1, counts[1] - 1]
    if cand_seeds is None and base_seeds is not None:
        cand_seeds, dofs[0] = base_seeds * counts[1] / counts[0], dofs[1]
    elif base_seeds is None and cand_seeds is not None:
        base_seeds, dofs[1] = cand_seeds * counts[0] / counts[1], dofs[0]
    differences = cand_examples - base_examples
    examples = differences.size
    example_var = float(differences.var(ddof=1)) if examples > 1 else 0.0
    for residual, seeds in ((cand_residual, counts[0]), (base_residual, counts[1])):
        if residual is not None:
            example_var -= residual / seeds  # the interaction the seed parts already count
    example_part = max(example_var, 0.0) / examples
    if dofs[0] == dofs[1] and (counts[0] < 2) != (
        counts[1] < 2
    ):  # borrowed: one estimate, counted once in the degrees of freedom
        parts = [((cand_seeds or 0.0) + (base_seeds or 0.0), dofs[0]), (example_part, examples - 1)]
    else:
        parts = [(cand_seeds, dofs[0]), (base_seeds, dofs[1]), (example_part, examples - 1)]
    total = sum(value for value, _ in parts if value is not None)
    denominator = sum(value * value / dof for value, dof in parts if value is not None and dof > 0 and value > 0)
    df = total * total / denominator if denominator > 0 else float(max(examples - 1, 1))
    # a borrowed seed part: its one estimate's degrees of freedom, not more (Welch–Satterthwaite overstates them here)
    if len(parts) == 2:
        df = min(df, float(parts[0][1])) if parts[0][1] > 0 else df
    return differences, Components(cand_seeds or 0.0, base_seeds or 0.0, example_part, max(df, 1.0))


def require() -> None:
    """UnsupportedError, before anything trains, where the verdict's one dependency is missing."""
    import importlib.util

    from runner.errors import UnsupportedError

    if importlib.util.find_spec("scipy") is None:
        raise UnsupportedError(
            "evaluation: needs SciPy (the verdict's t distribution): pip install 'tf-train-action[verdict]' "
            "(the action adds it by itself when the manifest has an evaluation: section)"
        )


def compare(
    candidate: np.ndarray,
    baseline: np.ndarray,
    goal: Goal = Goal.MAXIMIZE,
    margin: float = 0.0,
    confidence: float = 0.95,
) -> Comparison:
    """The verdict for two S×N matrices of per-example scores over the same N examples."""
    require()
    from scipy.special import stdtr, stdtrit  # Student's t: ~0.3 s to import, only when comparing

    candidate = np.asarray(candidate, dtype=np.float64)
    baseline = np.asarray(baseline, dtype=np.float64)
    if candidate.ndim != 2 or baseline.ndim != 2 or candidate.shape[1] != baseline.shape[1] or candidate.shape[1] == 0:
        raise ValueError("both sides need a seeds × examples matrix over the same examples")
    if not (0.5 <= confidence < 1):
        raise ValueError(f"confidence {confidence}: between 0.5 and 1")
    if margin < 0:
        raise ValueError(f"margin {margin}: not negative")
    differences, parts = components(candidate, baseline)
    delta = float(differences.mean())
    se = parts.se
    sign = 1.0 if goal == Goal.MAXIMIZE else -1.0
    improvement = sign * delta
    if se > 0:
        half = float(stdtrit(parts.df, 0.5 + confidence / 2)) * se
        p_better = float(stdtr(parts.df, improvement / se))
    else:  # identical evidence on both sides (or every example alike): no spread at all
        half = 0.0
        p_better = 1.0 if improvement > 0 else 0.0 if improvement < 0 else 0.5
    lo, hi = improvement - half, improvement + half
    verdict = _verdict(lo, hi, margin)
    ci = (delta - half, delta + half)
    seeds = (candidate.shape[0], baseline.shape[0])
    method = METHOD
    if max(seeds) < 2:
        method += "; " + SEEDLESS
    elif min(seeds) < 2:
        sides = ("candidate", "baseline") if seeds[0] < 2 else ("baseline", "candidate")
        method += "; " + BORROWED.format(side=sides[0], other=sides[1])
    return Comparison(
        verdict=verdict,
        goal=goal,
        delta=delta,
        ci=ci,
        confidence=confidence,
        margin=margin,
        p_better=p_better,
        seeds=seeds,
        examples=int(differences.size),
        candidate_mean=float(candidate.mean()),
        baseline_mean=float(baseline.mean()),
        candidate_seed_means=tuple(float(value) for value in candidate.mean(axis=1)),
        baseline_seed_means=tuple(float(value) for value in baseline.mean(axis=1)),
        binary=bool(np.isin(candidate, (0.0, 1.0)).all() and np.isin(baseline, (0.0, 1.0)).all()),
        components=parts,
        non_inferior=lo > -margin,
        decide=None if verdict != Verdict.INCONCLUSIVE else _what_decides(improvement, half, margin, parts, seeds),
        method=method,
    )


def _verdict(lo: float, hi: float, margin: float) -> Verdict:
    if hi < -margin:
        return Verdict.WORSE
    if lo > margin:
        return Verdict.BETTER
    if margin > 0 and -margin <= lo and hi <= margin:
        return Verdict.EQUIVALENT
    return Verdict.INCONCLUSIVE


def _what_decides(improvement: float, half: float, margin: float, parts: Components, seeds: tuple[int, int]) -> str:
    """How much narrower the interval must be to reach a verdict, and which evidence narrows it."""
    # The nearest verdict: the half-width at which the interval would clear one of the bounds it straddles
    needed = max(abs(improvement - margin), abs(improvement + margin)) if margin > 0 else abs(improvement)
    if margin > 0 and abs(improvement) < margin:  # equivalence is nearest when Δ lies inside the margin
        needed = margin - abs(improvement)
    if needed <= 0 and margin == 0:
        return (
            "no difference at all, and with margin 0 only better or worse can be called: set evaluation.margin to what"
            " counts as no worse"
        )
    if needed <= 0:
        return "the difference is on the margin itself: no amount of evidence decides it"
    factor = (half / needed) ** 2  # SE² shrinks with the evidence
    seed_share = (parts.candidate_seeds + parts.baseline_seeds) / max(parts.se**2, 1e-300)
    if seed_share >= 0.5 and min(seeds) >= 2:
        return f"about {factor:.1f}× the seeds on both sides (the seeds' spread dominates the interval)"
    if min(seeds) < 2:
        return (
            f"more seeds (with one seed on a side its seed variance is borrowed or unknown), or about {factor:.1f}× the"
            " examples"
        )
    return f"about {factor:.1f}× the evaluation examples (the examples dominate the interval)"
