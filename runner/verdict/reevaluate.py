"""The verdict of a run's candidate against a baseline, re-evaluating the baseline when the two did
not score the same evaluation set (TFMA's pattern: both models evaluated on one set, in one environment).

When the sets differ (their ids or the evaluation data's fingerprint), or the baseline kept no
evidence (every release made before `evaluation:`), the baseline's model is scored by
`evaluation.script` on the candidate's set: `PYTHON SCRIPT --model MODEL_DIR --out FILE`, run with
the candidate run's interpreter in the candidate run's working directory (its snapshot holds the
script and the data), TFTRAIN_SEED unset, for at most REEVALUATION_TIMEOUT_SECONDS; its output goes
to the run's evaluation/baseline-eval.log. What it writes is read as hostile input and kept as
evaluation/baseline-LABEL.jsonl; the baseline then has one seed, and borrows the candidate's seed
variance (runner.verdict.stats). A script that fails or runs too long, or no script at all, leaves
the verdict inconclusive with its reason (and the point values): never a traceback.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from runner.errors import EvidenceError
from runner.manifest.evaluation import EvaluationSpec
from runner.serving.check_process import stop  # the script and whatever it started, gone
from runner.verdict.evidence import read_evidence
from runner.verdict.judge import Judgement, Point, judge
from runner.verdict.layout import DIRECTORY, EvidenceSet, read_set, write_seed
from runner.verdict.refs import PointValue, Side

REEVALUATION_TIMEOUT_SECONDS = 30 * 60
LOG = "baseline-eval.log"
UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Rules:
    """What a verdict needs of `evaluation:`: the metric, the margin, the confidence, the script."""

    metric: str | None
    margin: float = 0.0
    confidence: float = 0.95
    script: str | None = None
    per_example_suffix: str = ".jsonl"

    @classmethod
    def of(cls, spec: EvaluationSpec) -> Rules:
        return cls(
            spec.metric, spec.margin, spec.confidence, spec.script, Path(spec.per_example).suffix.lower() or ".jsonl"
        )


def verdict_against(
    candidate_run_dir: Path, candidate_label: str, baseline: Side, spec: EvaluationSpec, logger
) -> Judgement:
    """The candidate run's kept evidence (runs/ID/evaluation/) judged against `baseline`,
    re-evaluating the baseline on the candidate's set when needed. EvidenceError when the candidate
    kept none, or kept evidence that is damaged."""
    candidate = read_set(candidate_run_dir, candidate_label, spec.metric)
    if candidate is None:
        raise EvidenceError(
            f"{candidate_label} kept no per-example evidence ({candidate_run_dir / DIRECTORY} is missing)"
        )
    return verdict_between(candidate, baseline, Rules.of(spec), candidate_run_dir, None, logger)


def verdict_between(
    candidate: EvidenceSet,
    baseline: Side,
    rules: Rules,
    run_dir: Path | None,
    candidate_point: PointValue | None,
    logger,
) -> Judgement:
    """`run_dir`: the candidate's run on this machine (where a re-evaluation runs), None when it is not here."""
    point = points(candidate_point if candidate_point is not None else _run_point(run_dir), baseline.point)
    why = why_reevaluate(candidate, baseline)
    if why is None:
        return judge(candidate, baseline.evidence, baseline.label, rules.margin, rules.confidence, point=point)
    if rules.script is None:
        return judge(
            candidate,
            None,
            baseline.label,
            rules.margin,
            rules.confidence,
            missing=f"{why}; no evaluation.script to score it on this run's set",
            point=point,
        )
    if run_dir is None:
        return judge(
            candidate,
            None,
            baseline.label,
            rules.margin,
            rules.confidence,
            missing=f"{why}; the candidate's run is not on this machine to re-evaluate it in",
            point=point,
        )
    if baseline.model is None:
        return judge(
            candidate,
            None,
            baseline.label,
            rules.margin,
            rules.confidence,
            missing=f"{why}; its model is not there to re-evaluate",
            point=point,
        )
    evidence, failure = reevaluate(candidate, baseline, rules, run_dir, logger)
    if evidence is None:
        return judge(
            candidate, None, baseline.label, rules.margin, rules.confidence, missing=f"{why}; {failure}", point=point
        )
    judgement = judge(candidate, evidence, baseline.label, rules.margin, rules.confidence, point=point)
    if judgement.comparison is None:
        return judgement
    method = (
        judgement.comparison.method + f"; {baseline.label} re-evaluated on this run's set by {rules.script} ({why})"
    )
    return dataclasses.replace(judgement, comparison=dataclasses.replace(judgement.comparison, method=method))


def why_reevaluate(candidate: EvidenceSet, baseline: Side) -> str | None:
    """Why the baseline's kept evidence cannot be paired with the candidate's, or None when it can."""
    kept = baseline.evidence
    if kept is None:
        return baseline.missing or f"{baseline.label} kept no per-example evidence"
    data = (candidate.data_fingerprint, kept.data_fingerprint)
    if None not in data and data[0] != data[1]:
        return f"{baseline.label} was evaluated on other data (evaluation.data's fingerprint differs)"
    prints = {evidence.fingerprint for evidence in (*candidate.seeds, *kept.seeds)}
    if len(prints) > 1:
        return f"{baseline.label} scored another evaluation set (the examples' ids differ)"
    return None


