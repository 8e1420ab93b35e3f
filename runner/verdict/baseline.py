"""The baseline `tftrain run` judges a candidate against at its end: the version of the model this
home registered last before the run's own (on a runner that keeps its home, the last merge's),
re-evaluated by `evaluation.script` when it kept no evidence for this run's set. A pull request is
judged against the last release by its comment (runner.verdict.pull_request)."""

from __future__ import annotations

from pathlib import Path

from runner.history.store import Store
from runner.manifest import LoadedManifest
from runner.telemetry.logger import Logger
from runner.verdict.judge import Judgement


def local_verdict(
    loaded: LoadedManifest, home: Path, run_dir: Path, run_id: str, model: str | None, logger: Logger
) -> tuple[Judgement | None, str | None]:
    """The verdict against the previous version, or None and why there is none."""
    from runner.history.model_registry import Registry
    from runner.verdict.layout import read_set
    from runner.verdict.reevaluate import verdict_against
    from runner.verdict.refs import side_of

    spec, name = loaded.manifest.evaluation, loaded.manifest.name
    candidate = read_set(run_dir, model or run_id, spec.metric)
    if candidate is None or not candidate.seeds:
        return None, "No verdict: no seed gave per-example evidence."
    with Store(home) as store:
        earlier = [version for version in Registry(store).versions(name) if version.label != model]
    if not earlier:
        return (
            None,
            (
                f"No earlier version of {name} in this home to compare with; the pull request's comment compares with"
                " the last release."
            ),
        )
    with side_of(earlier[-1].label, home, logger, metric=spec.metric) as side:
        return verdict_against(run_dir, model or run_id, side, spec, logger), None
