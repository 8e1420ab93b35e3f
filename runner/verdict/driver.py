"""`tftrain run` on a manifest with `evaluation:`: the seeds trained (runner.verdict.seeds), their
evidence kept in the run (runner.verdict.keeping), seed 0's model registered with it, and the
verdict against the model this home registered before, at the run's end: one table, the verdict
line, the run's record (run.json's `evaluation`), summary.md and the job summary.

The pull request's comment judges the same evidence against the last release (`tftrain github
comment`); `tftrain compare` judges any two."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from runner.errors import FatalError
from runner.history.states import RunStatus
from runner.history.store import Store
from runner.manifest import LoadedManifest
from runner.settings import Settings
from runner.sweep.placement import check_runs, gpu_shares, runs_that_fit, usable_gpus
from runner.telemetry.logger import Logger
from runner.training.pipeline import RunResult
from runner.verdict.seeds import SeedOutcome, SeedRunner


def run_evaluated(
    loaded: LoadedManifest, logger: Logger, settings: Settings, home: Path, environ: Mapping[str, str]
) -> RunResult:
    from runner.verdict.stats import require

    require()  # before anything trains
    spec = loaded.manifest.evaluation
    shares = _shares(loaded, logger, settings)
    logger.info(
        f"evaluation: {spec.seeds} seed{'s' if spec.seeds > 1 else ''} (TFTRAIN_SEED 0…{spec.seeds - 1}), {len(shares)}"
        f" at once; seed 0's model is registered, every seed's {spec.per_example} is evidence",
        style="bold",
    )
    outcomes = SeedRunner(loaded, logger, settings, home, environ, shares).run(spec.seeds)
    first = outcomes[0]
    if first.result is None:  # refused before it ran (or stopped before it started): nothing to keep
        raise first.error or FatalError("seed 0 did not run")
    return _conclude(loaded, logger, home, outcomes)


def _shares(loaded: LoadedManifest, logger: Logger, settings: Settings) -> list[str | None]:
    """Each concurrent seed's GPUs (None: tftrain's own), one entry per seed run at once."""
    manifest, spec = loaded.manifest, loaded.manifest.evaluation
    cuda = settings.cuda_visible_devices
    if spec.max_concurrent is not None:
        concurrent = min(spec.max_concurrent, spec.seeds)
        gpus = check_runs(manifest, concurrent, f"evaluation.max_concurrent: {concurrent} seeds", logger, cuda)
    else:
        concurrent = runs_that_fit(manifest, spec.seeds, cuda)
        gpus = check_runs(manifest, concurrent, f"{concurrent} seeds at once", logger, cuda) if concurrent > 1 else []
    if concurrent == 1:
        gpus = usable_gpus(cuda, None)
    return gpu_shares(gpus, concurrent)


def _conclude(loaded: LoadedManifest, logger: Logger, home: Path, outcomes: list[SeedOutcome]) -> RunResult:
    from runner.history.registration import register_finished
    from runner.serving.gate import gate_finished
    from runner.verdict.keeping import keep_evidence, version_extras

    spec = loaded.manifest.evaluation
    result = outcomes[0].result
    with Store(home) as store:
        run_dir = Path(store.run(result.run_id).run_dir)
        seeds = [
            (o.seed, o.run_id, _workdir(store, o), o.result.status.value if o.result else f"refused: {o.error}")
            for o in outcomes
        ]
        for outcome in outcomes[1:]:
            if outcome.run_id:
                store.update_run(outcome.run_id, seed={"seed": outcome.seed, "of": result.run_id})
    summary = keep_evidence(spec, run_dir, seeds, logger.warning)
    block = {**summary, "runs": [o.run_id for o in outcomes], "usage": _usage(home, outcomes)}
    model = None
    if result.status == RunStatus.COMPLETED and loaded.manifest.model.register_model:
        kept = summary["seeds"] and summary["seeds"][0]["seed"] == 0
        try:
            model = register_finished(
                home,
                result.run_id,
                {"evaluation": _version_info(summary)},
                lambda run_id: gate_finished(loaded, home, run_id, logger),
                version_extras(run_dir, summary) if summary["seeds"] else None,
                logger.warning,
            )
        except FatalError as exc:  # the gate or the registry refused seed 0's model: the run fails, its evidence kept
            result = _failed(home, result, exc, logger)
        else:
            if model:
                logger.info(
                    f"registered model {model} (seed 0's; the evidence of {len(summary['seeds'])} seed(s) beside it)",
                    style="bold green",
                )
                if not kept:
                    logger.warning(
                        "seed 0 gave no evidence: the version is registered without its own per-example file"
                    )
            else:
                logger.warning(
                    f"model.path {loaded.manifest.model.path} was not written by seed 0; no model registered"
                )
    if summary["seeds"]:
        block["verdict"], block["no_verdict"] = _judged(loaded, home, run_dir, result.run_id, model, logger)
    else:
        block["verdict"], block["no_verdict"] = None, "No verdict: no seed gave per-example evidence."
    with Store(home) as store:
        store.update_run(result.run_id, evaluation=block)
    _report(logger, run_dir, block, home, outcomes)
    logger.outputs({"model-version": model or "", "verdict": (block["verdict"] or {}).get("verdict", "")})
    return result._replace(model=_version(home, model) if model else None)


def _workdir(store: Store, outcome: SeedOutcome) -> Path | None:
    if not outcome.completed:
        return None
    return Path(store.run(outcome.run_id).run_dir) / "workdir"


def _failed(home: Path, result: RunResult, exc: FatalError, logger: Logger) -> RunResult:
    logger.error(str(exc))
    with Store(home) as store:
        store.finish(result.run_id, RunStatus.FAILED, exc.exit_code, logger.masker.text(str(exc)))
    logger.outputs({"status": RunStatus.FAILED.value})  # seed 0's run said Completed before its model was refused
    return result._replace(status=RunStatus.FAILED, exit_code=exc.exit_code, message=str(exc))


def _version(home: Path, label: str):
    from runner.history.model_registry import Registry

    with Store(home) as store:
        return Registry(store).resolve(label)


def _version_info(summary: dict) -> dict:
    """What version.json says of the evidence kept beside the model."""
    keys = ("metric", "goal", "fingerprint", "data_fingerprint", "examples", "asked")
    return {
        **{key: summary[key] for key in keys},
        "seeds": [{k: e[k] for k in ("seed", "run_id", "mean")} for e in summary["seeds"]],
    }


def _usage(home: Path, outcomes: list[SeedOutcome]) -> dict | None:
    """The seeds' usage summed: what the verdict cost."""
    from runner.telemetry.usage_budget import usages_of_runs

    usages = [usage for usage in usages_of_runs(home, [o.run_id for o in outcomes]) if usage is not None]
    if not usages:
        return None
    costs = [usage.cost for usage in usages]
    return {
        "runs": len(usages),
        "wall_seconds": round(sum(usage.wall_seconds for usage in usages), 3),
        "gpu_hours": round(sum(usage.gpu_hours for usage in usages), 6),
        "cpu_hours": round(sum(usage.cpu_hours for usage in usages), 6),
        "cost": round(sum(costs), 6) if None not in costs else None,
    }


