"""One verdict between two kept evidence sets, or inconclusive with its reason; and how it reads."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special  # noqa: F401  at collection: numpy.testing, which it imports, runs lscpu (a process) once

from runner.errors import EvidenceError
from runner.telemetry.evaluation_report import evaluation_markdown, strip_plot
from runner.verdict.evidence import Evidence
from runner.verdict.judge import Point, judge
from runner.verdict.layout import EvidenceSet
from runner.verdict.stats import Goal, Verdict


def side(label: str, matrix, ids=None, goal=Goal.MAXIMIZE, metric="correct", data=None) -> EvidenceSet:
    matrix = np.asarray(matrix, dtype=float)
    ids = tuple(ids or (f"e{i}" for i in range(matrix.shape[1])))
    seeds = tuple(Evidence(f"{label}: seed-{n}", metric, ids, row) for n, row in enumerate(matrix))
    return EvidenceSet(label, metric, goal, seeds, {"data_fingerprint": data})


RNG = np.random.default_rng(3)
GOOD = (RNG.random((3, 5000)) < 0.95).astype(float)
BAD = (RNG.random((3, 5000)) < 0.85).astype(float)


def test_a_clearly_worse_candidate_is_worse_and_reads_so():
    judgement = judge(side("run-7", BAD), side("demo@v3", GOOD), "demo@v3", 0.005, 0.95)
    assert judgement.verdict is Verdict.WORSE
    data = judgement.as_json()
    for key in (
        "verdict",
        "metric",
        "goal",
        "delta",
        "ci",
        "confidence",
        "margin",
        "p_better",
        "seeds",
        "examples",
        "method",
    ):
        assert key in data
    assert data["seeds"] == {"candidate": 3, "baseline": 3} and data["examples"] == 5000 and data["ci"][1] < -0.005
    assert (
        judgement.line().startswith("correct 0.84")
        and "vs demo@v3 0.95" in judgement.line()
        and "→ worse at ±0.5 pp" in judgement.line()
    )


def test_without_evidence_the_verdict_is_inconclusive_with_the_point_values():
    judgement = judge(
        side("run-7", GOOD),
        None,
        "release demo-v1",
        0.0,
        0.95,
        "demo-v1 kept no per-example evidence",
        Point("accuracy", 0.95, 0.94),
    )
    assert judgement.verdict is Verdict.INCONCLUSIVE and judgement.comparison is None
    assert (
        judgement.as_json()["reason"] == "demo-v1 kept no per-example evidence" and judgement.as_json()["delta"] is None
    )
    assert (
        "inconclusive (demo-v1 kept no per-example evidence); point values accuracy 0.95 vs 0.94 (+0.01, one draw each)"
        in judgement.line()
    )


def test_disjoint_sets_goals_or_data_are_inconclusive_with_the_reason():
    other_ids = [f"x{i}" for i in range(5000)]
    assert "share no example id" in judge(side("a", GOOD), side("b", GOOD, other_ids), "b", 0, 0.95).reason
    assert "to minimize correct" in judge(side("a", GOOD), side("b", GOOD, goal=Goal.MINIMIZE), "b", 0, 0.95).reason
    assert "evaluation data differ" in judge(side("a", GOOD, data="1"), side("b", GOOD, data="2"), "b", 0, 0.95).reason
    # a baseline without a data hash: ids decide
    assert judge(side("a", GOOD, data="1"), side("b", GOOD), "b", 0, 0.95).comparison is not None


def test_partly_overlapping_sets_are_compared_on_the_common_examples():
    judgement = judge(
        side("a", GOOD[:, :4000]), side("b", GOOD[:, 1000:], [f"e{i}" for i in range(1000, 5000)]), "b", 0, 0.95
    )
    assert (
        judgement.comparison.examples == 3000 and judgement.left_out == 2000 and judgement.as_json()["left_out"] == 2000
    )


@pytest.mark.parametrize("margin", [1.0, 5.0])
def test_a_margin_outside_the_metrics_range_is_refused(margin):
    with pytest.raises(EvidenceError, match=f"evaluation.margin {margin:g} is not below the metric's range"):
        judge(side("a", GOOD), side("b", GOOD), "b", margin, 0.95)
    losses = RNG.normal(0.3, 0.05, (2, 100))
    with pytest.raises(EvidenceError, match="range"):
        judge(side("a", losses, metric="loss"), side("b", losses, metric="loss"), "b", 10.0, 0.95)


def test_the_markdown_has_the_line_the_rows_and_a_plot_of_both_models_seeds():
    judgement = judge(side("run-7", BAD), side("demo@v3", GOOD), "demo@v3", 0.005, 0.95)
    block = {
        "metric": "correct",
        "goal": "maximize",
        "binary": True,
        "asked": 4,
        "examples": 5000,
        "seeds": [{"seed": n, "mean": float(m)} for n, m in enumerate(BAD.mean(axis=1))],
        "failed": [{"seed": 3, "run_id": "run-10", "status": "Failed"}],
        "verdict": judgement.as_json(),
    }
    text = evaluation_markdown(block)
    assert f"**{judgement.line()}**" in text and "| this run | 3 | 84." in text and "| demo@v3 | 3 | 95." in text
    assert "3 of 4 seeds gave evidence: seed 3 (run-10): Failed" in text and "```" in text
    plot = [line for line in text.splitlines() if line.startswith(("this run", "demo@v3"))]
    assert plot[0].index("●") < plot[1].index("●")  # the worse model's marks are left of the better's


def test_the_strip_plot_counts_coinciding_seeds_and_survives_one_value():
    lines = strip_plot({"a": [0.5, 0.5, 0.5], "b": [0.5]}, binary=False)
    assert "3" in lines[0] and "●" in lines[1] and len(lines) == 3
    assert strip_plot({"a": []}, binary=True) == []
