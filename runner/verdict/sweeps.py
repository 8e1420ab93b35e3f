"""`evaluation:` with `sweep:`: every trial trains with TFTRAIN_SEED 0, and the best trial's
per-example file is kept as one seed's evidence in its run and beside the registered model, so that
the sweep's model is judged against the last release like any run's (`tftrain github comment`,
`tftrain compare`). More seeds of the best trial are not trained: a sweep's budget is its trials."""

from __future__ import annotations

from pathlib import Path

from runner.errors import NotFoundError
from runner.history.store import Store
from runner.manifest import LoadedManifest
from runner.telemetry.logger import Logger
from runner.verdict.keeping import keep_evidence, version_extras


def keep_best_evidence(loaded: LoadedManifest, home: Path, run_id: str, logger: Logger) -> dict[str, Path] | None:
    spec = loaded.manifest.evaluation
    with Store(home) as store:
        try:
            run_dir = Path(store.run(run_id).run_dir)
        except NotFoundError:  # the best trial ran on another runner of a shared study: its home keeps its evidence
            return None
        summary = keep_evidence(spec, run_dir, [(0, run_id, run_dir / "workdir", "Completed")], logger.warning)
        store.update_run(
            run_id,
            evaluation={
                **summary,
                "runs": [run_id],
                "verdict": None,
                "no_verdict": "A sweep's best trial: judged against the last release by the pull request's comment.",
            },
        )
    if spec.seeds > 1:
        logger.warning(
            f"evaluation.seeds: {spec.seeds} with a sweep: the best trial's one seed is the evidence (its trials are"
            " the budget)"
        )
    return version_extras(run_dir, summary) if summary["seeds"] else None


def best_evidence(loaded: LoadedManifest, home: Path, logger: Logger):
    """What a sweep keeps beside its best trial's model (run_sweep's `evidence`), None without `evaluation:`."""
    if loaded.manifest.evaluation is None:
        return None
    return lambda run_id: keep_best_evidence(loaded, home, run_id, logger)
