"""The pull request's verdict: the run's kept evidence (several seeds, per example) judged against
the last release's, pulled and verified; a release made before evidence was kept is re-evaluated
by `evaluation.script` on this run's set, or the verdict is inconclusive, saying why, with the
point values beside it. The action's fail-on-regression is the margin; verdict-confidence the
interval's level."""

from __future__ import annotations

from pathlib import Path

from runner.errors import FatalError
from runner.manifest.evaluation import EvaluationSpec
from runner.paths import tftrain_home
from runner.settings import Settings
from runner.telemetry.evaluation_report import evaluation_markdown
from runner.verdict.judge import Judgement, judge
from runner.verdict.layout import read_set


def rules_of(record: dict, settings: Settings) -> EvaluationSpec:
    """The run's evaluation section, with the action's margin and confidence where they are given."""
    spec = EvaluationSpec.model_validate((record.get("manifest") or {}).get("evaluation") or {})
    update = {}
    if settings.inputs.fail_on_regression is not None:
        update["margin"] = settings.inputs.fail_on_regression
    if settings.inputs.verdict_confidence is not None:
        update["confidence"] = settings.inputs.verdict_confidence
    return spec.model_copy(update=update)


def release_verdict(
    record: dict, run_dir: Path, released: str | None, missing: str | None, settings: Settings, logger
) -> tuple[str, Judgement | None]:
    """(the comment's Markdown, the judgement) of the run against the release of `released`
    (NAME@vN; None: there is none, `missing` says why)."""
    label = record.get("model") or record["run_id"]
    block = dict(record["evaluation"])
    try:
        spec = rules_of(record, settings)
        judgement = _judged(run_dir, label, spec, released, missing, settings, logger)
    except (FatalError, ValueError) as exc:  # damaged evidence, a release that cannot be pulled: said, not a traceback
        logger.warning(f"no verdict: {exc}")
        block.update(verdict=None, no_verdict=f"No verdict against the last release: {exc}")
        return evaluation_markdown(block, heading="### Verdict against the last release"), None
    if judgement is None:
        block.update(verdict=None, no_verdict=missing or "No released model to compare with yet.")
    else:
        block.update(verdict=judgement.as_json(), no_verdict=None)
    return evaluation_markdown(block, heading="### Verdict against the last release"), judgement


def _judged(
    run_dir: Path,
    label: str,
    spec: EvaluationSpec,
    released: str | None,
    missing: str | None,
    settings: Settings,
    logger,
) -> Judgement | None:
    from runner.verdict.reevaluate import verdict_against
    from runner.verdict.refs import side_of

    if released is None:
        candidate = read_set(run_dir, label, spec.metric)
        return (
            judge(candidate, None, "the last release", spec.margin, spec.confidence, missing)
            if candidate is not None and missing
            else None
        )
    with side_of(f"release:{released}", tftrain_home(), logger, settings, spec.metric) as side:
        return verdict_against(run_dir, label, side, spec, logger)
