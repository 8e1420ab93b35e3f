"""How a verdict reads: one line for the pull-request comment and the console, e.g.

    correct 0.9751 (3 seeds) vs v4 0.9745 (3 seeds): Δ +0.06 pp, 95 % CI [−0.10, +0.22], P(better) 0.77 → equivalent at
    ±0.5 pp

A metric whose per-example values are all 0 or 1 (correct or not: its mean is an accuracy) is shown
in percentage points (pp); any other in its own units, with as many significant digits as the interval needs.
"""

from __future__ import annotations

import math

from runner.verdict.stats import Comparison, Verdict

MINUS = "\u2212"  # a typographic minus: the comment is read, not parsed


def _digits(width: float) -> int:
    """Decimals that show the interval's width with two significant digits."""
    if width <= 0 or not math.isfinite(width):
        return 2
    return max(0, min(8, 1 - math.floor(math.log10(width))))


def signed(value: float, digits: int) -> str:
    text = f"{value:+.{digits}f}"
    return text.replace("-", MINUS)


def delta_text(comparison: Comparison) -> tuple[str, str, str]:
    """(Δ, its interval, the margin) in the verdict's units."""
    scale, unit = (100.0, " pp") if comparison.binary else (1.0, "")
    lo, hi = comparison.ci
    digits = _digits((hi - lo) * scale)
    delta = signed(comparison.delta * scale, digits) + unit
    interval = f"[{signed(lo * scale, digits)}, {signed(hi * scale, digits)}]"
    margin = f"±{comparison.margin * scale:.{digits}f}{unit}".replace("-", MINUS)
    return delta, interval, margin


def verdict_line(comparison: Comparison, metric: str, baseline: str) -> str:
    """The one line; `baseline` names the other side (`v4`, `release v1.2`, a run id)."""
    seeds_c, seeds_b = comparison.seeds
    delta, interval, margin = delta_text(comparison)
    confidence = f"{comparison.confidence * 100:g} %"
    word = comparison.verdict.value
    if comparison.margin > 0:
        word += f" at {margin}"
    line = (
        f"{metric} {comparison.candidate_mean:.4f} ({_seeds(seeds_c)}) vs {baseline} {comparison.baseline_mean:.4f} "
        f"({_seeds(seeds_b)}): Δ {delta}, {confidence} CI {interval}, P(better) {comparison.p_better:.2f} → {word}"
    )
    if comparison.verdict == Verdict.INCONCLUSIVE:
        line += "; non-inferior" if comparison.non_inferior else ""
        if comparison.decide:
            line += f" (to decide: {comparison.decide})"
    return line


def _seeds(count: int) -> str:
    return f"{count} seed" + ("" if count == 1 else "s")
