"""The run's end, when it completed: its model through the gate (runner.serving.gate), replayed where
the manifest asks (runner.replay.promotion), then registered as the next version of its name."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from runner.history.states import RunStatus
from runner.training.context import RunContext, Training

if TYPE_CHECKING:
    from runner.history.model_registry import ModelVersion


def register_model(ctx: RunContext, training: Training, summary: dict) -> ModelVersion | None:
    """On Completed, the model at model.path passes the gate (runner.serving.gate) and becomes the
    next version (odd entries skipped, listed)."""
    from runner.history.model_registry import Registry
    from runner.history.sealing import seal_for
    from runner.history.secret_scan import secret_files, secret_values, warning
    from runner.serving.gate import run_gate

    model, logger, outcome = None, ctx.logger, training.outcome
    spec = ctx.manifest.model
    model_path = ctx.paths.workdir / spec.path
    if outcome.status == RunStatus.COMPLETED and spec.register_model:
        if model_path.exists():
            gate = run_gate(
                ctx.loaded, ctx.paths, training.probe, training.prepared.env, logger
            )  # ModelGateError: nothing is registered
            info = {
                "run_id": ctx.run_id,
                "metrics": summary,
                "framework": spec.framework,
                "framework_version": spec.framework_version or ctx.manifest.framework_version,
                "git": training.git,
                "serving_resources": spec.serving.model_dump(),
            }
            if gate is not None:
                info["serving"] = gate.serving.as_json()
            kept = gate.files() if gate else None
            if spec.replay is not None:  # ReplayError: the candidate answers unlike its baseline, nothing is registered
                kept = {**(kept or {}), **_replayed(ctx, gate, model_path, gate.serving.tensorflow if gate else None)}
            seal = seal_for(
                ctx.paths.root,
                ctx.manifest.model_dump(mode="json", by_alias=True),
                ctx.settings,
                os.environ,
                ctx.loaded.path,
            )
            withheld = secret_files(model_path, secret_values(ctx.manifest.secrets))
            for relative, secret in withheld.items():
                logger.warning(warning(str(spec.path), relative, secret))
            model = Registry(ctx.store).register(
                ctx.manifest.name, model_path, ctx.run_id, info, kept, seal, frozenset(withheld)
            )
            logger.info(f"registered model {model.label} ({model.info['files']} files)", style="bold green")
            if model.skipped:
                logger.warning(model.skipped_note(str(spec.path)))
        else:
            logger.warning(f"model.path {spec.path} was not written by the script; no model registered")
    elif model_path.exists() and spec.register_model:
        logger.info(f"model not registered (run {outcome.status}); it is kept at {model_path}")
    return model


def _replayed(ctx: RunContext, gate, model_path: Path, framework: str | None) -> dict[str, Path]:
    """model.replay after the gate: the files the version keeps, or ReplayError."""
    from runner.errors import ReplayError
    from runner.github import workflow
    from runner.replay.promotion import replay_before_registering

    if gate is None:
        raise ReplayError(
            f"model.replay: the gate found no model it can serve at model.path {ctx.manifest.model.path}, so it cannot"
            " be replayed"
        )
    github = _github(ctx)
    with workflow.github_errors():
        return replay_before_registering(
            ctx.loaded,
            ctx.paths.root,
            gate.directory,
            model_path,
            gate.files(),
            framework,
            github,
            ctx.store.home,
            ctx.logger,
        )


def _github(ctx: RunContext):
    """The run's GitHub repository for the replay (its last release, a release's requests), where the
    run knows it and has a token; None otherwise."""
    from runner.github import workflow
    from runner.replay.promotion import GitHub

    context = ctx.settings.github
    if not (context.repository and context.token):
        return None
    template = workflow.TagTemplate(ctx.settings.inputs.tag_template)

    def repo():
        return workflow.client(context).get_repo(context.repository), ctx.settings

    def last_release(name: str) -> int | None:
        found = workflow.releases_of(repo()[0], name, template)
        return found[0][0] if found else None

    return GitHub(repo, last_release)
