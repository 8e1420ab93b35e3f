"""The pull request's rules: the action's fail-on-regression is the margin, verdict-confidence the level."""

from __future__ import annotations

import scipy.special  # noqa: F401  at collection: numpy.testing, which it imports, runs lscpu (a process) once

from runner.settings import resolve
from runner.verdict.pull_request import rules_of

RECORD = {
    "manifest": {
        "evaluation": {"per_example": "outputs/eval.jsonl", "metric": "correct", "margin": 0.002, "confidence": 0.9}
    }
}


def test_the_manifests_rules_hold_unless_the_action_gives_its_own():
    spec = rules_of(RECORD, resolve({}))
    assert (spec.margin, spec.confidence) == (0.002, 0.9)
    spec = rules_of(RECORD, resolve({"INPUT_FAIL_ON_REGRESSION": "0.01", "INPUT_VERDICT_CONFIDENCE": "0.99"}))
    assert (spec.margin, spec.confidence, spec.metric) == (0.01, 0.99, "correct")
