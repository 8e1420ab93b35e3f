"""The baseline `tftrain run` judges a candidate against at its end: the version of the model this
home registered last before the run's own (on a runner that keeps its home, the last merge's). A
pull request is judged against the last release by its comment (runner.cli.github)."""

from __future__ import annotations

from pathlib import Path

from runner.history.store import Store
from runner.manifest import LoadedManifest
from runner.telemetry.logger import Logger
from runner.telemetry.summary import primary_metric
from runner.verdict.judge import Judgement, Point, judge
from runner.verdict.layout import read_set


def point_of(candidate: dict, baseline: dict) -> Point | None:
    """The primary metric's last value on both sides (metrics summaries), when both have one."""
    name, mine = primary_metric(candidate)
    other, theirs = primary_metric(baseline)
    try:
        return Point(name, float(mine), float(theirs)) if name and name == other else None
    except (TypeError, ValueError):
        return None


def local_verdict(loaded: LoadedManifest, home: Path, run_dir: Path, run_id: str, model: str | None,
                  logger: Logger) -> tuple[Judgement | None, str | None]:
    """The verdict against the previous version, or None and why there is none."""
    from runner.history.model_registry import Registry
    from runner.history.record import RunRecord

    spec, name = loaded.manifest.evaluation, loaded.manifest.name
    candidate = read_set(run_dir, model or run_id, spec.metric)
    if candidate is None or not candidate.seeds:
        return None, "No verdict: no seed gave per-example evidence."
    with Store(home) as store:
        earlier = [version for version in Registry(store).versions(name) if version.label != model]
    if not earlier:
        return None, f"No earlier version of {name} in this home to compare with; the pull request's comment compares with the last release."
    baseline = earlier[-1]
    record = RunRecord.read(run_dir / "run.json")
    point = point_of(record.metrics.as_dict() if record.metrics else {}, baseline.info.get("metrics") or {})
    evidence = read_set(baseline.path, baseline.label, spec.metric)
    return judge(candidate, evidence, baseline.label, spec.margin, spec.confidence,
                 f"{baseline.label} kept no per-example evidence (registered before `evaluation:`)", point), None