def _judged(
    loaded: LoadedManifest, home: Path, run_dir: Path, run_id: str, model: str | None, logger: Logger
) -> tuple[dict | None, str | None]:
    """The verdict against the version this home registered last before this run's, as JSON; or
    None and why there is none."""
    from runner.verdict.baseline import local_verdict

    try:
        judgement, why = local_verdict(loaded, home, run_dir, run_id, model, logger)
    except FatalError as exc:  # damaged evidence, a margin outside the metric's range: the run keeps its result
        logger.warning(f"no verdict: {exc}")
        return None, f"No verdict: {exc}"
    return (judgement.as_json(), None) if judgement is not None else (None, why)


def _report(logger: Logger, run_dir: Path, block: dict, home: Path, outcomes: list[SeedOutcome]) -> None:
    from runner.history.rundir import writing
    from runner.telemetry.evaluation_report import evaluation_markdown, model_rows
    from runner.telemetry.usage_budget import usages_of_runs
    from runner.telemetry.usage_report import sweep_costs, sweep_costs_markdown

    logger.table(
        f"evaluation: {block['metric']} ({block['goal']}) over {len(block['seeds'])} of {block['asked']} seeds",
        ["model", "seeds", "mean", "spread over seeds"],
        model_rows(block),
    )
    if block["verdict"]:
        logger.info(block["verdict"]["line"], style="bold")
    elif block["no_verdict"]:
        logger.info(block["no_verdict"])
    markdown = evaluation_markdown(block)
    trials = [
        (o.seed, o.run_id, usage) for o, usage in zip(outcomes, usages_of_runs(home, [o.run_id for o in outcomes]))
    ]
    if len(outcomes) > 1 and any(usage for _, _, usage in trials):
        rows, total = sweep_costs(trials)
        logger.table(
            "evaluation: what the seeds used", ["seed", "run", "GPU-hours", "CPU-hours", "cost"], rows + [total]
        )
        markdown += "\n#### What the seeds used\n\n" + sweep_costs_markdown(trials, noun="seed")
    summary = run_dir / "summary.md"
    if summary.is_file():
        with writing(summary), summary.open("a", encoding="utf-8") as handle:
            handle.write("\n" + markdown)
    logger.step_summary(markdown)
