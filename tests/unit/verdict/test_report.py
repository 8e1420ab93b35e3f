"""The verdict's line, as the pull-request comment and the console show it."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special  # noqa: F401  at collection: numpy.testing, which it imports, runs lscpu (a process) once

from runner.verdict.report import verdict_line
from runner.verdict.stats import Goal, compare


def test_a_share_reads_in_points_with_the_margin():
    rng = np.random.default_rng(7)
    candidate = (rng.random((3, 20_000)) < 0.9751).astype(float)
    baseline = (rng.random((3, 20_000)) < 0.9745).astype(float)
    line = verdict_line(compare(candidate, baseline, margin=0.005), "correct", "v4")
    assert line.startswith("correct 0.97") and "(3 seeds) vs v4 0.97" in line
    assert " pp, 95 % CI [" in line and "P(better) " in line and "at ±0.50 pp" in line
    assert "\n" not in line and "-" not in line.split("Δ")[1].split("→")[0]  # a typographic minus, not a hyphen


def test_other_units_read_as_they_are_and_inconclusive_says_what_decides():
    rng = np.random.default_rng(8)
    candidate, baseline = rng.normal(0.30, 0.2, (1, 500)), rng.normal(0.31, 0.2, (2, 500))
    line = verdict_line(compare(candidate, baseline, Goal.MINIMIZE), "loss", "release v1.2")
    assert "(1 seed) vs release v1.2" in line and "(2 seeds)" in line and " pp" not in line
    assert "→ inconclusive" in line and "to decide: more seeds" in line


@pytest.mark.parametrize(("accuracy", "word"), [(0.80, "worse"), (0.99, "better")])
def test_clear_differences_say_their_word(accuracy, word):
    rng = np.random.default_rng(9)
    candidate = (rng.random((3, 10_000)) < accuracy).astype(float)
    baseline = (rng.random((3, 10_000)) < 0.9).astype(float)
    assert verdict_line(compare(candidate, baseline), "correct", "v1").endswith(f"→ {word}")
