"""tftrain compare CANDIDATE BASELINE [--json] [--fail-on-regression] [--margin M] [--confidence C] [-f MANIFEST]:
is the candidate better than the baseline, on their kept per-example evidence?

Each side is a run (id, number, `latest`), NAME@vN, NAME@latest or release:NAME@vN|@latest. The
margin, the confidence and the evaluation script come from the options, else the manifest given
with -f, else the candidate run's manifest (run.json), else 0 and 0.95. When the two did not score
the same set, the baseline is re-evaluated on the candidate's (runner.verdict.reevaluate).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from runner.errors import Regression, UsageError
from runner.verdict.reevaluate import Rules


def add_arguments(parser) -> None:
    refs = "a run id (or number, or latest), NAME@vN, NAME@latest or release:NAME@vN|@latest"
    parser.add_argument("candidate", help=refs)
    parser.add_argument("baseline", help=refs)
    parser.add_argument("--json", action="store_true", help="print the judgement as JSON")
    parser.add_argument(
        "--fail-on-regression", action="store_true", help=f"exit {Regression.exit_code} when the verdict is worse"
    )
    parser.add_argument(
        "--margin",
        type=float,
        help="what counts as no worse, in the metric's units (default: evaluation.margin, else 0)",
    )
    parser.add_argument(
        "--confidence", type=float, help="the interval's confidence (default: evaluation.confidence, else 0.95)"
    )
    parser.add_argument(
        "-f",
        "--file",
        type=Path,
        metavar="MANIFEST",
        help=(
            "the manifest whose evaluation: section gives the metric, margin, confidence and script (default: the"
            " candidate run's)"
        ),
    )


def check_options(margin: float | None, confidence: float | None) -> None:
    """UsageError (one line, exit 2) for a margin or confidence no verdict can use."""
    if margin is not None and (not math.isfinite(margin) or margin < 0):
        raise UsageError(f"--margin {margin:g}: must be a finite number, not negative")
    if confidence is not None and (not math.isfinite(confidence) or not 0.5 <= confidence < 1):
        raise UsageError(f"--confidence {confidence:g}: must be at least 0.5 and below 1")


def rules_for(args, manifest: dict | None) -> Rules:
    """The options over the -f manifest's evaluation: section over the candidate run's (`manifest`,
    run.json's), over the defaults. A run.json's section is read as the run wrote it; a bad one is ignored."""
    from pydantic import ValidationError

    from runner.manifest.evaluation import EvaluationSpec

    rules = Rules(None)
    if args.file is not None:
        from runner.manifest import load_manifest

        spec = load_manifest(args.file).manifest.evaluation
        rules = Rules.of(spec) if spec is not None else rules
    elif isinstance(manifest, dict) and isinstance(manifest.get("evaluation"), dict):
        try:
            rules = Rules.of(EvaluationSpec.model_validate(manifest["evaluation"]))
        except ValidationError:
            rules = Rules(None)
    return Rules(
        rules.metric,
        rules.margin if args.margin is None else args.margin,
        rules.confidence if args.confidence is None else args.confidence,
        rules.script,
        rules.per_example_suffix,
    )


def run(args, logger) -> int:
    from runner.paths import tftrain_home
    from runner.settings import resolve
    from runner.verdict.reevaluate import verdict_between
    from runner.verdict.refs import check_evidence, side_of

    check_options(args.margin, args.confidence)
    if args.json:  # stdout holds the JSON alone: what is done on the way (a pull, a re-evaluation) is said on stderr
        logger = logger.on_stderr()
    home = tftrain_home()
    settings = resolve(os.environ, args)
    with side_of(args.candidate, home, logger, settings) as candidate:
        rules = rules_for(args, candidate.manifest)
        evidence = check_evidence(candidate, "candidate")
        if rules.metric is not None and rules.metric != evidence.metric:
            from runner.errors import EvidenceError

            raise EvidenceError(
                f"{candidate.label}'s evidence scores {evidence.metric!r}, not {rules.metric!r} (evaluation.metric)"
            )
        with side_of(args.baseline, home, logger, settings, evidence.metric) as baseline:
            judgement = verdict_between(evidence, baseline, rules, candidate.run_dir, candidate.point, logger)
    logger.flush()
    if args.json:
        print(json.dumps(judgement.as_json(), indent=2))
    else:
        for line in report_lines(judgement):
            print(line)
    if args.fail_on_regression and judgement.verdict.value == "worse":
        raise Regression(
            f"{judgement.candidate} is worse than {judgement.baseline} on {judgement.metric} (--fail-on-regression)"
        )
    return 0


def report_lines(judgement) -> list[str]:
    """The verdict line, then each side's mean ± spread over its seeds, Δ and its interval, P(better), the method."""
    from runner.verdict.report import delta_text

    lines = [judgement.line()]
    comparison = judgement.comparison
    if comparison is None:
        return lines
    for role, label, means in (
        ("candidate", judgement.candidate, comparison.candidate_seed_means),
        ("baseline", judgement.baseline, comparison.baseline_seed_means),
    ):
        lines.append(f"  {role:9} {label}: {judgement.metric} {_spread(means)}")
    delta, interval, margin = delta_text(comparison)
    lines.append(
        f"  Δ {delta}, {comparison.confidence * 100:g} % CI {interval}, margin {margin}, over {comparison.examples}"
        " examples"
    )
    lines.append(f"  P(better) {comparison.p_better:.3f}")
    lines.append(f"  method: {comparison.method}")
    return lines


def _spread(means) -> str:
    import statistics

    count = len(means)
    mean = statistics.fmean(means)
    if count < 2:
        return f"{mean:.4f} (1 seed)"
    return f"{mean:.4f} ± {statistics.stdev(means):.4f} (sd over {count} seeds)"
