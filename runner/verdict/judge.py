"""One verdict between two models' kept evidence, or the reason there is none: what `tftrain run`
prints at its end, `tftrain compare` answers and the pull-request comment says.

Without evidence on both sides over one evaluation set the verdict is inconclusive, with its reason
(a release made before tftrain kept evidence, two sets that share no example), and the point
comparison of the primary metric (metrics.json's last values) is still shown beside it."""

from __future__ import annotations

from dataclasses import dataclass

from runner.errors import EvidenceError
from runner.verdict.evidence import line_up
from runner.verdict.layout import EvidenceSet
from runner.verdict.report import verdict_line
from runner.verdict.stats import Comparison, Goal, Verdict, compare


@dataclass(frozen=True)
class Point:
    """The old comparison: one value per side (metrics.json's primary metric, its last value)."""

    metric: str
    candidate: float
    baseline: float


@dataclass(frozen=True)
class Judgement:
    metric: str
    goal: Goal
    candidate: str  # the sides' labels: a run id, NAME@vN, a release's tag
    baseline: str
    comparison: Comparison | None
    reason: str | None = None  # why there is no comparison
    point: Point | None = None
    left_out: int = 0  # ids one seed scored and another did not (compared on the common ones)

    @property
    def verdict(self) -> Verdict:
        return self.comparison.verdict if self.comparison is not None else Verdict.INCONCLUSIVE

    def line(self) -> str:
        if self.comparison is not None:
            return verdict_line(self.comparison, self.metric, self.baseline)
        text = f"{self.metric} vs {self.baseline}: inconclusive ({self.reason})"
        if self.point is not None:
            p = self.point
            text += (
                f"; point values {p.metric} {p.candidate:.4g} vs {p.baseline:.4g} ({p.candidate - p.baseline:+.4g}, one"
                " draw each)"
            )
        return text

    def as_json(self) -> dict:
        data = {
            "verdict": self.verdict.value,
            "metric": self.metric,
            "goal": self.goal.value,
            "candidate_ref": self.candidate,
            "baseline_ref": self.baseline,
            "line": self.line(),
        }
        if self.comparison is not None:
            data.update(self.comparison.as_json())
        else:
            data.update(
                delta=None, ci=None, confidence=None, margin=None, p_better=None, seeds=None, examples=None, method=None
            )
            data["reason"] = self.reason
        if self.point is not None:
            data["point"] = {
                "metric": self.point.metric,
                "candidate": self.point.candidate,
                "baseline": self.point.baseline,
            }
        if self.left_out:
            data["left_out"] = self.left_out
        return data


def check_margin(margin: float, sides: list[EvidenceSet]) -> None:
    """EvidenceError when the margin is not in the metric's range: a share's (0/1 values) margin is
    under 1; any other metric's under the span of the values both sides scored."""
    values = [evidence.values for side in sides for evidence in side.seeds]
    low = min(float(v.min()) for v in values)
    high = max(float(v.max()) for v in values)
    span = 1.0 if low >= 0 and high <= 1 else high - low
    if margin >= span and margin > 0:
        raise EvidenceError(
            f"evaluation.margin {margin:g} is not below the metric's range ({span:g}): every model would be"
            " 'equivalent'"
        )


def judge(
    candidate: EvidenceSet,
    baseline: EvidenceSet | None,
    baseline_label: str,
    margin: float,
    confidence: float,
    missing: str | None = None,
    point: Point | None = None,
) -> Judgement:
    """The verdict of `candidate` against `baseline`; None (no evidence): inconclusive for `missing`."""
    goal = candidate.goal
    if baseline is None:
        return Judgement(
            candidate.metric,
            goal,
            candidate.label,
            baseline_label,
            None,
            missing or f"{baseline_label} kept no per-example evidence",
            point,
        )
    if baseline.goal != goal:
        return Judgement(
            candidate.metric,
            goal,
            candidate.label,
            baseline_label,
            None,
            f"{baseline_label}'s evidence is to {baseline.goal.value} {baseline.metric}, this one's to {goal.value} it",
            point,
        )
    data = (candidate.data_fingerprint, baseline.data_fingerprint)
    if None not in data and data[0] != data[1]:
        return Judgement(
            candidate.metric,
            goal,
            candidate.label,
            baseline_label,
            None,
            f"the evaluation data differ from {baseline_label}'s (evaluation.data's fingerprint)",
            point,
        )
    try:
        paired = line_up(list(candidate.seeds), list(baseline.seeds))
    except EvidenceError as exc:
        return Judgement(candidate.metric, goal, candidate.label, baseline_label, None, str(exc), point)
    check_margin(margin, [candidate, baseline])
    result = compare(paired.candidate, paired.baseline, goal, margin, confidence)
    return Judgement(candidate.metric, goal, candidate.label, baseline_label, result, None, point, paired.left_out)