def points(candidate: PointValue | None, baseline: PointValue | None) -> Point | None:
    """The point comparison, when both sides have a value of the same primary metric."""
    if candidate is None or baseline is None or candidate.metric != baseline.metric:
        return None
    return Point(candidate.metric, candidate.value, baseline.value)


def _run_point(run_dir: Path | None) -> PointValue | None:
    from runner.history.untrusted import read_json
    from runner.verdict.refs import point_of

    if run_dir is None:
        return None
    try:
        summary = read_json(run_dir / "metrics.json")
        record = read_json(run_dir / "run.json")
    except (OSError, ValueError, RecursionError):
        return None
    manifest = record.get("manifest") if isinstance(record, dict) else None
    return point_of(summary if isinstance(summary, dict) else None, manifest if isinstance(manifest, dict) else None)


@dataclass(frozen=True)
class Interpreter:
    python: str | None
    problem: str | None  # why the run's environment cannot re-evaluate here


def interpreter_of(run_dir: Path) -> Interpreter:
    """The candidate run's Python (manifest.lock.yml's environment.python) when it is a file on this
    machine (local and Slurm targets); an image's run is not re-evaluated yet."""
    from runner.history.untrusted import BadRecord, read_yaml

    lock = run_dir / "manifest.lock.yml"
    try:
        document = read_yaml(lock)
    except (OSError, ValueError, BadRecord, RecursionError) as exc:
        return Interpreter(None, f"{lock} cannot be read ({getattr(exc, 'strerror', None) or exc})")
    environment = document.get("environment") if isinstance(document, dict) else None
    environment = environment if isinstance(environment, dict) else {}
    if environment.get("image"):
        return Interpreter(
            None,
            f"the run trained in the image {str(environment['image'])[:120]}: re-evaluating a baseline in an image is"
            " not supported yet",
        )
    python = environment.get("python")
    if not isinstance(python, str) or not python or not os.path.isabs(python) or not os.path.isfile(python):
        return Interpreter(None, f"the run's interpreter {str(python)[:120]!r} is not a file on this machine")
    return Interpreter(python, None)


def kept_name(label: str) -> str:
    """evaluation/baseline-LABEL.jsonl: a label as a file name (digits@v4 → baseline-digits-v4.jsonl)."""
    return f"baseline-{UNSAFE.sub('-', label).strip('-.')[:100] or 'model'}.jsonl"


def reevaluate(
    candidate: EvidenceSet, baseline: Side, rules: Rules, run_dir: Path, logger
) -> tuple[EvidenceSet | None, str | None]:
    """(the baseline's evidence on the candidate's set, None) or (None, why there is none)."""
    interpreter = interpreter_of(run_dir)
    if interpreter.python is None:
        return None, str(interpreter.problem)
    workdir = run_dir / "workdir"
    kept = run_dir / DIRECTORY
    kept.mkdir(exist_ok=True)
    log = kept / LOG
    name = kept_name(baseline.label)
    out = kept / f"{name.removesuffix('.jsonl')}.out{rules.per_example_suffix}"
    _remove(out)
    argv = [interpreter.python, str(rules.script), "--model", str(baseline.model), "--out", str(out)]
    env = {key: value for key, value in os.environ.items() if key != "TFTRAIN_SEED"}
    logger.info(f"re-evaluating {baseline.label} on this run's evaluation set: {rules.script} (log: {log})")
    status = _run(argv, workdir, env, log)
    try:
        if status is None:
            return (
                None,
                (
                    f"{rules.script} did not finish in {REEVALUATION_TIMEOUT_SECONDS // 60} min re-evaluating it (log:"
                    f" {log})"
                ),
            )
        if status != 0:
            return None, f"{rules.script} exited with status {status} re-evaluating it (log: {log})"
        try:
            evidence = read_evidence(out, candidate.metric, f"{rules.script}'s output for {baseline.label}")
        except EvidenceError as exc:
            return None, f"{exc} (log: {log})"
        write_seed(kept / name, evidence)
    finally:
        _remove(out)
    summary = {
        "metric": candidate.metric,
        "goal": candidate.goal.value,
        "reevaluated": str(rules.script),
        "seeds": [{"file": name}],
    }
    return EvidenceSet(baseline.label, candidate.metric, candidate.goal, (evidence,), summary), None


def _remove(path: Path) -> None:
    """The script's output, whatever it made of it (a file, a link, a directory)."""
    import shutil

    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _run(argv: list[str], cwd: Path, env: dict, log: Path) -> int | None:
    """The script's exit status, None when it ran past the limit (its process group is killed)."""
    with log.open("wb") as output:
        try:
            process = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            output.write(f"cannot start {argv[0]}: {exc.strerror or exc}\n".encode())
            return 127
        try:
            return process.wait(timeout=REEVALUATION_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            stop(process)
            return None
        except BaseException:
            stop(process)
            raise
